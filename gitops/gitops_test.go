package gitops

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/internal/gittest"
	"github.com/go-git/go-git/v5/plumbing"
)

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fixture makes a bare remote and a clone with a chart committed on main.
func fixture(t *testing.T) (work, bare string) {
	t.Helper()
	root := t.TempDir()
	bare = filepath.Join(root, "remote.git")
	work = filepath.Join(root, "work")
	gittest.Git(t, root, "init", "--bare", bare)
	gittest.Git(t, root, "init", work)
	write(t, filepath.Join(work, "charts/app/Chart.yaml"), "apiVersion: v2\nname: app\nversion: 1.0.0\n")
	write(t, filepath.Join(work, "charts/app/values.yaml"), "image:\n  digest: \"\"\n")
	write(t, filepath.Join(work, "README.md"), "app\n")
	write(t, filepath.Join(work, "hack/run.sh"), "#!/bin/sh\n")
	if err := os.Chmod(filepath.Join(work, "hack/run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, work, "add", ".")
	gittest.Git(t, work, "commit", "-qm", "initial")
	gittest.Git(t, work, "remote", "add", "origin", bare)
	gittest.Git(t, work, "push", "-q", "origin", "main")
	return work, bare
}

// open opens dir with opts and a clock that ticks a second per commit.
func open(t *testing.T, dir string, opts Options) *Repo {
	t.Helper()
	clock := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	opts.Now = func() time.Time { clock = clock.Add(time.Second); return clock }
	r, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func pinFiles(work, digest string) map[string][]byte {
	return map[string][]byte{
		filepath.Join(work, "charts/app/values.yaml"): []byte("image:\n  digest: \"" + digest + "\"\n"),
		"charts/app/Chart.yaml":                       []byte("apiVersion: v2\nname: app\nversion: 1.0.1\n"),
	}
}

// release runs Inspect → Commit → Push once, as the release flow does.
func release(t *testing.T, r *Repo, digest string) (Commit, error) {
	t.Helper()
	ctx := context.Background()
	remote, err := r.Inspect(ctx, "chartpin/pins")
	if err != nil {
		return Commit{}, err
	}
	head, err := r.Head()
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.Commit(ctx, CommitRequest{Branch: "chartpin/pins", Parent: head, Files: pinFiles(r.Root(), digest),
		Message: "chart app: pin image\n\nbody", Reuse: remote.Tip})
	if err != nil {
		return c, err
	}
	return c, r.Push(ctx, "chartpin/pins", c.Hash, remote)
}

func TestPushToBareRepository(t *testing.T) {
	work, bare := fixture(t)
	r := open(t, work, Options{})
	c, err := release(t, r, "sha256:aaa")
	if err != nil {
		t.Fatal(err)
	}
	if !c.Created || len(c.Paths) != 2 {
		t.Fatalf("commit = %+v, want created with 2 paths", c)
	}
	if got := gittest.Git(t, bare, "rev-parse", "chartpin/pins"); got != c.Hash.String() {
		t.Fatalf("remote branch at %s, want %s", got, c.Hash)
	}
	if got := gittest.Git(t, bare, "show", "chartpin/pins:charts/app/values.yaml"); got != "image:\n  digest: \"sha256:aaa\"" {
		t.Fatalf("values.yaml on branch = %q", got)
	}
	// Only the two files changed; everything else is the parent's.
	if got := gittest.Git(t, bare, "diff", "--name-only", "main", "chartpin/pins"); got != "charts/app/Chart.yaml\ncharts/app/values.yaml" {
		t.Fatalf("changed files = %q", got)
	}
	if got := gittest.Git(t, bare, "ls-tree", "chartpin/pins", "hack/run.sh"); !strings.HasPrefix(got, "100755") {
		t.Fatalf("executable bit lost: %q", got)
	}
	if got := gittest.Git(t, bare, "log", "-1", "--format=%B", "chartpin/pins"); !strings.Contains(got, "Chartpin-Branch: chartpin/pins") {
		t.Fatalf("commit message lacks trailer: %q", got)
	}
	if got := gittest.Git(t, bare, "fsck", "--strict"); strings.Contains(got, "error") {
		t.Fatalf("fsck: %s", got)
	}
	// The checkout is untouched: still on main, clean.
	if got := gittest.Git(t, work, "status", "--porcelain"); got != "" {
		t.Fatalf("working tree changed: %q", got)
	}
	if got := gittest.Git(t, work, "rev-parse", "--abbrev-ref", "HEAD"); got != "main" {
		t.Fatalf("HEAD moved to %s", got)
	}
}

func TestRerunSameContentIsNoop(t *testing.T) {
	work, bare := fixture(t)
	first, err := release(t, open(t, work, Options{}), "sha256:aaa")
	if err != nil {
		t.Fatal(err)
	}
	again, err := release(t, open(t, work, Options{}), "sha256:aaa")
	if err != nil {
		t.Fatal(err)
	}
	if again.Created || again.Hash != first.Hash {
		t.Fatalf("re-run made a new commit %s (first %s)", again.Hash, first.Hash)
	}
	if got := gittest.Git(t, bare, "rev-parse", "chartpin/pins"); got != first.Hash.String() {
		t.Fatalf("remote moved to %s", got)
	}
}

func TestBranchAlreadyExistsIsReplaced(t *testing.T) {
	work, bare := fixture(t)
	first, err := release(t, open(t, work, Options{}), "sha256:aaa")
	if err != nil {
		t.Fatal(err)
	}
	// A fresh clone (as CI has) sees the existing branch and replaces it.
	clone := filepath.Join(t.TempDir(), "ci")
	gittest.Git(t, filepath.Dir(clone), "clone", "-q", bare, clone)
	second, err := release(t, open(t, clone, Options{}), "sha256:bbb")
	if err != nil {
		t.Fatal(err)
	}
	if !second.Created || second.Hash == first.Hash {
		t.Fatalf("second = %+v", second)
	}
	if got := gittest.Git(t, bare, "show", "chartpin/pins:charts/app/values.yaml"); !strings.Contains(got, "sha256:bbb") {
		t.Fatalf("branch content = %q", got)
	}
	// One commit on top of main, not a pile.
	if got := gittest.Git(t, bare, "rev-list", "--count", "main..chartpin/pins"); got != "1" {
		t.Fatalf("commits on branch = %s", got)
	}
}

func TestForeignCommitRefused(t *testing.T) {
	work, bare := fixture(t)
	if _, err := release(t, open(t, work, Options{}), "sha256:aaa"); err != nil {
		t.Fatal(err)
	}
	// Alice adds a fix-up commit to the PR branch.
	alice := filepath.Join(t.TempDir(), "alice")
	gittest.Git(t, filepath.Dir(alice), "clone", "-q", "-b", "chartpin/pins", bare, alice)
	write(t, filepath.Join(alice, "README.md"), "app, reviewed\n")
	gittest.Git(t, alice, "commit", "-qam", "docs: note")
	gittest.Git(t, alice, "push", "-q", "origin", "chartpin/pins")
	aliceTip := gittest.Git(t, bare, "rev-parse", "chartpin/pins")

	_, err := release(t, open(t, work, Options{}), "sha256:bbb")
	if !errors.Is(err, ErrForeignCommits) {
		t.Fatalf("err = %v, want ErrForeignCommits", err)
	}
	for _, want := range []string{"origin/chartpin/pins", "Alice <alice@example.com>", "docs: note", "will not overwrite"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if got := gittest.Git(t, bare, "rev-parse", "chartpin/pins"); got != aliceTip {
		t.Fatalf("alice's commit was overwritten: %s", got)
	}
}

func TestMovedBetweenInspectAndPushRefused(t *testing.T) {
	for _, existed := range []bool{false, true} {
		t.Run(map[bool]string{false: "new-branch", true: "existing-branch"}[existed], func(t *testing.T) {
			work, bare := fixture(t)
			if existed {
				if _, err := release(t, open(t, work, Options{}), "sha256:aaa"); err != nil {
					t.Fatal(err)
				}
			}
			ctx := context.Background()
			r := open(t, work, Options{})
			remote, err := r.Inspect(ctx, "chartpin/pins")
			if err != nil {
				t.Fatal(err)
			}
			head, _ := r.Head()
			c, err := r.Commit(ctx, CommitRequest{Branch: "chartpin/pins", Parent: head, Files: pinFiles(work, "sha256:ccc"), Message: "pin"})
			if err != nil {
				t.Fatal(err)
			}
			// Someone else pushes to the branch after we looked.
			bob := filepath.Join(t.TempDir(), "bob")
			gittest.Git(t, filepath.Dir(bob), "clone", "-q", bare, bob)
			gittest.Git(t, bob, "checkout", "-qB", "chartpin/pins")
			write(t, filepath.Join(bob, "README.md"), "bob was here\n")
			gittest.Git(t, bob, "commit", "-qam", "bob")
			gittest.Git(t, bob, "push", "-qf", "origin", "chartpin/pins")
			bobTip := gittest.Git(t, bare, "rev-parse", "chartpin/pins")

			err = r.Push(ctx, "chartpin/pins", c.Hash, remote)
			if !errors.Is(err, ErrMoved) {
				t.Fatalf("err = %v, want ErrMoved", err)
			}
			if !strings.Contains(err.Error(), "nothing was overwritten") {
				t.Errorf("error %q does not say nothing was overwritten", err)
			}
			if got := gittest.Git(t, bare, "rev-parse", "chartpin/pins"); got != bobTip {
				t.Fatalf("bob's push was overwritten: %s", got)
			}
		})
	}
}

func TestNothingToCommit(t *testing.T) {
	work, bare := fixture(t)
	r := open(t, work, Options{})
	head, _ := r.Head()
	_, err := r.Commit(context.Background(), CommitRequest{Branch: "chartpin/pins", Parent: head, Message: "pin",
		Files: map[string][]byte{"charts/app/values.yaml": []byte("image:\n  digest: \"\"\n")}})
	if !errors.Is(err, ErrNothingToCommit) {
		t.Fatalf("err = %v, want ErrNothingToCommit", err)
	}
	if _, err := r.LocalBranch("chartpin/pins"); err != nil {
		t.Fatal(err)
	}
	if lb, _ := r.LocalBranch("chartpin/pins"); lb.Exists {
		t.Fatal("nothing to commit still created the local branch")
	}
	if out := gittest.Git(t, bare, "branch", "--list", "chartpin/pins"); out != "" {
		t.Fatalf("remote got a branch: %q", out)
	}
}

func TestOutsideRepositoryRefused(t *testing.T) {
	work, _ := fixture(t)
	r := open(t, work, Options{})
	head, _ := r.Head()
	_, err := r.Commit(context.Background(), CommitRequest{Branch: "b", Parent: head, Message: "m",
		Files: map[string][]byte{filepath.Join(t.TempDir(), "x"): []byte("x")}})
	if err == nil || !strings.Contains(err.Error(), "outside the repository") {
		t.Fatalf("err = %v", err)
	}
}

func TestPushOverSmartHTTPWithToken(t *testing.T) {
	work, bare := fixture(t)
	gittest.Git(t, bare, "config", "http.receivepack", "true")
	srv := gittest.NewHTTP(t, filepath.Dir(bare), "s3cret-token")
	gittest.Git(t, work, "remote", "set-url", "origin", srv.URL+"/remote.git")

	// Wrong token: refused, the token never appears in the message.
	_, err := release(t, open(t, work, Options{Token: "wrong-token"}), "sha256:aaa")
	if err == nil || !strings.Contains(err.Error(), "GITHUB_TOKEN") || strings.Contains(err.Error(), "wrong-token") {
		t.Fatalf("err = %v, want an auth error naming GITHUB_TOKEN and not the token", err)
	}

	srv.Reset()
	c, err := release(t, open(t, work, Options{Token: "s3cret-token"}), "sha256:aaa")
	if err != nil {
		t.Fatal(err)
	}
	if got := gittest.Git(t, bare, "rev-parse", "chartpin/pins"); got != c.Hash.String() {
		t.Fatalf("remote branch at %s, want %s", got, c.Hash)
	}
	t.Logf("first push over smart HTTP: %d requests", len(srv.Requests()))

	// Re-run: same content, one ls-remote and nothing else.
	srv.Reset()
	again, err := release(t, open(t, work, Options{Token: "s3cret-token"}), "sha256:aaa")
	if err != nil || again.Created {
		t.Fatalf("re-run: %+v, %v", again, err)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Fatalf("unchanged re-run sent %d requests, want 1 (the ref listing)", n)
	}

	// A newer pin replaces our own commit over HTTP too.
	if _, err := release(t, open(t, work, Options{Token: "s3cret-token"}), "sha256:bbb"); err != nil {
		t.Fatal(err)
	}
	if got := gittest.Git(t, bare, "show", "chartpin/pins:charts/app/values.yaml"); !strings.Contains(got, "sha256:bbb") {
		t.Fatalf("branch content = %q", got)
	}
}

func TestLocalBranch(t *testing.T) {
	work, _ := fixture(t)
	r := open(t, work, Options{})
	c, err := release(t, r, "sha256:aaa")
	if err != nil {
		t.Fatal(err)
	}
	lb, err := r.LocalBranch("chartpin/pins")
	if err != nil || !lb.Exists || lb.Tip != c.Hash || !lb.Ours {
		t.Fatalf("local branch = %+v, %v", lb, err)
	}
	head, _ := r.Head()
	if lb.Parent != head {
		t.Fatalf("parent %s, want %s", lb.Parent, head)
	}
	if lb.Tip == plumbing.ZeroHash {
		t.Fatal("zero tip")
	}
}

// A gh-pages style branch: created as a root commit, then appended to by a
// fast-forward push; a branch that moved is refused, not forced.
func TestPagesBranchAppend(t *testing.T) {
	work, bare := fixture(t)
	ctx := context.Background()
	r := open(t, work, Options{})
	b, err := r.Fetch(ctx, "gh-pages")
	if err != nil || b.Exists {
		t.Fatalf("fetch absent branch = %+v, %v", b, err)
	}
	c, err := r.Commit(ctx, CommitRequest{Branch: "gh-pages", Files: map[string][]byte{"index.yaml": []byte("apiVersion: v1\n")}, Message: "publish"})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Push(ctx, "gh-pages", c.Hash, b); err != nil {
		t.Fatal(err)
	}
	if got := gittest.Git(t, bare, "rev-list", "--count", "gh-pages"); got != "1" {
		t.Fatalf("gh-pages has %s commits, want a single root commit", got)
	}
	// Someone else publishes on top (not a chartpin commit): we append.
	other := filepath.Join(t.TempDir(), "other")
	gittest.Git(t, filepath.Dir(other), "clone", "-q", "-b", "gh-pages", bare, other)
	write(t, filepath.Join(other, "x-1.0.0.tgz"), "x")
	gittest.Git(t, other, "add", ".")
	gittest.Git(t, other, "commit", "-qm", "x 1.0.0")
	gittest.Git(t, other, "push", "-q", "origin", "gh-pages")

	b, err = r.Fetch(ctx, "gh-pages")
	if err != nil || !b.Exists || b.Ours {
		t.Fatalf("fetch = %+v, %v", b, err)
	}
	if data, err := r.ReadFile(b.Tip, "x-1.0.0.tgz"); err != nil || string(data) != "x" {
		t.Fatalf("ReadFile = %q, %v", data, err)
	}
	if _, err := r.ReadFile(b.Tip, "nope/index.yaml"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadFile missing = %v, want fs.ErrNotExist", err)
	}
	c, err = r.Commit(ctx, CommitRequest{Branch: "gh-pages", Parent: b.Tip, Files: map[string][]byte{"index.yaml": []byte("apiVersion: v1\nentries: {}\n")}, Message: "publish 2"})
	if err != nil {
		t.Fatal(err)
	}
	// It moves again before our push: refused, their commit stays.
	write(t, filepath.Join(other, "y-1.0.0.tgz"), "y")
	gittest.Git(t, other, "add", ".")
	gittest.Git(t, other, "commit", "-qm", "y 1.0.0")
	gittest.Git(t, other, "push", "-q", "origin", "gh-pages")
	theirs := gittest.Git(t, bare, "rev-parse", "gh-pages")
	if err := r.Push(ctx, "gh-pages", c.Hash, b); !errors.Is(err, ErrMoved) {
		t.Fatalf("push over moved gh-pages = %v, want ErrMoved", err)
	}
	if got := gittest.Git(t, bare, "rev-parse", "gh-pages"); got != theirs {
		t.Fatal("their gh-pages commit was overwritten")
	}
	// Re-fetched, the append lands as a fast-forward.
	b, _ = r.Fetch(ctx, "gh-pages")
	c, err = r.Commit(ctx, CommitRequest{Branch: "gh-pages", Parent: b.Tip, Files: map[string][]byte{"index.yaml": []byte("apiVersion: v1\nentries: {}\n")}, Message: "publish 2"})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Push(ctx, "gh-pages", c.Hash, b); err != nil {
		t.Fatal(err)
	}
	if got := gittest.Git(t, bare, "log", "--format=%s", "gh-pages"); got != "publish 2\ny 1.0.0\nx 1.0.0\npublish" {
		t.Fatalf("gh-pages history = %q", got)
	}
}

// A token meant for HTTPS is not offered to a local remote (go-git's file
// transport rejects it), and an SSH key is not offered over HTTPS.
func TestAuthMatchesRemoteScheme(t *testing.T) {
	work, _ := fixture(t)
	if _, err := release(t, open(t, work, Options{Token: "tok"}), "sha256:aaa"); err != nil {
		t.Fatalf("token with a local remote: %v", err)
	}
	r := open(t, work, Options{Token: "tok"})
	gittest.Git(t, work, "remote", "set-url", "origin", "https://example.com/o/r.git")
	if r.authFor() == nil {
		t.Fatal("token not used for an https remote")
	}
	gittest.Git(t, work, "remote", "set-url", "origin", "http://example.com/o/r.git")
	if r.authFor() != nil {
		t.Fatal("token offered over plain http to another host")
	}
	gittest.Git(t, work, "remote", "set-url", "origin", "http://127.0.0.1:8080/o/r.git")
	if r.authFor() == nil {
		t.Fatal("token not used for a loopback http remote")
	}
	gittest.Git(t, work, "remote", "set-url", "origin", "git@example.com:o/r.git")
	if r.authFor() != nil {
		t.Fatal("https token offered to an ssh remote")
	}
	if _, err := Open(work, Options{SSHKey: filepath.Join(t.TempDir(), "missing")}); err != nil {
		t.Fatal(err)
	}
	bad, _ := Open(work, Options{SSHKey: filepath.Join(t.TempDir(), "missing")})
	if _, err := bad.Inspect(context.Background(), "x"); err == nil || !strings.Contains(err.Error(), "reading ssh key") {
		t.Fatalf("missing key: %v", err)
	}
}

// The lease holds at the server too: the branch moves after the ref
// listing, while the pack is on its way; git-receive-pack refuses the update
// because its old value no longer matches.
func TestLeaseCheckedByServer(t *testing.T) {
	work, bare := fixture(t)
	gittest.Git(t, bare, "config", "http.receivepack", "true")
	srv := gittest.NewHTTP(t, filepath.Dir(bare), "tok")
	gittest.Git(t, work, "remote", "set-url", "origin", srv.URL+"/remote.git")
	if _, err := release(t, open(t, work, Options{Token: "tok"}), "sha256:aaa"); err != nil {
		t.Fatal(err)
	}
	main := gittest.Git(t, bare, "rev-parse", "main")
	// Wrap the server: the first receive-pack POST moves the branch first.
	inner := srv.Config.Handler
	var moved atomic.Bool
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-receive-pack") && moved.CompareAndSwap(false, true) {
			gittest.Git(t, bare, "update-ref", "refs/heads/chartpin/pins", main)
		}
		inner.ServeHTTP(w, r)
	})
	_, err := release(t, open(t, work, Options{Token: "tok"}), "sha256:bbb")
	if !moved.Load() {
		t.Fatal("the push never reached receive-pack")
	}
	if !errors.Is(err, ErrMoved) {
		t.Fatalf("err = %v, want ErrMoved from the server-side check", err)
	}
	t.Logf("server-side refusal: %v", err)
	if got := gittest.Git(t, bare, "rev-parse", "chartpin/pins"); got != main {
		t.Fatalf("branch at %s, want the concurrent update %s kept", got, main)
	}
}

// Committing onto the checked-out branch is refused, naming the option that
// picks another branch (a command line renders it as its flag).
func TestCheckedOutBranchRefusedNamingBranch(t *testing.T) {
	work, _ := fixture(t)
	r := open(t, work, Options{})
	head, _ := r.Head()
	current := strings.TrimSpace(gittest.Git(t, work, "branch", "--show-current"))
	_, err := r.Commit(context.Background(), CommitRequest{Branch: current, Parent: head, Message: "pin", Files: pinFiles(work, "sha256:ddd")})
	if err == nil || !strings.Contains(err.Error(), "pass Branch") || strings.Contains(err.Error(), "--branch") {
		t.Fatalf("err = %v, want a refusal naming the option Branch", err)
	}
	if got := failure.Render(err, strings.ToUpper); !strings.Contains(got, "pass BRANCH") {
		t.Errorf("rendered %q: want the option rendered by the caller", got)
	}
	if got := hint(context.DeadlineExceeded); !strings.Contains(got, "raise {{Timeout}}") {
		t.Errorf("deadline hint %q: want the option Timeout", got)
	}
}
