package relpath

import (
	"os"
	"path/filepath"
	"testing"
)

func TestIn(t *testing.T) {
	for _, c := range []struct {
		base, p, want string
		ok            bool
	}{
		{"/work", "/work/charts/app/values.yaml", "charts/app/values.yaml", true},
		{"/work", "/work", ".", true},
		{"/work", "/work/..hidden/values.yaml", "..hidden/values.yaml", true}, // a name starting with "..", still inside
		{"/work", "/other/values.yaml", "", false},
		{"/work", "/work2/values.yaml", "", false},
		{"/work/a", "/work", "", false},
	} {
		got, ok := In(c.base, c.p)
		if got != c.want || ok != c.ok {
			t.Errorf("In(%q, %q) = %q, %v; want %q, %v", c.base, c.p, got, ok, c.want, c.ok)
		}
	}
	if got := Show("/work", "/other/x"); got != "/other/x" {
		t.Errorf("Show outside = %q, want the path whole", got)
	}
}

func TestReal(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "real"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "real"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	got, err := Real(filepath.Join(dir, "link", "values.yaml"))
	want, _ := filepath.EvalSymlinks(filepath.Join(dir, "real"))
	if err != nil || got != filepath.Join(want, "values.yaml") {
		t.Errorf("Real = %q, %v; want %q", got, err, filepath.Join(want, "values.yaml"))
	}
}
