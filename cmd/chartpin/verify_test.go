package main

import (
	"encoding/base64"
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

// pin --write-digests records the signature it verified; an offline pin
// from that lock verifies the same moving digest from it against the key,
// writes the same bytes and sends no request. A tampered signature in the
// lock is refused: exit 1, nothing written.
func TestPinVerifyOfflineFromTheLock(t *testing.T) {
	reg := registrytest.New(t)
	key, digest, sigDigest := signedImage(t, reg, "linux/amd64", "linux/arm64")
	chart := func() (string, string) { return verifiedChart(t, reg.Host, key) }
	lock := filepath.Join(t.TempDir(), "digests.yaml")
	online, cfg := chart()
	if out, errOut, code := runCLI(t, "--insecure-registry", reg.Host, "pin", "--config", cfg, "--write-digests", lock); code != 0 {
		t.Fatalf("online: exit %d\n%s%s", code, out, errOut)
	}
	locked, err := os.ReadFile(lock)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(locked), reg.Host+"/team/app:1.0: {digest: "+digest) || !strings.Contains(string(locked), "signature: {manifest: "+sigDigest+", payload: ") {
		t.Fatalf("lock does not record the signature %s:\n%s", sigDigest, locked)
	}

	offline, cfg := chart()
	relock := filepath.Join(t.TempDir(), "again.yaml")
	reg.Reset()
	if out, errOut, code := runCLI(t, "pin", "--config", cfg, "--digests", lock, "--write-digests", relock); code != 0 {
		t.Fatalf("offline: exit %d\n%s%s", code, out, errOut)
	}
	// A lock written offline from a lock keeps the signature it verified.
	if again, _ := os.ReadFile(relock); !strings.Contains(string(again), "signature: {manifest: "+sigDigest+", payload: ") {
		t.Errorf("the lock written offline lost the signature:\n%s", again)
	}
	if n := len(reg.Requests()); n != 0 {
		t.Errorf("the offline pin sent %d registry requests: %v", n, reg.Requests())
	}
	want, _ := os.ReadFile(filepath.Join(online, "values.yaml"))
	if got, _ := os.ReadFile(filepath.Join(offline, "values.yaml")); string(got) != string(want) || !strings.Contains(string(got), digest) {
		t.Errorf("offline values.yaml:\n%s\nonline:\n%s", got, want)
	}

	// The payload recorded for another digest: it verifies with the key
	// but names another image, so it is refused.
	other := reg.PushIndex(t, "team/app", "other", "linux/amd64")
	sig, err := key.Sign(cosigned.Payload(reg.Host+"/team/app", other))
	if err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(string) string{
		"tampered payload": func(l string) string {
			return tamperPayload(t, l)
		},
		"another digest's signature": func(l string) string {
			l = replaceField(t, l, "payload", base64.StdEncoding.EncodeToString(cosigned.Payload(reg.Host+"/team/app", other)))
			return replaceField(t, l, "signature", base64.StdEncoding.EncodeToString(sig))
		},
	} {
		t.Run(name, func(t *testing.T) {
			tampered := filepath.Join(t.TempDir(), "digests.yaml")
			if err := os.WriteFile(tampered, []byte(edit(string(locked))), 0o644); err != nil {
				t.Fatal(err)
			}
			dir, cfg := chart()
			before := hashDir(t, dir)
			_, errOut, code := runCLI(t, "pin", "--config", cfg, "--digests", tampered)
			if code != 1 || !strings.Contains(errOut, "the signature the digest lock file records ("+sigDigest+") does not verify with key ") {
				t.Errorf("exit %d, stderr:\n%s\nwant exit 1 and the recorded signature refused", code, errOut)
			}
			if after := hashDir(t, dir); !maps.Equal(before, after) {
				t.Errorf("a refused offline pin changed files")
			}
		})
	}
}

// drift offline from a --digests lock verifies each pin's signature from
// the lock, as pin does, with no request: a lock that records the signature
// is ok; a tampered record is UNSIGNED (exit 1); a lock that records none
// (chartpin resolve wrote it) leaves the pin unjudged, in a note.
func TestDriftVerifyOfflineFromTheLock(t *testing.T) {
	reg := registrytest.New(t)
	key, _, sigDigest := signedImage(t, reg, "linux/amd64")
	dir, cfg := verifiedChart(t, reg.Host, key)
	lock := filepath.Join(t.TempDir(), "digests.yaml")
	if out, errOut, code := runCLI(t, "--insecure-registry", reg.Host, "pin", "--config", cfg, "--write-digests", lock); code != 0 {
		t.Fatalf("online pin: exit %d\n%s%s", code, out, errOut)
	}
	bare := filepath.Join(t.TempDir(), "bare.yaml")
	if out, errOut, code := runCLI(t, "--insecure-registry", reg.Host, "resolve", reg.Host+"/team/app:1.0", "--write-digests", bare); code != 0 {
		t.Fatalf("resolve: exit %d\n%s%s", code, out, errOut)
	}
	locked, err := os.ReadFile(lock)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(locked), "signature: {manifest: "+sigDigest) {
		t.Fatalf("lock does not record the signature %s:\n%s", sigDigest, locked)
	}
	tampered := filepath.Join(t.TempDir(), "tampered.yaml")
	if err := os.WriteFile(tampered, []byte(tamperPayload(t, string(locked))), 0o644); err != nil {
		t.Fatal(err)
	}

	reg.Reset()
	code, out := runCheck(t, "drift", "--config", cfg, "--digests", lock)
	wantExit(t, code, 0, out)
	if !strings.Contains(out, "OFFLINE ok ") || strings.Contains(out, "UNSIGNED") || strings.Contains(out, "not checked") {
		t.Errorf("drift from a lock that records the signature:\n%s", out)
	}
	code, out = runCheck(t, "drift", "--config", cfg, "--digests", tampered)
	wantExit(t, code, 1, out)
	if want := "the signature the digest lock file records (" + sigDigest + ") does not verify with key "; !strings.Contains(out, "UNSIGNED  "+dir+"/values.yaml:5 image.digest") || !strings.Contains(out, want) {
		t.Errorf("drift from a tampered lock: want UNSIGNED saying %q:\n%s", want, out)
	}
	code, out = runCheck(t, "drift", "--config", cfg, "--digests", bare)
	wantExit(t, code, 0, out)
	if !strings.Contains(out, "OFFLINE ok ") || strings.Contains(out, "UNSIGNED") || !strings.Contains(out, "1 pin(s) with verify: were not checked for signatures: the digest lock file records no signature for them") {
		t.Errorf("drift from a lock without signatures: want ok and a note:\n%s", out)
	}
	if n := len(reg.Requests()); n != 0 {
		t.Errorf("drift offline sent %d registry requests: %v", n, reg.Requests())
	}
}

// signedImage pushes team/app:1.0 to reg signed by a fresh key; it returns
// the key, the image's digest and its signature manifest's digest.
func signedImage(t *testing.T, reg *registrytest.Registry, platforms ...string) (*cosigned.Key, string, string) {
	t.Helper()
	digest := reg.PushIndex(t, "team/app", "1.0", platforms...)
	key, err := cosigned.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	sigDigest, err := key.Push(reg.Host+"/team/app", digest, []name.Option{name.Insecure})
	if err != nil {
		t.Fatal(err)
	}
	return key, digest, sigDigest
}

// verifiedChart is pinChart with a chartpin.yaml that verifies its image
// against key (cosign.pub beside it); it returns the chart and the config.
func verifiedChart(t *testing.T, host string, key *cosigned.Key) (string, string) {
	t.Helper()
	dir := pinChart(t, host)
	for n, b := range map[string]string{
		"chartpin.yaml": "charts:\n  - dir: .\n    images:\n      - at: image\n        verify: {key: cosign.pub}\n",
		"cosign.pub":    string(key.PublicPEM()),
	} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, filepath.Join(dir, "chartpin.yaml")
}

// tamperPayload is lock with its recorded signature's payload changed
// after signing.
func tamperPayload(t *testing.T, lock string) string {
	t.Helper()
	payload := strings.Replace(string(decodeField(t, lock, "payload")), `"optional":null`, `"optional":{}`, 1)
	return replaceField(t, lock, "payload", base64.StdEncoding.EncodeToString([]byte(payload)))
}

// decodeField and replaceField read and replace one base64 field of the
// signature a lock file records.
func decodeField(t *testing.T, lock, field string) []byte {
	t.Helper()
	_, rest, ok := strings.Cut(lock, "signature: {")
	_, rest, ok2 := strings.Cut(rest, field+": \"")
	v, _, ok3 := strings.Cut(rest, "\"")
	b, err := base64.StdEncoding.DecodeString(v)
	if !ok || !ok2 || !ok3 || err != nil {
		t.Fatalf("no %s in the lock's signature:\n%s", field, lock)
	}
	return b
}

func replaceField(t *testing.T, lock, field, v string) string {
	t.Helper()
	old := base64.StdEncoding.EncodeToString(decodeField(t, lock, field))
	return strings.Replace(lock, field+": \""+old+"\"", field+": \""+v+"\"", 1)
}
