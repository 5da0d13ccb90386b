package atomicfile

import (
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestWriteFileKeepsMode(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "values.yaml")
	if err := os.WriteFile(name, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(name, 0o664); err != nil { // beat the umask
		t.Fatal(err)
	}
	if err := WriteFile(name, []byte("new\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o664 {
		t.Errorf("mode = %o, want 664", got)
	}
	if b, _ := os.ReadFile(name); string(b) != "new\n" {
		t.Errorf("content = %q", b)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
}

func TestWriteFileNewFileGetsPerm(t *testing.T) {
	name := filepath.Join(t.TempDir(), "index.yaml")
	if err := WriteFile(name, []byte("x"), 0o640); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(name)
	if got := fi.Mode().Perm(); got != 0o640 {
		t.Errorf("mode = %o, want 640", got)
	}
}

func TestWriteFileMissingDirLeavesNothing(t *testing.T) {
	if err := WriteFile(filepath.Join(t.TempDir(), "no", "such"), []byte("x"), 0o644); err == nil {
		t.Fatal("want an error for a missing directory")
	}
}

// A chart whose values.yaml links to a shared file: the shared file gets the
// new bytes and the link stays a link.
func TestWriteFileFollowsSymlink(t *testing.T) {
	dir := t.TempDir()
	shared := filepath.Join(dir, "shared.yaml")
	if err := os.WriteFile(shared, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "values.yaml")
	if err := os.Symlink("shared.yaml", link); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(link, []byte("new\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("values.yaml is no longer a symlink: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(shared); string(b) != "new\n" {
		t.Errorf("shared file = %q, want the new bytes", b)
	}
}

// The new bytes arrive by rename, never by writing into the file: a reader
// that opened the file before keeps reading the old bytes whole, and the
// name points at a new inode (a crash mid-write leaves the old file intact).
func TestWriteFileReplacesNotRewrites(t *testing.T) {
	name := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(name, []byte("old bytes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	reader, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	before, _ := os.Stat(name)
	if err := WriteFile(name, []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := io.ReadAll(reader); string(got) != "old bytes\n" {
		t.Errorf("a reader of the old file saw %q, want the old bytes whole", got)
	}
	after, _ := os.Stat(name)
	if before.Sys().(*syscall.Stat_t).Ino == after.Sys().(*syscall.Stat_t).Ino {
		t.Error("same inode: the file was written in place, not replaced")
	}
	if got, _ := os.ReadFile(name); string(got) != "new\n" {
		t.Errorf("content %q", got)
	}
}
