package kubetest

import (
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
)

// Proxy sits between the clients under test and the API server and records
// every request ("METHOD /path"), so a test can say how many API calls a
// step made and which of them edit. It serves TLS like the real server:
// client-go sends no bearer token to a plain-HTTP server in a kubeconfig.
type Proxy struct {
	*httptest.Server

	mu       sync.Mutex
	requests []string
}

// Proxy starts a counting proxy in front of the server; it stops at t.Cleanup.
func (s *Server) Proxy(t testing.TB) *Proxy {
	t.Helper()
	target, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(s.CA) {
		t.Fatal("kubetest CA: no certificate")
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = &http.Transport{TLSClientConfig: tlsConfig(pool)}
	rp.FlushInterval = -1 // watches stream
	p := &Proxy{}
	p.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.requests = append(p.requests, r.Method+" "+r.URL.Path)
		p.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

// Reset forgets the recorded requests and returns them (none for a nil *Proxy).
func (p *Proxy) Reset() []string {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.requests
	p.requests = nil
	return out
}

// Config authenticates with token through the proxy.
func (p *Proxy) Config(token string) *rest.Config {
	return &rest.Config{
		Host:            p.URL,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: p.caPEM()},
		QPS:             1000,
		Burst:           1000,
	}
}

// Kubeconfig writes a kubeconfig for token through the proxy, with
// namespace as its default, and returns its path.
func (p *Proxy) Kubeconfig(t testing.TB, token, namespace string) string {
	t.Helper()
	return writeKubeconfig(t, t.TempDir(), p.URL, p.caPEM(), token, namespace)
}

func (p *Proxy) caPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.Certificate().Raw})
}

// ByMethod counts requests per HTTP method.
func ByMethod(requests []string) map[string]int {
	out := map[string]int{}
	for _, r := range requests {
		m, _, _ := strings.Cut(r, " ")
		out[m]++
	}
	return out
}

// Edits are the requests that change something (all but GET).
func Edits(requests []string) []string {
	var out []string
	for _, r := range requests {
		if !strings.HasPrefix(r, "GET ") {
			out = append(out, r)
		}
	}
	return out
}
