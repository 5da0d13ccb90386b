package registrytest

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// Fault is what the proxy does to one request instead of, or on top of,
// forwarding it. The zero Fault forwards the request untouched.
type Fault struct {
	// Delay waits this long (or until the client gives up) before acting.
	Delay time.Duration
	// Status, when set, answers with this status, Header and Body instead of forwarding.
	Status int
	Header http.Header
	Body   string
	// Drop closes the connection without answering.
	Drop bool
	// StripHeaders forwards, then removes these headers from the answer.
	StripHeaders []string
}

// Proxy is a loopback HTTP proxy in front of a registry that counts every
// request, can add latency to each, and injects faults.
type Proxy struct {
	Recorder
	// Host is host:port of the proxy.
	Host   string
	Server *httptest.Server

	mu       sync.Mutex
	seen     int
	inFlight int
	maxIn    int
	delay    time.Duration
	fault    func(n int, req *http.Request) Fault
}

// NewProxy starts a proxy to the plain-HTTP registry at target (host:port).
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p := &Proxy{}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: target})
	rp.ErrorLog = nil
	// Keep connections to the registry: the default two idle ones per host
	// make a burst of clients churn through loopback ports.
	tr := &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: 30 * time.Second}
	rp.Transport = tr
	t.Cleanup(tr.CloseIdleConnections)
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		p.record(req)
		p.mu.Lock()
		p.seen++
		p.inFlight++
		p.maxIn = max(p.maxIn, p.inFlight)
		delay, f := p.delay, Fault{}
		if p.fault != nil {
			f = p.fault(p.seen, req)
		}
		p.mu.Unlock()
		defer func() {
			p.mu.Lock()
			p.inFlight--
			p.mu.Unlock()
		}()
		if !wait(req, delay+f.Delay) {
			return
		}
		switch {
		case f.Drop:
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					conn.Close()
					return
				}
			}
			panic(http.ErrAbortHandler)
		case f.Status != 0:
			for k, vs := range f.Header {
				for _, v := range vs {
					w.Header().Add(k, v)
				}
			}
			w.WriteHeader(f.Status)
			_, _ = w.Write([]byte(f.Body))
		default:
			if len(f.StripHeaders) > 0 {
				w = &stripWriter{ResponseWriter: w, strip: f.StripHeaders}
			}
			rp.ServeHTTP(w, req)
		}
	}))
	t.Cleanup(p.Server.Close)
	p.Host = strings.TrimPrefix(p.Server.URL, "http://")
	return p
}

// SetDelay adds d before every request is handled (latency of a remote registry).
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// Inject decides a Fault for every request from now on; n counts the
// requests the proxy has seen, from 1. fn runs under the proxy's lock, one
// request at a time, so it may keep state. nil forwards everything.
func (p *Proxy) Inject(fn func(n int, req *http.Request) Fault) {
	p.mu.Lock()
	p.fault = fn
	p.mu.Unlock()
}

// Reset forgets the requests seen so far and restarts n at 1.
func (p *Proxy) Reset() {
	p.Recorder.Reset()
	p.mu.Lock()
	p.seen, p.maxIn = 0, 0
	p.mu.Unlock()
}

// MaxInFlight is the most requests the proxy was handling at once since Reset.
func (p *Proxy) MaxInFlight() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.maxIn
}

// wait waits d, or until the client hangs up (false).
func wait(req *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-req.Context().Done():
		return false
	}
}

type stripWriter struct {
	http.ResponseWriter
	strip []string
}

func (s *stripWriter) WriteHeader(code int) {
	for _, h := range s.strip {
		s.Header().Del(h)
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *stripWriter) Write(b []byte) (int, error) { return s.ResponseWriter.Write(b) }
