// Package golden compares test output with files under testdata, and
// rewrites them with `go test -update`.
package golden

import (
	"bytes"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// Update is the -update flag of every test binary that imports golden.
var Update = flag.Bool("update", false, "rewrite the golden files under testdata from the current output")

// Check compares got with testdata/name, or rewrites that file under -update.
func Check(t testing.TB, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *Update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run go test -update once): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file\n--- got ---\n%s\n--- want ---\n%s", name, got, want)
	}
}

// Tree compares the files under dir with the tree under want (a folder of
// testdata) byte for byte: an extra or missing file fails as surely as a
// changed one. Under -update it first replaces want with dir's files.
func Tree(t testing.TB, dir, want string) {
	t.Helper()
	got := ReadTree(t, dir)
	if *Update {
		if err := os.RemoveAll(want); err != nil {
			t.Fatal(err)
		}
		WriteTree(t, want, got)
	}
	SameTree(t, want, got, ReadTree(t, want))
}

// SameTree reports each file missing from got, extra in got, or different
// from want (trees as ReadTree returns them), after what.
func SameTree(t testing.TB, what string, got, want map[string][]byte) {
	t.Helper()
	var names []string
	for n := range got {
		names = append(names, n)
	}
	for n := range want {
		if _, ok := got[n]; !ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		g, gok := got[n]
		w, wok := want[n]
		switch {
		case !wok:
			t.Errorf("%s: extra file %s", what, n)
		case !gok:
			t.Errorf("%s: missing file %s", what, n)
		case !bytes.Equal(g, w):
			t.Errorf("%s: %s differs (first at line %d)\n--- got ---\n%s\n--- want ---\n%s", what, n, firstDiffLine(g, w), g, w)
		}
	}
}

// firstDiffLine is the 1-based line where a and b first differ.
func firstDiffLine(a, b []byte) int {
	line := 1
	for i := 0; i < len(a) && i < len(b) && a[i] == b[i]; i++ {
		if a[i] == '\n' {
			line++
		}
	}
	return line
}

// ReadTree returns the bytes of every file under dir by slash-separated
// relative path, so two trees compare as whole maps: an extra or missing
// file fails as surely as a changed one.
func ReadTree(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		out[filepath.ToSlash(rel)], err = os.ReadFile(path)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// WriteTree writes files (relative path → bytes, as ReadTree returns them)
// under dir, creating folders; ReadTree then WriteTree copies a tree.
func WriteTree(t testing.TB, dir string, files map[string][]byte) {
	t.Helper()
	for rel, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
