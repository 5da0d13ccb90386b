package upgrade

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/chartpin/chartpin/deprecation"
	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/internal/redact"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/registry"
	"helm.sh/helm/v3/pkg/repo"
	"oras.land/oras-go/v2/registry/remote/auth"
	"sigs.k8s.io/yaml"
)

// maxDownload caps an index or chart archive read into memory.
const maxDownload = 64 << 20

// chartSource lists a chart's versions, says when each was published and
// whether it is deprecated, and fetches one.
type chartSource interface {
	versions(ctx context.Context, opts Options) ([]string, error)
	describe(ctx context.Context, opts Options, version string) (published, error)
	fetch(ctx context.Context, opts Options, version string) (*chart.Chart, error)
	String() string
}

// published is what the repository records about one version.
type published struct {
	Created    time.Time // zero when the repository records no creation time
	Deprecated bool
}

func source(opts Options) chartSource {
	if opts.OCI != "" {
		return &ociSource{ref: strings.TrimSuffix(strings.TrimPrefix(opts.OCI, "oci://"), "/") + "/" + opts.Chart}
	}
	u := strings.TrimSuffix(opts.RepoURL, "/") + "/index.yaml"
	return &indexSource{url: u, shown: redact.URL(u), base: opts.RepoURL}
}

// ordered returns the semantic versions among versions, newest first:
// 1.9.63-rc.1 ranks below 1.9.63. Prereleases are kept only when
// allowPrerelease is set; strings that are not semver are skipped. An error
// says why nothing is left.
func ordered(versions []string, allowPrerelease bool) ([]*semver.Version, error) {
	var out []*semver.Version
	prereleases := 0
	for _, s := range versions {
		v, err := semver.NewVersion(s)
		if err != nil {
			continue
		}
		if v.Prerelease() != "" && !allowPrerelease {
			prereleases++
			continue
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		if prereleases > 0 {
			return nil, failure.Optionf("no stable version among %d versions (%d prereleases ignored; {{AllowPrerelease}} takes them)", len(versions), prereleases)
		}
		return nil, fmt.Errorf("no semantic version among %d versions", len(versions))
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].GreaterThan(out[j]) })
	return out, nil
}

// indexSource is a classic Helm repository: index.yaml plus archives.
type indexSource struct {
	url, base string
	shown     string // url with credentials masked, for logs and errors
	index     *repo.IndexFile
	client    *http.Client // made on first versions, with the index host's credentials
}

// httpClient is opts.HTTPClient sending the keychain's credentials for the
// index host, over HTTPS only, to that host only. Credentials in the URL
// itself take precedence.
func (s *indexSource) httpClient(opts Options) (*http.Client, error) {
	u, err := url.Parse(s.url)
	if err != nil || u.User != nil {
		return opts.HTTPClient, nil // get reports a bad URL; userinfo is sent as is
	}
	c, err := credential(opts.Keychain, u.Host)
	if err != nil {
		return nil, fmt.Errorf("reading credentials for %s: %w", u.Host, err)
	}
	if c.Username == "" && c.Password == "" {
		return opts.HTTPClient, nil
	}
	if u.Scheme != "https" {
		opts.Logger.Warn("credentials for the index host not sent over plain HTTP", "host", u.Host)
		return opts.HTTPClient, nil
	}
	next := opts.HTTPClient.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	hc := *opts.HTTPClient
	hc.Transport = basicAuth{host: u.Host, user: c.Username, password: c.Password, next: next}
	return &hc, nil
}

func (s *indexSource) String() string { return s.shown }

func (s *indexSource) versions(ctx context.Context, opts Options) ([]string, error) {
	var err error
	if s.client, err = s.httpClient(opts); err != nil {
		return nil, fmt.Errorf("fetching repository index %s: %w", s.shown, err)
	}
	data, err := get(ctx, opts, s.client, s.url)
	if err != nil {
		return nil, fmt.Errorf("fetching repository index %s: %w", s.shown, err)
	}
	idx := &repo.IndexFile{}
	if err := yaml.Unmarshal(data, idx); err != nil {
		return nil, failure.Optionf("parsing repository index %s: %w; is {{RepoURL}} the directory that holds index.yaml?", s.shown, err)
	}
	if idx.APIVersion == "" {
		return nil, failure.Optionf("parsing repository index %s: no apiVersion: is {{RepoURL}} the directory that holds index.yaml?", s.shown)
	}
	s.index = idx
	var versions []string
	for _, cv := range idx.Entries[opts.Chart] {
		if cv == nil || cv.Metadata == nil || cv.Removed || len(cv.URLs) == 0 {
			continue
		}
		versions = append(versions, cv.Version)
	}
	if len(versions) == 0 {
		return nil, failure.Optionf("repository index %s has no chart %q: check {{Chart}}", s.shown, opts.Chart)
	}
	return versions, nil
}

// describe reads the entry's created time and deprecated flag.
func (s *indexSource) describe(_ context.Context, opts Options, version string) (published, error) {
	cv := s.entry(opts.Chart, version)
	if cv == nil {
		return published{}, fmt.Errorf("chart %q %s vanished from %s between reads", opts.Chart, version, s.shown)
	}
	return published{Created: cv.Created, Deprecated: cv.Deprecated}, nil
}

func (s *indexSource) entry(chartName, version string) *repo.ChartVersion {
	for _, c := range s.index.Entries[chartName] {
		if c != nil && c.Metadata != nil && c.Version == version && len(c.URLs) > 0 {
			return c
		}
	}
	return nil
}

func (s *indexSource) fetch(ctx context.Context, opts Options, version string) (*chart.Chart, error) {
	cv := s.entry(opts.Chart, version)
	if cv == nil {
		return nil, fmt.Errorf("chart %q %s vanished from %s between reads", opts.Chart, version, s.shown)
	}
	u, err := repo.ResolveReferenceURL(s.base, cv.URLs[0])
	if err != nil {
		return nil, fmt.Errorf("chart %q %s in %s: archive URL %q: %w", opts.Chart, version, s.shown, redact.URL(cv.URLs[0]), err)
	}
	data, err := get(ctx, opts, s.client, u)
	if err != nil {
		return nil, fmt.Errorf("downloading chart %q %s from %s: %w", opts.Chart, version, redact.URL(u), err)
	}
	if cv.Digest != "" {
		sum := sha256.Sum256(data)
		if got := hex.EncodeToString(sum[:]); got != cv.Digest {
			return nil, fmt.Errorf("chart archive %s: sha256 %s, but %s says %s: the repository is inconsistent, republish the chart", redact.URL(u), got, s.shown, cv.Digest)
		}
	}
	return loadArchive(data, redact.URL(u), opts.Chart, version)
}

// get reads rawURL with hc within one request timeout. Credentials in rawURL
// are sent (basic auth) and never shown.
func get(ctx context.Context, opts Options, hc *http.Client, rawURL string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.RequestTimeout)
	defer cancel()
	shown := redact.URL(rawURL)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		// A *url.Error quotes the whole URL: keep only the reason.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("GET %s: invalid URL: %w", shown, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		// net/http masks a password in *url.Error, but not a lone user name.
		var ue *url.Error
		if errors.As(err, &ue) {
			ue.URL = shown
		}
		return nil, timeoutHint(ctx, opts, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		return nil, fmt.Errorf("GET %s: %s: %s", shown, resp.Status, credentialsHint(req.URL.Host))
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", shown, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxDownload+1))
	if err != nil {
		return nil, timeoutHint(ctx, opts, err)
	}
	if len(data) > maxDownload {
		return nil, fmt.Errorf("GET %s: larger than %d bytes", shown, maxDownload)
	}
	return data, nil
}

// timeoutHint says which deadline fired, so a hung repository reads as one.
func timeoutHint(ctx context.Context, opts Options, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		if !errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
		}
		return fmt.Errorf("no answer within the %s request timeout (is the repository up and reachable from here?): %w", opts.RequestTimeout, err)
	}
	return err
}

// ociSource is a chart pushed to an OCI registry under HOST/PATH/<chart>:<version>.
type ociSource struct {
	ref    string
	puller *remote.Puller // made on first describe
}

func (s *ociSource) String() string { return "oci://" + s.ref }

// client builds a Helm registry client whose every request is bound to ctx
// and to the request timeout: the client's own calls use context.Background.
func (s *ociSource) client(ctx context.Context, opts Options) (*registry.Client, error) {
	base := opts.HTTPClient.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc := &http.Client{Transport: ctxTransport{ctx: ctx, base: base}, Timeout: opts.RequestTimeout}
	// One credential source for both OCI clients: opts.Keychain, per host.
	authz := auth.Client{Client: hc, Credential: orasCredential(opts.Keychain)}
	ro := []registry.ClientOption{registry.ClientOptHTTPClient(hc), registry.ClientOptAuthorizer(authz)}
	if opts.PlainHTTP {
		ro = append(ro, registry.ClientOptPlainHTTP())
	}
	return registry.NewClient(ro...)
}

func (s *ociSource) versions(ctx context.Context, opts Options) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.RequestTimeout)
	defer cancel()
	rc, err := s.client(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("listing tags of %s: %w", s, err)
	}
	tags, err := rc.Tags(s.ref)
	if err != nil {
		return nil, fmt.Errorf("listing tags of %s: %w", s, s.authHint(timeoutHint(ctx, opts, err)))
	}
	if len(tags) == 0 {
		return nil, failure.Optionf("%s has no version tags: check {{OCI}} and {{Chart}}", s)
	}
	return tags, nil
}

// describe reads the creation time publish records in the chart manifest's
// annotations, and the deprecation markers that refer to that manifest.
func (s *ociSource) describe(ctx context.Context, opts Options, version string) (published, error) {
	if s.puller == nil {
		// One puller per tick: the ping and token exchange are not repeated per version.
		t := opts.HTTPClient.Transport
		if t == nil {
			t = http.DefaultTransport
		}
		p, err := remote.NewPuller(remote.WithTransport(t), remote.WithAuthFromKeychain(opts.Keychain))
		if err != nil {
			return published{}, err
		}
		s.puller = p
	}
	ctx, cancel := context.WithTimeout(ctx, opts.RequestTimeout)
	defer cancel()
	var nopts []name.Option
	if opts.PlainHTTP {
		nopts = append(nopts, name.Insecure)
	}
	tag := strings.ReplaceAll(version, "+", "_")
	ref, err := name.NewTag(s.ref+":"+tag, nopts...)
	if err != nil {
		return published{}, fmt.Errorf("%s:%s: %w", s, tag, err)
	}
	ro := []remote.Option{remote.WithContext(ctx), remote.Reuse(s.puller)}
	desc, err := remote.Get(ref, ro...)
	if err != nil {
		return published{}, fmt.Errorf("reading the manifest of %s:%s: %w", s, tag, s.authHint(timeoutHint(ctx, opts, err)))
	}
	var m v1.Manifest
	if err := json.Unmarshal(desc.Manifest, &m); err != nil {
		return published{}, fmt.Errorf("reading the manifest of %s:%s: %w", s, tag, err)
	}
	var p published
	if c, ok := m.Annotations[deprecation.CreatedAnnotation]; ok {
		if p.Created, err = time.Parse(time.RFC3339Nano, c); err != nil {
			return published{}, fmt.Errorf("%s:%s: annotation %s %q is not an RFC 3339 time: %w", s, tag, deprecation.CreatedAnnotation, c, err)
		}
	}
	st, err := deprecation.Read(ctx, ref.Context().Digest(desc.Digest.String()), ro...)
	if err != nil {
		return published{}, fmt.Errorf("%s:%s: %w", s, tag, timeoutHint(ctx, opts, err))
	}
	p.Deprecated = st.Deprecated
	return p, nil
}

func (s *ociSource) fetch(ctx context.Context, opts Options, version string) (*chart.Chart, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.RequestTimeout)
	defer cancel()
	rc, err := s.client(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("pulling %s:%s: %w", s, version, err)
	}
	// OCI tags cannot hold '+'; Helm pushes build metadata as '_'.
	ref := s.ref + ":" + strings.ReplaceAll(version, "+", "_")
	pr, err := rc.Pull(ref, registry.PullOptWithChart(true))
	if err != nil {
		return nil, fmt.Errorf("pulling %s:%s: %w", s, version, s.authHint(timeoutHint(ctx, opts, err)))
	}
	if pr.Chart == nil {
		return nil, fmt.Errorf("pulling %s:%s: no chart layer", s, version)
	}
	name := s.ref[strings.LastIndex(s.ref, "/")+1:]
	return loadArchive(pr.Chart.Data, "oci://"+ref, name, version)
}

// credentialsHint says where the credentials for host come from.
func credentialsHint(host string) string {
	return "check the credentials for " + host + " in DOCKER_CONFIG (the chart mounts registryAuth.secret there) or CHARTPIN_REGISTRY_AUTH"
}

// authHint adds credentialsHint to a registry's refusal.
func (s *ociSource) authHint(err error) error {
	if errors.Is(err, auth.ErrBasicCredentialNotFound) || strings.Contains(strings.ToLower(err.Error()), "unauthorized") {
		host, _, _ := strings.Cut(s.ref, "/")
		return fmt.Errorf("%w: %s", err, credentialsHint(host))
	}
	return err
}

// ctxTransport binds every request to ctx, so a client that ignores contexts
// still stops when the step's deadline passes.
type ctxTransport struct {
	ctx  context.Context
	base http.RoundTripper
}

func (t ctxTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	if dl, ok := t.ctx.Deadline(); ok {
		// A deadline, not a bare cancel, so the error says it was a timeout.
		ctx, cancel = context.WithDeadline(req.Context(), dl)
	}
	stop := context.AfterFunc(t.ctx, cancel)
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		stop()
		cancel()
		return nil, err
	}
	// Release the watcher when the body is done with.
	resp.Body = &cancelBody{ReadCloser: resp.Body, done: func() { stop(); cancel() }}
	return resp, nil
}

type cancelBody struct {
	io.ReadCloser
	done func()
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.done()
	return err
}

func loadArchive(data []byte, from, name, version string) (*chart.Chart, error) {
	ch, err := loader.LoadArchive(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("loading chart archive %s: %w", from, err)
	}
	if ch.Metadata.Name != name || ch.Metadata.Version != version {
		return nil, fmt.Errorf("chart archive %s holds %s %s, not %s %s: the repository is inconsistent, republish the chart", from, ch.Metadata.Name, ch.Metadata.Version, name, version)
	}
	return ch, nil
}
