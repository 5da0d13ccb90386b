package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chartpin/chartpin/internal/gittest"
)

// Every command that takes CHART_DIR selects charts by one rule
// (config.Select): with a chartpin.yaml, arguments name configured charts
// and an unconfigured one is exit 2; no argument means every configured
// chart; without a config, each argument is a chart, named once. The test
// runs them on the same layouts and reads which charts each one reported.
func TestCommandsSelectTheSameCharts(t *testing.T) {
	t.Setenv("GITHUB_ACTIONS", "")
	t.Setenv("GITHUB_TOKEN", "")
	root := t.TempDir()
	bare, work := filepath.Join(root, "r.git"), filepath.Join(root, "work")
	gittest.Git(t, root, "init", "-q", "--bare", bare)
	gittest.Git(t, root, "init", "-q", work)
	digest := "sha256:" + strings.Repeat("ab", 32)
	values := "image:\n  repository: registry.example.com/team/app\n  tag: \"2.1\"\n  digest: \"" + digest + "\"\n"
	writeFiles(t, work, map[string]string{
		"charts/a/Chart.yaml":  "apiVersion: v2\nname: a\nversion: 0.3.0\n",
		"charts/a/values.yaml": values,
		"charts/b/Chart.yaml":  "apiVersion: v2\nname: b\nversion: 0.3.0\n",
		"charts/b/values.yaml": values,
	})
	gittest.Git(t, work, "add", ".")
	gittest.Git(t, work, "commit", "-qm", "charts")
	gittest.Git(t, work, "remote", "add", "origin", bare)
	gittest.Git(t, work, "push", "-q", "origin", "HEAD")
	lock := filepath.Join(root, "digests.yaml")
	if err := os.WriteFile(lock, []byte("registry.example.com/team/app:2.1: "+digest+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(work)
	configured := filepath.Join(root, "configured.yaml")
	if err := os.WriteFile(configured, []byte("charts:\n  - dir: work/charts/a\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	type command struct {
		name string
		args []string
		// readsConfig: init writes a config and reads none, so it is run
		// on the layouts without one only.
		readsConfig bool
	}
	commands := []command{
		{"pin", []string{"pin", "--dry-run", "--digests", lock}, true},
		{"drift", []string{"drift", "--digests", lock}, true},
		{"guard", []string{"guard", "--base", "HEAD"}, true},
		{"release", []string{"release", "--dry-run", "--digests", lock}, true},
		{"init", []string{"init", "--dry-run", "--digests", lock, "--config", filepath.Join(root, "new.yaml")}, false},
	}
	for _, tc := range []struct {
		name   string
		config string // "" runs without chartpin.yaml
		dirs   []string
		code   int
		charts []string // base names of the charts reported
		want   string   // in the output of a refusal
	}{
		{"no config: each named chart once", "", []string{"charts/b", "charts/a", "charts/b/"}, 0, []string{"a", "b"}, ""},
		{"config: the named configured chart", configured, []string{"charts/a"}, 0, []string{"a"}, ""},
		{"config: no argument means every configured chart", configured, nil, 0, []string{"a"}, ""},
		{"config: an unconfigured chart is an input error", configured, []string{"charts/b"}, 2, nil, "charts/b is not configured in " + configured},
		{"config: an unconfigured chart beside a configured one", configured, []string{"charts/a", "charts/b"}, 2, nil, "charts/b is not configured"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, c := range commands {
				if tc.config != "" && !c.readsConfig {
					continue
				}
				if len(tc.dirs) == 0 && c.name == "guard" {
					// Without arguments guard also walks the repository, now
					// and at base, so that an added or removed chart is seen.
					continue
				}
				args := append(append([]string{}, c.args...), "-o", "json")
				if tc.config != "" {
					args = append(args, "--config", tc.config)
				}
				stdout, stderr, code := runCLI(t, append(args, tc.dirs...)...)
				if code != tc.code {
					t.Errorf("%s: exit %d, want %d\n%s%s", c.name, code, tc.code, stdout, stderr)
					continue
				}
				if tc.code != 0 {
					if !strings.Contains(stderr, tc.want) {
						t.Errorf("%s: %q not in\n%s", c.name, tc.want, stderr)
					}
					continue
				}
				if got := reportedCharts(t, stdout); !slices.Equal(got, tc.charts) {
					t.Errorf("%s: selected %v, want %v\n%s", c.name, got, tc.charts, stdout)
				}
			}
		})
	}
}

// reportedCharts is the sorted base names of every "dir" (pin, guard,
// release, init) and "chart" (drift) string in a JSON report.
func reportedCharts(t *testing.T, out string) []string {
	t.Helper()
	var doc any
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	found := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if s, ok := e.(string); ok && (k == "dir" || k == "chart") {
					found[filepath.Base(s)] = true
				}
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(doc)
	var names []string
	for n := range found {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
