package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/chartpin/chartpin/chartbump"
)

func init() {
	register(func() *cli.Command {
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
			},
			Action: runBump,
		}
	})
}

func runBump(c *cli.Context) error {
	if c.NArg() < 1 || c.NArg() > 2 {
		return usage("bump: want CHART_DIR [patch|minor|major|X.Y.Z], got %d arguments", c.NArg())
	}
	for _, a := range c.Args().Slice() {
		if strings.HasPrefix(a, "-") {
			return usage("bump: flag %s after CHART_DIR; put flags first: chartpin bump [--dry-run] [--app-version X.Y.Z] CHART_DIR [patch|minor|major|X.Y.Z]", a)
		}
	}
	opts := chartbump.Options{Bump: chartbump.BumpPatch, AppVersion: c.String("app-version"), AppVersionPolicy: c.String("app-version-policy")}
	switch arg := c.Args().Get(1); arg {
	case "": // patch; a lockstep chart takes an explicit --app-version as its version instead
	case chartbump.BumpPatch, chartbump.BumpMinor, chartbump.BumpMajor:
		opts.Bump = arg
	default:
		opts.Bump, opts.Version = chartbump.BumpNone, arg
	}
	chart, err := chartbump.Read(c.Args().First())
	if err != nil {
		return err
	}
	change, err := chartbump.Plan(chart, opts)
	if err != nil {
		return err
	}
	w := c.App.Writer
	if !change.Changed() {
		_, err := fmt.Fprintf(w, "%s: version %s, appVersion %s: nothing to change\n", change.Path, change.OldVersion, orNone(change.OldAppVersion))
		return err
	}
	verb := "bumped"
	if c.Bool("dry-run") {
		verb = "would bump (dry run, nothing written)"
	} else if err := chartbump.Write(change); err != nil {
		return err
	}
	fmt.Fprintf(w, "%s: %s version %s -> %s", change.Path, verb, change.OldVersion, change.NewVersion)
	if change.NewAppVersion != change.OldAppVersion {
		fmt.Fprintf(w, ", appVersion %s -> %s", change.OldAppVersion, change.NewAppVersion)
	}
	_, err = fmt.Fprintln(w)
	return err
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
