package publish

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chartpin/chartpin/gitops"
	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/internal/gittest"
)

// pagesRepo is a checkout whose main, holding the app chart at 1.0.0, is
// pushed to a bare remote: the remote, the chart directory and the checkout
// opened with gitops.
func pagesRepo(t *testing.T) (bare, chartDir string, repo *gitops.Repo) {
	t.Helper()
	root := t.TempDir()
	bare, work := filepath.Join(root, "r.git"), filepath.Join(root, "work")
	gittest.Git(t, root, "init", "-q", "--bare", bare)
	gittest.Git(t, root, "init", "-q", work)
	chartDir = writeChart(t, filepath.Join(work, "charts/app"), "1.0.0", "1.0.0", "0.8")
	gittest.Git(t, work, "add", ".")
	gittest.Git(t, work, "commit", "-qm", "chart")
	gittest.Git(t, work, "remote", "add", "origin", bare)
	gittest.Git(t, work, "push", "-q", "origin", "main")
	repo, err := gitops.Open(work, gitops.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return bare, chartDir, repo
}

// publishing to a gh-pages branch: a new branch, an append, a prerelease
// path inside the branch, and a refused overwrite that pushes nothing.
func TestPagesBranch(t *testing.T) {
	bare, chartDir, repo := pagesRepo(t)
	o := opts(Options{PagesBranch: "gh-pages", Repo: repo, PrereleaseIndex: "prerelease", BaseURL: "https://acme.github.io/charts"})
	ctx := context.Background()

	r1, err := Publish(ctx, chartDir, o)
	if err != nil {
		t.Fatal(err)
	}
	if r1.Index.Action != Added || r1.Index.Commit == "" || r1.Index.Location != "gh-pages:." {
		t.Fatalf("first: %+v", r1.Index)
	}
	if got := gittest.Git(t, bare, "ls-tree", "--name-only", "gh-pages"); got != "app-1.0.0.tgz\nindex.yaml" {
		t.Fatalf("gh-pages tree: %q", got)
	}
	if blob, err := exec.Command("git", "-C", bare, "cat-file", "blob", "gh-pages:app-1.0.0.tgz").Output(); err != nil || !bytes.Equal(blob, r1.Package) {
		t.Fatalf("tarball on gh-pages differs from the package (%v)", err)
	}
	if idx := gittest.Git(t, bare, "show", "gh-pages:index.yaml"); !strings.Contains(idx, "digest: "+r1.Digest) || !strings.Contains(idx, "https://acme.github.io/charts/app-1.0.0.tgz") {
		t.Fatalf("index on gh-pages:\n%s", idx)
	}

	writeChart(t, chartDir, "1.1.0-rc.1", "1.1.0-rc.1", "0.9")
	r2, err := Publish(ctx, chartDir, o)
	if err != nil {
		t.Fatal(err)
	}
	if r2.Index.Location != "gh-pages:prerelease" {
		t.Fatalf("prerelease went to %s", r2.Index.Location)
	}
	writeChart(t, chartDir, "1.0.1", "1.0.1", "0.9")
	if _, err := Publish(ctx, chartDir, o); err != nil {
		t.Fatal(err)
	}
	if got := gittest.Git(t, bare, "log", "--format=%s", "gh-pages"); got != "publish app 1.0.1\npublish app 1.1.0-rc.1\npublish app 1.0.0" {
		t.Fatalf("gh-pages history: %q", got)
	}
	stable := gittest.Git(t, bare, "show", "gh-pages:index.yaml")
	if strings.Contains(stable, "rc.1") || !strings.Contains(stable, "version: 1.0.1") || !strings.Contains(stable, "version: 1.0.0") {
		t.Fatalf("stable index:\n%s", stable)
	}
	if pre := gittest.Git(t, bare, "show", "gh-pages:prerelease/index.yaml"); !strings.Contains(pre, "version: 1.1.0-rc.1") ||
		!strings.Contains(pre, "- https://acme.github.io/charts/prerelease/app-1.1.0-rc.1.tgz") {
		t.Fatalf("prerelease index:\n%s", pre)
	}

	// 1.0.0 again with other bytes: refused, nothing pushed.
	tip := gittest.Git(t, bare, "rev-parse", "gh-pages")
	// The prerelease index at the branch root is the stable index; outside
	// the branch it is nowhere: refused, nothing pushed.
	writeChart(t, chartDir, "1.2.0-rc.1", "1.2.0-rc.1", "0.9")
	for _, p := range []string{".", "./", "/", "prerelease/..", "../prerelease"} {
		bad := o
		bad.PrereleaseIndex = p
		if _, err := Publish(ctx, chartDir, bad); failure.Code(err) != 2 {
			t.Errorf("--pages-branch gh-pages --prerelease-index %q = %v (exit %d), want exit 2", p, err, failure.Code(err))
		}
	}
	if gittest.Git(t, bare, "rev-parse", "gh-pages") != tip {
		t.Fatal("refused prerelease publish pushed to gh-pages")
	}
	writeChart(t, chartDir, "1.0.0", "1.0.0", "0.9")
	_, err = Publish(ctx, chartDir, o)
	if !errors.Is(err, ErrPublished) || failure.Code(err) != 1 {
		t.Fatalf("overwrite on gh-pages = %v", err)
	}
	if gittest.Git(t, bare, "rev-parse", "gh-pages") != tip {
		t.Fatal("refused publish pushed to gh-pages")
	}
	// Same bytes as published: a no-op, nothing pushed.
	writeChart(t, chartDir, "1.0.0", "1.0.0", "0.8")
	r, err := Publish(ctx, chartDir, o)
	if err != nil || r.Index.Action != Unchanged || !bytes.Equal(r.Package, r1.Package) {
		t.Fatalf("identical re-publish = %+v, %v", r.Index, err)
	}
	if gittest.Git(t, bare, "rev-parse", "gh-pages") != tip {
		t.Fatal("no-op publish pushed to gh-pages")
	}
}

// Another chart's publish lands on gh-pages between our fetch and our push:
// the publish merges again onto the new tip, keeping both.
func TestPagesBranchMovedIsMergedAgain(t *testing.T) {
	bare, chartDir, repo := pagesRepo(t)
	otherDir := writeChart(t, t.TempDir(), "2.0.0", "2.0.0", "0.8")
	os.WriteFile(filepath.Join(otherDir, "Chart.yaml"), []byte("apiVersion: v2\nname: other\nversion: 2.0.0\n"), 0o644)
	o := opts(Options{PagesBranch: "gh-pages", Repo: repo})
	ctx := context.Background()
	if _, err := Publish(ctx, chartDir, o); err != nil {
		t.Fatal(err)
	}

	defer func(old func()) { beforePagesPush = old }(beforePagesPush)
	moved := 0
	beforePagesPush = func() {
		if moved++; moved == 1 { // the other chart's job publishes first
			beforePagesPush = func() {}
			if _, err := Publish(ctx, otherDir, opts(Options{PagesBranch: "gh-pages", Repo: repo})); err != nil {
				t.Errorf("other publish: %v", err)
			}
			beforePagesPush = func() { moved++ }
		}
	}
	writeChart(t, chartDir, "1.0.1", "1.0.1", "0.9")
	r, err := Publish(ctx, chartDir, o)
	if err != nil {
		t.Fatal(err)
	}
	if moved != 2 {
		t.Fatalf("pushes attempted after the move: %d, want a second attempt", moved-1)
	}
	idx := gittest.Git(t, bare, "show", "gh-pages:index.yaml")
	for _, want := range []string{"name: other", "version: 2.0.0", "version: 1.0.1", "version: 1.0.0"} {
		if !strings.Contains(idx, want) {
			t.Errorf("gh-pages index lacks %q:\n%s", want, idx)
		}
	}
	if got := gittest.Git(t, bare, "log", "--format=%s", "gh-pages"); got != "publish app 1.0.1\npublish other 2.0.0\npublish app 1.0.0" {
		t.Fatalf("gh-pages history: %q", got)
	}
	if r.Index.Commit != gittest.Git(t, bare, "rev-parse", "gh-pages") {
		t.Fatal("result names another commit than the branch tip")
	}
}
