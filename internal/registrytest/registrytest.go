// Package registrytest runs go-containerregistry's in-process registry for
// tests, counts the requests it sees, and pushes sample images into it.
package registrytest

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Registry is an in-process OCI registry on a loopback port.
type Registry struct {
	// Host is host:port, for refs like Host + "/repo:tag".
	Host   string
	Server *httptest.Server

	mu       sync.Mutex
	requests []Request
}

// Request is one request the registry saw.
type Request struct {
	Method, Path string
}

// New starts a registry that lives as long as the test.
func New(t testing.TB) *Registry {
	t.Helper()
	r := &Registry{}
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.requests = append(r.requests, Request{req.Method, req.URL.Path})
		r.mu.Unlock()
		h.ServeHTTP(w, req)
	}))
	t.Cleanup(r.Server.Close)
	r.Host = strings.TrimPrefix(r.Server.URL, "http://")
	return r
}

// Requests returns every request seen so far.
func (r *Registry) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.requests...)
}

// Count is the number of requests with this method ("" for all) seen so far,
// pushes included; call Reset after setting up fixtures.
func (r *Registry) Count(method string) int {
	n := 0
	for _, q := range r.Requests() {
		if method == "" || q.Method == method {
			n++
		}
	}
	return n
}

// Reset forgets the requests seen so far.
func (r *Registry) Reset() {
	r.mu.Lock()
	r.requests = nil
	r.mu.Unlock()
}

// PushIndex pushes a multi-arch OCI index with one random image per
// platform ("linux/amd64", "linux/arm64/v8") to repo:tag and returns the
// index digest.
func (r *Registry) PushIndex(t testing.TB, repo, tag string, platforms ...string) string {
	t.Helper()
	return r.pushIndex(t, repo, tag, types.OCIImageIndex, platforms)
}

// PushDockerIndex is PushIndex with Docker manifest-list media types.
func (r *Registry) PushDockerIndex(t testing.TB, repo, tag string, platforms ...string) string {
	t.Helper()
	return r.pushIndex(t, repo, tag, types.DockerManifestList, platforms)
}

func (r *Registry) pushIndex(t testing.TB, repo, tag string, mt types.MediaType, platforms []string) string {
	t.Helper()
	idx := mutate.IndexMediaType(empty.Index, mt)
	for _, p := range platforms {
		img, err := random.Image(256, 1)
		if err != nil {
			t.Fatal(err)
		}
		if mt == types.DockerManifestList {
			img = mutate.MediaType(img, types.DockerManifestSchema2)
		} else {
			img = mutate.MediaType(img, types.OCIManifestSchema1)
		}
		plat, err := v1.ParsePlatform(p)
		if err != nil {
			t.Fatal(err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: plat}})
	}
	ref := r.ref(t, repo, tag)
	if err := remote.WriteIndex(ref, idx); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// PushImage pushes a single-arch image to repo:tag and returns its digest.
func (r *Registry) PushImage(t testing.TB, repo, tag string) string {
	t.Helper()
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref := r.ref(t, repo, tag)
	if err := remote.Write(ref, img); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// Tag points another tag at an existing digest of repo.
func (r *Registry) Tag(t testing.TB, repo, digest, tag string) {
	t.Helper()
	src, err := name.NewDigest(r.Host+"/"+repo+"@"+digest, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Tag(r.ref(t, repo, tag), desc); err != nil {
		t.Fatal(err)
	}
}

func (r *Registry) ref(t testing.TB, repo, tag string) name.Tag {
	t.Helper()
	ref, err := name.NewTag(r.Host+"/"+repo+":"+tag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}
