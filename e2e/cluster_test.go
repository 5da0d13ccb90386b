package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/chartpin/chartpin/internal/kubetest"
)

// apiProxy sits between the clients under test (Helm for upgrade, client-go
// for reconcile) and the real kube-apiserver, and records every request, so
// each step can say how many API calls it made and which of them edit.
type apiProxy struct {
	*httptest.Server

	mu       sync.Mutex
	requests []string
}

func startAPIProxy(t *testing.T, srv *kubetest.Server) *apiProxy {
	t.Helper()
	target, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(srv.CA) {
		t.Fatal("kubetest CA: no certificate")
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	rp.FlushInterval = -1 // watches stream
	p := &apiProxy{}
	// TLS like the real server: client-go does not send a bearer token to a
	// plain-HTTP server named in a kubeconfig.
	p.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.requests = append(p.requests, r.Method+" "+r.URL.Path)
		p.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

// reset forgets the recorded requests and returns them.
func (p *apiProxy) reset() []string {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.requests
	p.requests = nil
	return out
}

// seen returns the requests recorded so far.
func (p *apiProxy) seen() []string {
	if p == nil { // no API server: Helm's in-memory fallback
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.requests...)
}

// byMethod counts requests per HTTP method.
func byMethod(requests []string) map[string]int {
	out := map[string]int{}
	for _, r := range requests {
		m, _, _ := strings.Cut(r, " ")
		out[m]++
	}
	return out
}

// edits are the requests that change something.
func edits(requests []string) []string {
	var out []string
	for _, r := range requests {
		if !strings.HasPrefix(r, "GET ") {
			out = append(out, r)
		}
	}
	return out
}

// kubeconfig writes a kubeconfig for token that talks to the cluster through
// the proxy with namespace as its default.
func (p *apiProxy) kubeconfig(t *testing.T, name, token, namespace string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster: {server: %q, certificate-authority-data: %s}
users:
- name: %s
  user: {token: %q}
contexts:
- name: e2e
  context: {cluster: e2e, user: %s, namespace: %s}
current-context: e2e
`, p.URL, base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.Certificate().Raw})),
		name, token, name, namespace)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
