package main

import (
	"strings"
	"testing"

	"github.com/chartpin/chartpin/internal/registrytest"
)

// Every flag binds to CHARTPIN_<FLAG>; a command flag that shadows a global
// one (upgrade --timeout) gets CHARTPIN_<COMMAND>_<FLAG> instead.
func TestEnvironmentBindsFlags(t *testing.T) {
	reg := registrytest.New(t)
	reg.PushIndex(t, "app", "1", "linux/amd64")
	t.Setenv("CHARTPIN_INSECURE_REGISTRY", reg.Host)
	t.Setenv("CHARTPIN_OUTPUT", "json")
	out, errOut, code := runCLI(t, "resolve", reg.Host+"/app:1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.HasPrefix(strings.TrimSpace(out), "{") {
		t.Errorf("CHARTPIN_OUTPUT=json ignored:\n%s", out)
	}

	shadows := 0
	for _, c := range newApp().Commands {
		for _, f := range c.Flags {
			if f.Names()[0] != "timeout" {
				continue
			}
			shadows++
			env := strings.Join(f.(interface{ GetEnvVars() []string }).GetEnvVars(), ",")
			if want := "CHARTPIN_" + strings.ToUpper(c.Name) + "_TIMEOUT"; env != want {
				t.Errorf("%s --timeout binds %q, want %q (CHARTPIN_TIMEOUT is the global deadline)", c.Name, env, want)
			}
		}
	}
	if shadows == 0 {
		t.Error("no command flag shadows --timeout: this test checks nothing")
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	for _, args := range [][]string{
		{"resolve", "--no-such-flag"},
		{"--no-such-flag", "resolve", "x"},
		{"resolve"},
		{"completion", "fish"},
	} {
		if _, errOut, code := runCLI(t, args...); code != 2 {
			t.Errorf("chartpin %v: exit %d, want 2 (%s)", args, code, errOut)
		}
	}
}
