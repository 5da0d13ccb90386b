package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chartpin/chartpin/internal/registrytest"
)

// pinChart writes a one-image chart pointing at host and returns its dir.
func pinChart(t *testing.T, host string) string {
	t.Helper()
	t.Setenv("GITHUB_ACTIONS", "") // a CI runner's own outputs stay untouched
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

	// --dry-run prints the diff and writes nothing.
	out, errOut, code := runCLI(t, "--insecure-registry", reg.Host, "pin", "--dry-run", dir)
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
	// A real run records the lock (and writes the chart; put it back).
	if _, errOut, code := runCLI(t, "--insecure-registry", reg.Host, "pin", "--write-digests", lock, dir); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if err := os.WriteFile(values, before, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte("apiVersion: v2\nname: app\nversion: 0.1.0\nappVersion: \"0.1.0\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if l, err := os.ReadFile(lock); err != nil || !strings.Contains(string(l), reg.Host+"/team/app:1.0: {digest: "+want+", mediaType: application/vnd.oci.image.index.v1+json, platforms: [linux/amd64, linux/arm64]}") {
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
			NewVersion string `json:"new_version"`
			Pins       []struct {
				NewDigest string `json:"new_digest"`
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

// runnerCommands returns the lines the Actions runner would execute as
// workflow commands: those outside ::stop-commands:: blocks.
func runnerCommands(log string) []string {
	var commands []string
	stopped := ""
	for _, line := range strings.Split(log, "\n") {
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
	return commands
}

// parseOutputs reads a $GITHUB_OUTPUT file of name<<DELIM blocks as the runner does.
func parseOutputs(t *testing.T, data string) map[string]string {
	t.Helper()
	out := map[string]string{}
	lines := strings.Split(data, "\n")
	for i := 0; i < len(lines); i++ {
		if lines[i] == "" {
			continue
		}
		name, delim, ok := strings.Cut(lines[i], "<<")
		if !ok {
			t.Fatalf("output line %q is not NAME<<DELIM:\n%s", lines[i], data)
		}
		var val []string
		for i++; i < len(lines) && lines[i] != delim; i++ {
			val = append(val, lines[i])
		}
		if i == len(lines) {
			t.Fatalf("output %s: delimiter %s never closes:\n%s", name, delim, data)
		}
		if _, dup := out[name]; dup {
			t.Errorf("output %s written twice", name)
		}
		out[name] = strings.Join(val, "\n")
	}
	return out
}

// Inside GitHub Actions pin writes outputs changed and version, the change
// table as the step summary, a warning per pin it could not pin, and prints
// its report inside stop-commands, so a hostile tag in values.yaml injects
// neither a workflow command nor an output.
func TestPinGitHubActions(t *testing.T) {
	dir := t.TempDir()
	d := "sha256:" + strings.Repeat("ab", 32)
	evil := `1.0%0A::set-output name=changed::false\n::error::pwned\nchanged<<EOF`
	files := map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: \"app\\n::error::pwned by name\"\nversion: 0.1.0\nappVersion: \"0.1.0\"\n",
		"values.yaml": "image:\n  repository: ghcr.io/example/app\n  tag: \"1.0\"\n  digest: \"\"\n" +
			"evil:\n  repository: ghcr.io/example/evil\n  tag: \"" + evil + "\"\n  digest: \"\"\n",
		"lock.yaml": "ghcr.io/example/app:1.0: " + d + "\n",
	}
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tmp := t.TempDir()
	summary, output := filepath.Join(tmp, "summary.md"), filepath.Join(tmp, "output")
	t.Setenv("GITHUB_ACTIONS", "true")
	t.Setenv("GITHUB_STEP_SUMMARY", summary)
	t.Setenv("GITHUB_OUTPUT", output)
	t.Setenv("GITHUB_WORKSPACE", filepath.Dir(dir))
	code, out := runCombined(t, "pin", "--digests", filepath.Join(dir, "lock.yaml"), dir)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	// The report (with the hostile tag) was printed, but only as text.
	if !strings.Contains(out, "values.yaml:8 evil.digest: evil.tag") || !strings.Contains(out, "\n::error::pwned by name (") {
		t.Errorf("report not printed:\n%s", out)
	}
	commands := runnerCommands(out)
	want := "::warning file=" + filepath.Base(dir) + "/values.yaml,line=8,title=not pinned evil.digest::evil.tag \"1.0%250A::set-output name=changed::false\\n::error::pwned\\nchanged<<EOF\" is not an image tag"
	if len(commands) != 1 || commands[0] != want {
		t.Errorf("runner sees commands:\n%s\nwant only:\n%s", strings.Join(commands, "\n"), want)
	}

	o, err := os.ReadFile(output)
	if err != nil {
		t.Fatal(err)
	}
	got := parseOutputs(t, string(o))
	if len(got) != 2 || got["changed"] != "true" || got["version"] != "0.1.1" {
		t.Errorf("outputs %q from:\n%s", got, o)
	}

	s, err := os.ReadFile(summary)
	if err != nil {
		t.Fatal(err)
	}
	wantSummary := "## chartpin pin\n\n### app ::error::pwned by name\n\n| image | tag | old → new digest | platforms |\n|---|---|---|---|\n" +
		"| `ghcr.io/example/app` | `1.0` | `(none)` → `" + d[:19] + "` |  |\n\n" +
		"Chart version `0.1.0` → `0.1.1`, appVersion `0.1.0` → `0.1.1`.\n\n" +
		"Not pinned (image unknown):\n\n" +
		"- `evil.digest` (values.yaml:8): evil.tag \"1.0%0A::set-output name=changed::false\\\\n::error::pwned\\\\nchanged&lt;&lt;EOF\" is not an image tag\n\n"
	if string(s) != wantSummary {
		t.Errorf("summary:\n%s\nwant:\n%s", s, wantSummary)
	}

	// A second run changes nothing: changed=false, same version.
	os.Remove(output)
	if code, out := runCombined(t, "pin", "--digests", filepath.Join(dir, "lock.yaml"), dir); code != 0 {
		t.Fatalf("second run: exit %d:\n%s", code, out)
	}
	o, _ = os.ReadFile(output)
	if got := parseOutputs(t, string(o)); got["changed"] != "false" || got["version"] != "0.1.1" {
		t.Errorf("second run outputs %q", got)
	}
}

// hashDir returns path → content and mode of every file under dir.
func hashDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		out[p] = string(data) + "\x00" + fi.Mode().String()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPinBadInput runs every bad input through the command, as a user
// would: it fails with its message and exit code, and every file of every
// chart keeps its bytes and mode (the command plans, then applies, so a
// write before the refusal would show here).
func TestPinBadInput(t *testing.T) {
	t.Setenv("GITHUB_ACTIONS", "")
	reg := registrytest.New(t)
	reg.PushIndex(t, "team/app", "1.0", "linux/amd64", "linux/arm64")
	down := registrytest.New(t)
	downHost := down.Host
	down.Server.Close()

	const goodChart = "apiVersion: v2\nname: bad\nversion: 1.0.0\nappVersion: \"1.0.0\"\n"
	const d1 = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	const d2 = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
	block := func(host, tag, digest string) string {
		return "app:\n  image:\n    repository: " + host + "/team/app\n    tag: \"" + tag + "\"\n    digest: " + digest + "\n"
	}
	// d1 moves to d2, both recorded with their platforms.
	const movedLock = "example.org/team/app:1.0: {digest: " + d2 + ", platforms: [linux/amd64]}\n" +
		"example.org/team/app@" + d1 + ": {digest: " + d1 + ", platforms: [linux/amd64]}\n"
	cases := []struct {
		name  string
		files map[string]string // "other/..." is a second chart, pinnable on its own
		args  []string          // flags; starting with --insecure-registry: resolve online
		lock  string            // the --digests lock of an offline case
		want  []string
		code  int
	}{
		{name: "malformed YAML", files: map[string]string{"Chart.yaml": goodChart, "values.yaml": "app:\n  image:\n    tag: [1.0\n"},
			want: []string{"values.yaml:2: parsing yaml: did not find expected", "fix the file and retry"}, code: 2},
		{name: "duplicate keys", files: map[string]string{"Chart.yaml": goodChart, "values.yaml": block(reg.Host, "1.0", `""`) + "    digest: \"\"\n"},
			want: []string{"values.yaml:6: mapping key \"digest\" already defined at line 5"}, code: 2},
		{name: "two candidate locations for one pin", files: map[string]string{"Chart.yaml": goodChart, "values.yaml": "app:\n  image:\n    repository: " + reg.Host + "/team/app\n" +
			"    tag: \"1.0@" + d1 + "\"\n    digest: \"\"\n"},
			want: []string{"values.yaml:3: ambiguous pin: app.image.tag (line 4) and app.image.digest (line 5) hold the same image's digest"}, code: 2},
		{name: "missing Chart.yaml", files: map[string]string{"values.yaml": block(reg.Host, "1.0", `""`)},
			want: []string{"no Chart.yaml; pass a chart directory"}, code: 2},
		{name: "missing values.yaml", files: map[string]string{"Chart.yaml": goodChart},
			want: []string{"reading values:", "values.yaml"}, code: 2},
		{name: "non-semver version", files: map[string]string{"Chart.yaml": "apiVersion: v2\nname: bad\nversion: 1.0\n", "values.yaml": block(reg.Host, "1.0", `""`)},
			want: []string{"Chart.yaml:3: version \"1.0\" is not a semantic version"}, code: 2},
		{name: "lockstep chart whose version and appVersion differ",
			files: map[string]string{"Chart.yaml": "apiVersion: v2\nname: bad\nversion: 1.0.1\nappVersion: 1.0.0\n", "values.yaml": block(reg.Host, "1.0", `""`),
				"chartpin.yaml": "charts:\n  - dir: .\n    appVersion: lockstep\n    images:\n      - at: app.image\n"},
			want: []string{"lockstep chart has version 1.0.1 but appVersion 1.0.0"}, code: 2},
		{name: "unknown tag", files: map[string]string{"Chart.yaml": goodChart, "values.yaml": block(reg.Host, "9.9", `""`)},
			args: []string{"--insecure-registry", reg.Host},
			want: []string{"values.yaml:5 (app.image.digest): image " + reg.Host + "/team/app:9.9:", "image not found"}, code: 1},
		{name: "registry down", files: map[string]string{"Chart.yaml": goodChart, "values.yaml": block(downHost, "1.0", `""`)},
			args: []string{"--insecure-registry", downHost},
			want: []string{"values.yaml:5 (app.image.digest): image " + downHost + "/team/app:1.0:"}, code: 1},
		{name: "not in the lock file", files: map[string]string{"Chart.yaml": goodChart, "values.yaml": block("example.org", "1.0", `""`)},
			lock: "example.org/team/other:1.0: " + d1 + "\n",
			want: []string{"values.yaml:5 (app.image.digest): image example.org/team/app:1.0:", "not in digest lock file"}, code: 1},
		{name: "platforms required, lock entry without platforms",
			files: map[string]string{"Chart.yaml": goodChart, "values.yaml": block("example.org", "1.0", `""`),
				"chartpin.yaml": "charts:\n  - dir: .\n    images:\n      - at: app.image\n        platforms: [linux/amd64, linux/arm64]\n"},
			lock: "example.org/team/app:1.0: " + d1 + "\n",
			want: []string{"values.yaml:5 (app.image.digest): image example.org/team/app:1.0: refusing to pin " + d1, "the lock entry has no platforms"}, code: 1},
		{name: "versions offline",
			files: map[string]string{"Chart.yaml": goodChart, "values.yaml": block("example.org", "1.0", `""`),
				"chartpin.yaml": "charts:\n  - dir: .\n    images:\n      - at: app.image\n        versions: \"<2\"\n"},
			lock: "example.org/team/app:1.0: " + d1 + "\n",
			want: []string{"values.yaml:5 (app.image.digest): image example.org/team/app: listing tags for versions \"<2\"", "not supported"}, code: 1},
		{name: "unknown --set-tag path", files: map[string]string{"Chart.yaml": goodChart, "values.yaml": block("example.org", "1.0", `""`)},
			args: []string{"--set-tag", "app.nope=2.0"},
			want: []string{"--set-tag app.nope=2.0: no image at app.nope (images with a tag: app.image)"}, code: 2},
		{name: "empty when: is no condition, so it is refused",
			files: map[string]string{"Chart.yaml": goodChart, "values.yaml": block("example.org", "1.0", `""`),
				"chartpin.yaml": "charts:\n  - dir: .\n    images:\n      - at: app.image\n        when: \"\"\n"},
			lock: "example.org/team/app:1.0: " + d1 + "\n",
			want: []string{"chartpin.yaml:5: when: is empty"}, code: 2},
		{name: "one digest scalar shared by two images through an anchor",
			files: map[string]string{"Chart.yaml": goodChart, "values.yaml": "a:\n  repository: example.org/team/a\n  tag: \"1.0\"\n  digest: &dg \"\"\n" +
				"b:\n  repository: example.org/team/b\n  tag: \"1.0\"\n  digest: *dg\n"},
			lock: "example.org/team/a:1.0: " + d1 + "\nexample.org/team/b:1.0: " + d2 + "\n",
			want: []string{"values.yaml: ambiguous pin: a.digest (line 4, image example.org/team/a:1.0) and b.digest (line 8, image example.org/team/b:1.0) read one scalar (line 4)",
				"need " + d1 + " and " + d2, "at line 8, write the value instead of the alias"}, code: 2},
		{name: "an alias pin of an anchor another key holds",
			files: map[string]string{"Chart.yaml": goodChart, "values.yaml": "shared: &dg \"\"\napp:\n  repository: example.org/team/app\n  tag: \"1.0\"\n  digest: *dg\n"},
			lock:  "example.org/team/app:1.0: " + d1 + "\n",
			want:  []string{"values.yaml: pinning app.digest (line 5) to " + d1 + " would change the scalar at line 1, which shared (line 1) also reads through the anchor &dg"}, code: 2},
		{name: "a configured alias pin of an anchor another key holds",
			files: map[string]string{"Chart.yaml": goodChart, "values.yaml": "shared: &dg \"\"\napp:\n  repository: example.org/team/app\n  tag: \"1.0\"\n  digest: *dg\n",
				"chartpin.yaml": "charts:\n  - dir: .\n    images:\n      - at: app\n"},
			lock: "example.org/team/app:1.0: " + d1 + "\n",
			want: []string{"values.yaml: pinning app.digest (line 5) to " + d1 + " would change the scalar at line 1, which shared (line 1) also reads through the anchor &dg"}, code: 2},
		{name: "a merged block with its own repository shares the base's digest",
			files: map[string]string{"Chart.yaml": goodChart, "values.yaml": "base: &base\n  repository: example.org/team/app\n  tag: \"1.0\"\n  digest: \"\"\n" +
				"web:\n  <<: *base\nworker:\n  <<: *base\n  repository: example.org/team/worker\n"},
			lock: "example.org/team/app:1.0: " + d1 + "\nexample.org/team/worker:1.0: " + d2 + "\n",
			want: []string{"values.yaml: ambiguous pin: base.digest (line 4, image example.org/team/app:1.0) and worker.digest (line 8, image example.org/team/worker:1.0)",
				"set the key in the block instead of taking it through the << merge"}, code: 2},
		{name: "configured path missing from values",
			files: map[string]string{"Chart.yaml": goodChart, "values.yaml": block("example.org", "1.0", `""`),
				"chartpin.yaml": "charts:\n  - dir: .\n    images:\n      - at: app.sidecar\n"},
			want: []string{"chartpin.yaml:4: image app.sidecar:", "no key \"sidecar\" under app"}, code: 2},
		{name: "stale variant pin beside a moving digest",
			files: map[string]string{"Chart.yaml": goodChart, "values.yaml": "app:\n  image:\n    repository: example.org/team/app\n    tag: \"1.0\"\n" +
				"    digest: " + d1 + "\n    digestChroot: " + d1 + "\n"},
			lock: movedLock,
			want: []string{"values.yaml:6 (app.image.digestChroot): image app.image: its block moves but this pin cannot follow it", "configure it in chartpin.yaml"}, code: 1},
		{name: "copy of the old digest without --rewrite-copies",
			files: map[string]string{"Chart.yaml": goodChart, "values.yaml": block("example.org", "1.0", d1), "templates/NOTES.txt": "# pinned " + d1 + "\n"},
			lock:  movedLock,
			want:  []string{"templates/NOTES.txt:1: " + d1 + " (old digest of app.image.digest)", "rerun with --rewrite-copies to update them, or remove them"}, code: 1},
		{name: "a pinnable chart beside a failing one: neither is written",
			files: map[string]string{"Chart.yaml": goodChart, "values.yaml": block("example.org", "1.0", d1), "templates/NOTES.txt": "# pinned " + d1 + "\n",
				"other/Chart.yaml": goodChart, "other/values.yaml": block("example.org", "1.0", d1)},
			lock: movedLock,
			want: []string{"templates/NOTES.txt:1: " + d1}, code: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "chart")
			for name, body := range tc.files {
				p := filepath.Join(dir, name)
				if strings.HasPrefix(name, "other/") {
					p = filepath.Join(root, name)
				}
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(body), 0o640); err != nil {
					t.Fatal(err)
				}
			}
			// Online cases name their registry (a global flag, before
			// "pin"); every other case resolves from a lock file.
			var args []string
			if len(tc.args) > 0 && tc.args[0] == "--insecure-registry" {
				args = append(append(args, tc.args...), "pin")
			} else {
				args = append(append(args, "pin"), tc.args...)
				lock := filepath.Join(t.TempDir(), "digests.yaml")
				if err := os.WriteFile(lock, []byte(tc.lock), 0o644); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--digests", lock)
			}
			if _, ok := tc.files["chartpin.yaml"]; ok {
				args = append(args, "--config", filepath.Join(dir, "chartpin.yaml"))
			} else {
				// The pinnable chart goes first: its edits are planned in
				// full before the other chart is refused.
				if _, ok := tc.files["other/Chart.yaml"]; ok {
					args = append(args, filepath.Join(root, "other"))
				}
				args = append(args, dir)
			}
			before := hashDir(t, root)
			stdout, stderr, code := runCLI(t, args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr:\n%s\nwant it to contain %q", stderr, w)
				}
			}
			if !strings.Contains(stderr, dir) && tc.name != "unknown --set-tag path" {
				t.Errorf("stderr %q does not name the file", stderr)
			}
			after := hashDir(t, root)
			if len(after) != len(before) {
				t.Errorf("%d files became %d", len(before), len(after))
			}
			for p, h := range before {
				if after[p] != h {
					t.Errorf("%s written (bytes or mode changed), want untouched", p)
				}
			}
		})
	}
}

// One scalar shared through an anchor or a << merge is written once, only
// when every pin reading it wants the same value: a shared digest already
// right for one image is never flipped to another's (every later run would
// flip it back), and agreeing pins make one edit, reported for each path.
func TestPinSharedAnchor(t *testing.T) {
	t.Setenv("GITHUB_ACTIONS", "")
	reg := registrytest.New(t)
	// Two images of one repository: the old pin's platforms are readable for
	// both, so nothing else stops b from moving the scalar a is right for.
	da := reg.PushIndex(t, "team/a", "1.0", "linux/amd64", "linux/arm64")
	reg.PushIndex(t, "team/a", "2.0", "linux/amd64", "linux/arm64")
	dir := t.TempDir()
	chart := "apiVersion: v2\nname: app\nversion: 0.1.0\nappVersion: \"0.1.0\"\n"
	write := func(values string) {
		t.Helper()
		for n, b := range map[string]string{"Chart.yaml": chart, "values.yaml": values} {
			if err := os.WriteFile(filepath.Join(dir, n), []byte(b), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("a:\n  repository: " + reg.Host + "/team/a\n  tag: \"1.0\"\n  digest: &dg " + da + "\n" +
		"b:\n  repository: " + reg.Host + "/team/a\n  tag: \"2.0\"\n  digest: *dg\n")
	before := treeBytes(t, dir)
	_, stderr, code := runCLI(t, "--insecure-registry", reg.Host, "pin", dir)
	if code != 2 || !strings.Contains(stderr, "ambiguous pin: a.digest (line 4, image "+reg.Host+"/team/a:1.0) and b.digest (line 8, image "+reg.Host+"/team/a:2.0)") {
		t.Errorf("shared scalar right for a: exit %d\n%s", code, stderr)
	}
	if after := treeBytes(t, dir); after != before {
		t.Errorf("files changed:\n%s", after)
	}

	values := "base: &base\n  repository: " + reg.Host + "/team/a\n  tag: \"1.0\"\n  digest: &dg \"\"\nweb:\n  <<: *base\n" +
		"other:\n  repository: " + reg.Host + "/team/a\n  tag: \"1.0\"\n  digest: *dg\n"
	write(values)
	stdout, stderr, code := runCLI(t, "--insecure-registry", reg.Host, "pin", dir)
	if code != 0 {
		t.Fatalf("agreeing pins: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, p := range []string{"base.digest", "web.digest", "other.digest"} {
		if !strings.Contains(stdout, "values.yaml:4 "+p+" "+reg.Host+"/team/a:1.0 (none) -> "+da[:19]) {
			t.Errorf("%s not reported:\n%s", p, stdout)
		}
	}
	got, _ := os.ReadFile(filepath.Join(dir, "values.yaml"))
	if want := strings.Replace(values, `&dg ""`, `&dg "`+da+`"`, 1); string(got) != want {
		t.Errorf("values.yaml:\n%s\nwant:\n%s", got, want)
	}

	// A block whose repository and tag come through a << merge is pinned,
	// not skipped: Helm renders it with the merged keys.
	values = "defaults: &defaults\n  repository: " + reg.Host + "/team/a\n  tag: \"1.0\"\nimage:\n  <<: *defaults\n  digest: \"\"\n"
	write(values)
	if stdout, stderr, code := runCLI(t, "--insecure-registry", reg.Host, "pin", dir); code != 0 || strings.Contains(stdout, "SKIPPED") {
		t.Fatalf("merged block: exit %d\n%s%s", code, stdout, stderr)
	}
	got, _ = os.ReadFile(filepath.Join(dir, "values.yaml"))
	if want := strings.Replace(values, `digest: ""`, `digest: "`+da+`"`, 1); string(got) != want {
		t.Errorf("values.yaml:\n%s\nwant:\n%s", got, want)
	}
}

// --write-digests never replaces or joins a chart file, and --dry-run and
// the read-only commands write nothing at all: each case is refused before
// any registry request, exit 2, with every file's bytes unchanged.
func TestWriteDigestsNeverTouchesAChart(t *testing.T) {
	reg := registrytest.New(t)
	reg.PushIndex(t, "team/app", "1.0", "linux/amd64", "linux/arm64")
	for _, c := range []struct {
		name string
		args func(dir, outside string) []string
		want string
	}{
		{"dry run", func(dir, outside string) []string {
			return []string{"pin", "--dry-run", "--write-digests", outside + "/digests.yaml", dir}
		}, "--dry-run writes nothing"},
		{"values.yaml", func(dir, outside string) []string {
			return []string{"pin", "--write-digests", dir + "/values.yaml", dir}
		}, "is inside the chart"},
		{"values.yaml, dry run", func(dir, outside string) []string {
			return []string{"pin", "--dry-run", "--write-digests", dir + "/values.yaml", dir}
		}, "--dry-run writes nothing"},
		{"new file in the chart", func(dir, outside string) []string {
			return []string{"resolve", "--write-digests", dir + "/templates/digests.yaml", reg.Host + "/team/app:1.0"}
		}, "is inside the chart"},
		{"a file that is no lock", func(dir, outside string) []string {
			return []string{"resolve", "--write-digests", outside + "/notes.yaml", reg.Host + "/team/app:1.0"}
		}, "is not a digest lock file"},
		{"drift", func(dir, outside string) []string {
			return []string{"drift", "--write-digests", outside + "/digests.yaml", dir}
		}, "flag provided but not defined: -write-digests"},
		{"guard", func(dir, outside string) []string {
			return []string{"guard", "--write-digests", outside + "/digests.yaml", dir}
		}, "flag provided but not defined: -write-digests"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := pinChart(t, reg.Host)
			if err := os.MkdirAll(filepath.Join(dir, "templates"), 0o755); err != nil {
				t.Fatal(err)
			}
			outside := t.TempDir()
			if err := os.WriteFile(filepath.Join(outside, "notes.yaml"), []byte("team: platform\nowners: [a, b]\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			before := treeBytes(t, dir, outside)
			reg.Reset()
			_, errOut, code := runCLI(t, append([]string{"--insecure-registry", reg.Host}, c.args(dir, outside)...)...)
			if code != 2 || !strings.Contains(errOut, c.want) {
				t.Errorf("exit %d, stderr %q; want 2 saying %q", code, errOut, c.want)
			}
			if after := treeBytes(t, dir, outside); after != before {
				t.Errorf("files changed:\nbefore %s\nafter  %s", before, after)
			}
			if n := reg.Count(""); n != 0 {
				t.Errorf("registry saw %v; a refused run sends nothing", reg.Requests())
			}
		})
	}
}

// treeBytes lists every file under dirs with its mode and bytes.
func treeBytes(t *testing.T, dirs ...string) string {
	t.Helper()
	var b strings.Builder
	for _, d := range dirs {
		err := filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			fi, _ := e.Info()
			data, err := os.ReadFile(p)
			fmt.Fprintf(&b, "%s %v %q %v\n", p, fi.Mode(), data, err)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// Lock platforms reach the step summary as escaped Markdown text, and the
// lock's strings stay out of the runner's commands.
func TestPinSummaryEscapesLockPlatforms(t *testing.T) {
	dir := t.TempDir()
	d := "sha256:" + strings.Repeat("cd", 32)
	for n, b := range map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: app\nversion: 0.1.0\nappVersion: \"0.1.0\"\n",
		"values.yaml": "image:\n  repository: ghcr.io/example/app\n  tag: \"1.0\"\n  digest: \"\"\n",
		"lock.yaml":   "ghcr.io/example/app:1.0: {digest: " + d + ", platforms: [linux/amd64, linux/my_arch_, linux/arm64/v8]}\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	summary := filepath.Join(t.TempDir(), "summary.md")
	t.Setenv("GITHUB_ACTIONS", "true")
	t.Setenv("GITHUB_STEP_SUMMARY", summary)
	t.Setenv("GITHUB_OUTPUT", filepath.Join(t.TempDir(), "output"))
	code, out := runCombined(t, "pin", "--digests", filepath.Join(dir, "lock.yaml"), dir)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if c := runnerCommands(out); len(c) != 0 {
		t.Errorf("runner sees commands: %q", c)
	}
	s, _ := os.ReadFile(summary)
	if !strings.Contains(string(s), "| linux/amd64, linux/my\\_arch\\_, linux/arm64/v8 |\n") {
		t.Errorf("summary:\n%s", s)
	}
}
