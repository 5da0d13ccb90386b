package resolver_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chartpin/chartpin/internal/registrytest"
	"github.com/chartpin/chartpin/resolver"
)

// faultRig is a registry with one multi-arch image behind a fault-injecting proxy.
type faultRig struct {
	reg    *registrytest.Registry
	proxy  *registrytest.Proxy
	digest string
	ref    string
}

func newFaultRig(t *testing.T) *faultRig {
	t.Helper()
	reg := registrytest.New(t)
	d := reg.PushIndex(t, "app", "1", "linux/amd64", "linux/arm64")
	proxy := registrytest.NewProxy(t, reg.Host)
	return &faultRig{reg: reg, proxy: proxy, digest: d, ref: proxy.Host + "/app:1"}
}

// remote retries fast (1ms backoff) so that tests stay quick; 4 attempts
// and a 2s request timeout unless o says otherwise.
func (f *faultRig) remote(t *testing.T, o resolver.Options) *resolver.Remote {
	t.Helper()
	o.InsecureRegistries = append(o.InsecureRegistries, f.proxy.Host)
	if o.RetryAttempts == 0 {
		o.RetryAttempts, o.RetryBase, o.RetryMax = 4, time.Millisecond, 4*time.Millisecond
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = 2 * time.Second
	}
	r, err := resolver.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// onManifests injects fault into manifest requests of method for which when(n) is true (n counts them from 1).
func (f *faultRig) onManifests(method string, when func(n int) bool, fault registrytest.Fault) {
	n := 0
	f.proxy.Inject(func(_ int, req *http.Request) registrytest.Fault {
		if req.Method != method || !strings.Contains(req.URL.Path, "/manifests/") {
			return registrytest.Fault{}
		}
		n++ // the proxy calls Inject's func under its lock
		if when(n) {
			return fault
		}
		return registrytest.Fault{}
	})
}

func first(k int) func(int) bool { return func(n int) bool { return n <= k } }
func always(int) bool            { return true }

// exact checks that the resolver counted what the proxy saw.
func (f *faultRig) exact(t *testing.T, r *resolver.Remote) resolver.Stats {
	t.Helper()
	s := r.Stats()
	if s.Total() != f.proxy.Count("") || s.HEAD != f.proxy.Count("HEAD") {
		t.Errorf("resolver counted %+v (total %d); proxy saw %d requests, %d HEADs: %v", s, s.Total(), f.proxy.Count(""), f.proxy.Count("HEAD"), f.proxy.Requests())
	}
	return s
}

func TestFault429RetryAfterHonoured(t *testing.T) {
	f := newFaultRig(t)
	f.onManifests("HEAD", first(1), registrytest.Fault{Status: 429, Header: http.Header{"Retry-After": {"1"}}})
	r := f.remote(t, resolver.Options{})
	start := time.Now()
	img, err := r.Resolve(context.Background(), f.ref)
	waited := time.Since(start)
	if err != nil || img.Digest != f.digest {
		t.Fatalf("%+v, %v", img, err)
	}
	s := f.exact(t, r)
	if s.HEAD != 2 || s.Retries != 1 || s.Ping != 1 {
		t.Errorf("stats %+v, want 2 HEADs (one retry) and one ping", s)
	}
	// A timer cannot fire early: this proves Retry-After (1s) was used, not the 1ms backoff.
	if waited < time.Second {
		t.Errorf("retried after %s, before the registry's Retry-After of 1s", waited)
	}
}

func TestFault429BeyondCapFailsAtOnce(t *testing.T) {
	f := newFaultRig(t)
	f.onManifests("HEAD", always, registrytest.Fault{Status: 429, Header: http.Header{"Retry-After": {"120"}}})
	r := f.remote(t, resolver.Options{RetryAfterCap: 10 * time.Second})
	_, err := r.Resolve(context.Background(), f.ref)
	if !errors.Is(err, resolver.ErrRateLimited) {
		t.Fatalf("err = %v, want ErrRateLimited", err)
	}
	for _, want := range []string{f.ref, "429", "2m0s", "Retry-After: 120"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if s := f.exact(t, r); s.HEAD != 1 || s.Retries != 0 {
		t.Errorf("stats %+v, want one HEAD and no retry", s)
	}
}

func TestFault429KeepsRegistryMessage(t *testing.T) {
	f := newFaultRig(t)
	r := f.remote(t, resolver.Options{})
	ctx := context.Background()
	img, err := r.Resolve(ctx, f.ref)
	if err != nil {
		t.Fatal(err)
	}
	f.onManifests("GET", always, registrytest.Fault{Status: 429, Header: http.Header{"Retry-After": {"3600"}},
		Body: `{"errors":[{"code":"TOOMANYREQUESTS","message":"You have reached your pull rate limit."}]}`})
	_, err = r.Platforms(ctx, img)
	if !errors.Is(err, resolver.ErrRateLimited) || !strings.Contains(err.Error(), "You have reached your pull rate limit.") {
		t.Fatalf("err = %v, want ErrRateLimited with the registry's message", err)
	}
	if s := f.exact(t, r); s.GET != 1 {
		t.Errorf("stats %+v, want one GET", s)
	}
}

func TestFault429UntilAttemptsRunOut(t *testing.T) {
	f := newFaultRig(t)
	f.onManifests("HEAD", always, registrytest.Fault{Status: 429, Header: http.Header{"Retry-After": {"0"}}})
	r := f.remote(t, resolver.Options{})
	_, err := r.Resolve(context.Background(), f.ref)
	if !errors.Is(err, resolver.ErrRateLimited) || !strings.Contains(err.Error(), "after 4 attempt(s)") {
		t.Fatalf("err = %v, want ErrRateLimited after 4 attempts", err)
	}
	if s := f.exact(t, r); s.HEAD != 4 || s.Retries != 3 {
		t.Errorf("stats %+v, want 4 HEADs, 3 retries", s)
	}
}

func TestFault503(t *testing.T) {
	t.Run("transient", func(t *testing.T) {
		f := newFaultRig(t)
		f.onManifests("HEAD", first(2), registrytest.Fault{Status: 503, Body: "busy"})
		r := f.remote(t, resolver.Options{})
		img, err := r.Resolve(context.Background(), f.ref)
		if err != nil || img.Digest != f.digest {
			t.Fatalf("%+v, %v", img, err)
		}
		if s := f.exact(t, r); s.HEAD != 3 || s.Retries != 2 {
			t.Errorf("stats %+v, want 3 HEADs, 2 retries", s)
		}
	})
	t.Run("persistent", func(t *testing.T) {
		f := newFaultRig(t)
		f.onManifests("HEAD", always, registrytest.Fault{Status: 503})
		r := f.remote(t, resolver.Options{})
		_, err := r.Resolve(context.Background(), f.ref)
		if err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), f.ref) {
			t.Fatalf("err = %v, want a 503 naming the ref", err)
		}
		if s := f.exact(t, r); s.HEAD != 4 || s.Retries != 3 {
			t.Errorf("stats %+v, want 4 HEADs, 3 retries", s)
		}
	})
	t.Run("ping", func(t *testing.T) {
		f := newFaultRig(t)
		f.proxy.Inject(func(n int, req *http.Request) registrytest.Fault {
			if n == 1 {
				return registrytest.Fault{Status: 502}
			}
			return registrytest.Fault{}
		})
		r := f.remote(t, resolver.Options{})
		if img, err := r.Resolve(context.Background(), f.ref); err != nil || img.Digest != f.digest {
			t.Fatalf("%+v, %v", img, err)
		}
		if s := f.exact(t, r); s.Ping != 2 || s.HEAD != 1 || s.Retries != 1 {
			t.Errorf("stats %+v, want 2 pings, 1 HEAD", s)
		}
	})
}

func TestFaultSlowPastTimeout(t *testing.T) {
	t.Run("once", func(t *testing.T) {
		f := newFaultRig(t)
		f.onManifests("HEAD", first(1), registrytest.Fault{Delay: time.Minute})
		r := f.remote(t, resolver.Options{RequestTimeout: 150 * time.Millisecond})
		img, err := r.Resolve(context.Background(), f.ref)
		if err != nil || img.Digest != f.digest {
			t.Fatalf("%+v, %v", img, err)
		}
		if s := f.exact(t, r); s.HEAD != 2 || s.Retries != 1 {
			t.Errorf("stats %+v, want 2 HEADs, 1 retry", s)
		}
	})
	t.Run("always", func(t *testing.T) {
		f := newFaultRig(t)
		f.onManifests("HEAD", always, registrytest.Fault{Delay: time.Minute})
		r := f.remote(t, resolver.Options{RequestTimeout: 100 * time.Millisecond, RetryAttempts: 3, RetryBase: time.Millisecond, RetryMax: time.Millisecond})
		_, err := r.Resolve(context.Background(), f.ref)
		if err == nil || !strings.Contains(err.Error(), "per-request timeout") || !strings.Contains(err.Error(), "after 3 attempts") {
			t.Fatalf("err = %v, want a per-request timeout after 3 attempts", err)
		}
		if s := f.exact(t, r); s.HEAD != 3 || s.Retries != 2 {
			t.Errorf("stats %+v, want 3 HEADs, 2 retries", s)
		}
	})
}

func TestFaultDroppedConnection(t *testing.T) {
	t.Run("once", func(t *testing.T) {
		f := newFaultRig(t)
		f.onManifests("HEAD", first(1), registrytest.Fault{Drop: true})
		r := f.remote(t, resolver.Options{})
		img, err := r.Resolve(context.Background(), f.ref)
		if err != nil || img.Digest != f.digest {
			t.Fatalf("%+v, %v", img, err)
		}
		if s := f.exact(t, r); s.HEAD != 2 || s.Retries != 1 {
			t.Errorf("stats %+v, want 2 HEADs, 1 retry", s)
		}
	})
	t.Run("always", func(t *testing.T) {
		f := newFaultRig(t)
		f.onManifests("HEAD", always, registrytest.Fault{Drop: true})
		r := f.remote(t, resolver.Options{})
		_, err := r.Resolve(context.Background(), f.ref)
		if err == nil || !strings.Contains(err.Error(), "gave up after 4 attempts") {
			t.Fatalf("err = %v, want failure after 4 attempts", err)
		}
		// net/http itself resends once when a reused connection dies; those count too.
		if s := f.exact(t, r); s.HEAD < 4 || s.Retries != s.HEAD-1 {
			t.Errorf("stats %+v, want at least 4 HEADs, every one after the first a retry", s)
		}
	})
}

func TestFaultHeadWithoutDigestHeader(t *testing.T) {
	f := newFaultRig(t)
	f.onManifests("HEAD", always, registrytest.Fault{StripHeaders: []string{"Docker-Content-Digest"}})
	r := f.remote(t, resolver.Options{})
	ctx := context.Background()
	img, err := r.Resolve(ctx, f.ref)
	if err != nil || img.Digest != f.digest || !img.IsIndex() {
		t.Fatalf("%+v, %v; want the index digest %s", img, err, f.digest)
	}
	plats, err := r.Platforms(ctx, img)
	if err != nil || len(plats) != 2 {
		t.Fatalf("platforms %v, %v", plats, err)
	}
	if s := f.exact(t, r); s.HEAD != 1 || s.GET != 1 || s.Retries != 0 {
		t.Errorf("stats %+v, want one HEAD, one GET (reused for platforms)", s)
	}
}

func TestFaultCallerGivesUpDuringBackoff(t *testing.T) {
	f := newFaultRig(t)
	f.onManifests("HEAD", always, registrytest.Fault{Status: 429, Header: http.Header{"Retry-After": {"20"}}})
	r := f.remote(t, resolver.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(200*time.Millisecond, cancel)
	_, err := r.Resolve(ctx, f.ref)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want the caller's cancellation", err)
	}
	if s := f.exact(t, r); s.HEAD != 1 {
		t.Errorf("stats %+v, want one HEAD: nothing is sent after the caller gave up", s)
	}
}

func TestFault429PastTheCallersDeadlineFailsAtOnce(t *testing.T) {
	f := newFaultRig(t)
	f.onManifests("HEAD", always, registrytest.Fault{Status: 429, Header: http.Header{"Retry-After": {"20"}}})
	r := f.remote(t, resolver.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := r.Resolve(ctx, f.ref)
	if !errors.Is(err, resolver.ErrRateLimited) || !strings.Contains(err.Error(), "20s") {
		t.Fatalf("err = %v, want ErrRateLimited with the registry's Retry-After: waiting 20s cannot end before the 10s deadline", err)
	}
	if s := f.exact(t, r); s.HEAD != 1 || s.Retries != 0 {
		t.Errorf("stats %+v, want one HEAD", s)
	}
}

func TestFaultCallerDeadlineBoundsTheRequest(t *testing.T) {
	f := newFaultRig(t)
	f.onManifests("HEAD", always, registrytest.Fault{Delay: time.Minute})
	r := f.remote(t, resolver.Options{RequestTimeout: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	_, err := r.Resolve(ctx, f.ref)
	if !errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "attempts") {
		t.Fatalf("err = %v, want the caller's deadline, not retries", err)
	}
	if s := f.exact(t, r); s.HEAD != 1 || s.Retries != 0 {
		t.Errorf("stats %+v, want one HEAD and no retry past the caller's deadline", s)
	}
}
