package registrytest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Lie is how a Registry misbehaves on manifest requests (HEAD and GET),
// to test that nothing a registry says is taken on its word. The zero Lie
// tells the truth.
type Lie struct {
	// Serve answers every manifest request with the manifest of this tag
	// or digest instead of the one asked for (a stale cache, a broken proxy).
	Serve string
	// Digest replaces the Docker-Content-Digest header.
	Digest string
	// MediaType replaces the Content-Type header.
	MediaType string
	// Body, followed by Pad spaces streamed without a Content-Length (a
	// huge manifest), answers every manifest request, by any tag or digest.
	// Unless Digest is set, the header then carries the true sha256 of Body
	// and the padding, so a client that reads it all finds the hash right.
	Body []byte
	Pad  int64
}

// Lie makes every manifest request from now on answer as l says; the zero
// Lie restores the truth.
func (r *Registry) Lie(l Lie) {
	r.lieMu.Lock()
	r.lie = l
	r.lieMu.Unlock()
}

func (r *Registry) currentLie() Lie {
	r.lieMu.Lock()
	defer r.lieMu.Unlock()
	return r.lie
}

// serveLie answers a manifest request through the real registry h, then
// rewrites the answer as l says. It reports false when l is the truth.
func serveLie(h http.Handler, l Lie, w http.ResponseWriter, req *http.Request) bool {
	isManifest := strings.Contains(req.URL.Path, "/manifests/") && (req.Method == http.MethodGet || req.Method == http.MethodHead)
	truth := l.Serve == "" && l.Digest == "" && l.MediaType == "" && l.Body == nil
	if !isManifest || truth {
		return false
	}
	inner := req.Clone(req.Context())
	inner.Method = http.MethodGet
	if l.Serve != "" {
		i := strings.LastIndex(inner.URL.Path, "/")
		inner.URL.Path = inner.URL.Path[:i+1] + l.Serve
	}
	rec := httptest.NewRecorder()
	body := l.Body
	if body == nil {
		h.ServeHTTP(rec, inner)
		body = rec.Body.Bytes()
	} else {
		// Served for any reference, as a registry that stores it would.
		sum := sha256.New()
		sum.Write(l.Body)
		_, _ = io.Copy(sum, io.LimitReader(spaces{}, l.Pad))
		rec.Header().Set("Docker-Content-Digest", "sha256:"+hex.EncodeToString(sum.Sum(nil)))
		var doc struct{ MediaType string }
		_ = json.Unmarshal(l.Body, &doc)
		rec.Header().Set("Content-Type", doc.MediaType)
	}
	size := int64(len(body)) + l.Pad
	for k, vs := range rec.Header() {
		w.Header()[k] = vs
	}
	if rec.Code == http.StatusOK {
		if l.Digest != "" {
			w.Header().Set("Docker-Content-Digest", l.Digest)
		}
		if l.MediaType != "" {
			w.Header().Set("Content-Type", l.MediaType)
		}
	}
	if l.Pad > 0 && req.Method == http.MethodGet {
		w.Header().Del("Content-Length")
	} else {
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	}
	w.WriteHeader(rec.Code)
	if req.Method == http.MethodHead {
		return true
	}
	_, _ = w.Write(body)
	if l.Pad > 0 && rec.Code == http.StatusOK {
		_, _ = io.Copy(w, io.LimitReader(spaces{}, l.Pad)) // stops when the client hangs up
	}
	return true
}

type spaces struct{}

func (spaces) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}

// PutManifest pushes raw manifest bytes of mediaType to repo:tag and returns
// their digest: an index whose platform strings a test chooses, say. The
// registry checks that an index's children exist.
func (p *Pusher) PutManifest(t testing.TB, repo, tag string, mediaType types.MediaType, body []byte) string {
	t.Helper()
	ref := p.ref(t, repo, tag)
	if err := remote.Put(ref, rawManifest{body, mediaType}, p.options()...); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
	sum := sha256.Sum256(body)
	return "sha256:" + hex.EncodeToString(sum[:])
}

type rawManifest struct {
	body []byte
	mt   types.MediaType
}

func (m rawManifest) RawManifest() ([]byte, error)        { return m.body, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return m.mt, nil }
