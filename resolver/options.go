package resolver

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
)

// Option configures a Remote.
type Option func(*options) error

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

func makeOptions(opts ...Option) (options, error) {
	o := options{
		concurrency:    8,
		perRegistry:    8,
		mirrors:        map[string]string{},
		insecure:       map[string]bool{},
		keychain:       authn.DefaultKeychain,
		transport:      defaultTransport(),
		requestTimeout: 30 * time.Second,
		attempts:       4,
		backoffBase:    500 * time.Millisecond,
		backoffMax:     5 * time.Second,
		retryAfterCap:  30 * time.Second,
		logger:         slog.New(slog.DiscardHandler),
	}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	if o.perRegistry > o.concurrency {
		o.perRegistry = o.concurrency
	}
	return o, nil
}

// WithConcurrency bounds the requests in flight (default 8).
func WithConcurrency(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("concurrency %d: want at least 1", n)
		}
		o.concurrency = n
		return nil
	}
}

// WithPerRegistryLimit bounds the requests in flight to one registry (default 8).
func WithPerRegistryLimit(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("per-registry limit %d: want at least 1", n)
		}
		o.perRegistry = n
		return nil
	}
}

// WithMirrors resolves refs of a registry against its mirror, the registry
// that serves the pull (e.g. {"docker.io": "mirror.local:5000"}).
func WithMirrors(m map[string]string) Option {
	return func(o *options) error {
		for from, to := range m {
			if from == "" || to == "" {
				return fmt.Errorf("mirror %q=%q: want FROM=TO", from, to)
			}
			o.mirrors[canonicalHost(from)] = to
		}
		return nil
	}
}

// WithInsecureRegistries allows plain HTTP to exactly these hosts.
func WithInsecureRegistries(hosts ...string) Option {
	return func(o *options) error {
		for _, h := range hosts {
			o.insecure[canonicalHost(h)] = true
		}
		return nil
	}
}

// WithKeychain sets where credentials come from (default: Docker config).
func WithKeychain(k authn.Keychain) Option {
	return func(o *options) error { o.keychain = k; return nil }
}

// WithTransport sets the base HTTP transport (tests use it to inject faults).
func WithTransport(t http.RoundTripper) Option {
	return func(o *options) error {
		if t == nil {
			return fmt.Errorf("transport: want a non-nil http.RoundTripper")
		}
		o.transport = t
		return nil
	}
}

// WithRequestTimeout bounds each registry request attempt (default 30s).
func WithRequestTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("request timeout %s: want more than zero", d)
		}
		o.requestTimeout = d
		return nil
	}
}

// WithRetry sets how often a request is sent at most (default 4: one try and
// three retries) and the exponential backoff between tries: base doubling up
// to max (default 500ms up to 5s).
func WithRetry(attempts int, base, max time.Duration) Option {
	return func(o *options) error {
		if attempts < 1 || base < 0 || max < base {
			return fmt.Errorf("retry %d attempts, backoff %s..%s: want attempts ≥ 1 and 0 ≤ base ≤ max", attempts, base, max)
		}
		o.attempts, o.backoffBase, o.backoffMax = attempts, base, max
		return nil
	}
}

// WithRetryAfterCap is the longest Retry-After a 429 may ask for before the
// resolver gives up with ErrRateLimited instead of waiting (default 30s).
func WithRetryAfterCap(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return fmt.Errorf("retry-after cap %s: want zero or more", d)
		}
		o.retryAfterCap = d
		return nil
	}
}

// WithLogger logs every request and decision (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error { o.logger = l; return nil }
}
