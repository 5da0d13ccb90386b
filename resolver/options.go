package resolver

import (
	"cmp"
	"log/slog"
	"net/http"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/chartpin/chartpin/internal/failure"
)

// Options configure a Remote; the zero value of each field is its default.
type Options struct {
	// Concurrency bounds the requests in flight (default 8).
	Concurrency int
	// PerRegistryLimit bounds the requests in flight to one registry
	// (default 8, at most Concurrency).
	PerRegistryLimit int
	// Mirrors resolves refs of a registry against its mirror, the registry
	// that serves the pull (e.g. {"docker.io": "mirror.local:5000"}).
	Mirrors map[string]string
	// InsecureRegistries are the hosts spoken to over plain HTTP, exactly these.
	InsecureRegistries []string
	// Keychain is where credentials come from (default: Docker config).
	Keychain authn.Keychain
	// Transport is the base HTTP transport (tests use it to inject faults;
	// default: http.DefaultTransport's settings with more idle connections).
	Transport http.RoundTripper
	// RequestTimeout bounds each registry request attempt (default 30s).
	RequestTimeout time.Duration
	// RetryAttempts is how often a request is sent at most, with an
	// exponential backoff between tries from RetryBase doubling up to
	// RetryMax. All three zero: 4 attempts (one try, three retries), 500ms
	// up to 5s.
	RetryAttempts       int
	RetryBase, RetryMax time.Duration
	// RetryAfterCap is the longest Retry-After a 429 may ask for before the
	// resolver gives up with ErrRateLimited instead of waiting (default 30s).
	RetryAfterCap time.Duration
	// Logger logs every request and decision (default: discard).
	Logger *slog.Logger
}

// Validate checks the options by themselves; errors name option fields.
func (o Options) Validate() error {
	var err error
	switch {
	case o.Concurrency < 0:
		err = failure.Optionf("{{Concurrency}} %d: want at least 1", o.Concurrency)
	case o.PerRegistryLimit < 0:
		err = failure.Optionf("{{PerRegistryLimit}} %d: want at least 1", o.PerRegistryLimit)
	case o.RequestTimeout < 0:
		err = failure.Optionf("{{RequestTimeout}} %s: want more than zero", o.RequestTimeout)
	case o.RetryAttempts < 0 || o.RetryBase < 0 || o.RetryMax < o.RetryBase || o.RetryAttempts == 0 && o.RetryMax > 0:
		err = failure.Optionf("{{RetryAttempts}} %d, backoff {{RetryBase}} %s up to {{RetryMax}} %s: want attempts ≥ 1 and 0 ≤ base ≤ max",
			o.RetryAttempts, o.RetryBase, o.RetryMax)
	case o.RetryAfterCap < 0:
		err = failure.Optionf("{{RetryAfterCap}} %s: want zero or more", o.RetryAfterCap)
	}
	if err == nil {
		for from, to := range o.Mirrors {
			if from == "" || to == "" {
				err = failure.Optionf("{{Mirrors}} %q=%q: want FROM=TO", from, to)
				break
			}
		}
	}
	if err != nil {
		return failure.Input(err)
	}
	return nil
}

// options are Options with the defaults filled in and the hosts canonical.
type options struct {
	concurrency    int
	perRegistry    int
	mirrors        map[string]string
	insecure       map[string]bool
	keychain       authn.Keychain
	transport      http.RoundTripper
	requestTimeout time.Duration
	attempts       int
	backoffBase    time.Duration
	backoffMax     time.Duration
	retryAfterCap  time.Duration
	logger         *slog.Logger
}

// defaultTransport keeps enough idle connections per host for the
// concurrency, so a run reuses its connections instead of redialling.
func defaultTransport() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	return t
}

func makeOptions(in Options) (options, error) {
	if err := in.Validate(); err != nil {
		return options{}, err
	}
	o := options{
		concurrency:    cmp.Or(in.Concurrency, 8),
		perRegistry:    cmp.Or(in.PerRegistryLimit, 8),
		mirrors:        map[string]string{},
		insecure:       map[string]bool{},
		keychain:       in.Keychain,
		transport:      in.Transport,
		requestTimeout: cmp.Or(in.RequestTimeout, 30*time.Second),
		attempts:       4,
		backoffBase:    500 * time.Millisecond,
		backoffMax:     5 * time.Second,
		retryAfterCap:  cmp.Or(in.RetryAfterCap, 30*time.Second),
		logger:         in.Logger,
	}
	if in.RetryAttempts > 0 {
		o.attempts, o.backoffBase, o.backoffMax = in.RetryAttempts, in.RetryBase, in.RetryMax
	}
	if o.keychain == nil {
		o.keychain = authn.DefaultKeychain
	}
	if o.transport == nil {
		o.transport = defaultTransport()
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	for from, to := range in.Mirrors {
		o.mirrors[canonicalHost(from)] = to
	}
	for _, h := range in.InsecureRegistries {
		o.insecure[canonicalHost(h)] = true
	}
	if o.perRegistry > o.concurrency {
		o.perRegistry = o.concurrency
	}
	return o, nil
}
