package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/chartpin/chartpin/guard/guardtest"
	"github.com/chartpin/chartpin/internal/golden"
	"github.com/chartpin/chartpin/reconcile"
	"github.com/chartpin/chartpin/resolver"
	"github.com/chartpin/chartpin/upgrade"
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

// goldenCase is one command line of TestGoldenOutput; before runs ahead of
// each format's run (publish starts from an empty repository every time).
type goldenCase struct {
	args    []string
	before  func()
	formats []string // default text, json and markdown
	// aligned: the text view's columns are as wide as a temporary path or
	// the registry's port make them, so runs of spaces compare as two.
	aligned bool
}

var registryHost = regexp.MustCompile(`127\.0\.0\.1:\d+`)

// TestGoldenOutput runs every command in every format it has and compares
// stdout with testdata/<case>.<format>.golden (go test -update rewrites
// them). Inputs are fixed (digests, commit dates, chart bytes); only temporary
// paths, the embedded registry's port and the column widths that follow from
// them are masked. Every JSON document, success or failure, is one object
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
	t.Setenv("GITHUB_TOKEN", "")
	t.Setenv("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
	t.Setenv("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")

	// guard: one chart bumped, one changed without a bump.
	g := guardtest.New(t)
	g.Chart("charts/app", "app", "0.1.0", "0.1.0")
	g.Chart("charts/worker", "worker", "1.0.0", "1.0.0")
	g.Base()
	g.Write("charts/app/templates/deployment.yaml", "kind: Deployment\nmetadata:\n  name: app\n")
	g.ChartYAML("charts/app", "app", "0.2.0", "0.2.0")
	g.Write("charts/worker/values.yaml", "replicaCount: 2\n")
	g.Commit("change both, bump one")

	work, _, releaseLock := releaseRepo(t)
	site := filepath.Join(dir, "site")

	cases := map[string]goldenCase{
		"resolve":       {args: []string{"resolve", "registry.example.com/team/app:2.1", "--digests", lock}},
		"resolve-error": {args: []string{"resolve", "registry.example.com/team/app:9", "--digests", lock}},
		"pin":           {args: []string{"pin", chart, "--digests", lock, "--dry-run"}},
		"bump":          {args: []string{"bump", chart, "minor", "--dry-run"}},
		"drift":         {args: []string{"drift", chart, "--digests", lock}, aligned: true},
		"init":          {args: []string{"init", chart, "--config", filepath.Join(dir, "chartpin.yaml"), "--digests", lock, "--dry-run"}},
		"guard":         {args: []string{"guard", "--base", "origin/main", g.Path("charts/app"), g.Path("charts/worker")}},
		"release":       {args: []string{"release", filepath.Join(work, "charts/app"), "--digests", releaseLock, "--dry-run"}},
		"publish": {args: []string{"publish", chart, "--index-dir", site, "--base-url", "https://charts.example.com"},
			before: func() { os.RemoveAll(site) }},
		"publish-deprecate": {args: []string{"publish", chart, "--index-dir", site, "--deprecate", "0.3.0"},
			before: func() {
				os.RemoveAll(site)
				if _, errOut, code := runCLI(t, "publish", chart, "--index-dir", site); code != 0 {
					t.Fatalf("publish before deprecate: exit %d: %s", code, errOut)
				}
			}},
		"demo": {args: []string{"demo", "--dir", filepath.Join(dir, "demo")}, formats: []string{"text"}, aligned: true,
			before: func() { os.RemoveAll(filepath.Join(dir, "demo")) }},
	}
	cases["completion"] = goldenCase{args: []string{"completion", "bash"}, formats: []string{"text"}}
	for _, c := range newApp().Commands {
		if _, ok := cases[c.Name]; !ok && !slices.Contains(clusterViews, c.Name) {
			t.Errorf("command %s has no golden output", c.Name)
		}
	}
	masks := strings.NewReplacer(dir, "$DIR", g.Dir, "$REPO", filepath.Dir(work), "$REPO")
	for name, tc := range cases {
		formats := tc.formats
		if formats == nil {
			formats = []string{"text", "json", "markdown"}
		}
		for _, format := range formats {
			if tc.before != nil {
				tc.before()
			}
			args := tc.args
			if len(tc.formats) == 0 {
				args = append(args[:len(args):len(args)], "-o", format)
			}
			stdout, stderr, code := runCLI(t, args...)
			out := masks.Replace(stdout)
			if tc.aligned && format == "text" {
				out = spaces.ReplaceAllString(out, "  ")
			}
			checkGolden(t, name, format, out, code, stderr)
		}
	}
}

// checkGolden compares one command's stdout in one format with its golden
// file, after checking a JSON document's shape.
func checkGolden(t *testing.T, name, format, stdout string, code int, stderr string) {
	t.Helper()
	if code == 2 {
		t.Errorf("%s -o %s: exit 2: %s", name, format, stderr)
	}
	out := timestamp.ReplaceAllString(stdout, "$$TIME")
	out = registryHost.ReplaceAllString(out, "$$REGISTRY")
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

// clusterViews are the commands TestGoldenClusterViews renders.
var clusterViews = []string{"reconcile", "upgrade"}

// TestGoldenClusterViews renders reconcile's and upgrade's results, which
// need a cluster to come about, through the same output layer in every
// format: one tick that re-imaged, skipped and left a workload, and one
// upgrade held back by its soak after recovering a wedged release.
func TestGoldenClusterViews(t *testing.T) {
	t.Setenv("GITHUB_ACTIONS", "")
	d := func(c string) string { return "sha256:" + strings.Repeat(c, 64) }
	tick := &reconcile.Result{
		Decisions: []reconcile.Decision{
			{Target: "jobs-manager", Workload: "deployment/rel-jobs-manager", Container: "jobs-manager", Spec: "docker.io/chartpin/jobs-manager:dev",
				Running: []string{d("a")}, Latest: d("b"), Image: "docker.io/chartpin/jobs-manager@" + d("b"), Action: reconcile.ActionReimage, Reason: "ready pods run an older digest than dev names"},
			{Target: "pods-monitor", Workload: "deployment/rel-jobs-manager", Container: "pods-monitor", Spec: "docker.io/chartpin/pods-monitor:dev",
				Running: []string{d("c")}, Latest: d("c"), Image: "docker.io/chartpin/pods-monitor@" + d("c"), Action: reconcile.ActionNone, Reason: "runs the newest digest"},
			{Target: "resource-monitor", Workload: "daemonset/rel-resource-monitor", Container: "resource-monitor", Spec: "docker.io/chartpin/resource-monitor:dev",
				Running: []string{d("d"), d("e")}, Latest: d("e"), Image: "docker.io/chartpin/resource-monitor@" + d("e"), Action: reconcile.ActionSkip, Reason: "mid-rollout: 1 of 3 pods updated"},
		},
		Patched:   []string{"deployment/rel-jobs-manager"},
		RolledOut: []string{"deployment/rel-jobs-manager"},
	}
	created := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	held := upgrade.Result{Release: "web", Namespace: "prod", Current: "0.4.1", Latest: "0.4.2", Decision: upgrade.DecisionWaiting,
		Reason: "0.4.2 waits 17h more (--min-age 24h)", Now: created.Add(7 * time.Hour), MinAge: "24h0m0s",
		Candidates: []upgrade.Candidate{{Version: "0.4.2", Created: &created, Age: "7h", AgeSeconds: 7 * 3600, Verdict: "too-young", Wait: "17h"}},
		Recovered:  "rolled back from pending-upgrade to revision 6", Revision: 7, Shadowed: []string{"image.digest"}}
	views := map[string]view{ // one per clusterViews entry
		"reconcile": reconcileView(tick, 3, resolver.Stats{HEAD: 3}, false, nil),
		"upgrade":   upgradeView(held, true),
	}
	for name, v := range views {
		for _, format := range []string{"text", "json", "markdown"} {
			app := &cli.App{Name: "chartpin", Commands: []*cli.Command{{Name: name, Flags: []cli.Flag{outputFlag()},
				Action: func(c *cli.Context) error { return show(c, v) }}}}
			var stdout, stderr bytes.Buffer
			code := runApp(context.Background(), app, []string{"chartpin", name, "-o", format}, &stdout, &stderr)
			checkGolden(t, name, format, stdout.String(), code, stderr.String())
		}
	}
}
