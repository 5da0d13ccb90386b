package testenv

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// stopTB records how a helper ended the test instead of ending it.
type stopTB struct {
	testing.TB
	how, msg string
}

func (s *stopTB) Helper() {}
func (s *stopTB) Fatal(args ...any) {
	s.how, s.msg = "fatal", fmt.Sprint(args...)
	runtime.Goexit()
}
func (s *stopTB) Skip(args ...any) {
	s.how, s.msg = "skip", fmt.Sprint(args...)
	runtime.Goexit()
}

func runTB(t *testing.T, fn func(testing.TB)) *stopTB {
	tb := &stopTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(tb)
	}()
	<-done
	return tb
}

func TestRequireBinarySkipsLoudlyOrFailsInCI(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("CHARTPIN_REQUIRE_INTEGRATION", "")
	tb := runTB(t, func(tb testing.TB) { RequireBinary(tb, "docker-registry", "docker-registry") })
	if tb.how != "skip" || !strings.Contains(tb.msg, "INTEGRATION TEST NOT RUN") || !strings.Contains(tb.msg, "apt-get install -y docker-registry") {
		t.Errorf("without the binary: %s %q, want a loud skip", tb.how, tb.msg)
	}
	t.Setenv("CHARTPIN_REQUIRE_INTEGRATION", "1")
	tb = runTB(t, func(tb testing.TB) { RequireBinary(tb, "docker-registry", "docker-registry") })
	if tb.how != "fatal" || !strings.Contains(tb.msg, "CHARTPIN_REQUIRE_INTEGRATION=1") || !strings.Contains(tb.msg, "apt-get install -y docker-registry") {
		t.Errorf("in CI without the binary: %s %q, want a failure", tb.how, tb.msg)
	}
}

func TestRequireBinaryFindsAnAbsolutePath(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	sh := "/bin/sh"
	tb := runTB(t, func(tb testing.TB) {
		if got := RequireBinary(tb, sh, "dash"); got != sh {
			tb.Errorf("RequireBinary(%s) = %q", sh, got)
		}
	})
	if tb.how != "" {
		t.Errorf("with %s present: %s %q", sh, tb.how, tb.msg)
	}
}
