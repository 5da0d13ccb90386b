package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/chartpin/chartpin/config"
	"github.com/chartpin/chartpin/ghactions"
	"github.com/chartpin/chartpin/pin"
)

func pinCommand() *cli.Command {
	return withOutput(&cli.Command{
		Name:      "pin",
		Usage:     "resolve every image a chart declares, write the pins into values.yaml, bump version+appVersion",
		ArgsUsage: "[CHART_DIR...]",
		Description: "With ./chartpin.yaml (or --config) exactly the configured images are pinned; without one,\n" +
			"every pin key in each CHART_DIR's values.yaml is discovered, and keys that cannot be resolved by\n" +
			"construction (no repository, no tag) are listed as SKIPPED. Nothing is written unless every image\n" +
			"that would be pinned resolves and every policy holds (a refusal exits 1 and is listed in the plan,\n" +
			"which --dry-run always prints); a held pin or a false when: stays and the others move. A new pin\n" +
			"must be an index covering every platform of the pin it replaces. A second run changes nothing.\n" +
			"Inside GitHub Actions it writes\n" +
			"the outputs changed and version (one chart), the change table to the step summary, and a warning\n" +
			"for every pin it cannot pin and every old-digest copy it leaves.",
		Flags: append(pinFlags(),
			&cli.BoolFlag{Name: "dry-run", Usage: "print a unified diff, write nothing"},
		),
		Action: runPin,
	})
}

func runPin(c *cli.Context) error {
	opts, err := pinOptions(c)
	if err != nil {
		return err
	}
	ctx, cancel, r, err := resolverContext(c)
	if err != nil {
		return err
	}
	defer cancel()
	opts.Resolver, opts.Signatures, opts.DryRun = r, r.PinSignatures(), c.Bool("dry-run")
	unlock, notes, err := pin.Lock(ctx, opts)
	if err != nil {
		return err
	}
	defer unlock()
	printNotes(c, notes...)
	res, refused := pin.Plan(ctx, opts)
	if res == nil {
		return refused
	}
	if refused == nil {
		if err := r.Finish(); err != nil {
			return err
		}
		if !opts.DryRun {
			if err := res.Apply(); err != nil {
				return err
			}
		}
	}
	dry := opts.DryRun
	if err := show(c, view{value: res, dryRun: dry,
		text: func(w io.Writer) error {
			if dry {
				if _, err := io.WriteString(w, res.Diff()); err != nil {
					return err
				}
			}
			_, err := io.WriteString(w, res.Text())
			return err
		},
		markdown: func(w io.Writer) error {
			_, err := io.WriteString(w, res.Markdown())
			return err
		},
		actions: func(gh *ghactions.Runner) ghactions.Report { return pinReport(gh, res, dry) },
	}); err != nil {
		return err
	}
	return refused
}

// printNotes prints what a run did besides its result (an interrupted run
// completed) to stderr, one "chartpin:" line each.
func printNotes(c *cli.Context, notes ...string) {
	for _, n := range notes {
		if n != "" {
			fmt.Fprintln(c.App.ErrWriter, "chartpin:", ghactions.EscapeData(n))
		}
	}
}

// pinReport is what pin hands to GitHub Actions: outputs changed and (for
// one chart) version, the Markdown change set as the step summary, and a
// warning on every pin not pinned and every copy left as it is. Under
// --dry-run, changed and version say what a real run would do.
func pinReport(gh *ghactions.Runner, res *pin.Result, dry bool) ghactions.Report {
	rep := ghactions.Report{Outputs: []ghactions.Output{{Name: "changed", Value: strconv.FormatBool(res.Changed())}}}
	if len(res.Charts) == 1 {
		rep.Outputs = append(rep.Outputs, ghactions.Output{Name: "version", Value: res.Charts[0].NewVersion})
	}
	title := "## chartpin pin\n\n"
	if dry {
		title = "## chartpin pin (dry run: nothing written)\n\n"
	}
	rep.Summary = title + res.Markdown()
	for _, ch := range res.Charts {
		for _, f := range ch.Refused {
			rep.Annotations = append(rep.Annotations, ghactions.Annotation{Level: ghactions.Error,
				File: gh.RelPath(f.File), Line: f.Line, Title: "refused " + f.Path, Message: f.Reason})
		}
		for _, s := range ch.Skipped {
			rep.Annotations = append(rep.Annotations, ghactions.Annotation{Level: ghactions.Warning,
				File: gh.RelPath(s.File), Line: s.Line, Title: "not pinned " + s.Path, Message: s.Problem})
		}
		for _, cp := range ch.Copies {
			if cp.New == "" {
				rep.Annotations = append(rep.Annotations, ghactions.Annotation{Level: ghactions.Warning,
					File: gh.RelPath(cp.File), Line: cp.Line, Title: "old digest left " + cp.Pin,
					Message: cp.Old + " is the old digest of " + cp.Pin + " and is never rewritten here; update it by hand"})
			}
		}
	}
	return rep
}

// pinFlags are the flags of every command that runs the pin job (pin, release).
func pinFlags() []cli.Flag {
	return append(resolverFlags(),
		&cli.StringFlag{Name: "config", Usage: "chartpin.yaml `FILE` (default ./chartpin.yaml; without one, discovery)"},
		&cli.StringSliceFlag{Name: "set-tag", Usage: "move an image's tag first: `PATH=TAG` (PATH is the image's path, as in at:)"},
		&cli.BoolFlag{Name: "rewrite-copies", Usage: "also rewrite other occurrences of an old pin in the chart"},
		&cli.StringFlag{Name: "bump", Usage: "patch|minor|major|none (default: the config's, else patch)"},
		&cli.StringFlag{Name: "version", Usage: "explicit new chart `VERSION` (still lockstep-checked)"},
		&cli.StringFlag{Name: "app-version", Usage: "explicit new `APPVERSION` (still lockstep-checked)"},
		&cli.StringSliceFlag{Name: "platforms", Usage: "every new pin must cover these `PLATFORMS` too (linux/amd64,linux/arm64)"},
	)
}

// pinOptions reads pinFlags and the chart arguments; the caller sets the resolver.
func pinOptions(c *cli.Context) (pin.Options, error) {
	o := pin.Options{
		RewriteCopies: c.Bool("rewrite-copies"),
		Bump:          c.String("bump"),
		Version:       c.String("version"),
		AppVersion:    c.String("app-version"),
		Platforms:     c.StringSlice("platforms"),
		Logger:        logger(c),
	}
	if err := o.Validate(); err != nil {
		return pin.Options{}, err
	}
	tags := map[string]string{}
	for _, s := range c.StringSlice("set-tag") {
		// Split at the last '=': a tag cannot contain one, a quoted key can.
		i := strings.LastIndex(s, "=")
		path, tag := s[:max(i, 0)], s[i+1:]
		if i < 0 || path == "" || tag == "" {
			return pin.Options{}, usage("--set-tag %q: want PATH=TAG, e.g. images.ingestor=0.8.4", s)
		}
		if prev, dup := tags[path]; dup && prev != tag {
			return pin.Options{}, usage("--set-tag %s given twice (%s and %s)", path, prev, tag)
		}
		tags[path] = tag
	}
	cfgPath := c.String("config")
	if cfgPath == "" {
		found, err := config.Find(".")
		if err != nil {
			return pin.Options{}, err
		}
		cfgPath = found
	}
	o.ConfigPath, o.ChartDirs, o.SetTags = cfgPath, c.Args().Slice(), tags
	return o, nil
}
