package resolver

import (
	"net/http"
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Duration{
		"0":     0,
		"7":     7 * time.Second,
		" 120 ": 2 * time.Minute,
		now.Add(90 * time.Second).Format(http.TimeFormat): 90 * time.Second,
		now.Add(-time.Hour).Format(http.TimeFormat):       0, // in the past: go now
	} {
		got, ok := retryAfter(in, now)
		if !ok || got != want {
			t.Errorf("retryAfter(%q) = %s, %v; want %s", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "-1", "soon"} {
		if _, ok := retryAfter(in, now); ok {
			t.Errorf("retryAfter(%q) accepted", in)
		}
	}
}

func TestBackoffDoublesUpToMax(t *testing.T) {
	r := &retrier{base: 100 * time.Millisecond, max: 350 * time.Millisecond}
	for attempt, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 350 * time.Millisecond, 9: 350 * time.Millisecond} {
		for i := 0; i < 20; i++ {
			if got := r.backoff(attempt); got < want-want/5 || got > want+want/5 {
				t.Fatalf("backoff(%d) = %s, want %s ± 20%%", attempt, got, want)
			}
		}
	}
	if got := (&retrier{}).backoff(3); got != 0 {
		t.Errorf("zero base: %s", got)
	}
}

func TestParseChallenge(t *testing.T) {
	scheme, p := parseChallenge([]string{`Basic realm="x"`, `Bearer realm="https://auth.example/token",service="reg, with comma",scope="repository:a/b:pull,push"`})
	if scheme != "bearer" || p["realm"] != "https://auth.example/token" || p["service"] != "reg, with comma" || p["scope"] != "repository:a/b:pull,push" {
		t.Errorf("bearer: %s %v", scheme, p)
	}
	scheme, p = parseChallenge([]string{`Basic realm="basic-realm"`})
	if scheme != "basic" || p["realm"] != "basic-realm" {
		t.Errorf("basic: %s %v", scheme, p)
	}
	scheme, p = parseChallenge([]string{`Basic realm="a", Bearer realm=https://b/token, service=s`})
	if scheme != "bearer" || p["realm"] != "https://b/token" || p["service"] != "s" {
		t.Errorf("two challenges in one header: %s %v", scheme, p)
	}
	if scheme, _ := parseChallenge(nil); scheme != "" {
		t.Errorf("no header: %q", scheme)
	}
}
