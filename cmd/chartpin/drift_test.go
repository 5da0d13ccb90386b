package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chartpin/chartpin/internal/registrytest"
)

// driftChart writes values.yaml into a fresh chart directory.
func driftChart(t *testing.T, values string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "values.yaml"), []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestDriftExitCodes(t *testing.T) {
	reg := registrytest.New(t)
	d1 := reg.PushIndex(t, "team/app", "1.0", "linux/amd64", "linux/arm64")
	ok := driftChart(t, "image:\n  repository: "+reg.Host+"/team/app\n  tag: \"1.0\"\n  digest: "+d1+"\n")
	code, out := runCheck(t, "--insecure-registry", reg.Host, "drift", ok)
	wantExit(t, code, 0, out)
	if !strings.Contains(out, "1 ok, 0 DRIFT") || !strings.Contains(out, "registry requests: HEAD 1, GET 0") {
		t.Errorf("output:\n%s", out)
	}

	d2 := reg.PushIndex(t, "team/app", "1.0", "linux/amd64")
	code, out = runCheck(t, "--insecure-registry", reg.Host, "drift", ok)
	wantExit(t, code, 1, out)
	if !strings.Contains(out, "pinned "+d1+", now "+d2) {
		t.Errorf("drift does not show both digests:\n%s", out)
	}

	// A not-pinned image is listed, not a finding.
	notPinned := driftChart(t, "image:\n  repository: "+reg.Host+"/team/app\n  tag: \"1.0\"\n  digest: \"\"\n")
	code, out = runCheck(t, "--insecure-registry", reg.Host, "drift", notPinned)
	wantExit(t, code, 0, out)
	if !strings.Contains(out, "not pinned") {
		t.Errorf("output:\n%s", out)
	}

	zeroPins := driftChart(t, "replicaCount: 1\n")
	code, out = runCheck(t, "drift", zeroPins)
	wantExit(t, code, 2, out)
	if !strings.Contains(out, "holds no image pins") {
		t.Errorf("output:\n%s", out)
	}
	code, out = runCheck(t, "drift", t.TempDir())
	wantExit(t, code, 2, out)
	code, out = runCheck(t, "drift", "--output", "yaml", ok)
	wantExit(t, code, 2, out)
}

func TestDriftOfflineSaysSo(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	dir := driftChart(t, "image:\n  repository: ghcr.io/example/app\n  tag: \"1.0\"\n  digest: "+digest+"\n"+
		"other:\n  repository: ghcr.io/example/other\n  tag: \"2\"\n  digest: "+digest+"\n")
	lock := filepath.Join(t.TempDir(), "lock.yaml")
	os.WriteFile(lock, []byte("ghcr.io/example/app:1.0: "+digest+"\n"), 0o644)
	code, out := runCheck(t, "drift", "--digests", lock, dir)
	wantExit(t, code, 1, out) // other:2 is not in the lock: UNRESOLVED
	for i, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if strings.HasPrefix(line, "chartpin: ") { // main's error line
			continue
		}
		if !strings.HasPrefix(line, "OFFLINE ") {
			t.Errorf("line %d lacks OFFLINE: %q", i+1, line)
		}
	}
	if !strings.Contains(out, "not a live audit") {
		t.Errorf("summary does not say offline:\n%s", out)
	}
	code, out = runCheck(t, "drift", "--digests", lock, "-o", "markdown", dir)
	wantExit(t, code, 1, out)
	if !strings.Contains(out, "OFFLINE") {
		t.Errorf("markdown:\n%s", out)
	}
}

func TestDriftGitHubActionsInjection(t *testing.T) {
	reg := registrytest.New(t)
	d1 := reg.PushIndex(t, "team/app", "1.0", "linux/amd64")
	values := "images:\n  ok:\n    repository: " + reg.Host + "/team/app\n    tag: \"1.0\"\n    digest: " + d1 + "\n" +
		"  evil:\n    repository: " + reg.Host + "/team/app\n    tag: \"1.0%0A::set-output name=findings::0\\n::error::pwned\"\n    digest: " + d1 + "\n"
	dir := driftChart(t, values)
	tmp := t.TempDir()
	summary, output := filepath.Join(tmp, "summary.md"), filepath.Join(tmp, "output")
	t.Setenv("GITHUB_ACTIONS", "true")
	t.Setenv("GITHUB_STEP_SUMMARY", summary)
	t.Setenv("GITHUB_OUTPUT", output)
	t.Setenv("GITHUB_WORKSPACE", filepath.Dir(dir))
	code, out := runCheck(t, "--insecure-registry", reg.Host, "drift", dir)
	wantExit(t, code, 1, out)

	// Read the log as the runner does: commands only outside stop-commands.
	commands := runnerCommands(out)
	if len(commands) != 1 {
		t.Fatalf("runner sees %d commands, want the one annotation:\n%s", len(commands), strings.Join(commands, "\n"))
	}
	want := "::error file=" + filepath.Base(dir) + "/values.yaml,line=9,title=UNWATCHABLE images.evil.digest::images.evil.tag \"1.0%250A::set-output name=findings::0\\n::error::pwned\" is not an image tag"
	if commands[0] != want {
		t.Errorf("annotation\n got %s\nwant %s", commands[0], want)
	}
	o, err := os.ReadFile(output)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(o), "findings<<") || !strings.Contains(string(o), "\n1\n") || strings.Contains(string(o), "findings::0") {
		t.Errorf("outputs:\n%s", o)
	}
	s, err := os.ReadFile(summary)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(s), "\n") {
		if strings.HasPrefix(line, "::") {
			t.Errorf("summary line starts a command: %q", line)
		}
	}
	if !strings.Contains(string(s), "**UNWATCHABLE**") {
		t.Errorf("summary:\n%s", s)
	}
}

// With --output json inside Actions, stdout is exactly the JSON document and
// the annotations go to stderr.
func TestDriftJSONStaysParseableInActions(t *testing.T) {
	digest := "sha256:" + strings.Repeat("cd", 32)
	dir := driftChart(t, "image:\n  repository: ghcr.io/example/app\n  tag: \"1.0\"\n  digest: "+digest+"\n")
	lock := filepath.Join(t.TempDir(), "lock.yaml")
	os.WriteFile(lock, []byte("ghcr.io/example/app:1.0: sha256:"+strings.Repeat("ef", 32)+"\n"), 0o644)
	t.Setenv("GITHUB_ACTIONS", "true")
	t.Setenv("GITHUB_STEP_SUMMARY", "")
	t.Setenv("GITHUB_OUTPUT", "")
	var stdout, stderr bytes.Buffer
	code := runTo(&stdout, &stderr, []string{"drift", "--digests", lock, "-o", "json", dir})
	wantExit(t, code, 1, stdout.String()+stderr.String())
	var rep struct {
		Offline bool `json:"offline"`
		Items   []struct {
			Status string `json:"status"`
		} `json:"items"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("stdout is not one JSON document: %v\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if !rep.Offline || len(rep.Items) != 1 || rep.Items[0].Status != "DRIFT" {
		t.Errorf("json: %+v", rep)
	}
	if !strings.HasPrefix(stderr.String(), "::error file=") || !strings.Contains(stderr.String(), "title=OFFLINE DRIFT image.digest") {
		t.Errorf("stderr:\n%s", stderr.String())
	}
}

// The float is resolved where the pull would go: through --registry-mirror.
func TestDriftThroughMirror(t *testing.T) {
	reg := registrytest.New(t)
	d := reg.PushIndex(t, "team/app", "1.0", "linux/amd64")
	dir := driftChart(t, "image:\n  registry: registry.example.com\n  repository: team/app\n  tag: \"1.0\"\n  digest: "+d+"\n")
	reg.Reset()
	code, out := runCheck(t, "--registry-mirror", "registry.example.com="+reg.Host, "--insecure-registry", reg.Host, "drift", "-o", "json", dir)
	wantExit(t, code, 0, out)
	if !strings.Contains(out, `"source": "`+reg.Host+`/team/app:1.0"`) || !strings.Contains(out, `"float": "registry.example.com/team/app:1.0"`) {
		t.Errorf("output:\n%s", out)
	}
	if n := reg.CountPath("HEAD", "/manifests/"); n != 1 {
		t.Errorf("mirror saw %d HEADs, want 1", n)
	}
}
