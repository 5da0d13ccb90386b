package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chartpin/chartpin/guard/guardtest"
	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/internal/registrytest"
	"github.com/chartpin/chartpin/upgrade"
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

	scoped := map[string]int{}
	for _, c := range newApp().Commands {
		for _, f := range c.Flags {
			name := f.Names()[0]
			if name != "timeout" && name != "version" && name != "app-version" {
				continue
			}
			scoped[name]++
			env := strings.Join(f.(interface{ GetEnvVars() []string }).GetEnvVars(), ",")
			if want := "CHARTPIN_" + envName(c.Name) + "_" + envName(name); env != want {
				t.Errorf("%s --%s binds %q, want %q", c.Name, name, env, want)
			}
		}
	}
	if scoped["timeout"] == 0 || scoped["version"] == 0 {
		t.Errorf("scoped flags found %v: this test checks nothing", scoped)
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	for _, args := range [][]string{
		{"resolve", "--no-such-flag"},
		{"--no-such-flag", "resolve", "x"},
		{"resolve"},
		{"completion", "fish"},
		{"nosuch"},
	} {
		if _, errOut, code := runCLI(t, args...); code != 2 {
			t.Errorf("chartpin %v: exit %d, want 2 (%s)", args, code, errOut)
		}
	}
}

// Every options field a library names in an error maps to a flag that exists.
func TestFlagOfOptionFields(t *testing.T) {
	defined := map[string]bool{}
	app := newApp()
	for _, f := range app.Flags {
		defined["--"+f.Names()[0]] = true
	}
	for _, c := range app.Commands {
		for _, f := range c.Flags {
			defined["--"+f.Names()[0]] = true
		}
	}
	for field, want := range map[string]string{
		"PrereleaseIndex": "--prerelease-index", "PrereleaseBaseURL": "--prerelease-base-url", "BaseURL": "--base-url",
		"OCI": "--oci", "IndexDir": "--index-dir", "PagesBranch": "--pages-branch", "AppVersion": "--app-version",
		"RepoURL": "--repo", "MinAge": "--min-age", "API": "--github-api", "SignKey": "--key", "WriteDigests": "--write-digests",
		"InsecureRegistries": "--insecure-registry", "ConfigPath": "--config", "Force": "--force", "DryRun": "--dry-run",
		"Base": "--base", "Branch": "--branch", "Timeout": "--timeout", "JitterKey": "--jitter-key", "Targets": "--targets", "Deadline": "--deadline",
		"MaxAttempts": "--max-attempts", "RolloutTimeout": "--rollout-timeout", "Jitter": "--jitter", "MaxSkips": "--max-skips", "RewriteCopies": "--rewrite-copies", "Mirrors": "--registry-mirror", "AllowPrerelease": "--allow-prerelease", "Keyring": "--keyring",
	} {
		if got := flagOf(field); got != want || !defined[got] {
			t.Errorf("flagOf(%s) = %s (defined %v), want %s", field, got, defined[got], want)
		}
	}
	for field := range optionFlags {
		if !defined[flagOf(field)] {
			t.Errorf("optionFlags[%s] = %s: no such flag", field, flagOf(field))
		}
	}
}

// A library names options by field; the command line says the flag.
func TestOptionErrorsNameFlags(t *testing.T) {
	failure.SpellFields(nil) // as a Go caller sees it; run sets the flags again
	lib := upgrade.Options{MinAge: -time.Hour}.Validate()
	if lib == nil || strings.Contains(lib.Error(), "--") || !strings.Contains(lib.Error(), "MinAge -1h0m0s") {
		t.Errorf("library error %v: want option fields, no flags", lib)
	}
	reg := registrytest.New(t)
	reg.PushIndex(t, "app", "1", "linux/amd64")
	repo := guardtest.New(t)
	repo.Chart("app", "app", "1.0.0", "1.0.0")
	repo.Base()
	cfg := filepath.Join(t.TempDir(), "chartpin.yaml")
	if err := os.WriteFile(cfg, []byte("charts:\n  - dir: other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"upgrade", "--min-age", "-1h"}, 2, "upgrade: --release is required; --chart is required; one of --repo URL or --oci oci://HOST/PATH is required; --min-age -1h0m0s: want"},
		{[]string{"publish", "--index-dir", "site", "--prerelease-base-url", "https://x.example/pre", "."}, 2, "--prerelease-base-url without --prerelease-index"},
		{[]string{"resolve", reg.Host + "/app:1"}, 1, "speaks plain HTTP: pass --insecure-registry " + reg.Host + " if that is intended"},
		{[]string{"--timeout", "5s", "resolve", "127.0.0.1:1/app:1"}, 1, "(and the registry name or --registry-mirror is right)"},
		{[]string{"pin", "--config", filepath.Join(repo.Dir, "missing.yaml")}, 2, "; pass --config FILE or run without one for discovery"},
		{[]string{"pin", "--config", cfg, repo.Path("app")}, 2, "add it under charts: there, or name a configured chart"},
		{[]string{"init", "--config", cfg, repo.Path("app")}, 2, "exists; init never overwrites it: --force replaces it, --dry-run prints what init would write"},
		{[]string{"reconcile", "--targets", filepath.Join(repo.Dir, "missing.yaml")}, 2, "; pass --targets with the file the chart's ConfigMap mounts"},
		{[]string{"reconcile", "--targets", cfg, "--jitter", "1m"}, 2, "outside a cluster pass --jitter-key"},
		{[]string{"reconcile", "--targets", cfg, "--rollout-timeout", "10m", "--jitter", "5m", "--deadline", "15m"}, 2, "--deadline 15m0s must exceed --rollout-timeout 10m0s plus --jitter 5m0s (leave slack"},
		{[]string{"guard", "--base", "no-such-rev", repo.Path("app")}, 2, "resolving --base no-such-rev: "},
	} {
		_, errOut, code := runCLI(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
}

// A report that quotes an error (a refused pin's reason) names option
// fields as flags too, in text and in JSON.
func TestReportsNameFlags(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte("apiVersion: v2\nname: app\nversion: 1.0.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "values.yaml"), []byte("image:\n  repository: 127.0.0.1:1/app\n  tag: \"1\"\n  digest: \"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"pin", dir, "--dry-run", "--timeout", "5s"},
		{"pin", dir, "--dry-run", "--timeout", "5s", "-o", "json"},
	} {
		_, out := runCheck(t, args...)
		if !strings.Contains(out, "REFUSED") && !strings.Contains(out, `"reason": "resolving 127.0.0.1:1/app:1`) {
			t.Errorf("%v: no refusal in:\n%s", args, out)
		}
		if strings.Contains(out, "Mirrors") || strings.Count(out, "--registry-mirror") < 2 {
			t.Errorf("%v: the report and the error must both name --registry-mirror:\n%s", args, out)
		}
	}
}
