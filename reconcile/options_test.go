package reconcile

import (
	"strings"
	"testing"
	"time"

	"github.com/chartpin/chartpin/internal/failure"
)

// Each option out of range is an input error naming its field; the
// defaults are valid as they are.
func TestOptionsValidate(t *testing.T) {
	if err := DefaultOptions().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	e := newEnv(t)
	for want, set := range map[string]func(*Options){
		"RolloutTimeout 0s: want more than zero":  func(o *Options) { o.RolloutTimeout = 0 },
		"RequestTimeout -1s: want more than zero": func(o *Options) { o.RequestTimeout = -time.Second },
		"PollInterval 0s: want more than zero":    func(o *Options) { o.PollInterval = 0 },
		"MaxSkips -1: want 0 or more":             func(o *Options) { o.MaxSkips = -1 },
		"MaxAttempts 0: want at least 1":          func(o *Options) { o.MaxAttempts = 0 },
		"Spread -1s: want 0 or more":              func(o *Options) { o.Spread = -time.Second },
	} {
		err := options(set).Validate()
		if failure.Code(err) != 2 || err.Error() != want {
			t.Errorf("%s: got %v (exit %d)", want, err, failure.Code(err))
		}
		if _, err := New(e.client, e.resolver(), options(set)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New with %s: %v", want, err)
		}
	}
	if err := options(func(o *Options) { o.MaxSkips = 0 }).Validate(); err != nil {
		t.Errorf("MaxSkips 0 (fail on the first skipped tick): %v", err)
	}
}
