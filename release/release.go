// Package release is the release-time job without its shell: plan the pins
// on the working tree, commit only the changed files on a release branch (the
// checkout itself is left untouched), push it, and open or update one pull
// request.
//
// It is idempotent by construction: the commit is the source of truth and
// the pull request a view of it. An unchanged re-run reuses the pushed commit
// (no new commit, no push) and finds the pull request already saying the
// same (no editing call). A re-run after a partial failure (pushed, but no
// pull request; or committed, but not pushed) completes the job.
package release

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/chartpin/chartpin/gitops"
	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/internal/redact"
	"github.com/chartpin/chartpin/internal/relpath"
	"github.com/chartpin/chartpin/pin"
	"github.com/chartpin/chartpin/pullrequest"
)

// Options configures one release run.
type Options struct {
	// Pin is the pin run (charts, resolver, tags, bump).
	Pin pin.Options
	// Repo is the checkout to commit from and push.
	Repo *gitops.Repo
	// PRs opens or updates the pull request; nil only with DryRun (then the
	// dry run cannot say whether it would open or update).
	PRs pullrequest.Service
	// Branch is the release branch (default chartpin/pins); Base the pull
	// request's base (default main).
	Branch, Base string
	Labels       []string
	// DryRun computes and shows the commit and pull request, writing nothing.
	DryRun bool
	Logger *slog.Logger
	// Describe words an error a dry run notes instead of failing (default:
	// its message; a command line names option fields by its flags).
	Describe func(error) string
}

// Validate checks the options by themselves, before the remote, GitHub or
// a registry is asked: a checkout, a pull request service unless DryRun,
// and valid pin options.
func (o Options) Validate() error {
	if o.Repo == nil {
		return failure.Input(errors.New("release: no repository"))
	}
	if o.PRs == nil && !o.DryRun {
		return failure.Input(errors.New("release: no pull request service (set GITHUB_TOKEN)"))
	}
	return o.Pin.Validate()
}

func describe(o Options, err error) string {
	if o.Describe != nil {
		return o.Describe(err)
	}
	return err.Error()
}

// Report is what a run did (or, dry, would do).
type Report struct {
	DryRun bool `json:"-"` // the output layer marks dry runs itself
	// Plan is the pin change set (nil when nothing was planned).
	Plan *pin.Result `json:"plan,omitempty"`
	// Nothing: no pin moved; nothing was done.
	Nothing bool   `json:"nothing"`
	Branch  string `json:"branch"`
	Remote  string `json:"remote,omitempty"`
	// Parent is the commit the release commit has (or would have) as parent.
	Parent string `json:"parent,omitempty"`
	// Files are the committed paths, relative to the repository root.
	Files []string `json:"files,omitempty"`
	// Commit is the release commit; CommitCreated is false when an existing
	// commit already held exactly these changes.
	Commit        string `json:"commit,omitempty"`
	CommitCreated bool   `json:"commit_created,omitempty"`
	// Pushed is false when the remote branch already had the commit.
	Pushed bool `json:"pushed"`
	// Title and Body of the pull request (= the commit message).
	Title string `json:"title,omitempty"`
	Body  string `json:"body,omitempty"`
	// PR is the pull request outcome (dry run: the open one found, if any).
	PR *pullrequest.Outcome `json:"pull_request,omitempty"`
	// Diff is the unified diff of the pin run (dry run).
	Diff string `json:"diff,omitempty"`
	// Notes say what a dry run could not look up (an unreachable remote or
	// API); a real run fails instead.
	Notes []string `json:"notes,omitempty"`
}

// Run pins, commits, pushes and opens or updates the pull request.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Branch == "" {
		o.Branch = "chartpin/pins"
	}
	if o.Base == "" {
		o.Base = "main"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Pin.Logger == nil {
		o.Pin.Logger = o.Logger
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	rep := &Report{DryRun: o.DryRun, Branch: o.Branch}
	rep.Remote, _ = o.Repo.RemoteURL()

	// Look at the remote branch first: foreign commits stop us before any write.
	// A dry run previews without the remote: it cannot say whether the
	// branch exists, but it still shows the commit and the pull request.
	remote, err := o.Repo.Inspect(ctx, o.Branch)
	if err != nil {
		if !o.DryRun {
			return rep, err
		}
		rep.Notes = append(rep.Notes, fmt.Sprintf("remote branch %s not looked up: %s", o.Branch, describe(o, err)))
	}
	head, err := o.Repo.Head()
	if err != nil {
		return rep, err
	}
	plan, err := pin.Plan(ctx, o.Pin)
	if err != nil {
		return rep, err
	}
	rep.Plan = plan

	if !plan.Changed() {
		rep.Nothing = true
		return rep, nil
	}
	// The commit is built from the plan's bytes on top of HEAD; the checkout
	// is left as it is. Writing the pins into it would make a re-run in the
	// same checkout plan against already-bumped files and bump twice. Files
	// with uncommitted edits are refused: those edits would ride along.
	if err := requireClean(o.Repo, head, plan); err != nil {
		return rep, err
	}
	if o.DryRun {
		return dryRun(ctx, o, rep, plan, head)
	}
	return propose(ctx, o, rep, plan, head, remote)
}

// propose commits the plan's bytes on top of head, pushes the branch unless
// the remote has that commit, and opens or updates the pull request.
func propose(ctx context.Context, o Options, rep *Report, plan *pin.Result, head plumbing.Hash, remote gitops.Branch) (*Report, error) {
	message := plan.Subject() + "\n\n" + plan.Markdown()
	// Reuse: the pushed commit, when it has this parent and these bytes.
	commit, err := o.Repo.Commit(ctx, gitops.CommitRequest{
		Branch: o.Branch, Parent: head, Files: files(plan), Message: message, Reuse: remote.Tip,
	})
	if errors.Is(err, gitops.ErrNothingToCommit) {
		rep.Nothing = true
		return rep, nil
	}
	if err != nil {
		return rep, err
	}
	if !commit.Created {
		message = withoutTrailer(remote.Message) // the pull request shows this already
	}
	rep.Commit, rep.CommitCreated = commit.Hash.String(), commit.Created
	rep.Files = commit.Paths
	rep.Title, rep.Body = splitMessage(message)

	if !(remote.Exists && remote.Tip == commit.Hash) {
		if err := o.Repo.Push(ctx, o.Branch, commit.Hash, remote); err != nil {
			return rep, err
		}
		rep.Pushed = true
	}
	out, err := pullrequest.Ensure(ctx, o.PRs, pullrequest.Request{
		Head: o.Branch, Base: o.Base, Title: rep.Title, Body: prBody(rep.Body), Labels: o.Labels,
	})
	if err != nil {
		return rep, fmt.Errorf("%w (the branch %s is pushed; re-run to finish: release is idempotent)", err, o.Branch)
	}
	rep.PR = &out
	return rep, nil
}

func dryRun(ctx context.Context, o Options, rep *Report, plan *pin.Result, head plumbing.Hash) (*Report, error) {
	rep.Diff = plan.Diff()
	rep.Title, rep.Body = plan.Subject(), plan.Markdown()
	for _, f := range plan.Files() {
		rep.Files = append(rep.Files, relToRoot(o.Repo.Root(), f.Path))
	}
	sort.Strings(rep.Files)
	rep.Parent = head.String()
	if o.PRs != nil {
		pr, err := o.PRs.FindOpen(ctx, o.Branch)
		switch {
		case err != nil:
			rep.Notes = append(rep.Notes, fmt.Sprintf("open pull request not looked up: %s", describe(o, err)))
		case pr != nil:
			rep.PR = &pullrequest.Outcome{Action: pullrequest.Updated, PR: *pr}
		default:
			rep.PR = &pullrequest.Outcome{Action: pullrequest.Created}
		}
	}
	return rep, nil
}

// requireClean refuses when a file the plan changes differs from HEAD.
func requireClean(repo *gitops.Repo, head plumbing.Hash, plan *pin.Result) error {
	for _, f := range plan.Files() {
		rel := relToRoot(repo.Root(), f.Path)
		committed, err := repo.ReadFile(head, rel)
		if errors.Is(err, fs.ErrNotExist) {
			return failure.Input(fmt.Errorf("%s is not committed; commit it first: release commits on top of HEAD", rel))
		}
		if err != nil {
			return err
		}
		if !bytes.Equal(committed, f.Before) {
			return failure.Input(fmt.Errorf("%s has uncommitted changes; commit or stash them first: they would ride along in the release commit", rel))
		}
	}
	return nil
}

func files(plan *pin.Result) map[string][]byte {
	out := map[string][]byte{}
	for _, f := range plan.Files() {
		out[f.Path] = f.After
	}
	return out
}

func relToRoot(root, p string) string {
	if real, err := relpath.Real(p); err == nil {
		p = real
	}
	return filepath.ToSlash(relpath.Show(root, p))
}

// withoutTrailer drops chartpin's trailer from a commit message.
func withoutTrailer(msg string) string {
	i := strings.LastIndex(msg, "\n"+gitops.Trailer+": ")
	if i < 0 {
		return strings.TrimRight(msg, "\n")
	}
	return strings.TrimRight(msg[:i], "\n")
}

func splitMessage(msg string) (title, body string) {
	title, body, _ = strings.Cut(msg, "\n")
	return title, strings.TrimSpace(body) + "\n"
}

// footer ends every pull request body chartpin writes.
const footer = "\n---\nOpened by `chartpin release`. Re-running it updates this pull request; a commit pushed to this branch by anyone else stops it (it never overwrites)."

func prBody(body string) string { return strings.TrimRight(body, "\n") + "\n" + footer + "\n" }

// Text renders the report for a terminal.
func (r *Report) Text() string {
	var b strings.Builder
	switch {
	case r.Nothing:
		fmt.Fprintf(&b, "nothing to release: no pin moved; no commit, no push, no pull request change\n")
		return b.String()
	case r.DryRun:
		fmt.Fprintf(&b, "dry run: nothing written, nothing pushed\n\n")
		fmt.Fprintf(&b, "would commit on %s (parent %s):\n  %s\n", r.Branch, shortHash(r.Parent), r.Title)
		for _, f := range r.Files {
			fmt.Fprintf(&b, "    %s\n", f)
		}
		fmt.Fprintf(&b, "would push %s to %s\n", r.Branch, redact.URL(r.Remote))
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "note: %s\n", n)
		}
		switch {
		case r.PR == nil:
			fmt.Fprintf(&b, "would open or update the pull request for %s (not looked up)\n", r.Branch)
		case r.PR.Action == pullrequest.Created:
			fmt.Fprintf(&b, "would open a pull request: %s\n", r.Title)
		default:
			fmt.Fprintf(&b, "would update pull request #%d (%s): %s\n", r.PR.PR.Number, r.PR.PR.URL, r.Title)
		}
		fmt.Fprintf(&b, "\npull request body:\n\n%s\n%s", prBody(r.Body), r.Diff)
		return b.String()
	}
	verb := "committed"
	if !r.CommitCreated {
		verb = "kept"
	}
	fmt.Fprintf(&b, "%s %s on %s (the checkout is untouched): %s\n", verb, shortHash(r.Commit), r.Branch, r.Title)
	if r.Pushed {
		fmt.Fprintf(&b, "pushed %s\n", r.Branch)
	} else {
		fmt.Fprintf(&b, "%s already up to date on the remote: not pushed\n", r.Branch)
	}
	if r.PR != nil {
		fmt.Fprintf(&b, "pull request #%d %s: %s\n", r.PR.PR.Number, r.PR.Action, r.PR.PR.URL)
		if len(r.PR.LabelsAdded) > 0 {
			fmt.Fprintf(&b, "labels added: %s\n", strings.Join(r.PR.LabelsAdded, ", "))
		}
	}
	return b.String()
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
