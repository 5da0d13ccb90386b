package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chartpin/chartpin/internal/registrytest"
)

// pinChart writes a one-image chart pointing at host and returns its dir.
func pinChart(t *testing.T, host string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: app\nversion: 0.1.0\nappVersion: \"0.1.0\"\n",
		"values.yaml": "# app\nimage:\n  repository: " + host + "/team/app\n  tag: \"1.0\"\n  digest: \"\"  # written by chartpin\n",
	}
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestPinCommand(t *testing.T) {
	reg := registrytest.New(t)
	want := reg.PushIndex(t, "team/app", "1.0", "linux/amd64", "linux/arm64")
	dir := pinChart(t, reg.Host)
	values := filepath.Join(dir, "values.yaml")
	before, _ := os.ReadFile(values)
	lock := filepath.Join(t.TempDir(), "digests.yaml")

	// --dry-run prints the diff and writes nothing (but records the lock).
	out, errOut, code := runCLI(t, "--insecure-registry", reg.Host, "pin", "--dry-run", "--write-digests", lock, dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "-  digest: \"\"  # written by chartpin\n+  digest: \""+want+"\"  # written by chartpin\n") ||
		!strings.Contains(out, "-version: 0.1.0\n-appVersion: \"0.1.0\"\n+version: 0.1.1\n+appVersion: \"0.1.1\"\n") {
		t.Errorf("dry-run output:\n%s", out)
	}
	if after, _ := os.ReadFile(values); string(after) != string(before) {
		t.Errorf("--dry-run wrote values.yaml:\n%s", after)
	}
	if l, err := os.ReadFile(lock); err != nil || !strings.Contains(string(l), reg.Host+"/team/app:1.0: "+want) {
		t.Errorf("--write-digests: %s %v", l, err)
	}

	// Offline from that lock, JSON output, written.
	out, errOut, code = runCLI(t, "pin", "--digests", lock, "-o", "json", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var res struct {
		Changed bool     `json:"changed"`
		Files   []string `json:"files"`
		Charts  []struct {
			NewVersion string `json:"newVersion"`
			Pins       []struct {
				NewDigest string `json:"newDigest"`
				Changed   bool   `json:"changed"`
			} `json:"pins"`
		} `json:"charts"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("json: %v\n%s", err, out)
	}
	if !res.Changed || len(res.Files) != 2 || res.Charts[0].NewVersion != "0.1.1" || res.Charts[0].Pins[0].NewDigest != want {
		t.Errorf("json result %+v", res)
	}
	after, _ := os.ReadFile(values)
	if !strings.Contains(string(after), "digest: \""+want+"\"  # written by chartpin") {
		t.Errorf("values.yaml:\n%s", after)
	}

	// Second run: nothing to do, exit 0, markdown says so.
	out, errOut, code = runCLI(t, "pin", "--digests", lock, "-o", "markdown", dir)
	if code != 0 || !strings.Contains(out, "No pin changed.") {
		t.Errorf("second run: exit %d, %q, %s", code, out, errOut)
	}

	// Usage errors are exit 2.
	for _, args := range [][]string{
		{"pin", "--digests", lock, "-o", "yaml", dir},
		{"pin", "--digests", lock, "--set-tag", "image", dir},
		{"pin", "--digests", lock, "--bump", "huge", dir},
		{"pin", "--digests", lock, "--set-tag", "nowhere=1.1", dir},
	} {
		if _, errOut, code := runCLI(t, args...); code != 2 {
			t.Errorf("%v: exit %d (%s), want 2", args, code, errOut)
		}
	}
}

func TestPinCommandConfigFromWorkingDirectory(t *testing.T) {
	reg := registrytest.New(t)
	want := reg.PushIndex(t, "team/app", "1.0", "linux/amd64", "linux/arm64")
	dir := pinChart(t, reg.Host)
	// ./chartpin.yaml is picked up without --config; it pins with a required platform set.
	if err := os.WriteFile(filepath.Join(dir, "chartpin.yaml"), []byte("charts:\n  - dir: .\n    images:\n      - at: image\n        platforms: [linux/amd64, linux/s390x]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	_, errOut, code := runCLI(t, "--insecure-registry", reg.Host, "pin")
	if code != 1 || !strings.Contains(errOut, "values.yaml:5 (image.digest)") || !strings.Contains(errOut, "linux/s390x") || !strings.Contains(errOut, want) {
		t.Errorf("exit %d, stderr %s", code, errOut)
	}
}

// --set-tag splits PATH=TAG at the last '=': a tag never holds one, a key may.
func TestPinSetTagKeyWithEquals(t *testing.T) {
	dir := t.TempDir()
	digest := "sha256:" + strings.Repeat("c0", 32)
	files := map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: app\nversion: 1.0.0\n",
		"values.yaml": "a=b:\n  image:\n    repository: ghcr.io/example/app\n    tag: \"1.0\"\n    digest: \"\"\n",
		"lock.yaml":   "ghcr.io/example/app:2.0: " + digest + "\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, errOut, code := runCLI(t, "pin", "--digests", filepath.Join(dir, "lock.yaml"), "--set-tag", "a=b.image=2.0", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	got, err := os.ReadFile(filepath.Join(dir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := "a=b:\n  image:\n    repository: ghcr.io/example/app\n    tag: \"2.0\"\n    digest: \"" + digest + "\"\n"
	if string(got) != want {
		t.Errorf("values.yaml:\n%s\nwant:\n%s", got, want)
	}
}
