package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chartpin/chartpin/internal/gittest"
	"github.com/chartpin/chartpin/pullrequest/fakegithub"
)

const releaseToken = "ghs_cli-release-token"

// releaseRepo is a checkout with a chart and a local bare remote, plus a
// digest lock file so the run resolves offline.
func releaseRepo(t *testing.T) (work, bare, lock string) {
	t.Helper()
	root := t.TempDir()
	bare, work = filepath.Join(root, "r.git"), filepath.Join(root, "work")
	gittest.Git(t, root, "init", "-q", "--bare", bare)
	gittest.Git(t, root, "init", "-q", work)
	files := map[string]string{
		"charts/app/Chart.yaml":  "apiVersion: v2\nname: app\nversion: 0.3.0\nappVersion: \"0.3.0\"\n",
		"charts/app/values.yaml": "image:\n  repository: registry.example.com/team/app\n  tag: \"2.1\"\n  digest: \"\"\n",
	}
	for name, body := range files {
		p := filepath.Join(work, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gittest.Git(t, work, "add", ".")
	gittest.Git(t, work, "commit", "-qm", "chart")
	gittest.Git(t, work, "remote", "add", "origin", bare)
	gittest.Git(t, work, "push", "-q", "origin", "main")
	lock = filepath.Join(root, "digests.yaml")
	os.WriteFile(lock, []byte("registry.example.com/team/app:2.1: sha256:"+strings.Repeat("ab", 32)+"\n"), 0o644)
	return work, bare, lock
}

func TestReleaseCommand(t *testing.T) {
	work, bare, lock := releaseRepo(t)
	gh := fakegithub.New("acme", "charts", releaseToken)
	t.Cleanup(gh.Close)
	t.Chdir(work)
	outputs := filepath.Join(t.TempDir(), "outputs")
	t.Setenv("GITHUB_ACTIONS", "true")
	t.Setenv("GITHUB_OUTPUT", outputs)
	t.Setenv("GITHUB_STEP_SUMMARY", filepath.Join(t.TempDir(), "summary"))
	args := []string{"release", "--digests", lock, "--github-api", gh.URL, "--repo", "acme/charts", "--label", "release", "charts/app"}

	t.Setenv("GITHUB_TOKEN", "")
	if code, out := runCombined(t, args...); code != 2 || !strings.Contains(out, "GITHUB_TOKEN is not set") {
		t.Fatalf("without a token: exit %d\n%s", code, out)
	}
	t.Setenv("GITHUB_TOKEN", releaseToken)

	code, out := runCombined(t, append([]string{"release", "--dry-run"}, args[1:]...)...)
	if code != 0 || !strings.Contains(out, "would open a pull request") || !strings.Contains(out, "+  digest: \"sha256:abab") {
		t.Fatalf("dry run: exit %d\n%s", code, out)
	}
	if gittest.Git(t, bare, "branch", "--list", "chartpin/pins") != "" {
		t.Fatal("dry run pushed")
	}

	code, out = runCombined(t, args...)
	if code != 0 || !strings.Contains(out, "pushed chartpin/pins") || !strings.Contains(out, "pull request #1 created: https://github.com/acme/charts/pull/1") {
		t.Fatalf("release: exit %d\n%s", code, out)
	}
	if strings.Contains(out, releaseToken) {
		t.Fatal("output contains the token")
	}
	if got := gittest.Git(t, bare, "show", "chartpin/pins:charts/app/Chart.yaml"); !strings.Contains(got, "version: 0.3.1") {
		t.Fatalf("branch Chart.yaml:\n%s", got)
	}
	o, _ := os.ReadFile(outputs)
	if !strings.Contains(string(o), "pr-number<<") || !strings.Contains(string(o), "\n1\n") || !strings.Contains(string(o), "changed<<") {
		t.Fatalf("step outputs:\n%s", o)
	}

	gh.Reset()
	code, out = runCombined(t, args...)
	if code != 0 || !strings.Contains(out, "already up to date on the remote: not pushed") || !strings.Contains(out, "pull request #1 unchanged") {
		t.Fatalf("re-run: exit %d\n%s", code, out)
	}
	if n := len(gh.Calls()); n != 1 {
		t.Fatalf("re-run made %d GitHub calls, want 1: %v", n, gh.Sequence())
	}

	if code, out := runCombined(t, "release", "--committer", "nobody", "charts/app"); code != 2 || !strings.Contains(out, "NAME <EMAIL>") {
		t.Fatalf("bad committer: exit %d\n%s", code, out)
	}
	if code, out := runCombined(t, "release", "--repo", "justone", "charts/app"); code != 2 || !strings.Contains(out, "OWNER/NAME") {
		t.Fatalf("bad --repo: exit %d\n%s", code, out)
	}
}

func TestPublishCommand(t *testing.T) {
	work, _, _ := releaseRepo(t)
	chart := filepath.Join(work, "charts/app")
	repo := filepath.Join(t.TempDir(), "repo")
	code, out := runCombined(t, "publish", "--index-dir", repo, "--base-url", "https://charts.example.com", chart)
	if code != 0 || !strings.Contains(out, "app 0.3.0 (stable), app-0.3.0.tgz sha256:") || !strings.Contains(out, "added (1 entries)") {
		t.Fatalf("publish: exit %d\n%s", code, out)
	}
	code, out = runCombined(t, "publish", "--index-dir", repo, "-o", "json", chart)
	if code != 0 || !strings.Contains(out, `"action": "unchanged"`) {
		t.Fatalf("re-publish: exit %d\n%s", code, out)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"publish", "--index-dir", repo, "--version", "0.3.1", chart}, 2, "disagrees with"},
		{[]string{"publish", chart}, 2, "nothing to publish to"},
		{[]string{"publish", "--index-dir", repo}, 2, "exactly one CHART_DIR"},
		{[]string{"publish", "--index-dir", repo, "--sign", chart}, 2, "--sign needs --key"},
		{[]string{"publish", "--oci", "ghcr.io/x", chart}, 2, "want oci://HOST/PATH"},
	} {
		if code, out := runCombined(t, tc.args...); code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("%v: exit %d\n%s", tc.args, code, out)
		}
	}
	os.WriteFile(filepath.Join(chart, "values.yaml"), []byte("image:\n  repository: registry.example.com/team/app\n  tag: \"2.2\"\n  digest: \"\"\n"), 0o644)
	if code, out := runCombined(t, "publish", "--index-dir", repo, chart); code != 1 || !strings.Contains(out, "never overwrites") {
		t.Fatalf("overwrite: exit %d\n%s", code, out)
	}
}

// A dry run previews a release with the remote and the API out of reach: it
// shows the commit (parent, title, files) and the pull request title and
// body, notes what it could not look up, and exits 0.
func TestReleaseDryRunWithoutRemote(t *testing.T) {
	work, _, lock := releaseRepo(t)
	gittest.Git(t, work, "remote", "set-url", "origin", "http://127.0.0.1:1/acme/charts.git")
	head := strings.TrimSpace(gittest.Git(t, work, "rev-parse", "HEAD"))
	t.Chdir(work)
	t.Setenv("GITHUB_TOKEN", releaseToken)
	t.Setenv("GITHUB_ACTIONS", "")
	for _, token := range []string{releaseToken, ""} {
		t.Setenv("GITHUB_TOKEN", token)
		code, out := runCombined(t, "release", "charts/app", "--digests", lock, "--github-api", "http://127.0.0.1:1", "--dry-run")
		if code != 0 {
			t.Fatalf("token %q: exit %d\n%s", token, code, out)
		}
		for _, want := range []string{
			"would commit on chartpin/pins (parent " + head[:12] + "):",
			"chart(app 0.3.1): pin 1 image to index digests", "charts/app/values.yaml",
			"note: remote branch chartpin/pins not looked up",
			"pull request body:", "+  digest: \"sha256:abab",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("token %q: output lacks %q:\n%s", token, want, out)
			}
		}
		// The pull request lookup failed: its note names the flag, not pullrequest's option field.
		if token != "" && (!strings.Contains(out, "check --github-api and the network") || strings.Contains(out, "check API")) {
			t.Errorf("token %q: the note does not name --github-api:\n%s", token, out)
		}
	}
	stdout, errOut, code := runCLI(t, "release", "charts/app", "--digests", lock, "--dry-run", "-o", "json")
	var doc struct {
		DryRun bool   `json:"dry_run"`
		Parent string `json:"parent"`
		Title  string `json:"title"`
		Body   string `json:"body"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); code != 0 || err != nil || !doc.DryRun || doc.Parent != head || doc.Title == "" || doc.Body == "" {
		t.Errorf("json: exit %d, %v, %+v\n%s\n%s", code, err, doc, stdout, errOut)
	}
}

// GITHUB_TOKEN goes to the GitHub API over HTTPS or on this machine only: a
// plain-HTTP --github-api on another host is an input error before anything
// is pushed, and the API (here a recording fake on a non-loopback address)
// sees no request.
func TestReleaseTokenNeverInCleartext(t *testing.T) {
	ip, ok := fakegithub.NonLoopbackIP()
	if !ok {
		t.Skip("this machine has no non-loopback IPv4 address to serve the fake API on")
	}
	gh, err := fakegithub.NewAt(ip+":0", "acme", "charts", releaseToken)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gh.Close)
	work, bare, lock := releaseRepo(t)
	t.Chdir(work)
	t.Setenv("GITHUB_ACTIONS", "")
	t.Setenv("GITHUB_TOKEN", releaseToken)
	before := treeBytes(t, work, bare)
	for _, dry := range []bool{false, true} {
		args := []string{"release", "--digests", lock, "--github-api", gh.URL, "--repo", "acme/charts", "charts/app"}
		if dry {
			args = append(args, "--dry-run")
		}
		code, out := runCombined(t, args...)
		if code != 2 || !strings.Contains(out, "--github-api "+gh.URL+": plain HTTP to another machine") || strings.Contains(out, releaseToken) {
			t.Errorf("dry run %v: exit %d\n%s", dry, code, out)
		}
	}
	if calls := gh.Calls(); len(calls) != 0 {
		t.Errorf("the API got %d requests, first with Authorization %q", len(calls), calls[0].Auth)
	}
	if after := treeBytes(t, work, bare); after != before {
		t.Errorf("files changed:\nbefore %s\nafter %s", before, after)
	}
}
