// Package relpath is the one rule for showing a path relative to a base
// (the working directory, a repository root, the GitHub workspace): a path
// under base becomes a slash path relative to it; any other path is shown
// whole, never as "../..".
package relpath

import (
	"path/filepath"
	"strings"
)

// In returns p relative to base, with forward slashes, when p lies under
// base (or is base); ok is false otherwise.
func In(base, p string) (rel string, ok bool) {
	r, err := filepath.Rel(base, p)
	if err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return "", false
	}
	return filepath.ToSlash(r), true
}

// Show is p relative to base when it lies under base, else p itself.
func Show(base, p string) string {
	if r, ok := In(base, p); ok {
		return r
	}
	return p
}

// Real resolves the symbolic links of p's directory (not of p itself), so
// that a path reached through a linked directory compares with a resolved
// root such as a repository's.
func Real(p string) (string, error) {
	dir, err := filepath.EvalSymlinks(filepath.Dir(p))
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, filepath.Base(p)), nil
}
