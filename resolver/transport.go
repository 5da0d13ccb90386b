package resolver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/chartpin/chartpin/internal/failure"
)

// Stats counts the requests a Remote sent. Every request that reaches the
// network is counted once, retries included.
type Stats struct {
	HEAD    int `json:"head"`    // manifest HEADs
	GET     int `json:"get"`     // manifest GETs
	Token   int `json:"token"`   // bearer token requests
	Ping    int `json:"ping"`    // GET /v2/, once per registry
	Other   int `json:"other"`   // tag listings and anything else
	Retries int `json:"retries"` // requests sent again after a 5xx, 429, timeout or reset (included above)
}

// Total is every request sent.
func (s Stats) Total() int { return s.HEAD + s.GET + s.Token + s.Ping + s.Other }

// The transport stack, outermost first:
//
//	scheme → retry → limit → guard → counter → base
//
// go-containerregistry's own retry and ping are bypassed (see Remote), so
// the counter sees each request exactly once per attempt.

// counter counts every request that reaches the network, by kind, and logs it.
type counter struct {
	next http.RoundTripper
	log  *slog.Logger
	mu   sync.Mutex
	s    Stats
}

func (c *counter) RoundTrip(req *http.Request) (*http.Response, error) {
	kind := c.kind(req)
	c.add(kind, 1)
	// net/http silently resends an idempotent request once when a reused
	// connection dies before the answer; count what went on the wire.
	var writes atomic.Int32
	trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { writes.Add(1) }}
	start := time.Now()
	resp, err := c.next.RoundTrip(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
	if extra := int(writes.Load()) - 1; extra > 0 {
		c.add(kind, extra)
		c.mu.Lock()
		c.s.Retries += extra
		c.mu.Unlock()
	}
	// Never log headers or queries: they may carry credentials.
	if err != nil {
		c.log.Debug("request failed", "method", req.Method, "url", redactURL(req), "error", err)
	} else {
		c.log.Debug("request", "method", req.Method, "url", redactURL(req), "status", resp.StatusCode, "ms", time.Since(start).Milliseconds())
	}
	return resp, err
}

func (c *counter) kind(req *http.Request) *int {
	switch p := req.URL.Path; {
	case p == "/v2/" || p == "/v2":
		return &c.s.Ping
	case !strings.HasPrefix(p, "/v2/"):
		return &c.s.Token // the realm a bearer challenge named
	case strings.Contains(p, "/manifests/") && req.Method == http.MethodHead:
		return &c.s.HEAD
	case strings.Contains(p, "/manifests/") && req.Method == http.MethodGet:
		return &c.s.GET
	}
	return &c.s.Other
}

func (c *counter) add(kind *int, n int) {
	c.mu.Lock()
	*kind += n
	c.mu.Unlock()
}

func (c *counter) stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.s
}

func (c *counter) retried() {
	c.mu.Lock()
	c.s.Retries++
	c.mu.Unlock()
}

func redactURL(req *http.Request) string {
	return req.URL.Scheme + "://" + req.URL.Host + req.URL.Path
}

// insecureGuard refuses plain HTTP to any host not named by
// --insecure-registry (a token realm could otherwise point anywhere).
type insecureGuard struct {
	next    http.RoundTripper
	allowed map[string]bool
}

func (g *insecureGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "http" && !g.allowed[canonicalHost(req.URL.Host)] {
		return nil, failure.Optionf("plain HTTP to %s refused: pass {{InsecureRegistries}} %s if that registry really has no TLS", req.URL.Host, req.URL.Host)
	}
	return g.next.RoundTrip(req)
}

// schemer picks the scheme per host up front: plain HTTP for hosts named by
// --insecure-registry, HTTPS for every registry otherwise. No attempt is
// wasted on a scheme the host does not speak (go-containerregistry would
// race https against http for loopback and private addresses).
type schemer struct {
	next       http.RoundTripper
	insecure   map[string]bool
	registries *sync.Map // host → true, registries this Remote talks to
}

func (s *schemer) RoundTrip(req *http.Request) (*http.Response, error) {
	host := canonicalHost(req.URL.Host)
	want := ""
	switch {
	case s.insecure[host]:
		want = "http"
	case s.isRegistry(req.URL.Host):
		want = "https"
	}
	if want != "" && req.URL.Scheme != want {
		req = req.Clone(req.Context())
		req.URL.Scheme = want
	}
	return s.next.RoundTrip(req)
}

func (s *schemer) isRegistry(host string) bool {
	_, ok := s.registries.Load(host)
	return ok
}

// limiter bounds the requests in flight, overall and per host. A slot is
// held until the response body is closed, and never while a retry waits.
type limiter struct {
	next    http.RoundTripper
	global  chan struct{}
	perHost int
	mu      sync.Mutex
	hosts   map[string]chan struct{}
}

func (l *limiter) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	l.mu.Lock()
	hs, ok := l.hosts[req.URL.Host]
	if !ok {
		hs = make(chan struct{}, l.perHost)
		l.hosts[req.URL.Host] = hs
	}
	l.mu.Unlock()
	select {
	case l.global <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case hs <- struct{}{}:
	case <-ctx.Done():
		<-l.global
		return nil, ctx.Err()
	}
	var once sync.Once
	release := func() { once.Do(func() { <-hs; <-l.global }) }
	resp, err := l.next.RoundTrip(req)
	if err != nil {
		release()
		return nil, err
	}
	resp.Body = &onClose{ReadCloser: resp.Body, fn: release}
	return resp, nil
}

// onClose runs fn once when the body is closed.
type onClose struct {
	io.ReadCloser
	fn   func()
	once sync.Once
}

func (b *onClose) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.fn)
	return err
}

// retrier sends a request again on 5xx, 408, 429, timeouts and connection
// resets, with exponential backoff; a 429 waits as long as Retry-After says,
// up to a cap. Each attempt has its own timeout inside the caller's ctx.
// Waiting uses a timer bound to ctx, never a sleep.
type retrier struct {
	next          http.RoundTripper
	attempts      int
	base, max     time.Duration
	retryAfterCap time.Duration
	timeout       time.Duration
	onRetry       func()
	log           *slog.Logger
}

// RateLimitError is what a registry that kept answering 429 turns into.
type RateLimitError struct {
	Host       string
	Status     string
	Message    string        // the registry's own words (body, or Retry-After for HEAD)
	RetryAfter time.Duration // what the registry asked for last; 0 if it did not say
	Attempts   int
}

func (e *RateLimitError) Error() string {
	msg := fmt.Sprintf("%s answered %s after %d attempt(s)", e.Host, e.Status, e.Attempts)
	if e.RetryAfter > 0 {
		msg += fmt.Sprintf(", asking to retry after %s", e.RetryAfter)
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// Is makes errors.Is(err, ErrRateLimited) true.
func (e *RateLimitError) Is(target error) bool { return target == ErrRateLimited }

func (t *retrier) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	for attempt := 1; ; attempt++ {
		r := req
		if attempt > 1 && req.Body != nil {
			if req.GetBody == nil {
				return nil, fmt.Errorf("%s %s: cannot resend a request body", req.Method, redactURL(req))
			}
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			r = req.Clone(ctx)
			r.Body = body
		}
		actx, cancel := context.WithTimeout(ctx, t.timeout)
		resp, err := t.next.RoundTrip(r.WithContext(actx))
		var (
			retry bool
			wait  = t.backoff(attempt)
		)
		switch {
		case err != nil:
			if ctx.Err() != nil { // the caller gave up: do not retry
				cancel()
				return nil, err
			}
			if actx.Err() != nil {
				err = fmt.Errorf("no answer within %s (per-request timeout): %w", t.timeout, actx.Err())
			}
			retry = retryableError(err)
		case resp.StatusCode == http.StatusTooManyRequests:
			ra, ok := retryAfter(resp.Header.Get("Retry-After"), time.Now())
			if ok {
				wait = ra
			}
			if wait > t.retryAfterCap || attempt >= t.attempts || deadlineBefore(ctx, wait) {
				e := &RateLimitError{Host: req.URL.Host, Status: resp.Status, Message: registryMessage(resp), Attempts: attempt}
				if ok {
					e.RetryAfter = ra
				}
				cancel()
				return nil, e
			}
			retry = true
		case retryableStatus(resp.StatusCode):
			if ra, ok := retryAfter(resp.Header.Get("Retry-After"), time.Now()); ok && ra <= t.retryAfterCap {
				wait = ra
			}
			retry = true
		}
		if !retry || attempt >= t.attempts || deadlineBefore(ctx, wait) {
			if err != nil {
				cancel()
				if retry {
					err = fmt.Errorf("%w (gave up after %d attempts)", err, attempt)
				}
				return nil, err
			}
			resp.Body = &onClose{ReadCloser: resp.Body, fn: cancel}
			return resp, nil
		}
		if resp != nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
		}
		cancel()
		t.log.Debug("retrying", "method", req.Method, "url", redactURL(req), "attempt", attempt+1, "wait", wait, "reason", reason(resp, err))
		t.onRetry()
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		}
	}
}

// deadlineBefore reports whether ctx ends before wait is over: then waiting
// is pointless, and what the registry said is the better error.
func deadlineBefore(ctx context.Context, wait time.Duration) bool {
	dl, ok := ctx.Deadline()
	return ok && time.Until(dl) < wait
}

// backoff is base·2^(attempt-1), capped, with ±20% jitter.
func (t *retrier) backoff(attempt int) time.Duration {
	d := t.base
	for i := 1; i < attempt && d < t.max; i++ {
		d *= 2
	}
	d = min(d, t.max)
	if d <= 0 {
		return 0
	}
	return d - d/5 + rand.N(d/5*2+1)
}

func retryableStatus(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

func retryableError(err error) bool {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return true
	case errors.As(err, &ne) && ne.Timeout():
		return true
	}
	return strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "server closed idle connection")
}

// retryAfter parses Retry-After: delay seconds or an HTTP date.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// registryMessage is the body a registry sent with an error (trimmed), or,
// for a HEAD, what its headers said.
func registryMessage(resp *http.Response) string {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	msg := strings.Join(strings.Fields(string(b)), " ")
	if msg == "" && resp.Header.Get("Retry-After") != "" {
		msg = "Retry-After: " + resp.Header.Get("Retry-After")
	}
	return msg
}

func reason(resp *http.Response, err error) string {
	if err != nil {
		return err.Error()
	}
	return resp.Status
}
