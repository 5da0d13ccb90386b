package main

import (
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/chartpin/chartpin/chartbump"
	"github.com/chartpin/chartpin/ghactions"
	"github.com/chartpin/chartpin/internal/chartfile"
)

func bumpCommand() *cli.Command {
	return &cli.Command{
		Name:      "bump",
		Usage:     "move Chart.yaml version (and appVersion in lockstep) byte-exactly",
		ArgsUsage: "CHART_DIR [patch|minor|major|X.Y.Z]",
		Description: "Without a second argument the version gets a patch bump. appVersion follows the\n" +
			"version when the two are equal today (auto), or as --app-version-policy says.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "app-version", Usage: "set appVersion to `X.Y.Z` (a lockstep chart takes it as its version too)"},
			&cli.StringFlag{Name: "app-version-policy", Value: chartbump.PolicyAuto, Usage: "auto|lockstep|keep|from:VALUE"},
			&cli.BoolFlag{Name: "dry-run", Usage: "print what would change, write nothing"},
			outputFlag(),
		},
		Action: runBump,
	}
}

func runBump(c *cli.Context) error {
	if c.NArg() < 1 || c.NArg() > 2 {
		return usage("bump: want CHART_DIR [patch|minor|major|X.Y.Z], got %d arguments", c.NArg())
	}
	if _, err := format(c); err != nil {
		return err
	}
	opts := chartbump.Options{Bump: chartbump.BumpPatch, AppVersion: c.String("app-version"), AppVersionPolicy: c.String("app-version-policy")}
	switch arg := c.Args().Get(1); arg {
	case "": // patch; a lockstep chart takes an explicit --app-version as its version instead
	case chartbump.BumpPatch, chartbump.BumpMinor, chartbump.BumpMajor:
		opts.Bump = arg
	default:
		opts.Bump, opts.Version = chartbump.BumpNone, arg
	}
	dir := c.Args().First()
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() { // else Read names the problem
		held, note, err := chartfile.Lock(c.Context, dir, !c.Bool("dry-run"))
		if err != nil {
			return err
		}
		defer held.Unlock()
		printNotes(c, note)
	}
	chart, err := chartbump.Read(dir)
	if err != nil {
		return err
	}
	change, err := chartbump.Plan(chart, opts)
	if err != nil {
		return err
	}
	dry := c.Bool("dry-run")
	if change.Changed() && !dry {
		if err := chartbump.Write(change); err != nil {
			return err
		}
	}
	return show(c, view{value: bumpJSON{Path: change.Path, Changed: change.Changed(),
		OldVersion: change.OldVersion, NewVersion: change.NewVersion,
		OldAppVersion: change.OldAppVersion, NewAppVersion: change.NewAppVersion}, dryRun: dry,
		text:     func(w io.Writer) error { return writeBumpText(w, change, dry) },
		markdown: func(w io.Writer) error { return writeBumpMarkdown(w, change, dry) },
	})
}

// bumpJSON is bump's JSON document.
type bumpJSON struct {
	Path          string `json:"path"`
	Changed       bool   `json:"changed"`
	OldVersion    string `json:"old_version"`
	NewVersion    string `json:"new_version"`
	OldAppVersion string `json:"old_app_version,omitempty"`
	NewAppVersion string `json:"new_app_version,omitempty"`
}

func writeBumpText(w io.Writer, change chartbump.Change, dry bool) error {
	if !change.Changed() {
		_, err := fmt.Fprintf(w, "%s: version %s, appVersion %s: nothing to change\n", change.Path, change.OldVersion, orNone(change.OldAppVersion))
		return err
	}
	verb := "bumped"
	if dry {
		verb = "would bump (dry run, nothing written)"
	}
	fmt.Fprintf(w, "%s: %s version %s -> %s", change.Path, verb, change.OldVersion, change.NewVersion)
	if change.NewAppVersion != change.OldAppVersion {
		fmt.Fprintf(w, ", appVersion %s -> %s", change.OldAppVersion, change.NewAppVersion)
	}
	_, err := fmt.Fprintln(w)
	return err
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// writeBumpMarkdown is the change as a before/after table.
func writeBumpMarkdown(w io.Writer, change chartbump.Change, dry bool) error {
	head := "bumped"
	switch {
	case !change.Changed():
		head = "nothing to change"
	case dry:
		head = "dry run, nothing written"
	}
	if _, err := fmt.Fprintf(w, "### %s (%s)\n\n", ghactions.Code(change.Path), head); err != nil {
		return err
	}
	return mdTable(w, []string{"", "before", "after"}, [][]string{
		{"version", ghactions.Code(change.OldVersion), ghactions.Code(change.NewVersion)},
		{"appVersion", ghactions.Code(orNone(change.OldAppVersion)), ghactions.Code(orNone(change.NewAppVersion))},
	})
}
