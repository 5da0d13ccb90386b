package main

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/chartpin/chartpin/ghactions"
	"github.com/chartpin/chartpin/gitops"
	"github.com/chartpin/chartpin/pullrequest"
	"github.com/chartpin/chartpin/release"
)

func releaseCommand() *cli.Command {
	return &cli.Command{
		Name:      "release",
		Usage:     "pin, commit the changed files on a branch, push it, open or update one pull request",
		ArgsUsage: "[CHART_DIR...]",
		Description: "Plans chartpin pin on the working tree, commits only the files it would change on\n" +
			"--branch (on top of HEAD; the checkout is left untouched), pushes it and opens or updates the pull\n" +
			"request against --base. Nothing changed: no commit, no push, no editing API call. A branch\n" +
			"someone else pushed to is never overwritten. GITHUB_TOKEN authenticates the push (HTTPS)\n" +
			"and the API; it is never printed.",
		Flags: append(pinFlags(),
			&cli.BoolFlag{Name: "dry-run", Usage: "show the diff, the commit and the pull request; write and push nothing (works without the remote)"},
			outputFlag(),
			&cli.StringFlag{Name: "branch", Value: "chartpin/pins", Usage: "release `BRANCH` to commit on and push"},
			&cli.StringFlag{Name: "remote", Value: "origin", Usage: "git `REMOTE` to push to"},
			&cli.StringFlag{Name: "base", Value: "main", Usage: "pull request base `BRANCH`"},
			&cli.StringSliceFlag{Name: "label", Usage: "pull request `LABEL` (repeatable)"},
			&cli.StringFlag{Name: "github-api", Value: "https://api.github.com", Usage: "GitHub REST API `URL`"},
			&cli.StringFlag{Name: "repo", Usage: "GitHub `OWNER/NAME` (default: from the remote URL)"},
			&cli.StringFlag{Name: "ssh-key", Usage: "private key `FILE` for an SSH remote"},
			&cli.StringFlag{Name: "committer", Value: "chartpin <chartpin@users.noreply.github.com>", Usage: "`NAME <EMAIL>` of the release commit"},
		),
		Action: runRelease,
	}
}

var committerRE = regexp.MustCompile(`^([^<>]+?)\s*<([^<>\s]+)>$`)

func runRelease(c *cli.Context) error {
	if _, err := format(c); err != nil {
		return err
	}
	pinOpts, err := pinOptions(c)
	if err != nil {
		return err
	}
	m := committerRE.FindStringSubmatch(c.String("committer"))
	if m == nil {
		return usage("--committer %q: want NAME <EMAIL>", c.String("committer"))
	}
	dirs := pinOpts.ChartDirs
	token := os.Getenv("GITHUB_TOKEN")
	dry := c.Bool("dry-run")
	if token == "" && !dry {
		return usage("GITHUB_TOKEN is not set: release needs it to open the pull request (and to push over HTTPS); or pass --dry-run")
	}
	log := logger(c)
	gopts := gitops.Options{Remote: c.String("remote"), Token: token, Logger: log,
		CommitterName: m[1], CommitterEmail: m[2], Timeout: c.Duration("timeout")}
	if k := c.String("ssh-key"); k != "" {
		gopts.SSHKey, gopts.SSHPassphrase = k, os.Getenv("CHARTPIN_SSH_PASSPHRASE")
	}
	start := "."
	if len(dirs) > 0 {
		start = dirs[0]
	}
	repo, err := gitops.Open(start, gopts)
	if err != nil {
		return err
	}
	var prs pullrequest.Service
	if token != "" {
		owner, name, ok := strings.Cut(c.String("repo"), "/")
		if c.String("repo") == "" {
			remote, err := repo.RemoteURL()
			if err != nil {
				return usage("%w; or pass --repo OWNER/NAME", err)
			}
			if owner, name, err = pullrequest.RepoFromRemote(remote); err != nil {
				return usage("%w; pass --repo OWNER/NAME", err)
			}
		} else if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
			return usage("--repo %q: want OWNER/NAME", c.String("repo"))
		}
		gh, err := pullrequest.NewGitHub(owner, name, token, pullrequest.Options{API: c.String("github-api"), Logger: log})
		if err != nil {
			return usage("%w", err)
		}
		prs = gh
	}
	ctx, cancel, r, err := resolverContext(c)
	if err != nil {
		return err
	}
	defer cancel()
	pinOpts.Resolver, pinOpts.Signatures = r, r.PinSignatures()
	rep, err := release.Run(ctx, release.Options{
		Pin:  pinOpts,
		Repo: repo, PRs: prs, Branch: c.String("branch"), Base: c.String("base"),
		Labels: c.StringSlice("label"), DryRun: dry, Logger: log, Describe: message,
	})
	if err != nil {
		return err
	}
	if err := r.Finish(); err != nil {
		return err
	}
	return show(c, view{value: rep, dryRun: dry,
		text: func(w io.Writer) error {
			_, err := io.WriteString(w, rep.Text())
			return err
		},
		markdown: func(w io.Writer) error { return writeReleaseMarkdown(w, rep) },
		actions:  func(*ghactions.Runner) ghactions.Report { return releaseReport(rep) },
	})
}

// releaseReport is what release hands to GitHub Actions: outputs changed,
// commit, pushed and the pull request, and its body as the step summary.
func releaseReport(rep *release.Report) ghactions.Report {
	out := ghactions.Report{Outputs: []ghactions.Output{
		{Name: "changed", Value: strconv.FormatBool(!rep.Nothing)},
		{Name: "commit", Value: rep.Commit},
		{Name: "pushed", Value: strconv.FormatBool(rep.Pushed)},
	}}
	if rep.PR != nil && rep.PR.PR.Number != 0 {
		out.Outputs = append(out.Outputs,
			ghactions.Output{Name: "pr-number", Value: strconv.Itoa(rep.PR.PR.Number)},
			ghactions.Output{Name: "pr-url", Value: rep.PR.PR.URL})
	}
	if !rep.Nothing {
		out.Summary = "## chartpin release\n\n" + rep.Body
	}
	return out
}

// writeReleaseMarkdown is the release as a table, then the pull request's
// title and body (Markdown already) and, in a dry run, the diff.
func writeReleaseMarkdown(w io.Writer, rep *release.Report) error {
	if rep.Nothing {
		_, err := io.WriteString(w, "Nothing to release: no pin moved; no commit, no push, no pull request change.\n")
		return err
	}
	head, commit := "### release", rep.Commit
	if rep.DryRun {
		head, commit = "### release (dry run: nothing written, nothing pushed)", "(not made)"
	}
	pr := "not looked up"
	switch {
	case rep.PR == nil:
	case rep.DryRun && rep.PR.Action == pullrequest.Created:
		pr = "would open"
	case rep.DryRun:
		pr = fmt.Sprintf("would update #%d", rep.PR.PR.Number)
	default:
		pr = fmt.Sprintf("#%d %s: %s", rep.PR.PR.Number, rep.PR.Action, rep.PR.PR.URL)
	}
	files := make([]string, len(rep.Files))
	for i, f := range rep.Files {
		files[i] = ghactions.Code(f)
	}
	fmt.Fprintf(w, "%s\n\n", head)
	if err := mdTable(w, []string{"BRANCH", "PARENT", "COMMIT", "FILES", "PUSHED", "PULL REQUEST"}, [][]string{{
		ghactions.Code(rep.Branch), ghactions.Code(shortHash(rep.Parent)), ghactions.Code(shortHash(commit)),
		strings.Join(files, " "), strconv.FormatBool(rep.Pushed), ghactions.Text(pr),
	}}); err != nil {
		return err
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "\n> note: %s\n", ghactions.Text(n))
	}
	fmt.Fprintf(w, "\n#### %s\n\n%s\n", ghactions.Text(rep.Title), strings.TrimRight(rep.Body, "\n"))
	if rep.DryRun && rep.Diff != "" {
		fmt.Fprintf(w, "\n%s", fencedText("diff", rep.Diff))
	}
	return nil
}

// shortHash is a commit hash cut to twelve characters, as git shows it.
func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
