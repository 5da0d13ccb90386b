package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/chartpin/chartpin/internal/golden"
)

var (
	snakeKey  = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	spaces    = regexp.MustCompile(` {2,}`)
	timestamp = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`)
)

// checkKeys fails on any JSON object key that is not lowercase snake_case.
func checkKeys(t *testing.T, where string, v any) {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if !snakeKey.MatchString(k) {
				t.Errorf("%s: key %q is not snake_case", where, k)
			}
			checkKeys(t, where+"."+k, e)
		}
	case []any:
		for _, e := range v {
			checkKeys(t, where+"[]", e)
		}
	}
}

// TestGoldenOutput runs the commands that work offline in every format and
// compares stdout with testdata/<case>.<format>.golden (go test -update
// rewrites them). Every JSON document, success or failure, is one object
// with snake_case keys.
func TestGoldenOutput(t *testing.T) {
	dir := t.TempDir()
	chart := filepath.Join(dir, "app")
	os.MkdirAll(chart, 0o755)
	os.WriteFile(filepath.Join(chart, "Chart.yaml"), []byte("apiVersion: v2\nname: app\nversion: 0.3.0\nappVersion: \"0.3.0\"\n"), 0o644)
	os.WriteFile(filepath.Join(chart, "values.yaml"), []byte("image:\n  repository: registry.example.com/team/app\n  tag: \"2.1\"\n  digest: \"sha256:"+strings.Repeat("cd", 32)+"\"\n"), 0o644)
	lock := filepath.Join(dir, "digests.yaml")
	os.WriteFile(lock, []byte("registry.example.com/team/app:2.1: {digest: sha256:"+strings.Repeat("ab", 32)+", platforms: [linux/amd64, linux/arm64]}\n"), 0o644)
	t.Setenv("GITHUB_ACTIONS", "")
	cases := map[string][]string{
		"resolve":       {"resolve", "registry.example.com/team/app:2.1", "--digests", lock},
		"resolve-error": {"resolve", "registry.example.com/team/app:9", "--digests", lock},
		"pin":           {"pin", chart, "--digests", lock, "--dry-run"},
		"bump":          {"bump", chart, "minor", "--dry-run"},
		"drift":         {"drift", chart, "--digests", lock},
		"init":          {"init", chart, "--config", filepath.Join(dir, "chartpin.yaml"), "--digests", lock, "--dry-run"},
	}
	for name, args := range cases {
		for _, format := range []string{"text", "json", "markdown"} {
			stdout, stderr, code := runCLI(t, append(args, "-o", format)...)
			if code == 2 {
				t.Errorf("%s -o %s: exit 2: %s", name, format, stderr)
			}
			out := strings.ReplaceAll(stdout, dir, "$DIR")
			out = timestamp.ReplaceAllString(out, "$$TIME")
			if format == "text" { // column widths follow the temporary path's length
				out = spaces.ReplaceAllString(out, "  ")
			}
			if format == "json" {
				var doc any
				if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
					t.Errorf("%s -o json: not one JSON document: %v\n%s", name, err, stdout)
				}
				if _, ok := doc.(map[string]any); !ok {
					t.Errorf("%s -o json: not an object", name)
				}
				checkKeys(t, name, doc)
				if e, failed := doc.(map[string]any)["error"]; failed != (code != 0) {
					t.Errorf("%s -o json: exit %d, error object %v", name, code, e)
				}
			}
			golden.Check(t, name+"."+format+".golden", []byte(out))
		}
	}
}
