// Package guardtest builds throwaway git repositories with go-git commits,
// for tests of code that reads a checkout.
package guardtest

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Repo is a git repository with a work tree in a temp dir.
type Repo struct {
	Dir  string
	Git  *git.Repository
	t    testing.TB
	tick int
}

// New initialises an empty repository.
func New(t testing.TB) *Repo {
	t.Helper()
	dir := t.TempDir()
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	r, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	return &Repo{Dir: dir, Git: r, t: t}
}

// Path is the absolute path of rel.
func (r *Repo) Path(rel string) string { return filepath.Join(r.Dir, filepath.FromSlash(rel)) }

// Write writes a file in the work tree, creating directories.
func (r *Repo) Write(rel, content string) {
	r.t.Helper()
	p := r.Path(rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// Remove deletes a file or directory from the work tree.
func (r *Repo) Remove(rel string) {
	r.t.Helper()
	if err := os.RemoveAll(r.Path(rel)); err != nil {
		r.t.Fatal(err)
	}
}

// Chart writes a minimal chart: Chart.yaml, values.yaml and one template.
func (r *Repo) Chart(dir, name, version, appVersion string) {
	r.t.Helper()
	r.ChartYAML(dir, name, version, appVersion)
	r.Write(dir+"/values.yaml", "replicaCount: 1\nimage:\n  repository: ghcr.io/example/"+name+"\n  tag: \"1.0\"\n  digest: \"\"\n")
	r.Write(dir+"/templates/deployment.yaml", "kind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\n")
}

// ChartYAML writes only Chart.yaml (version on line 3, appVersion on line 4).
func (r *Repo) ChartYAML(dir, name, version, appVersion string) {
	r.t.Helper()
	r.Write(dir+"/Chart.yaml", "apiVersion: v2\nname: "+name+"\nversion: "+version+"\nappVersion: \""+appVersion+"\"\ndescription: test chart\n")
}

// Commit stages everything (deletions included) and commits it.
func (r *Repo) Commit(msg string) plumbing.Hash {
	r.t.Helper()
	wt, err := r.Git.Worktree()
	if err != nil {
		r.t.Fatal(err)
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		r.t.Fatal(err)
	}
	r.tick++
	when := time.Date(2026, 1, 1, 0, r.tick, 0, 0, time.UTC)
	h, err := wt.Commit(msg, &git.CommitOptions{
		Author:            &object.Signature{Name: "test", Email: "test@example.com", When: when},
		AllowEmptyCommits: true,
	})
	if err != nil {
		r.t.Fatal(err)
	}
	return h
}

// SetRef points a reference (e.g. refs/remotes/origin/main) at h.
func (r *Repo) SetRef(name string, h plumbing.Hash) {
	r.t.Helper()
	if err := r.Git.Storer.SetReference(plumbing.NewHashReference(plumbing.ReferenceName(name), h)); err != nil {
		r.t.Fatal(err)
	}
}

// Base commits the current work tree and makes it origin/main, the base
// a pull request is compared with.
func (r *Repo) Base() plumbing.Hash {
	r.t.Helper()
	h := r.Commit("base")
	r.SetRef("refs/remotes/origin/main", h)
	return h
}
