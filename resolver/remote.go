package resolver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Remote resolves against live registries. One Remote is one run: it
// remembers every answer, so each unique ref costs one HEAD, each digest's
// platforms one GET, and each repository's tags one listing.
type Remote struct {
	o      options
	puller *remote.Puller
	count  *counter
	sem    chan struct{}

	mu        sync.Mutex
	perHost   map[string]chan struct{}
	heads     onceMap[Image]
	platforms onceMap[[]string]
	tags      onceMap[[]string]
}

// New returns a Remote configured by opts.
func New(opts ...Option) (*Remote, error) {
	o, err := makeOptions(opts...)
	if err != nil {
		return nil, err
	}
	count := &counter{next: o.transport}
	var rt http.RoundTripper = count
	rt = &insecureGuard{next: rt, allowed: o.insecure}
	puller, err := remote.NewPuller(
		remote.WithTransport(rt),
		remote.WithAuthFromKeychain(o.keychain),
		remote.WithUserAgent("chartpin"),
	)
	if err != nil {
		return nil, err
	}
	return &Remote{
		o:       o,
		puller:  puller,
		count:   count,
		sem:     make(chan struct{}, o.concurrency),
		perHost: map[string]chan struct{}{},
	}, nil
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
	img, err := r.heads.do(src.String(), func() (Image, error) { return r.head(ctx, src) })
	if err != nil {
		return Image{}, err
	}
	img.Ref = norm
	return img, nil
}

func (r *Remote) head(ctx context.Context, src name.Reference) (Image, error) {
	release, err := r.acquire(ctx, src.Context().RegistryStr())
	if err != nil {
		return Image{}, err
	}
	defer release()
	ctx, cancel := context.WithTimeout(ctx, r.o.requestTimeout)
	defer cancel()
	source := displayName(src)
	r.o.logger.Debug("HEAD manifest", "ref", source)
	desc, err := r.puller.Head(ctx, src)
	if err != nil && strings.Contains(err.Error(), "did not include Docker-Content-Digest") {
		// The registry omits the digest header: GET the manifest and hash it.
		r.o.logger.Debug("GET manifest: HEAD had no Docker-Content-Digest", "ref", source)
		got, gerr := r.puller.Get(ctx, src)
		if gerr != nil {
			return Image{}, classify(source, gerr)
		}
		img := Image{Source: source, Digest: got.Digest.String(), MediaType: string(got.MediaType)}
		if plats, perr := platformsOf(got); perr == nil {
			r.platforms.set(img.Digest, plats)
		}
		return img, nil
	}
	if err != nil {
		return Image{}, classify(source, err)
	}
	return Image{Source: source, Digest: desc.Digest.String(), MediaType: string(desc.MediaType)}, nil
}

// Platforms implements Interface.
func (r *Remote) Platforms(ctx context.Context, img Image) ([]string, error) {
	if img.Digest == "" || img.Source == "" {
		return nil, fmt.Errorf("platforms of %q: image was not resolved", img.Ref)
	}
	return r.platforms.do(img.Digest, func() ([]string, error) {
		src, err := Normalize(img.Source)
		if err != nil {
			return nil, err
		}
		repo, _, _ := strings.Cut(src, "@")
		repo = trimTag(repo)
		ref, err := r.parse(repo + "@" + img.Digest)
		if err != nil {
			return nil, fmt.Errorf("platforms of %s: %w", img.Source, err)
		}
		release, err := r.acquire(ctx, ref.Context().RegistryStr())
		if err != nil {
			return nil, err
		}
		defer release()
		ctx, cancel := context.WithTimeout(ctx, r.o.requestTimeout)
		defer cancel()
		r.o.logger.Debug("GET manifest for platforms", "ref", displayName(ref))
		desc, err := r.puller.Get(ctx, ref)
		if err != nil {
			return nil, classify(displayName(ref), err)
		}
		return platformsOf(desc)
	})
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
	return r.tags.do(repo.String(), func() ([]string, error) {
		release, err := r.acquire(ctx, repo.RegistryStr())
		if err != nil {
			return nil, err
		}
		defer release()
		ctx, cancel := context.WithTimeout(ctx, r.o.requestTimeout)
		defer cancel()
		tags, err := r.puller.List(ctx, repo)
		if err != nil {
			return nil, classify(displayName(repo.Tag("latest")), err)
		}
		sort.Strings(tags)
		return tags, nil
	})
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

// acquire takes a slot of the global and the per-registry limit.
func (r *Remote) acquire(ctx context.Context, host string) (func(), error) {
	r.mu.Lock()
	hs, ok := r.perHost[host]
	if !ok {
		hs = make(chan struct{}, r.o.perRegistry)
		r.perHost[host] = hs
	}
	r.mu.Unlock()
	select {
	case r.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case hs <- struct{}{}:
	case <-ctx.Done():
		<-r.sem
		return nil, ctx.Err()
	}
	return func() { <-hs; <-r.sem }, nil
}

func platformsOf(desc *remote.Descriptor) ([]string, error) {
	if !desc.MediaType.IsIndex() {
		return nil, nil // single-arch: no platforms list
	}
	idx, err := desc.ImageIndex()
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range m.Manifests {
		if p := platformString(d.Platform); p != "" {
			out = append(out, p)
		}
	}
	return out, nil
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
	var te *transport.Error
	if errors.As(err, &te) {
		switch te.StatusCode {
		case http.StatusNotFound:
			return fmt.Errorf("%s: %w: check the repository and tag exist (registry said: %v)", ref, ErrNotFound, err)
		case http.StatusUnauthorized, http.StatusForbidden:
			return fmt.Errorf("%s: %w: log in (docker login, DOCKER_CONFIG or CHARTPIN_REGISTRY_AUTH) or check access (registry said: %v)", ref, ErrUnauthorized, err)
		case http.StatusTooManyRequests:
			return fmt.Errorf("%s: %w: retry later or authenticate for a higher limit (registry said: %v)", ref, ErrRateLimited, err)
		}
		for _, d := range te.Errors {
			if d.Code == transport.ManifestUnknownErrorCode || d.Code == transport.NameUnknownErrorCode {
				return fmt.Errorf("%s: %w: check the repository and tag exist (registry said: %v)", ref, ErrNotFound, err)
			}
		}
	}
	return fmt.Errorf("resolving %s: %w", ref, err)
}

// onceMap runs fn once per key and shares the answer, errors included, for the run.
type onceMap[T any] struct {
	mu sync.Mutex
	m  map[string]*onceEntry[T]
}

type onceEntry[T any] struct {
	done chan struct{}
	val  T
	err  error
}

func (m *onceMap[T]) do(key string, fn func() (T, error)) (T, error) {
	m.mu.Lock()
	if m.m == nil {
		m.m = map[string]*onceEntry[T]{}
	}
	if e, ok := m.m[key]; ok {
		m.mu.Unlock()
		<-e.done
		return e.val, e.err
	}
	e := &onceEntry[T]{done: make(chan struct{})}
	m.m[key] = e
	m.mu.Unlock()
	e.val, e.err = fn()
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
