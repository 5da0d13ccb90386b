package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/chartpin/chartpin/ghactions"
	"github.com/chartpin/chartpin/gitops"
	"github.com/chartpin/chartpin/publish"
	"github.com/chartpin/chartpin/resolver"
)

func publishCommand() *cli.Command {
	// Flags that are options fields bind straight into o.
	var o publish.Options
	return &cli.Command{
		Name:      "publish",
		Usage:     "package a chart; add it to an index.yaml and/or push it to OCI; never overwrite a published version",
		ArgsUsage: "CHART_DIR",
		Description: "The same version with identical bytes is a no-op (exit 0); with other bytes it is refused\n" +
			"(exit 1). Prereleases never enter the stable index: give them --prerelease-index. The index\n" +
			"is re-read and checked after every write.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "index-dir", Destination: &o.IndexDir, Usage: "Helm repository `DIR` (index.yaml and tarballs)"},
			&cli.StringFlag{Name: "pages-branch", Destination: &o.PagesBranch, Usage: "Helm repository on git `BRANCH` (e.g. gh-pages) of --remote, pushed with GITHUB_TOKEN"},
			&cli.StringFlag{Name: "remote", Value: "origin", Usage: "git `REMOTE` holding --pages-branch"},
			&cli.StringFlag{Name: "base-url", Destination: &o.BaseURL, Usage: "`URL` the index's tarball URLs point to"},
			&cli.StringFlag{Name: "oci", Destination: &o.OCI, Usage: "OCI target `oci://HOST/PATH` (the chart lands at PATH/NAME:VERSION)"},
			&cli.StringFlag{Name: "prerelease-index", Destination: &o.PrereleaseIndex, Usage: "where prereleases go: a `DIR` (or a path inside --pages-branch), never the stable index's place"},
			&cli.StringFlag{Name: "prerelease-base-url", Destination: &o.PrereleaseBaseURL, Usage: "`URL` the prerelease index's tarball URLs point to (default: --base-url plus --prerelease-index's path below the stable root; required when it lies elsewhere)"},
			&cli.StringFlag{Name: "version", Destination: &o.Version, Usage: "expected chart `VERSION`; refused unless Chart.yaml says the same"},
			&cli.StringFlag{Name: "app-version", Destination: &o.AppVersion, Usage: "expected `APPVERSION`; refused unless Chart.yaml says the same"},
			&cli.BoolFlag{Name: "sign", Usage: "write a provenance file (.prov) signed with --key"},
			&cli.StringFlag{Name: "key", Usage: "signing key `NAME` in --keyring"},
			&cli.StringFlag{Name: "keyring", Usage: "secret keyring `FILE` (default ~/.gnupg/secring.gpg)"},
			&cli.StringFlag{Name: "passphrase-file", Usage: "`FILE` holding the signing key's passphrase"},
			&cli.StringFlag{Name: "deprecate", Usage: "instead of publishing, mark the published `VERSION` deprecated at every target: upgrades never take it and move edges running it to the newest non-deprecated version"},
			&cli.StringFlag{Name: "undeprecate", Usage: "instead of publishing, withdraw the deprecation of `VERSION`"},
			outputFlag(),
		},
		Action: func(c *cli.Context) error { return runPublish(c, o) },
	}
}

func runPublish(c *cli.Context, o publish.Options) error {
	if c.NArg() != 1 {
		return usage("publish takes exactly one CHART_DIR, got %d", c.NArg())
	}
	if _, err := format(c); err != nil {
		return err
	}
	dir := c.Args().First()
	log := logger(c)
	o.PlainHTTP, o.Timeout, o.Logger = c.StringSlice("insecure-registry"), c.Duration("timeout"), log
	if auth := os.Getenv("CHARTPIN_REGISTRY_AUTH"); auth != "" {
		host, user, pass, err := resolver.ParseRegistryAuth(auth)
		if err != nil {
			return usage("CHARTPIN_REGISTRY_AUTH: %w", err)
		}
		// A scoped credential goes only to its own registry.
		ociHost, _, _ := strings.Cut(strings.TrimPrefix(o.OCI, "oci://"), "/")
		if host == "" || host == ociHost {
			o.RegistryUser, o.RegistryPassword = user, pass
		}
	}
	if c.Bool("sign") {
		if c.String("key") == "" {
			return usage("--sign needs --key NAME")
		}
		o.SignKey, o.Keyring = c.String("key"), c.String("keyring")
		if f := c.String("passphrase-file"); f != "" {
			o.Passphrase = func() ([]byte, error) {
				b, err := os.ReadFile(f)
				return []byte(strings.TrimRight(string(b), "\r\n")), err
			}
		}
	}
	if o.PagesBranch != "" {
		repo, err := gitops.Open(dir, gitops.Options{Remote: c.String("remote"), Token: os.Getenv("GITHUB_TOKEN"),
			Logger: log, Timeout: c.Duration("timeout")})
		if err != nil {
			return fmt.Errorf("--pages-branch: %w", err)
		}
		o.Repo = repo
	}
	ctx, cancel := commandContext(c)
	defer cancel()
	if c.IsSet("deprecate") || c.IsSet("undeprecate") {
		return runDeprecate(c, ctx, dir, o)
	}
	if err := o.Validate(); err != nil {
		return err
	}
	res, err := publish.Publish(ctx, dir, o)
	if err != nil {
		return err
	}
	return show(c, view{value: publishView(res),
		text:     func(w io.Writer) error { return writePublishText(w, res) },
		markdown: func(w io.Writer) error { return writePublishMarkdown(w, res) },
		actions: func(*ghactions.Runner) ghactions.Report {
			rep := ghactions.Report{Outputs: []ghactions.Output{
				{Name: "version", Value: res.Version},
				{Name: "digest", Value: "sha256:" + res.Digest},
			}}
			if res.OCI != nil {
				rep.Outputs = append(rep.Outputs, ghactions.Output{Name: "oci-ref", Value: res.OCI.Ref})
			}
			return rep
		},
	})
}

type publishJSON struct {
	Name       string               `json:"name"`
	Version    string               `json:"version"`
	AppVersion string               `json:"app_version"`
	Prerelease bool                 `json:"prerelease"`
	Filename   string               `json:"filename"`
	Digest     string               `json:"digest"`
	Signed     bool                 `json:"signed"`
	Index      *publish.IndexResult `json:"index,omitempty"`
	OCI        *publish.OCIResult   `json:"oci,omitempty"`
}

func publishView(r *publish.Result) publishJSON {
	return publishJSON{Name: r.Name, Version: r.Version, AppVersion: r.AppVersion, Prerelease: r.Prerelease,
		Filename: r.Filename, Digest: "sha256:" + r.Digest, Signed: r.Provenance != nil, Index: r.Index, OCI: r.OCI}
}

// said spells an action out for a terminal.
func said(a publish.Action) string {
	if a == publish.Unchanged {
		return "already published with identical bytes, nothing written"
	}
	return string(a)
}

func writePublishText(w io.Writer, r *publish.Result) error {
	kind := "stable"
	if r.Prerelease {
		kind = "prerelease"
	}
	if _, err := fmt.Fprintf(w, "%s %s (%s), %s sha256:%s\n", r.Name, r.Version, kind, r.Filename, r.Digest); err != nil {
		return err
	}
	if r.Index != nil {
		fmt.Fprintf(w, "index %s: %s (%d entries", r.Index.Location, said(r.Index.Action), r.Index.Entries)
		if r.Index.Unverified > 0 {
			fmt.Fprintf(w, ", %d hosted elsewhere not checked", r.Index.Unverified)
		}
		fmt.Fprint(w, ")")
		if r.Index.Commit != "" {
			fmt.Fprintf(w, ", commit %s", r.Index.Commit[:12])
		}
		fmt.Fprintln(w)
	}
	if r.OCI != nil {
		fmt.Fprintf(w, "%s: %s (manifest %s)\n", r.OCI.Ref, said(r.OCI.Action), r.OCI.ManifestDigest)
	}
	return nil
}

// writePublishMarkdown is the package and one table row per target.
func writePublishMarkdown(w io.Writer, r *publish.Result) error {
	kind := "stable"
	if r.Prerelease {
		kind = "prerelease"
	}
	signed := ""
	if r.Provenance != nil {
		signed = ", signed"
	}
	fmt.Fprintf(w, "### %s %s (%s)\n\nPackage %s, %s%s\n\n", ghactions.Text(r.Name), ghactions.Text(r.Version), kind,
		ghactions.Code(r.Filename), ghactions.Code("sha256:"+r.Digest), signed)
	var rows [][]string
	if r.Index != nil {
		detail := fmt.Sprintf("%d entries", r.Index.Entries)
		if r.Index.Unverified > 0 {
			detail += fmt.Sprintf(", %d hosted elsewhere not checked", r.Index.Unverified)
		}
		if r.Index.Commit != "" {
			detail += ", commit " + ghactions.Code(r.Index.Commit[:12])
		}
		rows = append(rows, []string{"index " + ghactions.Code(r.Index.Location), ghactions.Text(said(r.Index.Action)), detail})
	}
	if r.OCI != nil {
		rows = append(rows, []string{ghactions.Code(r.OCI.Ref), ghactions.Text(said(r.OCI.Action)), "manifest " + ghactions.Code(r.OCI.ManifestDigest)})
	}
	return mdTable(w, []string{"TARGET", "ACTION", "DETAIL"}, rows)
}

// runDeprecate marks a published version deprecated, or withdraws that.
func runDeprecate(c *cli.Context, ctx context.Context, dir string, o publish.Options) error {
	version, deprecated := c.String("deprecate"), true
	switch {
	case c.IsSet("deprecate") && c.IsSet("undeprecate"):
		return usage("--deprecate and --undeprecate are exclusive")
	case c.IsSet("undeprecate"):
		version, deprecated = c.String("undeprecate"), false
	}
	if c.Bool("sign") || c.IsSet("version") || c.IsSet("app-version") {
		return usage("--deprecate/--undeprecate changes no package: drop --sign, --version and --app-version")
	}
	res, err := publish.Deprecate(ctx, dir, version, deprecated, o)
	if err != nil {
		return err
	}
	return show(c, view{value: res, text: func(w io.Writer) error {
		if res.Index != nil {
			fmt.Fprintf(w, "%s %s: index %s: %s (%d entries, tarballs untouched)", res.Name, res.Version, res.Index.Location, marked(res.Index.Action), res.Index.Entries)
			if res.Index.Commit != "" {
				fmt.Fprintf(w, ", commit %s", res.Index.Commit[:12])
			}
			fmt.Fprintln(w)
		}
		if res.OCI != nil {
			fmt.Fprintf(w, "%s: %s (manifest %s untouched", res.OCI.Ref, marked(res.OCI.Action), res.OCI.ManifestDigest)
			if res.OCI.Marker != "" {
				fmt.Fprintf(w, ", marker %s refers to it", res.OCI.Marker)
			}
			fmt.Fprintln(w, ")")
		}
		return nil
	}, markdown: func(w io.Writer) error { return writeDeprecateMarkdown(w, res) }})
}

// writeDeprecateMarkdown is one table row per target the mark was set at.
func writeDeprecateMarkdown(w io.Writer, res *publish.DeprecateResult) error {
	state := "deprecated"
	if !res.Deprecated {
		state = "no longer deprecated"
	}
	fmt.Fprintf(w, "### %s %s %s\n\n", ghactions.Text(res.Name), ghactions.Text(res.Version), state)
	var rows [][]string
	if res.Index != nil {
		detail := fmt.Sprintf("%d entries, tarballs untouched", res.Index.Entries)
		if res.Index.Commit != "" {
			detail += ", commit " + ghactions.Code(res.Index.Commit[:12])
		}
		rows = append(rows, []string{"index " + ghactions.Code(res.Index.Location), ghactions.Text(marked(res.Index.Action)), detail})
	}
	if res.OCI != nil {
		detail := "manifest " + ghactions.Code(res.OCI.ManifestDigest) + " untouched"
		if res.OCI.Marker != "" {
			detail += ", marker " + ghactions.Code(res.OCI.Marker) + " refers to it"
		}
		rows = append(rows, []string{ghactions.Code(res.OCI.Ref), ghactions.Text(marked(res.OCI.Action)), detail})
	}
	return mdTable(w, []string{"TARGET", "ACTION", "DETAIL"}, rows)
}

// marked spells a deprecation action out for a terminal.
func marked(a publish.Action) string {
	if a == publish.Unchanged {
		return "already so, nothing written"
	}
	return string(a)
}
