// Package atomicfile writes files so that a reader sees the old bytes or the
// new bytes, never a mix, and the file keeps its mode (an `mv` of a temp file
// once reset values.yaml to 0600).
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
)

// Hook, when set, is called with "rename" just before a write's temporary
// file replaces name and with "renamed" just after: the seam through which
// tests crash a run at each write step. Always nil in chartpin itself.
var Hook func(stage, name string)

// TempRE matches the names of the temporary files WriteFile creates; a run
// that holds a chart's lock removes the ones a killed run left.
var TempRE = regexp.MustCompile(`^\..+\.chartpin-[0-9]+$`)

// WriteFile replaces name with data through a temporary file in the same
// directory and a rename. An existing file keeps its permission bits; a new
// one gets perm. A symlink is followed: its target is replaced, the link stays.
func WriteFile(name string, data []byte, perm fs.FileMode) error {
	return WriteFileVia("", name, data, perm)
}

// WriteFileVia is WriteFile with the temporary file in tmpDir ("" is name's
// directory). A tmpDir on another filesystem falls back to name's directory,
// since a rename cannot cross filesystems.
func WriteFileVia(tmpDir, name string, data []byte, perm fs.FileMode) error {
	if target, err := filepath.EvalSymlinks(name); err == nil {
		name = target
	}
	if fi, err := os.Stat(name); err == nil {
		perm = fi.Mode().Perm()
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	if tmpDir == "" {
		tmpDir = filepath.Dir(name)
	}
	err := write(tmpDir, name, data, perm)
	if errors.Is(err, syscall.EXDEV) && tmpDir != filepath.Dir(name) {
		err = write(filepath.Dir(name), name, data, perm)
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}

func write(tmpDir, name string, data []byte, perm fs.FileMode) error {
	tmp, err := os.CreateTemp(tmpDir, "."+filepath.Base(name)+".chartpin-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if Hook != nil {
		Hook("rename", name)
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		return err
	}
	if Hook != nil {
		Hook("renamed", name)
	}
	return nil
}
