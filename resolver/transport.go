package resolver

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
)

// Stats counts the requests a Remote sent.
type Stats struct {
	HEAD    int `json:"head"`
	GET     int `json:"get"`
	Token   int `json:"token"`
	Other   int `json:"other"` // pings (/v2/) and anything else
	Retries int `json:"retries"`
}

// Total is every request sent.
func (s Stats) Total() int { return s.HEAD + s.GET + s.Token + s.Other }

// counter counts every request that reaches the network, by kind.
type counter struct {
	next http.RoundTripper
	mu   sync.Mutex
	s    Stats
}

func (c *counter) RoundTrip(req *http.Request) (*http.Response, error) {
	c.mu.Lock()
	switch {
	case req.URL.Query().Get("scope") != "" || strings.HasSuffix(req.URL.Path, "/token"):
		c.s.Token++
	case req.URL.Path == "/v2/" || req.URL.Path == "/v2":
		c.s.Other++
	case req.Method == http.MethodHead:
		c.s.HEAD++
	case req.Method == http.MethodGet:
		c.s.GET++
	default:
		c.s.Other++
	}
	c.mu.Unlock()
	return c.next.RoundTrip(req)
}

func (c *counter) stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.s
}

// insecureGuard refuses plain HTTP to any host not named by
// --insecure-registry (go-containerregistry would otherwise fall back to
// HTTP for loopback and private addresses on its own).
type insecureGuard struct {
	next    http.RoundTripper
	allowed map[string]bool
}

func (g *insecureGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "http" && !g.allowed[req.URL.Host] {
		return nil, fmt.Errorf("plain HTTP to %s refused: pass --insecure-registry %s if that registry really has no TLS", req.URL.Host, req.URL.Host)
	}
	return g.next.RoundTrip(req)
}
