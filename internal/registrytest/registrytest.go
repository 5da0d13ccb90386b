// Package registrytest runs registries for tests: go-containerregistry's
// in-process registry, Debian's docker-registry (CNCF distribution) on a
// loopback port, and a fault-injecting proxy in front of either. Each counts
// the requests it sees; Pusher pushes sample images into any of them.
package registrytest

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/chartpin/chartpin/internal/sample"
)

// Registry is an in-process OCI registry on a loopback port.
type Registry struct {
	Pusher // Host is host:port, for refs like Host + "/repo:tag"
	Recorder
	Server *httptest.Server

	lieMu sync.Mutex
	lie   Lie
}

// Request is one request a registry or proxy saw.
type Request struct {
	Method, Path string
}

// Recorder keeps every request seen.
type Recorder struct {
	mu       sync.Mutex
	requests []Request
}

func (r *Recorder) record(req *http.Request) {
	r.mu.Lock()
	r.requests = append(r.requests, Request{req.Method, req.URL.Path})
	r.mu.Unlock()
}

// New starts a registry that lives as long as the test; opts tune it (e.g.
// registry.WithReferrersSupport).
func New(t testing.TB, opts ...registry.Option) *Registry {
	t.Helper()
	r := &Registry{}
	h := registry.New(append([]registry.Option{registry.Logger(log.New(io.Discard, "", 0))}, opts...)...)
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.record(req)
		if !serveLie(h, r.currentLie(), w, req) {
			h.ServeHTTP(w, req)
		}
	}))
	t.Cleanup(r.Server.Close)
	r.Host = strings.TrimPrefix(r.Server.URL, "http://")
	return r
}

// Requests returns every request seen so far.
func (r *Recorder) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.requests...)
}

// Count is the number of requests with this method ("" for all) seen so far,
// pushes included; call Reset after setting up fixtures.
func (r *Recorder) Count(method string) int {
	n := 0
	for _, q := range r.Requests() {
		if method == "" || q.Method == method {
			n++
		}
	}
	return n
}

// CountPath is the number of requests with this method ("" for all) whose
// path contains part (e.g. "/manifests/", or "/v2/" for everything).
func (r *Recorder) CountPath(method, part string) int {
	n := 0
	for _, q := range r.Requests() {
		if (method == "" || q.Method == method) && strings.Contains(q.Path, part) {
			n++
		}
	}
	return n
}

// Reset forgets the requests seen so far.
func (r *Recorder) Reset() {
	r.mu.Lock()
	r.requests = nil
	r.mu.Unlock()
}

// Pusher pushes sample images to a registry at Host (plain HTTP, or HTTPS
// through Transport), with Auth when the registry wants credentials.
type Pusher struct {
	Host      string
	Auth      authn.Authenticator // nil: anonymous
	Transport http.RoundTripper   // nil: the default (plain HTTP on loopback)
}

func (p *Pusher) options() []remote.Option {
	var opts []remote.Option
	if p.Auth != nil {
		opts = append(opts, remote.WithAuth(p.Auth))
	}
	if p.Transport != nil {
		opts = append(opts, remote.WithTransport(p.Transport))
	}
	return opts
}

// PushIndex pushes a multi-arch OCI index with one random image per
// platform ("linux/amd64", "linux/arm64/v8") to repo:tag and returns the
// index digest.
func (p *Pusher) PushIndex(t testing.TB, repo, tag string, platforms ...string) string {
	t.Helper()
	return p.pushIndex(t, repo, tag, types.OCIImageIndex, platforms)
}

// PushDockerIndex is PushIndex with Docker manifest-list media types.
func (p *Pusher) PushDockerIndex(t testing.TB, repo, tag string, platforms ...string) string {
	t.Helper()
	return p.pushIndex(t, repo, tag, types.DockerManifestList, platforms)
}

func (p *Pusher) pushIndex(t testing.TB, repo, tag string, mt types.MediaType, platforms []string) string {
	t.Helper()
	idx, err := sample.Index(mt, platforms...)
	if err != nil {
		t.Fatal(err)
	}
	ref := p.ref(t, repo, tag)
	if err := remote.WriteIndex(ref, idx, p.options()...); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// PushImage pushes a single-arch Docker v2 image to repo:tag and returns its digest.
func (p *Pusher) PushImage(t testing.TB, repo, tag string) string {
	t.Helper()
	return p.pushImage(t, repo, tag, types.DockerManifestSchema2)
}

// PushOCIImage pushes a single-arch OCI image to repo:tag and returns its digest.
func (p *Pusher) PushOCIImage(t testing.TB, repo, tag string) string {
	t.Helper()
	return p.pushImage(t, repo, tag, types.OCIManifestSchema1)
}

func (p *Pusher) pushImage(t testing.TB, repo, tag string, mt types.MediaType) string {
	t.Helper()
	img, err := sample.Image(mt)
	if err != nil {
		t.Fatal(err)
	}
	ref := p.ref(t, repo, tag)
	if err := remote.Write(ref, img, p.options()...); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// Tag points another tag at an existing digest of repo.
func (p *Pusher) Tag(t testing.TB, repo, digest, tag string) {
	t.Helper()
	src, err := name.NewDigest(p.Host+"/"+repo+"@"+digest, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(src, p.options()...)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Tag(p.ref(t, repo, tag), desc, p.options()...); err != nil {
		t.Fatal(err)
	}
}

func (p *Pusher) ref(t testing.TB, repo, tag string) name.Tag {
	t.Helper()
	ref, err := name.NewTag(p.Host+"/"+repo+":"+tag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}
