package pin

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/chartpin/chartpin/internal/atomicfile"
	"github.com/chartpin/chartpin/internal/golden"
	"github.com/chartpin/chartpin/internal/testenv"
)

// planCase plans testdata/<name> in a temporary copy (nothing applied).
func planCase(t *testing.T, name string, rewrite bool) (*Result, string) {
	t.Helper()
	work := t.TempDir()
	golden.WriteTree(t, work, golden.ReadTree(t, filepath.Join("testdata", name, "original")))
	var gc goldenCase
	if data, err := os.ReadFile(filepath.Join("testdata", name, "case.yaml")); err == nil {
		if err := yaml.Unmarshal(data, &gc); err != nil {
			t.Fatal(err)
		}
	}
	opts := Options{ChartDirs: []string{work}, Resolver: offline(t, filepath.Join("testdata", name, "digests.yaml")),
		RewriteCopies: rewrite, SetTags: gc.SetTags}
	if _, err := os.Stat(filepath.Join(work, "chartpin.yaml")); err == nil {
		opts.ConfigPath, opts.ChartDirs = filepath.Join(work, "chartpin.yaml"), nil
	}
	res, err := Plan(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return res, work
}

// The unified diff is a real patch: git apply turns before into after.
func TestDiffApplies(t *testing.T) {
	git := testenv.RequireBinary(t, "git", "git")
	for _, name := range []string{"quoting", "crlf-karpenter", "kube-prometheus-stack"} {
		t.Run(name, func(t *testing.T) {
			res, work := planCase(t, name, false)
			wd, _ := os.Getwd()
			if err := os.Chdir(work); err != nil {
				t.Fatal(err)
			}
			diff := res.Diff()
			os.Chdir(wd)
			if !strings.HasPrefix(diff, "--- a/values.yaml\n+++ b/values.yaml\n@@ ") {
				t.Fatalf("diff header:\n%.200s", diff)
			}
			cmd := exec.Command(git, "apply", "--whitespace=nowarn", "-")
			cmd.Dir = work
			cmd.Stdin = strings.NewReader(diff)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("git apply: %v\n%s\n%s", err, out, diff)
			}
			for _, f := range res.Files() {
				got, _ := os.ReadFile(f.Path)
				if !bytes.Equal(got, f.After) {
					t.Errorf("%s after git apply differs from the plan", f.Path)
				}
			}
		})
	}
}

func TestViews(t *testing.T) {
	res, _ := planCase(t, "copies", true)
	md := res.Markdown()
	for _, want := range []string{
		"### copies\n",
		"| image | tag | old → new digest | platforms |\n|---|---|---|---|\n",
		"| `ghcr.io/example/ingestor` | `0.8` → `0.8.4` | `sha256:111111111111` → `sha256:4f229cf42c4a` |",
		"Chart version `0.8.2` → `0.8.3`, appVersion `0.8.2` → `0.8.4`.",
		"Copies of old digests rewritten:\n\n- `Chart.yaml:8`\n- `templates/_helpers.tpl:2`\n- `templates/tests/ingestor_test.yaml:7`\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if got, want := res.Subject(), "chart(copies 0.8.3): pin 2 images to index digests"; got != want {
		t.Errorf("subject %q, want %q", got, want)
	}
	txt := res.Text()
	if !strings.Contains(txt, "pinned ") || !strings.Contains(txt, "version 0.8.2 -> 0.8.3, appVersion 0.8.2 -> 0.8.4") {
		t.Errorf("text:\n%s", txt)
	}
	js, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Changed bool          `json:"changed"`
		Files   []string      `json:"files"`
		Charts  []ChartResult `json:"charts"`
	}
	if err := json.Unmarshal(js, &back); err != nil || !back.Changed || len(back.Files) != 4 || len(back.Charts[0].Copies) != 4 {
		t.Errorf("json %s (%v)", js, err)
	}

	// Skipped pins are listed in every view.
	skip, _ := planCase(t, "node-exporter", false)
	if !strings.Contains(skip.Markdown(), "Not pinned (image unknown):") || !strings.Contains(skip.Text(), "SKIPPED") ||
		len(skip.Charts[0].Skipped) != 1 || skip.Charts[0].Skipped[0].Path != "image.digest" {
		t.Errorf("skipped not listed:\n%s\n%s", skip.Markdown(), skip.Text())
	}
}

// Apply refuses when a file changed on disk after Plan, and writes nothing.
func TestApplyRefusesConcurrentChange(t *testing.T) {
	res, work := planCase(t, "copies", true)
	before := hashTree(t, work)
	test := filepath.Join(work, "templates", "tests", "ingestor_test.yaml")
	data, _ := os.ReadFile(test)
	if err := os.WriteFile(test, append(data, "# edited meanwhile\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	edited := hashTree(t, work)
	err := res.Apply()
	if err == nil || !strings.Contains(err.Error(), "changed on disk since it was read") {
		t.Fatalf("Apply: %v", err)
	}
	after := hashTree(t, work)
	for p, h := range edited {
		if after[p] != h {
			t.Errorf("%s written although Apply refused", p)
		}
	}
	if len(before) != len(after) {
		t.Errorf("files added or removed")
	}
}

func TestRender(t *testing.T) {
	const d = "sha256:00000000000000000000000000000000000000000000000000000000000000aa"
	cases := []struct {
		format, repo, current, tag, want string
	}{
		{"digest", "", "", "1", d},
		{"hex", "", "sha256:old", "1", strings.TrimPrefix(d, "sha256:")},
		{"tag@digest", "", "v1@sha256:old", "v2", "v2@" + d},
		{"ref@digest", "docker.io/library/busybox", "busybox:1.36", "1.37", "busybox:1.37@" + d},
		{"ref@digest", "localhost:5000/a/b", "localhost:5000/a/b:1@sha256:old", "2", "localhost:5000/a/b:2@" + d},
		{"ref@digest", "docker.io/library/busybox", "", "1", "docker.io/library/busybox:1@" + d},
	}
	for _, c := range cases {
		p := discoverPin(c.format, c.repo)
		if got := render(p, d, c.tag, c.current); got != c.want {
			t.Errorf("render(%s, %q) = %q, want %q", c.format, c.current, got, c.want)
		}
	}
}

// A write that fails midway restores the files already written: all or nothing.
func TestApplyRestoresOnFailure(t *testing.T) {
	dir := t.TempDir()
	first, second := filepath.Join(dir, "values.yaml"), filepath.Join(dir, "Chart.yaml")
	if err := os.WriteFile(first, []byte("a: 1\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(second, []byte("version: 1.0.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Once values.yaml is written, Chart.yaml becomes a directory that no
	// rename can replace: the second write fails.
	broken := false
	atomicfile.Hook = func(stage, name string) {
		if stage == "renamed" && name == first && !broken {
			broken = true
			if err := os.Remove(second); err != nil {
				t.Error(err)
			}
			if err := os.MkdirAll(filepath.Join(second, "x"), 0o755); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(func() { atomicfile.Hook = nil })
	res := &Result{files: []FileChange{
		{Path: first, Before: []byte("a: 1\n"), After: []byte("a: 2\n"), dir: dir},
		{Path: second, Before: []byte("version: 1.0.0\n"), After: []byte("version: 1.0.1\n"), dir: dir},
	}}
	err := res.Apply()
	if err == nil || !strings.Contains(err.Error(), "files written so far were restored") {
		t.Fatalf("Apply: %v", err)
	}
	if got, _ := os.ReadFile(first); string(got) != "a: 1\n" {
		t.Errorf("first file not restored: %q", got)
	}
	if fi, _ := os.Stat(first); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v after restore", fi.Mode())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("journal or temporary files left: %v", entries)
	}
}

func TestRewriteCopy(t *testing.T) {
	old := strings.Repeat("a", 64)
	nw := strings.Repeat("b", 64)
	m := map[string]*move{old: {oldHex: old, newHex: nw, newTag: "0.8.4"}}
	cases := []struct{ in, out, oldTok, newTok string }{
		{"value: host/x@sha256:" + old + "\n", "value: host/x@sha256:" + nw + "\n", "host/x@sha256:" + old, "host/x@sha256:" + nw},
		{"image: host:5000/x:0.8.2@sha256:" + old, "image: host:5000/x:0.8.4@sha256:" + nw, "host:5000/x:0.8.2@sha256:" + old, "host:5000/x:0.8.4@sha256:" + nw},
		{`default "` + old + `"`, `default "` + nw + `"`, old, nw},
		{"tag: v0.8.2@sha256:" + old, "tag: 0.8.4@sha256:" + nw, "v0.8.2@sha256:" + old, "0.8.4@sha256:" + nw},
		{"a sha256:" + old + " b sha256:" + old, "a sha256:" + nw + " b sha256:" + nw, "sha256:" + old, "sha256:" + nw},
	}
	for _, c := range cases {
		out, o, n := rewrite(c.in, m)
		if out != c.out || o != c.oldTok || n != c.newTok {
			t.Errorf("rewrite(%q) = %q [%s -> %s]\nwant %q [%s -> %s]", c.in, out, o, n, c.out, c.oldTok, c.newTok)
		}
	}
}

// Two pins on one line, one moving to the digest the other moves from: each
// old digest is replaced once, and the report names the first on the line,
// whatever order the map is read in.
func TestRewriteChainedMoves(t *testing.T) {
	x, y, z := strings.Repeat("1", 64), strings.Repeat("2", 64), strings.Repeat("3", 64)
	m := map[string]*move{
		x: {oldHex: x, newHex: y, pin: "a.digest"},
		y: {oldHex: y, newHex: z, pin: "b.digest"},
	}
	in := "# a sha256:" + x + ", b sha256:" + y
	for range 50 { // map order varies between reads
		out, o, n := rewrite(in, m)
		if want := "# a sha256:" + y + ", b sha256:" + z; out != want || o != "sha256:"+x || n != "sha256:"+y {
			t.Fatalf("rewrite = %q [%s -> %s], want %q [sha256:%s -> sha256:%s]", out, o, n, want, x, y)
		}
		if first, _ := firstMove(in, m); first.pin != "a.digest" {
			t.Fatalf("credited to %s, want a.digest (its digest comes first)", first.pin)
		}
	}
}

func TestVersionChange(t *testing.T) {
	arrow := func(a, b string) string { return a + " -> " + b }
	for _, c := range []struct {
		in   ChartResult
		want string
	}{
		{ChartResult{OldVersion: "1.0.0", NewVersion: "1.0.1", OldAppVersion: "1.0.0", NewAppVersion: "1.0.1"}, "version 1.0.0 -> 1.0.1, appVersion 1.0.0 -> 1.0.1"},
		{ChartResult{OldVersion: "1.0.0", NewVersion: "1.0.1", OldAppVersion: "v0.93.1", NewAppVersion: "v0.93.1"}, "version 1.0.0 -> 1.0.1, appVersion v0.93.1 (unchanged)"},
		{ChartResult{OldVersion: "1.0.0", NewVersion: "1.0.1", NewAppVersion: "1.0.1"}, "version 1.0.0 -> 1.0.1, appVersion (none) -> 1.0.1"},
		{ChartResult{OldVersion: "1.0.0", NewVersion: "1.0.1"}, "version 1.0.0 -> 1.0.1"},
		{ChartResult{OldVersion: "1.0.0", NewVersion: "1.0.0", OldAppVersion: "2", NewAppVersion: "2"}, ""},
	} {
		if got := versionChange(c.in, arrow); got != c.want {
			t.Errorf("versionChange(%+v) = %q, want %q", c.in, got, c.want)
		}
	}
}
