// Package gitops commits chartpin's edits on a release branch and pushes it,
// without touching the checked-out branch, the index or the working tree.
//
// A push never overwrites work that is not chartpin's: the remote branch may
// only be replaced when its tip is a commit chartpin made (trailer and
// committer both match), and the push carries a lease on the tip observed
// before the commit, so a branch that moves under us is refused, not clobbered.
package gitops

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"

	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/internal/redact"
	"github.com/chartpin/chartpin/internal/relpath"
)

// Sentinel errors; match them with errors.Is.
var (
	// ErrForeignCommits: the remote branch carries commits chartpin did not make.
	ErrForeignCommits = errors.New("remote branch has commits chartpin did not make")
	// ErrMoved: the remote branch moved between our look and our push.
	ErrMoved = errors.New("remote branch moved under us")
	// ErrNothingToCommit: the files already hold these bytes in the parent commit.
	ErrNothingToCommit = errors.New("nothing to commit")
)

// Trailer marks commits chartpin made; its value is the branch name.
const Trailer = "Chartpin-Branch"

// Repo is a git repository chartpin commits to and pushes from.
type Repo struct {
	repo    *git.Repository
	root    string
	remote  string
	auth    transport.AuthMethod // for http(s) remotes
	sshAuth transport.AuthMethod // for ssh remotes
	authErr error
	name    string
	email   string
	now     func() time.Time
	timeout time.Duration
	log     *slog.Logger
}

// Options configures Open; the zero value pushes to origin without
// credentials, as chartpin, with a two-minute bound on each network step.
type Options struct {
	// Remote names the remote to push to (default origin).
	Remote string
	// Token authenticates HTTPS pushes (GitHub: GITHUB_TOKEN).
	Token string
	// SSHKey is a private key file for SSH pushes; SSHPassphrase unlocks it.
	// A key that cannot be read fails the first network step, not Open.
	SSHKey, SSHPassphrase string
	// CommitterName and CommitterEmail author chartpin's commits (default
	// chartpin <chartpin@users.noreply.github.com>).
	CommitterName, CommitterEmail string
	// Now is the commit time source (default time.Now).
	Now func() time.Time
	// Timeout bounds each network step (default 2m).
	Timeout time.Duration
	// Logger receives progress (default: discard).
	Logger *slog.Logger
}

// Open opens the repository containing dir.
func Open(dir string, opts Options) (*Repo, error) {
	r := &Repo{
		remote:  cmp.Or(opts.Remote, "origin"),
		name:    cmp.Or(opts.CommitterName, "chartpin"),
		email:   cmp.Or(opts.CommitterEmail, "chartpin@users.noreply.github.com"),
		now:     opts.Now,
		timeout: cmp.Or(opts.Timeout, 2*time.Minute),
		log:     cmp.Or(opts.Logger, slog.New(slog.DiscardHandler)),
	}
	if r.now == nil {
		r.now = time.Now
	}
	if opts.Token != "" {
		r.auth = &githttp.BasicAuth{Username: "x-access-token", Password: opts.Token}
	}
	if opts.SSHKey != "" {
		k, err := gitssh.NewPublicKeysFromFile("git", opts.SSHKey, opts.SSHPassphrase)
		if err != nil {
			r.authErr = fmt.Errorf("reading ssh key %s: %w; fix the key path or passphrase", opts.SSHKey, err)
		} else {
			r.sshAuth = k
		}
	}
	repo, err := git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{DetectDotGit: true})
	if err != nil {
		// Not a checkout: the user pointed chartpin at the wrong place.
		return nil, failure.Input(fmt.Errorf("opening git repository at %s: %w; run chartpin inside a git checkout", dir, err))
	}
	wt, err := repo.Worktree()
	if err != nil {
		return nil, fmt.Errorf("opening git repository at %s: %w", dir, err)
	}
	root, err := filepath.EvalSymlinks(wt.Filesystem.Root())
	if err != nil {
		return nil, fmt.Errorf("opening git repository at %s: %w", dir, err)
	}
	r.repo, r.root = repo, root
	return r, nil
}

// Root is the working tree's top directory.
func (r *Repo) Root() string { return r.root }

// Head is the commit checked out in the working tree.
func (r *Repo) Head() (plumbing.Hash, error) {
	ref, err := r.repo.Head()
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("reading HEAD in %s: %w; commit something first", r.root, err)
	}
	return ref.Hash(), nil
}

// RemoteURL is the first URL of the configured remote.
func (r *Repo) RemoteURL() (string, error) {
	rem, err := r.repo.Remote(r.remote)
	if err != nil {
		return "", fmt.Errorf("remote %q in %s: %w; add it with git remote add", r.remote, r.root, err)
	}
	if len(rem.Config().URLs) == 0 {
		return "", fmt.Errorf("remote %q in %s has no URL", r.remote, r.root)
	}
	return rem.Config().URLs[0], nil
}

// Branch is the state of a branch on the remote.
type Branch struct {
	Name   string
	Exists bool
	// Tip is the commit the remote branch points at (zero when absent).
	Tip plumbing.Hash
	// Parent and Tree of Tip, when it exists.
	Parent, Tree plumbing.Hash
	// Message of Tip.
	Message string
	// Ours reports that Tip is a chartpin commit for this branch.
	Ours bool
}

// Inspect lists the remote branch and, if it exists, fetches its tip. It
// returns ErrForeignCommits when the tip is not a chartpin commit.
func (r *Repo) Inspect(ctx context.Context, branch string) (Branch, error) {
	b, err := r.Fetch(ctx, branch)
	if err != nil || !b.Exists {
		return b, err
	}
	if !b.Ours {
		c, _ := r.repo.CommitObject(b.Tip)
		return b, fmt.Errorf("%w: %s/%s is at %s by %s <%s> (%q); chartpin will not overwrite it: merge or close that work, or delete the branch, then re-run",
			ErrForeignCommits, r.remote, branch, short(b.Tip), c.Committer.Name, c.Committer.Email, firstLine(c.Message))
	}
	return b, nil
}

// Fetch lists the remote branch and, if it exists, fetches its tip, whoever
// made it (a gh-pages branch has many authors).
func (r *Repo) Fetch(ctx context.Context, branch string) (Branch, error) {
	b := Branch{Name: branch}
	if r.authErr != nil {
		return b, r.authErr
	}
	rem, err := r.repo.Remote(r.remote)
	if err != nil {
		return b, fmt.Errorf("remote %q in %s: %w", r.remote, r.root, err)
	}
	lctx, cancel := context.WithTimeout(ctx, r.timeout)
	refs, err := rem.ListContext(lctx, &git.ListOptions{Auth: r.authFor()})
	cancel()
	if err != nil {
		return b, failure.Optionf("listing branches of %s: %w; "+hint(err), r.remote, err)
	}
	want := plumbing.NewBranchReferenceName(branch)
	for _, ref := range refs {
		if ref.Name() == want {
			b.Exists, b.Tip = true, ref.Hash()
		}
	}
	r.log.Debug("remote branch", "remote", r.remote, "branch", branch, "exists", b.Exists, "tip", b.Tip)
	if !b.Exists {
		return b, nil
	}
	if _, err := r.repo.CommitObject(b.Tip); err != nil {
		fctx, cancel := context.WithTimeout(ctx, r.timeout)
		spec := config.RefSpec(fmt.Sprintf("+%s:refs/remotes/%s/%s", want, r.remote, branch))
		err := r.repo.FetchContext(fctx, &git.FetchOptions{RemoteName: r.remote, RefSpecs: []config.RefSpec{spec}, Auth: r.authFor()})
		cancel()
		if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
			return b, failure.Optionf("fetching %s/%s: %w; "+hint(err), r.remote, branch, err)
		}
	}
	c, err := r.repo.CommitObject(b.Tip)
	if err != nil {
		return b, fmt.Errorf("reading %s/%s at %s: %w", r.remote, branch, b.Tip, err)
	}
	b.Tree, b.Message = c.TreeHash, c.Message
	if len(c.ParentHashes) == 1 {
		b.Parent = c.ParentHashes[0]
	}
	b.Ours = r.ours(c, branch)
	return b, nil
}

// ReadFile returns path (slash-separated, relative to the root) as of commit;
// the error wraps fs.ErrNotExist when the commit has no such file.
func (r *Repo) ReadFile(commit plumbing.Hash, path string) ([]byte, error) {
	c, err := r.repo.CommitObject(commit)
	if err != nil {
		return nil, fmt.Errorf("reading commit %s: %w", short(commit), err)
	}
	f, err := c.File(path)
	if errors.Is(err, object.ErrFileNotFound) || errors.Is(err, object.ErrDirectoryNotFound) || errors.Is(err, object.ErrEntryNotFound) {
		return nil, fmt.Errorf("%s at %s: %w", path, short(commit), fs.ErrNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s at %s: %w", path, short(commit), err)
	}
	s, err := f.Contents()
	if err != nil {
		return nil, fmt.Errorf("reading %s at %s: %w", path, short(commit), err)
	}
	return []byte(s), nil
}

// ours: a single-parent commit carrying our trailer for this branch, committed
// by our identity. An amend or a commit on top by someone else fails this.
func (r *Repo) ours(c *object.Commit, branch string) bool {
	return len(c.ParentHashes) == 1 &&
		c.Committer.Email == r.email &&
		strings.Contains(c.Message, "\n"+Trailer+": "+branch+"\n")
}

// LocalBranch returns the local branch's tip commit (zero when absent).
func (r *Repo) LocalBranch(branch string) (Branch, error) {
	b := Branch{Name: branch}
	ref, err := r.repo.Reference(plumbing.NewBranchReferenceName(branch), true)
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return b, nil
	}
	if err != nil {
		return b, fmt.Errorf("reading local branch %s: %w", branch, err)
	}
	c, err := r.repo.CommitObject(ref.Hash())
	if err != nil {
		return b, fmt.Errorf("reading local branch %s: %w", branch, err)
	}
	b.Exists, b.Tip, b.Tree, b.Message = true, ref.Hash(), c.TreeHash, c.Message
	if len(c.ParentHashes) == 1 {
		b.Parent = c.ParentHashes[0]
	}
	b.Ours = r.ours(c, branch)
	return b, nil
}

// CommitRequest describes one commit on top of Parent.
type CommitRequest struct {
	Branch string
	Parent plumbing.Hash
	// Files maps a path (absolute, or relative to Root) to its new content.
	Files map[string][]byte
	// Message without the trailer; Commit adds it.
	Message string
	// Reuse is an existing commit to keep when it has the same parent and
	// tree, so an unchanged re-run makes no new commit and no push.
	Reuse plumbing.Hash
}

// Commit is a commit on the release branch.
type Commit struct {
	Hash    plumbing.Hash
	Tree    plumbing.Hash
	Created bool // false: Reuse matched
	Paths   []string
}

// Commit writes a commit with only req.Files changed relative to req.Parent
// and points the local branch at it. It returns ErrNothingToCommit when the
// parent already holds every file's bytes.
func (r *Repo) Commit(ctx context.Context, req CommitRequest) (Commit, error) {
	var out Commit
	var parentTree plumbing.Hash
	var parents []plumbing.Hash
	if !req.Parent.IsZero() { // zero: a root commit (a new gh-pages branch)
		parent, err := r.repo.CommitObject(req.Parent)
		if err != nil {
			return out, fmt.Errorf("reading parent commit %s: %w", short(req.Parent), err)
		}
		parentTree, parents = parent.TreeHash, []plumbing.Hash{req.Parent}
	}
	files := map[string][]byte{}
	for p, data := range req.Files {
		rel, err := r.rel(p)
		if err != nil {
			return out, err
		}
		files[rel] = data
		out.Paths = append(out.Paths, rel)
	}
	tree, err := r.writeTree(parentTree, "", files)
	if err != nil {
		return out, fmt.Errorf("building tree for %s: %w", req.Branch, err)
	}
	out.Tree = tree
	if tree == parentTree || len(files) == 0 {
		return out, fmt.Errorf("%w: %s already has these bytes", ErrNothingToCommit, short(req.Parent))
	}
	if !req.Reuse.IsZero() {
		if c, err := r.repo.CommitObject(req.Reuse); err == nil && c.TreeHash == tree &&
			len(c.ParentHashes) == 1 && c.ParentHashes[0] == req.Parent && r.ours(c, req.Branch) {
			out.Hash = req.Reuse
			return out, r.setBranch(req.Branch, out.Hash)
		}
	}
	sig := object.Signature{Name: r.name, Email: r.email, When: r.now()}
	msg := strings.TrimRight(req.Message, "\n") + "\n\n" + Trailer + ": " + req.Branch + "\n"
	c := &object.Commit{Author: sig, Committer: sig, Message: msg, TreeHash: tree, ParentHashes: parents}
	obj := r.repo.Storer.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return out, fmt.Errorf("encoding commit: %w", err)
	}
	h, err := r.repo.Storer.SetEncodedObject(obj)
	if err != nil {
		return out, fmt.Errorf("writing commit: %w", err)
	}
	out.Hash, out.Created = h, true
	r.log.Debug("committed", "branch", req.Branch, "commit", h, "files", out.Paths)
	return out, r.setBranch(req.Branch, h)
}

func (r *Repo) setBranch(branch string, h plumbing.Hash) error {
	ref := plumbing.NewHashReference(plumbing.NewBranchReferenceName(branch), h)
	if head, err := r.repo.Head(); err == nil && head.Name() == ref.Name() {
		return failure.Optionf("branch %s is checked out in %s; run chartpin release from the base branch or pass {{Branch}}", branch, r.root)
	}
	if err := r.repo.Storer.SetReference(ref); err != nil {
		return fmt.Errorf("updating local branch %s: %w", branch, err)
	}
	return nil
}

// rel turns p into a slash path relative to the repository root.
func (r *Repo) rel(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return filepath.ToSlash(filepath.Clean(p)), nil
	}
	real, err := relpath.Real(p)
	if err != nil {
		return "", fmt.Errorf("resolving %s: %w", p, err)
	}
	rel, ok := relpath.In(r.root, real)
	if !ok {
		return "", fmt.Errorf("%s is outside the repository %s", p, r.root)
	}
	return rel, nil
}

// Push points the local branch at commit and pushes it. base is the state
// Inspect saw: the push is refused (ErrMoved) unless the remote still has it.
func (r *Repo) Push(ctx context.Context, branch string, commit plumbing.Hash, base Branch) error {
	if base.Exists && base.Tip == commit {
		return nil
	}
	if r.authErr != nil {
		return r.authErr
	}
	if err := r.setBranch(branch, commit); err != nil {
		return err
	}
	ref := plumbing.NewBranchReferenceName(branch)
	spec := config.RefSpec(fmt.Sprintf("%s:%s", ref, ref))
	opts := &git.PushOptions{RemoteName: r.remote, Auth: r.authFor(), RefSpecs: []config.RefSpec{spec}}
	if base.Exists {
		// Only over the exact tip we looked at; the server checks the old
		// value atomically too. Our own release commit may be replaced
		// (force); anything else only fast-forwarded.
		opts.RequireRemoteRefs = []config.RefSpec{config.RefSpec(base.Tip.String() + ":" + ref.String())}
		if base.Ours {
			opts.RefSpecs = []config.RefSpec{config.RefSpec("+" + string(spec))}
		}
	}
	pctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	err := r.repo.PushContext(pctx, opts)
	switch {
	case err == nil:
		r.log.Debug("pushed", "remote", r.remote, "branch", branch, "commit", commit)
		return nil
	case errors.Is(err, git.NoErrAlreadyUpToDate):
		return nil
	case strings.Contains(err.Error(), "required to be") || strings.Contains(err.Error(), "non-fast-forward") ||
		strings.Contains(err.Error(), "fetch first") || strings.Contains(err.Error(), "stale info") ||
		strings.Contains(err.Error(), "cannot lock ref") || strings.Contains(err.Error(), "failed to update ref"):
		was := "absent"
		if base.Exists {
			was = short(base.Tip)
		}
		return fmt.Errorf("%w: pushing %s to %s: the branch was %s when chartpin looked and someone else has pushed since (%v); nothing was overwritten: re-run to start from their state",
			ErrMoved, short(commit), r.remote+"/"+branch, was, err)
	default:
		return failure.Optionf("pushing %s to %s/%s: %w; "+hint(err), short(commit), r.remote, branch, err)
	}
}

// authFor returns the auth method for the remote's URL scheme.
func (r *Repo) authFor() transport.AuthMethod {
	u, _ := r.RemoteURL()
	switch {
	case isSSHURL(u):
		return r.sshAuth // nil: go-git's default, the SSH agent
	case redact.Private(u):
		return r.auth
	}
	// A local path or file:// remote takes no credentials, and a token never
	// travels in cleartext: plain http:// only to this machine.
	return nil
}

func isSSHURL(u string) bool {
	if strings.HasPrefix(u, "ssh://") {
		return true
	}
	if pu, err := url.Parse(u); err == nil && pu.Scheme != "" {
		return false
	}
	return strings.Contains(u, "@") && strings.Contains(u, ":") // scp-like git@host:owner/repo
}

// hint names the next step for common transport failures, as a format that
// may name option fields.
func hint(err error) string {
	switch {
	case errors.Is(err, transport.ErrAuthenticationRequired), errors.Is(err, transport.ErrAuthorizationFailed):
		return "set GITHUB_TOKEN to a token allowed to push (contents: write), or use an SSH remote with a key"
	case errors.Is(err, transport.ErrRepositoryNotFound):
		return "check the remote URL and that the token can see the repository"
	case errors.Is(err, context.DeadlineExceeded):
		return "the remote did not answer in time; raise {{Timeout}} or re-run"
	}
	return "check the remote URL and network, then re-run (release is idempotent)"
}

func short(h plumbing.Hash) string { return h.String()[:12] }

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
