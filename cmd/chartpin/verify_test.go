package main

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/chartpin/chartpin/internal/cosigned"
	"github.com/chartpin/chartpin/internal/registrytest"
)

// pin with verify: refuses an unsigned digest with exit 1, names the image
// and the reason, and leaves every file's bytes alone; once the digest is
// signed by the configured key, the same command pins it.
func TestPinVerifyRefusesUnsigned(t *testing.T) {
	reg := registrytest.New(t)
	digest := reg.PushIndex(t, "team/app", "1.0", "linux/amd64", "linux/arm64")
	dir := pinChart(t, reg.Host)
	key, err := cosigned.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"chartpin.yaml": "charts:\n  - dir: .\n    images:\n      - at: image\n        verify: {key: cosign.pub}\n",
		"cosign.pub":    string(key.PublicPEM()),
	}
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	before := hashDir(t, dir)
	cfg := filepath.Join(dir, "chartpin.yaml")
	lock := filepath.Join(t.TempDir(), "lock.yaml")

	_, errOut, code := runCLI(t, "--insecure-registry", reg.Host, "pin", "--config", cfg, "--write-digests", lock)
	t.Logf("unsigned: stderr:\n%s", errOut)
	if code != 1 {
		t.Errorf("unsigned: exit %d, want 1; stderr:\n%s", code, errOut)
	}
	for _, want := range []string{"values.yaml:5 (image.digest)", "image " + reg.Host + "/team/app:1.0", "no valid signature", "has no signature", "cosign.pub"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr does not say %q:\n%s", want, errOut)
		}
	}
	if after := hashDir(t, dir); !maps.Equal(before, after) {
		t.Errorf("a refused pin changed files:\nbefore %v\nafter  %v", before, after)
	}
	if _, err := os.Stat(lock); err == nil {
		t.Errorf("a refused pin wrote the --write-digests file")
	}

	if _, err := key.Push(reg.Host+"/team/app", digest, []name.Option{name.Insecure}); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runCLI(t, "--insecure-registry", reg.Host, "pin", "--config", cfg)
	if code != 0 {
		t.Fatalf("signed: exit %d\n%s%s", code, out, errOut)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "values.yaml")); !strings.Contains(string(got), "digest: \""+digest+"\"") {
		t.Errorf("values.yaml after the signed pin:\n%s", got)
	}
}

// drift with verify: reports a pinned digest without a signature by the
// configured key as UNSIGNED in every output format, exit 1; once signed,
// the pin is ok and drift exits 0.
func TestDriftVerifyReportsUnsigned(t *testing.T) {
	reg := registrytest.New(t)
	digest := reg.PushIndex(t, "team/app", "1.0", "linux/amd64")
	key, err := cosigned.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	dir := driftChart(t, "image:\n  repository: "+reg.Host+"/team/app\n  tag: \"1.0\"\n  digest: "+digest+"\n")
	files := map[string]string{
		"Chart.yaml":    "apiVersion: v2\nname: app\nversion: 0.1.0\n",
		"chartpin.yaml": "charts:\n  - dir: .\n    images:\n      - at: image\n        verify: {key: cosign.pub}\n",
		"cosign.pub":    string(key.PublicPEM()),
	}
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(dir, "chartpin.yaml")
	drift := func(args ...string) string {
		t.Helper()
		code, out := runCheck(t, append([]string{"--insecure-registry", reg.Host, "drift", "--config", cfg}, args...)...)
		wantExit(t, code, 1, out)
		return out
	}
	for format, want := range map[string]string{
		"text":     "UNSIGNED  " + dir + "/values.yaml:4 image.digest",
		"json":     `"status": "UNSIGNED"`,
		"markdown": "| **UNSIGNED** |",
	} {
		if out := drift("-o", format); !strings.Contains(out, want) || !strings.Contains(out, "has no signature") {
			t.Errorf("-o %s does not say %q and why:\n%s", format, want, out)
		}
	}
	if out := drift(); !strings.Contains(out, "1 UNSIGNED") {
		t.Errorf("summary does not count UNSIGNED:\n%s", out)
	}
	t.Setenv("GITHUB_ACTIONS", "true")
	t.Setenv("GITHUB_STEP_SUMMARY", "")
	t.Setenv("GITHUB_OUTPUT", "")
	commands := runnerCommands(drift())
	if len(commands) != 1 || !strings.HasPrefix(commands[0], "::error file=") || !strings.Contains(commands[0], "title=UNSIGNED image.digest::") {
		t.Errorf("annotations %q, want one UNSIGNED error", commands)
	}
	t.Setenv("GITHUB_ACTIONS", "")

	if _, err := key.Push(reg.Host+"/team/app", digest, []name.Option{name.Insecure}); err != nil {
		t.Fatal(err)
	}
	code, out := runCheck(t, "--insecure-registry", reg.Host, "drift", "--config", cfg)
	wantExit(t, code, 0, out)
	if !strings.Contains(out, "\nok  ") || strings.Contains(out, "UNSIGNED") {
		t.Errorf("signed pin:\n%s", out)
	}
}

// A keyless verify: that cannot be read is a config error before any
// request: exit 2, the config file and line named.
func TestPinVerifyKeylessConfigErrors(t *testing.T) {
	reg := registrytest.New(t)
	reg.PushIndex(t, "team/app", "1.0", "linux/amd64", "linux/arm64")
	for _, tc := range []struct{ name, verify, want string }{
		{"identity without issuer", "        verify:\n          identity: me@example.com\n          trustedRoot: root.json\n", "chartpin.yaml:6: verify: a keyless policy needs issuer:"},
		{"key and identity", "        verify:\n          key: cosign.pub\n          identity: me@example.com\n", "chartpin.yaml:6: verify: key: and identity: are two policies"},
		{"missing trusted root", "        verify:\n          identity: me@example.com\n          issuer: https://accounts.google.com\n          trustedRoot: sigstore/trusted_root.json\n", "chartpin.yaml:8: verify.trustedRoot: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := pinChart(t, reg.Host)
			cfg := filepath.Join(dir, "chartpin.yaml")
			if err := os.WriteFile(cfg, []byte("charts:\n  - dir: .\n    images:\n      - at: image\n"+tc.verify), 0o644); err != nil {
				t.Fatal(err)
			}
			before := hashDir(t, dir)
			reg.Reset()
			_, errOut, code := runCLI(t, "--insecure-registry", reg.Host, "pin", "--config", cfg)
			if code != 2 || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit 2 and %q", code, errOut, tc.want)
			}
			if n := len(reg.Requests()); n != 0 {
				t.Errorf("a config error sent %d registry requests", n)
			}
			if after := hashDir(t, dir); !maps.Equal(before, after) {
				t.Errorf("a config error changed files")
			}
		})
	}
}
