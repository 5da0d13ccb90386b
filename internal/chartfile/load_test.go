package chartfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chartpin/chartpin/internal/failure"
)

// TestLoadNamesWhatToPass: every way a chart directory can be wrong is an
// input error (exit 2) that says what to pass, the same for each reader.
func TestLoadNamesWhatToPass(t *testing.T) {
	write := func(t *testing.T, dir, name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string) string
		want  string
	}{
		{"missing dir", func(t *testing.T, dir string) string { return filepath.Join(dir, "nope") },
			"/nope: not a directory; name a chart directory holding Chart.yaml and values.yaml"},
		{"a file", func(t *testing.T, dir string) string { write(t, dir, "f", "x"); return filepath.Join(dir, "f") },
			"/f: not a directory; name a chart directory holding Chart.yaml and values.yaml"},
		{"no Chart.yaml", func(t *testing.T, dir string) string { write(t, dir, ValuesFile, "a: 1\n"); return dir },
			"no Chart.yaml; pass a chart directory"},
		{"no values.yaml", func(t *testing.T, dir string) string { write(t, dir, ChartFile, "version: 1.0.0\n"); return dir },
			"values.yaml: no such file or directory; pins live in the chart's default values.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.setup(t, t.TempDir())
			l, err := Load(dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !failure.IsInput(err) {
				t.Fatalf("Load = %v, %v; want an input error containing %q", l, err, tc.want)
			}
		})
	}
	dir := t.TempDir()
	write(t, dir, ChartFile, "version: 1.0.0\n")
	write(t, dir, ValuesFile, "a: 1\n")
	l, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if l.ChartPath != filepath.Join(dir, ChartFile) || string(l.Chart) != "version: 1.0.0\n" ||
		l.ValuesPath != filepath.Join(dir, ValuesFile) || string(l.Values) != "a: 1\n" {
		t.Errorf("Load = %+v", l)
	}
}

// TestReplaceRefusesAChangedFile: Replace writes only over the bytes the
// plan was made from, and keeps the file's mode.
func TestReplaceRefusesAChangedFile(t *testing.T) {
	name := filepath.Join(t.TempDir(), ChartFile)
	if err := os.WriteFile(name, []byte("version: 1.0.0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := Replace(name, []byte("version: 0.9.0\n"), []byte("version: 2.0.0\n"))
	if err == nil || !strings.Contains(err.Error(), name+" changed on disk since it was read; nothing written") {
		t.Fatalf("Replace over an edited file = %v", err)
	}
	if b, _ := os.ReadFile(name); string(b) != "version: 1.0.0\n" {
		t.Fatalf("refused Replace wrote %q", b)
	}
	if err := Replace(name, []byte("version: 1.0.0\n"), []byte("version: 1.0.1\n")); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(name)
	if b, _ := os.ReadFile(name); err != nil || string(b) != "version: 1.0.1\n" || fi.Mode().Perm() != 0o600 {
		t.Fatalf("after Replace: %q, %v, %v", b, fi.Mode(), err)
	}
}
