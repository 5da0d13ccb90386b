package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/chartpin/chartpin/config"
	"github.com/chartpin/chartpin/pin"
)

func init() {
	register(func() *cli.Command {
		return &cli.Command{
			Name:      "pin",
			Usage:     "resolve every image a chart declares, write the pins into values.yaml, bump version+appVersion",
			ArgsUsage: "[CHART_DIR...]",
			Description: "With ./chartpin.yaml (or --config) exactly the configured images are pinned; without one,\n" +
				"every pin key in each CHART_DIR's values.yaml is discovered. Nothing is written unless every\n" +
				"image resolves and every policy holds; a second run changes nothing.",
			Flags: append(pinFlags(),
				&cli.BoolFlag{Name: "dry-run", Usage: "print a unified diff, write nothing"},
				&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "text", Usage: "text|json|markdown"},
			),
			Action: runPin,
		}
	})
}

func runPin(c *cli.Context) error {
	out, err := outputFormat(c, "text", "json", "markdown")
	if err != nil {
		return err
	}
	opts, err := pinOptions(c)
	if err != nil {
		return err
	}
	ctx, cancel := commandContext(c)
	defer cancel()
	r, err := newResolver(c)
	if err != nil {
		return err
	}
	opts.Resolver = r
	res, err := pin.Plan(ctx, opts)
	if err != nil {
		return err
	}
	if err := r.Finish(); err != nil {
		return err
	}
	if !c.Bool("dry-run") {
		if err := res.Apply(); err != nil {
			return err
		}
	}
	w := c.App.Writer
	switch out {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	case "markdown":
		_, err = fmt.Fprint(w, res.Markdown())
		return err
	}
	if c.Bool("dry-run") {
		if _, err := fmt.Fprint(w, res.Diff()); err != nil {
			return err
		}
	}
	_, err = fmt.Fprint(w, res.Text())
	return err
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
	)
}

// pinOptions reads pinFlags and the chart arguments; the caller sets the resolver.
func pinOptions(c *cli.Context) (pin.Options, error) {
	if b := c.String("bump"); b != "" && b != "patch" && b != "minor" && b != "major" && b != "none" {
		return pin.Options{}, usage("--bump %q: want patch, minor, major or none", b)
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
	dirs := c.Args().Slice()
	if cfgPath == "" && len(dirs) == 0 {
		dirs = []string{"."}
	}
	return pin.Options{
		ConfigPath:    cfgPath,
		ChartDirs:     dirs,
		SetTags:       tags,
		RewriteCopies: c.Bool("rewrite-copies"),
		Bump:          c.String("bump"),
		Version:       c.String("version"),
		AppVersion:    c.String("app-version"),
		Logger:        logger(c),
	}, nil
}
