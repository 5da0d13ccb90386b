package resolver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/chartpin/chartpin/internal/failure"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Remote resolves against live registries. One Remote is one run: it
// remembers every answer, so each registry costs one ping, each repository
// at most one token, each unique ref one HEAD, each digest's manifest one
// GET, and each repository's tags one listing.
//
// go-containerregistry pings a registry once per repository and wraps its
// own retry around every request; Remote instead pings once per registry,
// exchanges tokens itself and hands go-containerregistry a finished
// transport (transport.Wrapper), so retries happen only in Remote's own
// transport and every request is counted exactly once.
type Remote struct {
	o          options
	rt         http.RoundTripper
	count      *counter
	registries sync.Map // host → true

	pings     onceMap[*transport.Challenge] // by registry host
	repos     onceMap[http.RoundTripper]    // by repository
	heads     onceMap[Image]                // by queried ref
	manifests onceMap[Manifest]             // by queried repository@digest
	tags      onceMap[[]string]             // by queried repository
}

// New returns a Remote configured by opts.
func New(opts Options) (*Remote, error) {
	o, err := makeOptions(opts)
	if err != nil {
		return nil, err
	}
	r := &Remote{o: o}
	r.count = &counter{next: o.transport, log: o.logger}
	var rt http.RoundTripper = r.count
	rt = &insecureGuard{next: rt, allowed: o.insecure}
	rt = &limiter{next: rt, global: make(chan struct{}, o.concurrency), perHost: o.perRegistry, hosts: map[string]chan struct{}{}}
	rt = &retrier{
		next: rt, attempts: o.attempts, base: o.backoffBase, max: o.backoffMax,
		retryAfterCap: o.retryAfterCap, timeout: o.requestTimeout,
		onRetry: r.count.retried, log: o.logger,
	}
	r.rt = &schemer{next: rt, insecure: o.insecure, registries: &r.registries}
	return r, nil
}

// Stats reports the requests this Remote has sent so far.
func (r *Remote) Stats() Stats { return r.count.stats() }

// Resolve implements Interface.
func (r *Remote) Resolve(ctx context.Context, ref string) (Image, error) {
	norm, err := Normalize(ref)
	if err != nil {
		return Image{}, err
	}
	src, err := r.source(norm)
	if err != nil {
		return Image{}, err
	}
	// Keyed by the queried ref: a digest from one registry is never reused for another.
	img, err := r.heads.do(ctx, src.String(), func() (Image, error) { return r.head(ctx, src) })
	if err != nil {
		if displayName(src) != norm {
			return Image{}, fmt.Errorf("%s via mirror %s: %w", norm, src.Context().RegistryStr(), err)
		}
		return Image{}, err
	}
	img.Ref = norm
	return img, nil
}

func (r *Remote) head(ctx context.Context, src name.Reference) (Image, error) {
	source := displayName(src)
	opts, err := r.remoteOptions(ctx, src.Context())
	if err != nil {
		return Image{}, classify(source, err)
	}
	desc, err := remote.Head(src, opts...)
	if err != nil && isMissingHeader(err) {
		// The registry omits the digest header: GET the manifest and hash it.
		r.o.logger.Debug("GET manifest: HEAD lacked a header", "ref", source, "error", err)
		m, gerr := r.fetch(ctx, src)
		if gerr != nil {
			return Image{}, gerr
		}
		r.manifests.set(src.Context().Digest(m.Digest).String(), m)
		return Image{Source: source, Digest: m.Digest, MediaType: m.MediaType}, nil
	}
	if err != nil {
		return Image{}, classify(source, err)
	}
	r.o.logger.Debug("resolved", "ref", source, "digest", desc.Digest.String(), "mediaType", string(desc.MediaType))
	return Image{Source: source, Digest: desc.Digest.String(), MediaType: string(desc.MediaType)}, nil
}

func isMissingHeader(err error) bool {
	s := err.Error()
	return strings.Contains(s, "did not include Docker-Content-Digest") || strings.Contains(s, "did not include Content-Length")
}

// Platforms implements Interface: the platforms of the verified manifest
// (see Manifest), so it costs the same one GET per digest.
func (r *Remote) Platforms(ctx context.Context, img Image) ([]string, error) {
	if img.Digest == "" || img.Ref == "" {
		return nil, fmt.Errorf("platforms of %q: image was not resolved", img.Ref)
	}
	m, err := r.Manifest(ctx, DigestRef(img.Ref, img.Digest))
	if err != nil {
		return nil, err
	}
	return m.Platforms, nil
}

// Tags implements Interface.
func (r *Remote) Tags(ctx context.Context, repository string) ([]string, error) {
	norm, err := Normalize(repository + ":latest")
	if err != nil {
		return nil, err
	}
	src, err := r.source(norm)
	if err != nil {
		return nil, err
	}
	repo := src.Context()
	return r.tags.do(ctx, repo.String(), func() ([]string, error) {
		opts, err := r.remoteOptions(ctx, repo)
		if err != nil {
			return nil, classify(displayName(repo.Tag("latest")), err)
		}
		tags, err := remote.List(repo, opts...)
		if err != nil {
			return nil, classify(displayName(repo.Tag("latest")), err)
		}
		sort.Strings(tags)
		return tags, nil
	})
}

// Index pulls the multi-arch index ref names (by tag or digest) through
// this Remote's transport, mirrors, credentials and retries, for an image
// builder that stacks a layer on a base image. Its manifests and blobs are
// fetched lazily, when the caller reads them.
func (r *Remote) Index(ctx context.Context, ref string) (v1.ImageIndex, error) {
	norm, err := Normalize(ref)
	if err != nil {
		return nil, err
	}
	src, err := r.source(norm)
	if err != nil {
		return nil, err
	}
	opts, err := r.remoteOptions(ctx, src.Context())
	if err != nil {
		return nil, classify(displayName(src), err)
	}
	idx, err := remote.Index(src, opts...)
	if err != nil {
		return nil, classify(displayName(src), err)
	}
	return idx, nil
}

// remoteOptions are go-containerregistry options for one repository: a
// finished, authenticated transport, so it neither pings nor retries.
func (r *Remote) remoteOptions(ctx context.Context, repo name.Repository) ([]remote.Option, error) {
	rt, err := r.repos.do(ctx, repo.String(), func() (http.RoundTripper, error) { return r.authenticate(ctx, repo) })
	if err != nil {
		return nil, err
	}
	return []remote.Option{remote.WithTransport(rt), remote.WithContext(ctx), remote.WithUserAgent("chartpin")}, nil
}

// authenticate pings the registry (once per run) and, when it asks for
// bearer tokens, exchanges the credentials for a pull token for repo.
func (r *Remote) authenticate(ctx context.Context, repo name.Repository) (http.RoundTripper, error) {
	reg := repo.Registry
	r.registries.Store(reg.RegistryStr(), true)
	ch, err := r.pings.do(ctx, reg.RegistryStr(), func() (*transport.Challenge, error) { return r.ping(ctx, reg) })
	if err != nil {
		return nil, err
	}
	// The repository, not the registry: a keychain may match by path, as the kubelet does.
	auth, err := authn.Resolve(ctx, r.o.keychain, repo)
	if err != nil {
		return nil, fmt.Errorf("reading credentials for %s: %w", reg.RegistryStr(), err)
	}
	tok := &transport.Token{}
	if strings.EqualFold(ch.Scheme, "bearer") {
		tok, err = transport.Exchange(ctx, reg, auth, r.rt, []string{repo.Scope(transport.PullScope)}, ch)
		if err != nil {
			return nil, fmt.Errorf("getting a pull token for %s: %w", repo, err)
		}
	}
	return transport.FromToken(reg, auth, r.rt, ch, tok)
}

// ping asks GET /v2/ which authentication the registry wants.
func (r *Remote) ping(ctx context.Context, reg name.Registry) (*transport.Challenge, error) {
	scheme := "https"
	if r.o.insecure[canonicalHost(reg.RegistryStr())] {
		scheme = "http"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+reg.RegistryStr()+"/v2/", nil)
	if err != nil {
		return nil, err
	}
	resp, err := r.rt.RoundTrip(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", req.URL, err)
	}
	defer resp.Body.Close()
	ch := &transport.Challenge{Insecure: scheme == "http"}
	switch resp.StatusCode {
	case http.StatusOK:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return ch, nil
	case http.StatusUnauthorized:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		ch.Scheme, ch.Parameters = parseChallenge(resp.Header.Values("WWW-Authenticate"))
		return ch, nil
	}
	return nil, transport.CheckError(resp, http.StatusOK, http.StatusUnauthorized)
}

// source maps a normalized ref to the ref actually queried (mirrors applied).
func (r *Remote) source(norm string) (name.Reference, error) {
	host, rest, _ := strings.Cut(norm, "/")
	if to, ok := r.o.mirrors[host]; ok {
		norm = to + "/" + rest
	}
	return r.parse(norm)
}

// parse parses a normalized ref, marking hosts named by --insecure-registry.
func (r *Remote) parse(norm string) (name.Reference, error) {
	opts := []name.Option{name.WeakValidation}
	if r.o.insecure[hostOf(norm)] {
		opts = append(opts, name.Insecure)
	}
	ref, err := name.ParseReference(norm, opts...)
	if err != nil {
		return nil, fmt.Errorf("parsing reference %q: %w", norm, err)
	}
	return ref, nil
}

func platformString(p *v1.Platform) string {
	if p == nil || p.OS == "unknown" || p.OS == "" { // attestation manifests
		return ""
	}
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}

// classify turns a registry error into one that says what to do next.
func classify(ref string, err error) error {
	if errors.Is(err, ErrRateLimited) {
		return fmt.Errorf("%s: %w: %v; retry later or authenticate for a higher limit", ref, ErrRateLimited, unwrapURL(err))
	}
	var te *transport.Error
	if errors.As(err, &te) {
		switch te.StatusCode {
		case http.StatusNotFound:
			return fmt.Errorf("%s: %w: check the repository and tag exist (registry said: %v)", ref, ErrNotFound, te)
		case http.StatusUnauthorized, http.StatusForbidden:
			return fmt.Errorf("%s: %w: log in (docker login, DOCKER_CONFIG or CHARTPIN_REGISTRY_AUTH) or check access (registry said: %v)", ref, ErrUnauthorized, te)
		}
		for _, d := range te.Errors {
			if d.Code == transport.ManifestUnknownErrorCode || d.Code == transport.NameUnknownErrorCode {
				return fmt.Errorf("%s: %w: check the repository and tag exist (registry said: %v)", ref, ErrNotFound, te)
			}
		}
		if te.StatusCode >= 500 || te.StatusCode == http.StatusRequestTimeout {
			return fmt.Errorf("resolving %s: the registry kept failing, retries exhausted; try again later: %w", ref, err)
		}
	}
	if s := err.Error(); strings.Contains(s, "server gave HTTP response to HTTPS client") || strings.Contains(s, "does not look like a TLS handshake") {
		host := hostOf(ref)
		return failure.Optionf("resolving %s: %s speaks plain HTTP: pass {{InsecureRegistries}} %s if that is intended: %w", ref, host, host, err)
	}
	var dnsErr *net.DNSError
	if retryableError(err) || errors.Is(err, syscall.ECONNREFUSED) || errors.As(err, &dnsErr) {
		return failure.Optionf("resolving %s: %w; check that %s is reachable (and the registry name or {{Mirrors}} is right), or try again later", ref, err, hostOf(ref))
	}
	return fmt.Errorf("resolving %s: %w", ref, err)
}

// unwrapURL drops net/url's "Head "https://…":" prefix when the inner error says it all.
func unwrapURL(err error) error {
	var rl *RateLimitError
	if errors.As(err, &rl) {
		return rl
	}
	return err
}

// parseChallenge reads WWW-Authenticate values: the scheme (Bearer
// preferred over Basic) and its parameters.
func parseChallenge(values []string) (string, map[string]string) {
	var basic map[string]string
	for _, v := range values {
		for _, c := range splitChallenges(v) {
			switch strings.ToLower(c.scheme) {
			case "bearer":
				return "bearer", c.params
			case "basic":
				basic = c.params
			}
		}
	}
	if basic != nil {
		return "basic", basic
	}
	return "", nil
}

type challenge struct {
	scheme string
	params map[string]string
}

// splitChallenges parses `Scheme k=v, k="quoted, value", Scheme2 k=v`.
func splitChallenges(s string) []challenge {
	var out []challenge
	i := 0
	skip := func(set string) {
		for i < len(s) && strings.IndexByte(set, s[i]) >= 0 {
			i++
		}
	}
	token := func() string {
		start := i
		for i < len(s) && strings.IndexByte(" \t,=\"", s[i]) < 0 {
			i++
		}
		return s[start:i]
	}
	for i < len(s) {
		skip(" \t,")
		word := token()
		if word == "" {
			i++
			continue
		}
		skip(" \t")
		if i < len(s) && s[i] == '=' && len(out) > 0 {
			i++
			skip(" \t")
			var val strings.Builder
			if i < len(s) && s[i] == '"' {
				for i++; i < len(s) && s[i] != '"'; i++ {
					if s[i] == '\\' && i+1 < len(s) {
						i++
					}
					val.WriteByte(s[i])
				}
				i++
			} else {
				val.WriteString(token())
			}
			out[len(out)-1].params[strings.ToLower(word)] = val.String()
			continue
		}
		out = append(out, challenge{scheme: word, params: map[string]string{}})
	}
	return out
}

// onceMap runs fn once per key and shares the answer, errors included, for
// the run. An answer cut short by its caller's ctx is not kept: the next
// caller asks again.
type onceMap[T any] struct {
	mu sync.Mutex
	m  map[string]*onceEntry[T]
}

type onceEntry[T any] struct {
	done chan struct{}
	val  T
	err  error
}

func (m *onceMap[T]) do(ctx context.Context, key string, fn func() (T, error)) (T, error) {
	m.mu.Lock()
	if m.m == nil {
		m.m = map[string]*onceEntry[T]{}
	}
	if e, ok := m.m[key]; ok {
		m.mu.Unlock()
		select {
		case <-e.done:
			return e.val, e.err
		case <-ctx.Done():
			var zero T
			return zero, ctx.Err()
		}
	}
	e := &onceEntry[T]{done: make(chan struct{})}
	m.m[key] = e
	m.mu.Unlock()
	e.val, e.err = fn()
	if e.err != nil && ctx.Err() != nil {
		m.mu.Lock()
		delete(m.m, key)
		m.mu.Unlock()
	}
	close(e.done)
	return e.val, e.err
}

func (m *onceMap[T]) set(key string, v T) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[string]*onceEntry[T]{}
	}
	if _, ok := m.m[key]; !ok {
		e := &onceEntry[T]{done: make(chan struct{}), val: v}
		close(e.done)
		m.m[key] = e
	}
}

var _ Interface = (*Remote)(nil)
