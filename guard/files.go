package guard

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"helm.sh/helm/v3/pkg/ignore"
)

// packaged maps each file helm package would include (chart-relative,
// slash-separated) to its git blob hash. Comparing hashes needs no diff, so
// a change of any size is seen (the shell guard truncated diffs at 64 KiB).
type packaged map[string]plumbing.Hash

// diff lists the files added, removed or modified between a and b, sorted.
func diff(a, b packaged) []string {
	var out []string
	for f, h := range a {
		if h2, ok := b[f]; !ok || h2 != h {
			out = append(out, f)
		}
	}
	for f := range b {
		if _, ok := a[f]; !ok {
			out = append(out, f)
		}
	}
	sort.Strings(out)
	return out
}

// fileInfo is the part of os.FileInfo that .helmignore rules look at.
type fileInfo struct {
	name string
	dir  bool
}

func (f fileInfo) Name() string       { return f.name }
func (f fileInfo) Size() int64        { return 0 }
func (f fileInfo) Mode() fs.FileMode  { return 0 }
func (f fileInfo) ModTime() time.Time { return time.Time{} }
func (f fileInfo) IsDir() bool        { return f.dir }
func (f fileInfo) Sys() any           { return nil }

func rules(data []byte, have bool) (*ignore.Rules, error) {
	r := ignore.Empty()
	if have {
		var err error
		if r, err = ignore.Parse(bytes.NewReader(data)); err != nil {
			return nil, fmt.Errorf("parsing .helmignore: %w", err)
		}
	}
	r.AddDefaults()
	return r, nil
}

// diskFiles returns the packaged files of the chart in dir as helm package
// would select them, or nil when dir holds no Chart.yaml.
func diskFiles(dir string) (packaged, error) {
	if _, err := os.Lstat(filepath.Join(dir, "Chart.yaml")); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	ig, err := os.ReadFile(filepath.Join(dir, ignore.HelmIgnore))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	r, err := rules(ig, err == nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, ignore.HelmIgnore), err)
	}
	out := packaged{}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			// git's own directory is never content (a chart at the repository root).
			if d.Name() == ".git" || r.Ignore(rel, fileInfo{d.Name(), true}) {
				return filepath.SkipDir
			}
			return nil
		}
		if r.Ignore(rel, fileInfo{d.Name(), false}) {
			return nil
		}
		var data []byte
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			// git stores a link as its target; compare like with like.
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			data = []byte(target)
		case d.Type().IsRegular():
			if data, err = os.ReadFile(p); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: not a regular file; helm package refuses it", p)
		}
		out[rel] = plumbing.ComputeHash(plumbing.BlobObject, data)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// treeFiles is diskFiles for a chart directory in a commit's tree.
func (g *guard) treeFiles(tree *object.Tree, dir string) (packaged, error) {
	sub := tree
	if dir != "." {
		var err error
		if sub, err = tree.Tree(dir); err != nil {
			if errors.Is(err, object.ErrDirectoryNotFound) {
				return nil, nil
			}
			return nil, err
		}
	}
	if _, err := sub.FindEntry("Chart.yaml"); err != nil {
		if errors.Is(err, object.ErrEntryNotFound) {
			return nil, nil
		}
		return nil, err
	}
	var ig []byte
	have := false
	if e, err := sub.FindEntry(ignore.HelmIgnore); err == nil {
		if ig, err = g.blob(e.Hash); err != nil {
			return nil, fmt.Errorf("%s: %w", path.Join(dir, ignore.HelmIgnore), err)
		}
		have = true
	} else if !errors.Is(err, object.ErrEntryNotFound) {
		return nil, err
	}
	r, err := rules(ig, have)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path.Join(dir, ignore.HelmIgnore), err)
	}
	out := packaged{}
	var walk func(t *object.Tree, prefix string) error
	walk = func(t *object.Tree, prefix string) error {
		for _, e := range t.Entries {
			rel := path.Join(prefix, e.Name)
			switch e.Mode {
			case filemode.Dir:
				if r.Ignore(rel, fileInfo{e.Name, true}) {
					continue
				}
				st, err := g.repo.TreeObject(e.Hash)
				if err != nil {
					return fmt.Errorf("reading tree %s: %w", rel, err)
				}
				if err := walk(st, rel); err != nil {
					return err
				}
			case filemode.Submodule:
				// Not part of the working tree's files either; helm sees an empty dir.
			default:
				if !r.Ignore(rel, fileInfo{e.Name, false}) {
					out[rel] = e.Hash
				}
			}
		}
		return nil
	}
	if err := walk(sub, ""); err != nil {
		return nil, err
	}
	return out, nil
}

func (g *guard) blob(h plumbing.Hash) ([]byte, error) {
	b, err := g.repo.BlobObject(h)
	if err != nil {
		return nil, fmt.Errorf("reading blob %s: %w", short(h.String()), err)
	}
	rd, err := b.Reader()
	if err != nil {
		return nil, fmt.Errorf("reading blob %s: %w", short(h.String()), err)
	}
	defer rd.Close()
	return io.ReadAll(rd)
}

// skipDir names directories that hold fixtures or dependencies, not charts.
func skipDir(name string) bool {
	return strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" || name == "node_modules"
}

// walkDisk finds chart directories in the working tree; a chart's own
// subdirectories (charts/ subcharts included) belong to it and are not entered.
func walkDisk(root string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("walking for charts: %w", err)
		}
		if !d.IsDir() {
			return nil
		}
		if p != root && skipDir(d.Name()) {
			return filepath.SkipDir
		}
		if _, err := os.Lstat(filepath.Join(p, "Chart.yaml")); err == nil {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			out = append(out, filepath.ToSlash(rel))
			return filepath.SkipDir
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("walking for charts: %w", err)
		}
		return nil
	})
	return out, err
}

// walkTree is walkDisk over a commit's tree, so removed charts are found.
func walkTree(repo *git.Repository, tree *object.Tree) ([]string, error) {
	var out []string
	var walk func(t *object.Tree, prefix string) error
	walk = func(t *object.Tree, prefix string) error {
		for _, e := range t.Entries {
			if e.Name == "Chart.yaml" && e.Mode != filemode.Dir {
				out = append(out, prefix)
				return nil
			}
		}
		for _, e := range t.Entries {
			if e.Mode != filemode.Dir || skipDir(e.Name) {
				continue
			}
			st, err := repo.TreeObject(e.Hash)
			if err != nil {
				return fmt.Errorf("walking for charts at base: reading tree %s: %w", path.Join(prefix, e.Name), err)
			}
			p := e.Name
			if prefix != "." {
				p = prefix + "/" + e.Name
			}
			if err := walk(st, p); err != nil {
				return err
			}
		}
		return nil
	}
	return out, walk(tree, ".")
}
