package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chartpin/chartpin/internal/registrytest"
)

// policyCase is one pin run on a small chart: which files it writes, to
// exactly which bytes, and what it says. Every other file must keep its
// bytes and mode.
type policyCase struct {
	name  string
	files map[string]string // chart files (chartpin.yaml is passed with --config)
	lock  string            // the --digests lock file
	args  []string          // extra flags after "pin"
	// changed maps a file to its whole content after the run; a file
	// absent here must be untouched.
	changed map[string]string
	stdout  []string
	stderr  []string
	code    int
}

// runPolicyCase runs c through the command and checks every file of the
// chart, byte for byte, before and after.
func runPolicyCase(t *testing.T, c policyCase) {
	t.Helper()
	t.Setenv("GITHUB_ACTIONS", "")
	dir := t.TempDir()
	for name, body := range c.files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	lock := filepath.Join(t.TempDir(), "digests.yaml")
	if err := os.WriteFile(lock, []byte(c.lock), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"pin", "--digests", lock}, c.args...)
	if _, ok := c.files["chartpin.yaml"]; ok {
		args = append(args, "--config", filepath.Join(dir, "chartpin.yaml"))
	} else {
		args = append(args, dir)
	}
	before := hashDir(t, dir)
	stdout, stderr, code := runCLI(t, args...)
	if code != c.code {
		t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, c.code, stdout, stderr)
	}
	for _, w := range c.stdout {
		if !strings.Contains(stdout, w) {
			t.Errorf("stdout lacks %q:\n%s", w, stdout)
		}
	}
	for _, w := range c.stderr {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, stderr)
		}
	}
	after := hashDir(t, dir)
	if len(after) != len(before) {
		t.Errorf("%d files became %d", len(before), len(after))
	}
	for p, h := range before {
		name, _ := filepath.Rel(dir, p)
		want, changes := c.changed[name]
		if !changes {
			if after[p] != h {
				t.Errorf("%s written, want untouched:\n%s", name, after[p])
			}
			continue
		}
		if got := strings.TrimSuffix(after[p], "\x00-rw-r-----"); got != want {
			t.Errorf("%s (bytes or mode):\n%s\nwant:\n%s", name, after[p], want)
		}
	}
}

const (
	policyChart = "apiVersion: v2\nname: app\nversion: 1.0.0\nappVersion: \"1.0.0\"\n"
	bumpedChart = "apiVersion: v2\nname: app\nversion: 1.0.1\nappVersion: \"1.0.1\"\n"
	dOld        = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	dNew        = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
	dOther      = "sha256:3333333333333333333333333333333333333333333333333333333333333333"
)

// twoImages is a values.yaml with two pinned images and a feature flag.
func twoImages(api, worker, flag string) string {
	return "feature:\n  worker: " + flag + "\n" +
		"api:\n  image:\n    repository: example.org/team/api\n    tag: \"1.0\"\n    digest: " + api + "\n" +
		"worker:\n  image:\n    repository: example.org/team/worker\n    tag: \"1.0\"\n    digest: " + worker + "\n"
}

// twoLock moves both images off dOld; every digest is recorded with its
// platforms, as --write-digests writes them.
const twoLock = "example.org/team/api:1.0: {digest: " + dNew + ", platforms: [linux/amd64, linux/arm64]}\n" +
	"example.org/team/api@" + dOld + ": {digest: " + dOld + ", platforms: [linux/amd64, linux/arm64]}\n" +
	"example.org/team/worker:1.0: {digest: " + dOther + ", platforms: [linux/amd64, linux/arm64]}\n" +
	"example.org/team/worker@" + dOld + ": {digest: " + dOld + ", platforms: [linux/amd64, linux/arm64]}\n"

func TestPinHoldsAndConditions(t *testing.T) {
	for _, c := range []policyCase{
		{
			name: "a held pin stays although its tag now names another digest",
			files: map[string]string{"Chart.yaml": policyChart, "values.yaml": twoImages(dOld, dOld, "true"),
				"chartpin.yaml": "charts:\n  - dir: .\n    images:\n      - at: api.image\n      - at: worker.image\n" +
					"        hold: \"frozen: the 1.0 tag was re-published\"\n"},
			lock:    twoLock,
			changed: map[string]string{"values.yaml": twoImages(dNew, dOld, "true"), "Chart.yaml": bumpedChart},
			stdout:  []string{"HELD    ", "/values.yaml:12 worker.image.digest example.org/team/worker:1.0 sha256:111111111111: ", "hold: frozen: the 1.0 tag was re-published"},
		},
		{
			name: "a false when: holds that pin and lets the others move",
			files: map[string]string{"Chart.yaml": policyChart, "values.yaml": twoImages(dOld, dOld, "false"),
				"chartpin.yaml": "charts:\n  - dir: .\n    images:\n      - at: api.image\n      - at: worker.image\n        when: feature.worker\n"},
			lock:    twoLock,
			changed: map[string]string{"values.yaml": twoImages(dNew, dOld, "false"), "Chart.yaml": bumpedChart},
			stdout:  []string{"HELD    ", "/values.yaml:12 worker.image.digest example.org/team/worker:1.0 sha256:111111111111: ", `when "feature.worker" does not hold in values.yaml (would move to ` + dOther + ")"},
		},
		{
			name: "an unreadable when: writes nothing",
			files: map[string]string{"Chart.yaml": policyChart, "values.yaml": twoImages(dOld, dOld, "maybe"),
				"chartpin.yaml": "charts:\n  - dir: .\n    images:\n      - at: api.image\n      - at: worker.image\n        when: feature.worker\n"},
			lock:   twoLock,
			stderr: []string{"values.yaml:12 (worker.image.digest)", "feature.worker is \"maybe\" (!!str), not a boolean", "fail closed"},
			code:   1,
		},
		{
			name: "a hold that names no pin is a config error",
			files: map[string]string{"Chart.yaml": policyChart, "values.yaml": twoImages(dOld, dOld, "true"),
				"chartpin.yaml": "charts:\n  - dir: .\n    images:\n      - at: api.image\n      - at: worker.imag\n        hold: frozen\n"},
			lock:   twoLock,
			stderr: []string{"chartpin.yaml:5: image worker.imag:", `no key "imag" under worker`},
			code:   2,
		},
		{
			name: "an acknowledgement that names no pin is a config error",
			files: map[string]string{"Chart.yaml": policyChart, "values.yaml": twoImages(dOld, dOld, "true"),
				"chartpin.yaml": "charts:\n  - dir: .\n    images:\n      - at: api.image\n    acknowledge:\n      - at: workr.image\n" +
					"        digest: " + dOld + "\n        until: 2099-01-01\n        reason: known\n"},
			lock:   twoLock,
			stderr: []string{"chartpin.yaml:6: acknowledge at: workr.image names no pin in"},
			code:   2,
		},
		{
			name: "--set-tag on a held image is refused before anything resolves",
			files: map[string]string{"Chart.yaml": policyChart, "values.yaml": twoImages(dOld, dOld, "true"),
				"chartpin.yaml": "charts:\n  - dir: .\n    images:\n      - at: api.image\n      - at: worker.image\n        hold: frozen\n"},
			lock:   twoLock,
			args:   []string{"--set-tag", "worker.image=2.0"},
			stderr: []string{"--set-tag worker.image=2.0:", "is held (", "chartpin.yaml:5: \"frozen\"); drop the hold: to move it"},
			code:   2,
		},
		{
			name: "format tag@digest reads the tag from the pin key",
			files: map[string]string{"Chart.yaml": policyChart,
				"values.yaml":   "app:\n  repository: example.org/team/app\n  version: v1.5.3@" + dOld + "  # pinned\n",
				"chartpin.yaml": "charts:\n  - dir: .\n    images:\n      - at: app\n        pin: version\n        format: tag@digest\n"},
			lock: "example.org/team/app:v1.5.3: {digest: " + dNew + ", platforms: [linux/amd64]}\n" +
				"example.org/team/app@" + dOld + ": {digest: " + dOld + ", platforms: [linux/amd64]}\n",
			changed: map[string]string{"Chart.yaml": bumpedChart,
				"values.yaml": "app:\n  repository: example.org/team/app\n  version: v1.5.3@" + dNew + "  # pinned\n"},
		},
	} {
		t.Run(c.name, func(t *testing.T) { runPolicyCase(t, c) })
	}
}

// onePin is a values.yaml with one image pinned to digest.
func onePin(digest string) string {
	return "app:\n  image:\n    repository: example.org/team/app\n    tag: \"1.0\"\n    digest: " + digest + "\n"
}

// oneMoved moves onePin(dOld) to dNew, both recorded with their platforms.
const oneMoved = "example.org/team/app:1.0: {digest: " + dNew + ", platforms: [linux/amd64, linux/arm64]}\n" +
	"example.org/team/app@" + dOld + ": {digest: " + dOld + ", platforms: [linux/amd64, linux/arm64]}\n"

func TestPinPlatformsAndPlans(t *testing.T) {
	for _, c := range []policyCase{
		{
			name:  "offline, a plain lock entry over a pinned digest is refused: its platforms are unknown",
			files: map[string]string{"Chart.yaml": policyChart, "values.yaml": onePin(dOld)},
			lock:  "example.org/team/app:1.0: " + dNew + "\n",
			stderr: []string{"values.yaml:5 (app.image.digest): image example.org/team/app:1.0: refusing to pin " + dNew,
				"reading the platforms of the pin it replaces (" + dOld + ")", "record the lock online"},
			stdout: []string{"REFUSED ", "nothing written: 1 move is refused"},
			code:   1,
		},
		{
			name:  "offline, a one-platform index over a two-platform pin is refused",
			files: map[string]string{"Chart.yaml": policyChart, "values.yaml": onePin(dOld)},
			lock: "example.org/team/app:1.0: {digest: " + dNew + ", platforms: [linux/amd64]}\n" +
				"example.org/team/app@" + dOld + ": {digest: " + dOld + ", platforms: [linux/amd64, linux/arm64]}\n",
			stderr: []string{"refusing to pin " + dNew, "required platforms missing: linux/arm64 (index has linux/amd64)"},
			code:   1,
		},
		{
			name:   "--platforms asks for a platform the new index lacks",
			files:  map[string]string{"Chart.yaml": policyChart, "values.yaml": onePin(`""`)},
			lock:   "example.org/team/app:1.0: {digest: " + dNew + ", platforms: [linux/amd64, linux/arm64]}\n",
			args:   []string{"--platforms", "linux/s390x"},
			stderr: []string{"required platforms missing: linux/s390x"},
			code:   1,
		},
		{
			name:  "a refused dry run prints its whole plan: the diff of the moves, then every refusal",
			files: map[string]string{"Chart.yaml": policyChart, "values.yaml": onePin(dOld), "templates/NOTES.txt": "pinned " + dOld + "\n"},
			lock:  oneMoved,
			args:  []string{"--dry-run"},
			stdout: []string{"-    digest: " + dOld + "\n+    digest: " + dNew + "\n", "-version: 1.0.0\n",
				"/templates/NOTES.txt:1 app.image.digest: " + dOld + " is a copy of the old digest of app.image.digest; rerun with --rewrite-copies",
				"nothing written: 1 move is refused"},
			stderr: []string{"rerun with --rewrite-copies"},
			code:   1,
		},
		{
			name:   "a refused dry run in JSON marks dry_run and lists the refusals",
			files:  map[string]string{"Chart.yaml": policyChart, "values.yaml": onePin(dOld), "templates/NOTES.txt": "pinned " + dOld + "\n"},
			lock:   oneMoved,
			args:   []string{"--dry-run", "-o", "json"},
			stdout: []string{`"changed": false`, `"dry_run": true`, `"refusals": [`, `"line": 1,`, `"path": "app.image.digest"`},
			code:   1,
		},
		{
			name: "versions: offline picks from the tags the lock recorded",
			files: map[string]string{"Chart.yaml": policyChart, "values.yaml": onePin(`""`),
				"chartpin.yaml": "charts:\n  - dir: .\n    images:\n      - at: app.image\n        versions: \">=1.0.0 <1.3.0\"\n"},
			lock: "example.org/team/app: {tags: [\"1.0\", 1.0.0, 1.2.9, 1.3.0, latest]}\n" +
				"example.org/team/app:1.2.9: {digest: " + dNew + ", platforms: [linux/amd64, linux/arm64]}\n",
			changed: map[string]string{"Chart.yaml": bumpedChart, "values.yaml": onePin(`"` + dNew + `"`)},
			stdout:  []string{"example.org/team/app:1.2.9"},
		},
	} {
		t.Run(c.name, func(t *testing.T) { runPolicyCase(t, c) })
	}
}

// Online, a one-platform index over a two-platform pin is refused with no
// platforms: configured: the plan lists it, nothing is written, exit 1.
func TestPinShrinkOnline(t *testing.T) {
	t.Setenv("GITHUB_ACTIONS", "")
	reg := registrytest.New(t)
	old := reg.PushIndex(t, "team/app", "0.9", "linux/amd64", "linux/arm64")
	narrow := reg.PushIndex(t, "team/app", "1.0", "linux/amd64")
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"Chart.yaml": policyChart,
		"values.yaml": "app:\n  image:\n    repository: " + reg.Host + "/team/app\n    tag: \"1.0\"\n    digest: " + old + "\n"})
	before := hashDir(t, dir)
	out, errOut, code := runCLI(t, "--insecure-registry", reg.Host, "pin", "--dry-run", dir)
	if code != 1 || !strings.Contains(out, "REFUSED ") || !strings.Contains(out, "refusing to pin "+narrow) ||
		!strings.Contains(errOut, "required platforms missing: linux/arm64 (index has linux/amd64)") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if _, _, code := runCLI(t, "--insecure-registry", reg.Host, "pin", dir); code != 1 {
		t.Errorf("pin: exit %d, want 1", code)
	}
	sameFiles(t, before, hashDir(t, dir), "")
}
