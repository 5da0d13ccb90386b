package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBumpCommand(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "Chart.yaml")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	read := func() string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	orig := "name: app\n# chart\nversion: 0.1.0\nappVersion: \"v0.1.0\" # app\ndependencies:\n  - name: lib\n    version: 0.1.0\n"
	write(orig)

	cases := []struct {
		args     []string
		code     int
		out      string
		contents string
	}{
		{[]string{dir, "--dry-run"}, 0, "would bump (dry run, nothing written) version 0.1.0 -> 0.1.1", orig}, // flags after CHART_DIR work too
		{[]string{"--dry-run", dir}, 0, "would bump (dry run, nothing written) version 0.1.0 -> 0.1.1, appVersion v0.1.0 -> v0.1.1", orig},
		{[]string{dir}, 0, "bumped version 0.1.0 -> 0.1.1, appVersion v0.1.0 -> v0.1.1",
			"name: app\n# chart\nversion: 0.1.1\nappVersion: \"v0.1.1\" # app\ndependencies:\n  - name: lib\n    version: 0.1.0\n"},
		{[]string{dir, "0.1.1"}, 0, "nothing to change", ""},
		{[]string{dir, "minor"}, 0, "version 0.1.1 -> 0.2.0, appVersion v0.1.1 -> v0.2.0", ""},
		{[]string{"--app-version", "v0.3.0", dir}, 0, "version 0.2.0 -> 0.3.0, appVersion v0.2.0 -> v0.3.0", ""},
		{[]string{dir, "0.2.9"}, 2, "new version 0.2.9 is lower than the current 0.3.0", ""},
		{[]string{dir, "banana"}, 2, `new version "banana" is not a semantic version`, ""},
		{[]string{dir, "patch", "extra"}, 2, "want CHART_DIR", ""},
		{[]string{}, 2, "want CHART_DIR", ""},
		{[]string{t.TempDir()}, 2, "no Chart.yaml", ""},
	}
	for _, c := range cases {
		before := read()
		code, out := runCombined(t, append([]string{"bump"}, c.args...)...)
		if code != c.code || !strings.Contains(out, c.out) {
			t.Fatalf("bump %v: exit %d, output %q; want exit %d with %q", c.args, code, out, c.code, c.out)
		}
		after := read()
		switch {
		case c.contents != "" && after != c.contents:
			t.Fatalf("bump %v: file\n%s\nwant\n%s", c.args, after, c.contents)
		case code != 0 && after != before:
			t.Fatalf("bump %v failed but changed the file", c.args)
		}
	}

	write("version: 1.0.0\nappVersion: 2.0.0\n")
	code, out := runCombined(t, "bump", "--app-version-policy", "lockstep", dir)
	if code != 2 || !strings.Contains(out, "say which wins") {
		t.Fatalf("lockstep mismatch: exit %d: %s", code, out)
	}
	if read() != "version: 1.0.0\nappVersion: 2.0.0\n" {
		t.Fatal("refused bump wrote")
	}
}
