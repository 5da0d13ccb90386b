package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chartpin/chartpin/guard/guardtest"
	"github.com/chartpin/chartpin/internal/registrytest"
)

// runCheck runs chartpin with args and returns its exit status and output,
// outside GitHub Actions unless the test sets GITHUB_ACTIONS itself.
func runCheck(t *testing.T, args ...string) (int, string) {
	t.Helper()
	if _, set := os.LookupEnv("GITHUB_ACTIONS"); !set {
		t.Setenv("GITHUB_ACTIONS", "")
	}
	return runCombined(t, args...)
}

func wantExit(t *testing.T, got, want int, out string) {
	t.Helper()
	if got != want {
		t.Fatalf("exit %d, want %d; output:\n%s", got, want, out)
	}
}

func TestGuardTemplateChangeWithoutBump(t *testing.T) {
	r := guardtest.New(t)
	r.Chart("charts/app", "app", "0.1.0", "0.1.0")
	r.Base()
	r.Write("charts/app/templates/deployment.yaml", "kind: Deployment\nmetadata:\n  name: changed\n")
	r.Commit("change a template")
	code, out := runCheck(t, "guard", "--base", "origin/main", r.Path("charts/app"))
	wantExit(t, code, 1, out)
	wantGuardOutput(t, out, "FAIL  charts/app  0.1.0 -> 0.1.0  1 file(s) changed: templates/deployment.yaml\n"+
		"  charts/app/Chart.yaml:3: charts/app changed (templates/deployment.yaml) but version 0.1.0 was not increased (base origin/main has 0.1.0); bump it, e.g. chartpin bump charts/app patch\n"+
		"guard: 1 chart(s) checked, 1 finding(s)\n"+
		"chartpin: guard: findings: 1 in charts/app\n")
}

// wantGuardOutput compares guard's text output after its first line, which
// names the compared commits and whether uncommitted changes were included.
func wantGuardOutput(t *testing.T, out, want string) {
	t.Helper()
	first, rest, _ := strings.Cut(out, "\n")
	if !strings.HasPrefix(first, "guard: compared origin/main (") || !strings.HasSuffix(first, ", no uncommitted changes in the charts checked") {
		t.Errorf("first line %q", first)
	}
	if rest != want {
		t.Errorf("output after the first line:\n%s\nwant:\n%s", rest, want)
	}
}

func TestGuardBumpPresent(t *testing.T) {
	r := guardtest.New(t)
	r.Chart("charts/app", "app", "0.1.0", "0.1.0")
	r.Base()
	r.Write("charts/app/templates/deployment.yaml", "kind: Deployment\n")
	r.ChartYAML("charts/app", "app", "0.1.1", "0.1.1")
	r.Commit("change and bump")
	code, out := runCheck(t, "guard", "--base", "origin/main", r.Path("charts/app"))
	wantExit(t, code, 0, out)
	wantGuardOutput(t, out, "ok  charts/app  0.1.0 -> 0.1.1  2 file(s) changed: Chart.yaml, templates/deployment.yaml\n"+
		"guard: 1 chart(s) checked, ok\n")
}

func TestGuardVersionMustIncreaseBySemver(t *testing.T) {
	for _, c := range []struct {
		old, new string
		exit     int
	}{
		{"0.2.0", "0.1.9", 1},        // decreased
		{"0.2.0", "0.2.0", 1},        // equal
		{"0.2.0", "v0.2.0", 1},       // equal, spelled differently
		{"1.9.63", "1.9.63-rc.1", 1}, // a prerelease is lower
		{"1.9.63-rc.1", "1.9.63", 0},
		{"0.9.0", "0.10.0", 0}, // not string order
		{"0.2.0", "banana", 1},
	} {
		t.Run(c.old+"->"+c.new, func(t *testing.T) {
			r := guardtest.New(t)
			r.Chart("app", "app", c.old, "1.0")
			r.Base()
			r.Write("app/values.yaml", "replicaCount: 2\n")
			r.ChartYAML("app", "app", c.new, "1.0")
			r.Commit("change")
			code, out := runCheck(t, "guard", "--base", "origin/main", r.Path("app"))
			wantExit(t, code, c.exit, out)
		})
	}
}

func TestGuardLockstep(t *testing.T) {
	t.Run("auto: equal at base", func(t *testing.T) {
		r := guardtest.New(t)
		r.Chart("app", "app", "1.2.3", "1.2.3")
		r.Base()
		r.Write("app/values.yaml", "replicaCount: 3\n")
		r.ChartYAML("app", "app", "1.2.4", "1.2.3")
		r.Commit("bump version only")
		code, out := runCheck(t, "guard", "--base", "origin/main", r.Path("app"))
		wantExit(t, code, 1, out)
		if !strings.Contains(out, `app/Chart.yaml:4: appVersion "1.2.3" did not move with version "1.2.4"`) {
			t.Errorf("output:\n%s", out)
		}
	})
	t.Run("auto: apart at base", func(t *testing.T) {
		r := guardtest.New(t)
		r.Chart("app", "app", "1.2.3", "9.9")
		r.Base()
		r.Write("app/values.yaml", "replicaCount: 3\n")
		r.ChartYAML("app", "app", "1.2.4", "9.9")
		r.Commit("bump version only")
		code, out := runCheck(t, "guard", "--base", "origin/main", r.Path("app"))
		wantExit(t, code, 0, out)
	})
	t.Run("configured lockstep", func(t *testing.T) {
		r := guardtest.New(t)
		r.Chart("charts/app", "app", "1.2.3", "1.0.0")
		r.Write("chartpin.yaml", "charts:\n  - dir: charts/app\n    appVersion: lockstep\n")
		r.Base()
		r.Write("charts/app/values.yaml", "replicaCount: 3\n")
		r.ChartYAML("charts/app", "app", "1.2.4", "1.0.0")
		r.Commit("bump version only")
		code, out := runCheck(t, "guard", "--base", "origin/main", "--config", r.Path("chartpin.yaml"), r.Path("charts/app"))
		wantExit(t, code, 1, out)
		if !strings.Contains(out, "configured appVersion: lockstep") {
			t.Errorf("output:\n%s", out)
		}
		r.ChartYAML("charts/app", "app", "1.2.4", "1.2.4")
		r.Commit("lockstep")
		code, out = runCheck(t, "guard", "--base", "origin/main", "--config", r.Path("chartpin.yaml"), r.Path("charts/app"))
		wantExit(t, code, 0, out)
	})
}

func TestGuardVersionAlreadyInIndex(t *testing.T) {
	r := guardtest.New(t)
	r.Chart("app", "app", "0.1.0", "0.1.0")
	r.Base()
	r.Write("app/values.yaml", "replicaCount: 3\n")
	r.ChartYAML("app", "app", "0.1.1", "0.1.1")
	r.Commit("bump")
	index := "apiVersion: v1\nentries:\n  app:\n    - version: 0.1.1\n      name: app\n    - version: 0.1.0\n      name: app\n  other:\n    - version: 0.2.0\n"
	file := filepath.Join(t.TempDir(), "index.yaml")
	if err := os.WriteFile(file, []byte(index), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out := runCheck(t, "guard", "--base", "origin/main", "--index", file, r.Path("app"))
	wantExit(t, code, 1, out)
	if !strings.Contains(out, "app version 0.1.1 is already published in "+file) {
		t.Errorf("output:\n%s", out)
	}

	var hits int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		hits++
		if req.URL.Path != "/index.yaml" {
			http.NotFound(w, req)
			return
		}
		w.Write([]byte(strings.Replace(index, "0.1.1", "0.0.9", 1)))
	}))
	defer srv.Close()
	code, out = runCheck(t, "guard", "--base", "origin/main", "--index", srv.URL+"/index.yaml", r.Path("app"))
	wantExit(t, code, 0, out)
	if hits != 1 {
		t.Errorf("index fetched %d times, want 1", hits)
	}
	// An index that cannot be read fails the check instead of passing it.
	code, out = runCheck(t, "guard", "--base", "origin/main", "--index", srv.URL+"/missing.yaml", r.Path("app"))
	wantExit(t, code, 1, out)
	if !strings.Contains(out, "404") {
		t.Errorf("output:\n%s", out)
	}
}

func TestGuardVersionAlreadyInOCI(t *testing.T) {
	reg := registrytest.New(t)
	reg.PushImage(t, "charts/app", "0.1.1")
	r := guardtest.New(t)
	r.Chart("app", "app", "0.1.0", "0.1.0")
	r.Base()
	r.ChartYAML("app", "app", "0.1.1", "0.1.1")
	r.Commit("bump")
	oci := "oci://" + reg.Host + "/charts"
	code, out := runCheck(t, "--insecure-registry", reg.Host, "guard", "--base", "origin/main", "--oci", oci, r.Path("app"))
	wantExit(t, code, 1, out)
	if !strings.Contains(out, "already published in "+oci+"/app") {
		t.Errorf("output:\n%s", out)
	}
	r.ChartYAML("app", "app", "0.1.2", "0.1.2")
	r.Commit("bump again")
	code, out = runCheck(t, "--insecure-registry", reg.Host, "guard", "--base", "origin/main", "--oci", oci, r.Path("app"))
	wantExit(t, code, 0, out)
	// A chart never pushed (no repository yet) is not published.
	code, out = runCheck(t, "--insecure-registry", reg.Host, "guard", "--base", "origin/main", "--oci", "oci://"+reg.Host+"/elsewhere", r.Path("app"))
	wantExit(t, code, 0, out)
}

func TestGuardTwoChartsOneBumped(t *testing.T) {
	r := guardtest.New(t)
	r.Chart("charts/a", "a", "1.0.0", "1.0.0")
	r.Chart("charts/b", "b", "2.0.0", "2.0.0")
	r.Chart("charts/c", "c", "3.0.0", "3.0.0")
	r.Base()
	r.Write("charts/a/templates/deployment.yaml", "kind: Deployment\n# a\n")
	r.ChartYAML("charts/a", "a", "1.0.1", "1.0.1")
	r.Write("charts/b/templates/deployment.yaml", "kind: Deployment\n# b\n")
	r.Commit("change a and b, bump a")
	t.Chdir(r.Dir)
	code, out := runCheck(t, "guard", "--base", "origin/main") // charts found by walking
	wantExit(t, code, 1, out)
	for _, want := range []string{"ok         charts/a", "FAIL       charts/b", "unchanged  charts/c", "charts/b/Chart.yaml:3:"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "charts/a/Chart.yaml:") {
		t.Errorf("the bumped chart was blamed:\n%s", out)
	}
}

func TestGuardChartAddedAndRemoved(t *testing.T) {
	r := guardtest.New(t)
	r.Chart("charts/old", "old", "1.0.0", "1.0.0")
	r.Base()
	r.Remove("charts/old")
	r.Chart("charts/new", "new", "0.1.0", "0.1.0")
	r.Commit("replace a chart")
	t.Chdir(r.Dir)
	code, out := runCheck(t, "guard", "--base", "origin/main")
	wantExit(t, code, 0, out)
	if !strings.Contains(out, "added    charts/new  0.1.0") || !strings.Contains(out, "removed  charts/old  (was 1.0.0)") {
		t.Errorf("output:\n%s", out)
	}
}

func TestGuardLargeDiff(t *testing.T) {
	r := guardtest.New(t)
	r.Chart("app", "app", "0.1.0", "0.1.0")
	r.Base()
	// 128 KiB of new values, with the one change that matters at the very end.
	big := strings.Repeat("# padding line that makes the diff large\n", 128*1024/41) + "replicaCount: 9\n"
	r.Write("app/values.yaml", big)
	r.Commit("large change")
	code, out := runCheck(t, "guard", "--base", "origin/main", r.Path("app"))
	wantExit(t, code, 1, out)
	if !strings.Contains(out, "values.yaml") {
		t.Errorf("output:\n%s", out)
	}
	r.ChartYAML("app", "app", "0.1.1", "0.1.1")
	r.Commit("bump")
	code, out = runCheck(t, "guard", "--base", "origin/main", r.Path("app"))
	wantExit(t, code, 0, out)
}

func TestGuardHelmignoredChangeNeedsNoBump(t *testing.T) {
	r := guardtest.New(t)
	r.Chart("app", "app", "0.1.0", "0.1.0")
	r.Write("app/.helmignore", "# not packaged\nci/\n*.md\n")
	r.Write("app/README.md", "old\n")
	r.Write("app/ci/test-values.yaml", "a: 1\n")
	r.Base()
	r.Write("app/README.md", "new\n")
	r.Write("app/ci/test-values.yaml", "a: 2\n")
	r.Write("app/templates/.hidden", "editor swap\n") // helm ignores dotfiles in templates/
	r.Commit("docs and ci only")
	code, out := runCheck(t, "guard", "--base", "origin/main", r.Path("app"))
	wantExit(t, code, 0, out)
	if !strings.Contains(out, "unchanged  app") {
		t.Errorf("output:\n%s", out)
	}
	// Un-ignoring a file changes what is packaged: that needs a bump.
	r.Write("app/.helmignore", "ci/\n")
	r.Commit("package the README")
	code, out = runCheck(t, "guard", "--base", "origin/main", r.Path("app"))
	wantExit(t, code, 1, out)
	if !strings.Contains(out, "README.md") {
		t.Errorf("output:\n%s", out)
	}
}

func TestGuardUncommittedChangesCompared(t *testing.T) {
	r := guardtest.New(t)
	r.Chart("app", "app", "0.1.0", "0.1.0")
	r.Base()
	r.Write("app/templates/new.yaml", "kind: ConfigMap\n") // untracked, not committed
	code, out := runCheck(t, "guard", "--base", "origin/main", r.Path("app"))
	wantExit(t, code, 1, out)
	if !strings.Contains(out, "uncommitted changes included (app)") || !strings.Contains(out, "templates/new.yaml") {
		t.Errorf("output:\n%s", out)
	}
}

func TestGuardInputErrors(t *testing.T) {
	r := guardtest.New(t)
	r.Chart("app", "app", "0.1.0", "0.1.0")
	r.Base()
	code, out := runCheck(t, "guard", r.Path("app"))
	wantExit(t, code, 2, out)
	code, out = runCheck(t, "guard", "--base", "origin/nope", r.Path("app"))
	wantExit(t, code, 2, out)
	if !strings.Contains(out, "fetch") {
		t.Errorf("no next step in:\n%s", out)
	}
	code, out = runCheck(t, "guard", "--base", "origin/main", t.TempDir())
	wantExit(t, code, 2, out)
	// A Chart.yaml that cannot be parsed is a failure, not "unchanged".
	r.Write("app/Chart.yaml", "version: [\n")
	code, out = runCheck(t, "guard", "--base", "origin/main", r.Path("app"))
	wantExit(t, code, 1, out)
	if !strings.Contains(out, "app/Chart.yaml") {
		t.Errorf("output:\n%s", out)
	}
}

func TestGuardGitHubActions(t *testing.T) {
	r := guardtest.New(t)
	r.Chart("charts/app", "app", "0.1.0", "0.1.0")
	r.Base()
	r.Write("charts/app/values.yaml", "image:\n  tag: \"x\"\n")
	r.Commit("change")
	dir := t.TempDir()
	summary, output := filepath.Join(dir, "summary.md"), filepath.Join(dir, "output")
	t.Setenv("GITHUB_ACTIONS", "true")
	t.Setenv("GITHUB_STEP_SUMMARY", summary)
	t.Setenv("GITHUB_OUTPUT", output)
	code, out := runCheck(t, "guard", "--base", "origin/main", r.Path("charts/app"))
	wantExit(t, code, 1, out)
	if !strings.Contains(out, "\n::error file=charts/app/Chart.yaml,line=3,title=chartpin guard%3A charts/app::charts/app changed (values.yaml) but version 0.1.0 was not increased") {
		t.Errorf("no annotation in:\n%s", out)
	}
	s, err := os.ReadFile(summary)
	if err != nil || !strings.Contains(string(s), "| `charts/app` | **FAIL** |") {
		t.Errorf("summary (%v):\n%s", err, s)
	}
	o, err := os.ReadFile(output)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"changed<<", "\ntrue\n", "version<<", "\n0.1.0\n", "findings<<", "\n1\n"} {
		if !strings.Contains(string(o), want) {
			t.Errorf("outputs lack %q:\n%s", want, o)
		}
	}
}

// A file name is repository content too: one crafted to end an annotation
// early and issue its own command must stay inert.
func TestGuardHostileFileNameInert(t *testing.T) {
	r := guardtest.New(t)
	r.Chart("app", "app", "0.1.0", "0.1.0")
	r.Base()
	// Untracked (go-git refuses to commit control characters; git does not).
	r.Write("app/templates/x\n::error::pwned%0A.yaml", "kind: ConfigMap\n")
	t.Setenv("GITHUB_ACTIONS", "true")
	t.Setenv("GITHUB_STEP_SUMMARY", "")
	t.Setenv("GITHUB_OUTPUT", "")
	code, out := runCheck(t, "guard", "--base", "origin/main", r.Path("app"))
	wantExit(t, code, 1, out)
	stopped := ""
	var commands []string
	for _, line := range strings.Split(out, "\n") {
		switch {
		case stopped != "" && line == "::"+stopped+"::":
			stopped = ""
		case stopped != "":
		case strings.HasPrefix(line, "::stop-commands::"):
			stopped = strings.TrimPrefix(line, "::stop-commands::")
		case strings.HasPrefix(line, "::"):
			commands = append(commands, line)
		}
	}
	if len(commands) != 1 || !strings.HasPrefix(commands[0], "::error file=app/Chart.yaml,line=3,") ||
		!strings.Contains(commands[0], "templates/x%0A::error::pwned%250A.yaml") {
		t.Errorf("runner sees commands:\n%s", strings.Join(commands, "\n"))
	}
}

// A git object guard needs and cannot read fails the check with a message;
// it is never taken for "nothing changed": no check fails open.
func TestGuardUnreadableGitObjectFails(t *testing.T) {
	r := guardtest.New(t)
	r.Chart("app", "app", "0.1.0", "0.1.0")
	base := r.Base()
	c, err := r.Git.CommitObject(base)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := c.Tree()
	if err != nil {
		t.Fatal(err)
	}
	sub, err := tree.Tree("app/templates")
	if err != nil {
		t.Fatal(err)
	}
	h := sub.Hash.String()
	if err := os.Remove(filepath.Join(r.Dir, ".git", "objects", h[:2], h[2:])); err != nil {
		t.Fatal(err)
	}
	code, out := runCheck(t, "guard", "--base", "origin/main", r.Path("app"))
	wantExit(t, code, 1, out)
	if !strings.Contains(out, "reading app at --base") || !strings.Contains(out, "templates") {
		t.Errorf("output:\n%s", out)
	}
}

func TestGuardChartAtRepositoryRoot(t *testing.T) {
	r := guardtest.New(t)
	r.Chart(".", "root", "1.0.0", "1.0.0")
	r.Base()
	t.Chdir(r.Dir)
	code, out := runCheck(t, "guard", "--base", "origin/main")
	wantExit(t, code, 0, out)
	if !strings.Contains(out, "unchanged  .  1.0.0") {
		t.Errorf("output:\n%s", out)
	}
	r.Write("templates/deployment.yaml", "kind: StatefulSet\n")
	code, out = runCheck(t, "guard", "--base", "origin/main")
	wantExit(t, code, 1, out)
	if !strings.Contains(out, "Chart.yaml:3: . changed (templates/deployment.yaml)") {
		t.Errorf("output:\n%s", out)
	}
}
