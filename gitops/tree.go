package gitops

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// writeTree returns the hash of tree with files (paths relative to dir)
// replaced or added, writing only the blobs and trees that differ. A zero
// tree is an empty one.
func (r *Repo) writeTree(tree plumbing.Hash, dir string, files map[string][]byte) (plumbing.Hash, error) {
	var entries []object.TreeEntry
	if !tree.IsZero() {
		t, err := r.repo.TreeObject(tree)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("reading tree %s: %w", dir, err)
		}
		entries = append(entries, t.Entries...)
	}
	// Split files into those in this directory and those below it.
	here := map[string][]byte{}
	below := map[string]map[string][]byte{}
	for p, data := range files {
		first, rest, deeper := strings.Cut(p, "/")
		if !deeper {
			here[first] = data
			continue
		}
		if below[first] == nil {
			below[first] = map[string][]byte{}
		}
		below[first][rest] = data
	}
	index := map[string]int{}
	for i, e := range entries {
		index[e.Name] = i
	}
	set := func(name string, mode filemode.FileMode, h plumbing.Hash) {
		if i, ok := index[name]; ok {
			entries[i].Hash = h
			if mode == filemode.Dir || entries[i].Mode == filemode.Dir {
				entries[i].Mode = mode
			}
			return
		}
		index[name] = len(entries)
		entries = append(entries, object.TreeEntry{Name: name, Mode: mode, Hash: h})
	}
	for name, data := range here {
		if i, ok := index[name]; ok && entries[i].Mode == filemode.Dir {
			return plumbing.ZeroHash, fmt.Errorf("%s%s is a directory in the parent commit", dir, name)
		}
		h, err := r.writeBlob(data)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		mode := filemode.Regular
		if i, ok := index[name]; ok {
			mode = entries[i].Mode // keep an executable bit
		}
		set(name, mode, h)
	}
	for name, sub := range below {
		var subtree plumbing.Hash
		if i, ok := index[name]; ok {
			if entries[i].Mode != filemode.Dir {
				return plumbing.ZeroHash, fmt.Errorf("%s%s is a file in the parent commit", dir, name)
			}
			subtree = entries[i].Hash
		}
		h, err := r.writeTree(subtree, dir+name+"/", sub)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		set(name, filemode.Dir, h)
	}
	// Git's order: names compared as if directories ended in "/".
	sort.Slice(entries, func(i, j int) bool { return sortKey(entries[i]) < sortKey(entries[j]) })
	t := &object.Tree{Entries: entries}
	obj := r.repo.Storer.NewEncodedObject()
	if err := t.Encode(obj); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("encoding tree %s: %w", dir, err)
	}
	return r.repo.Storer.SetEncodedObject(obj)
}

func sortKey(e object.TreeEntry) string {
	if e.Mode == filemode.Dir {
		return e.Name + "/"
	}
	return e.Name
}

func (r *Repo) writeBlob(data []byte) (plumbing.Hash, error) {
	obj := r.repo.Storer.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	w, err := obj.Writer()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if _, err := bytes.NewReader(data).WriteTo(w); err != nil {
		return plumbing.ZeroHash, err
	}
	if err := w.Close(); err != nil {
		return plumbing.ZeroHash, err
	}
	return r.repo.Storer.SetEncodedObject(obj)
}
