package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/chartpin/chartpin/config"
	"github.com/chartpin/chartpin/deprecation"
	"github.com/chartpin/chartpin/drift"
	"github.com/chartpin/chartpin/ghactions"
	"github.com/chartpin/chartpin/publish"
)

func driftCommand() *cli.Command {
	return withOutput(&cli.Command{
		Name:      "drift",
		Usage:     "read-only: does each pin's float still resolve to it? " + statusList(" / "),
		ArgsUsage: "[CHART_DIR...]",
		Flags: append(checkFlags(),
			&cli.StringFlag{Name: "config", Usage: "chartpin.yaml `FILE` (default ./chartpin.yaml if present; pins it lacks are discovered too)"},
			&cli.StringFlag{Name: "index", Usage: "report versions each Chart.yaml names that this index.yaml (`URL|FILE`) marks deprecated"},
			&cli.StringFlag{Name: "oci", Usage: "report versions each Chart.yaml names that are deprecated under `oci://HOST/PATH`"},
			&cli.BoolFlag{Name: "show-tags", Usage: "for drifted pins, list the tags that share the new digest (lists tags: GET requests)"},
		),
		Action: runDrift,
	})
}

func runDrift(c *cli.Context) error {
	if oci := c.String("oci"); oci != "" {
		if err := publish.CheckOCI(oci); err != nil {
			return err
		}
	}
	cfg, err := checkConfig(c.String("config"))
	if err != nil {
		return err
	}
	targets, err := config.Select(cfg, c.Args().Slice())
	if err != nil {
		return err
	}
	ctx, cancel, r, err := resolverContext(c)
	if err != nil {
		return err
	}
	defer cancel()
	opts := drift.Options{ShowTags: c.Bool("show-tags"), Offline: r.Offline(), Logger: logger(c), Signatures: r.PinSignatures()}
	if c.String("index") != "" || c.String("oci") != "" {
		opts.Repository = &deprecation.Repository{
			Index: c.String("index"), OCI: c.String("oci"), Resolver: r, Artifacts: r.Artifacts(),
		}
	}
	rep, err := drift.Check(ctx, r, targets, opts)
	if err != nil {
		return err
	}
	if !r.Offline() {
		stats := r.Stats()
		rep.Requests = &stats
	}
	if err := r.Finish(); err != nil {
		return err
	}
	err = show(c, view{value: rep,
		text: func(w io.Writer) error { return drift.WriteText(w, rep, relToCwd) },
		markdown: func(w io.Writer) error {
			_, err := io.WriteString(w, drift.Markdown(rep, relToCwd))
			return err
		},
		actions: func(gh *ghactions.Runner) ghactions.Report { return drift.Actions(rep, gh.RelPath) },
	})
	if err != nil {
		return err
	}
	return rep.Err()
}

// relToCwd shortens a path for the terminal.
func relToCwd(p string) string {
	wd, err := os.Getwd()
	if err != nil {
		return p
	}
	if rel, err := filepath.Rel(wd, p); err == nil && !filepath.IsAbs(rel) && len(rel) < len(p) && rel[0] != '.' {
		return rel
	}
	return p
}

// statusList is every drift status, as the summary line counts them.
func statusList(sep string) string {
	names := make([]string, len(drift.Statuses))
	for i, s := range drift.Statuses {
		names[i] = string(s)
	}
	return strings.Join(names, sep)
}
