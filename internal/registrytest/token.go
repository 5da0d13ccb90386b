package registrytest

import (
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/registry"
)

// NewWithTokenAuth starts an in-process registry that speaks the Docker
// token protocol as Docker Hub and GHCR do: /v2/ answers 401 with a Bearer
// challenge whose realm is /token on the same server; /token checks the
// basic credentials (user "" allows anonymous pulls) and issues a token per
// scope; every /v2/<repo>/ request needs a token for that repository.
func NewWithTokenAuth(t testing.TB, user, password string) *Registry {
	t.Helper()
	r := &Registry{}
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.record(req)
		host := req.Host
		challenge := func(scope string) {
			v := `Bearer realm="http://` + host + `/token",service="registrytest"`
			if scope != "" {
				v += `,scope="` + scope + `"`
			}
			w.Header().Set("WWW-Authenticate", v)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
		}
		if req.URL.Path == "/token" {
			u, p, ok := req.BasicAuth()
			if user != "" && (!ok || u != user || p != password) {
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = io.WriteString(w, `{"details":"incorrect username or password"}`)
				return
			}
			scopes := strings.Join(req.URL.Query()["scope"], " ")
			_ = json.NewEncoder(w).Encode(map[string]string{"token": "tok " + scopes})
			return
		}
		bearer := strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer ")
		if req.URL.Path == "/v2/" {
			if !strings.HasPrefix(bearer, "tok ") {
				challenge("")
				return
			}
		} else if repo, ok := repoOf(req.URL.Path); ok {
			if !strings.Contains(bearer, "repository:"+repo+":") {
				challenge("repository:" + repo + ":pull")
				return
			}
		}
		h.ServeHTTP(w, req)
	}))
	t.Cleanup(r.Server.Close)
	r.Host = strings.TrimPrefix(r.Server.URL, "http://")
	if user != "" {
		r.Auth = authn.FromConfig(authn.AuthConfig{Username: user, Password: password})
	}
	return r
}

// repoOf is <repo> in /v2/<repo>/(manifests|blobs|tags)/….
func repoOf(path string) (string, bool) {
	rest := strings.TrimPrefix(path, "/v2/")
	for _, part := range []string{"/manifests/", "/blobs/", "/tags/"} {
		if i := strings.Index(rest, part); i > 0 {
			return rest[:i], true
		}
	}
	return "", false
}
