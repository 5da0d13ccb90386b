package main

import (
	"io"

	"github.com/urfave/cli/v2"

	"github.com/chartpin/chartpin/config"
	"github.com/chartpin/chartpin/ghactions"
	"github.com/chartpin/chartpin/guard"
	"github.com/chartpin/chartpin/publish"
)

func guardCommand() *cli.Command {
	return &cli.Command{
		Name:      "guard",
		Usage:     "refuse chart changes since --base without a semver version bump (read-only)",
		ArgsUsage: "[CHART_DIR...]",
		Flags: append(checkFlags(),
			&cli.StringFlag{Name: "base", Usage: "compare with this git `REF` (e.g. origin/main)"},
			&cli.StringFlag{Name: "config", Usage: "chartpin.yaml `FILE` (default ./chartpin.yaml if present)"},
			&cli.StringFlag{Name: "index", Usage: "refuse a version already in this index.yaml (`URL|FILE`); report deprecated versions still named"},
			&cli.StringFlag{Name: "oci", Usage: "refuse a version already pushed to `oci://HOST/PATH`; report deprecated versions still named"},
			outputFlag(),
		),
		Action: runGuard,
	}
}

func runGuard(c *cli.Context) error {
	base := c.String("base")
	if base == "" {
		return usage("guard: --base REF is required, e.g. chartpin guard --base origin/main")
	}
	if _, err := format(c); err != nil {
		return err
	}
	if oci := c.String("oci"); oci != "" {
		if err := publish.CheckOCI(oci); err != nil {
			return err
		}
	}
	ctx, cancel := commandContext(c)
	defer cancel()
	dirs := c.Args().Slice()
	opts := guard.Options{Base: base, Dirs: dirs, Logger: logger(c), Index: c.String("index"), OCI: c.String("oci")}
	cfg, err := checkConfig(c.String("config"))
	if err != nil {
		return err
	}
	opts.Config = cfg
	if opts.OCI != "" {
		r, err := newResolver(c)
		if err != nil {
			return err
		}
		opts.Resolver, opts.Artifacts = r, r.Artifacts()
	}
	repoDir := "."
	if len(dirs) > 0 {
		repoDir = dirs[0]
	}
	res, err := guard.Check(ctx, repoDir, opts)
	if err != nil {
		return err
	}
	err = show(c, view{value: res,
		text: func(w io.Writer) error { return guard.WriteText(w, res) },
		markdown: func(w io.Writer) error {
			_, err := io.WriteString(w, guard.Markdown(res))
			return err
		},
		actions: func(*ghactions.Runner) ghactions.Report { return guard.Actions(res) },
	})
	if err != nil {
		return err
	}
	return res.Err()
}

// checkConfig loads --config, or ./chartpin.yaml when present; nil without one.
func checkConfig(path string) (*config.File, error) {
	if path == "" {
		found, err := config.Find(".")
		if err != nil || found == "" {
			return nil, err
		}
		path = found
	}
	return config.Load(path)
}
