package main

import (
	"encoding/json"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/chartpin/chartpin/config"
	"github.com/chartpin/chartpin/ghactions"
	"github.com/chartpin/chartpin/guard"
)

func init() {
	register(func() *cli.Command {
		return &cli.Command{
			Name:      "guard",
			Usage:     "refuse chart changes since --base without a semver version bump (read-only)",
			ArgsUsage: "[CHART_DIR...]",
			Flags: append(resolverFlags(),
				&cli.StringFlag{Name: "base", Usage: "compare with this git `REF` (e.g. origin/main)"},
				&cli.StringFlag{Name: "config", Usage: "chartpin.yaml `FILE` (default ./chartpin.yaml if present)"},
				&cli.StringFlag{Name: "index", Usage: "refuse a version already in this index.yaml (`URL|FILE`)"},
				&cli.StringFlag{Name: "oci", Usage: "refuse a version already pushed to `oci://HOST/PATH`"},
				&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "text", Usage: "text|json|markdown"},
			),
			Action: runGuard,
		}
	})
}

func runGuard(c *cli.Context) error {
	base := c.String("base")
	if base == "" {
		return usage("guard: --base REF is required, e.g. chartpin guard --base origin/main")
	}
	out, err := outputFormat(c, "text", "json", "markdown")
	if err != nil {
		return err
	}
	if oci := c.String("oci"); oci != "" && !strings.HasPrefix(oci, "oci://") {
		return usage("--oci %q: want oci://HOST/PATH", oci)
	}
	ctx, cancel := commandContext(c)
	defer cancel()
	dirs := c.Args().Slice()
	opts := []guard.Option{guard.WithDirs(dirs...), guard.WithLogger(logger(c)), guard.WithIndex(c.String("index"))}
	cfg, err := checkConfig(c.String("config"))
	if err != nil {
		return err
	}
	if cfg != nil {
		opts = append(opts, guard.WithConfig(cfg))
	}
	if oci := c.String("oci"); oci != "" {
		r, err := newResolver(c)
		if err != nil {
			return err
		}
		opts = append(opts, guard.WithOCI(oci, r))
	}
	repoDir := "."
	if len(dirs) > 0 {
		repoDir = dirs[0]
	}
	res, err := guard.Check(ctx, repoDir, base, opts...)
	if err != nil {
		return err
	}
	err = printCheck(c, out, res,
		func() string { return guard.Markdown(res) },
		func(w io.Writer) error { return guard.WriteText(w, res) },
		func(*ghactions.Runner) ghactions.Report { return guard.Actions(res) })
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

// printCheck prints a read-only check's report as text, markdown or JSON and
// emits its GitHub Actions annotations, summary and outputs. JSON stays
// machine-readable: no stop-commands around it (a JSON line cannot start
// with "::"), and the annotations go to stderr, which the runner reads for
// workflow commands too.
func printCheck(c *cli.Context, out string, report any, markdown func() string, text func(io.Writer) error,
	actions func(*ghactions.Runner) ghactions.Report) error {
	gh := ghactions.FromEnv(os.Getenv)
	annotations := c.App.Writer
	var err error
	if out == "json" {
		annotations = c.App.ErrWriter
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		err = enc.Encode(report)
	} else {
		err = gh.Untrusted(c.App.Writer, func(w io.Writer) error {
			if out == "markdown" {
				_, err := io.WriteString(w, markdown())
				return err
			}
			return text(w)
		})
	}
	if err != nil {
		return err
	}
	return gh.Emit(annotations, actions(gh))
}
