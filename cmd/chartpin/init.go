package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/chartpin/chartpin/adopt"
	"github.com/chartpin/chartpin/config"
	"github.com/chartpin/chartpin/ghactions"
)

func initCommand() *cli.Command {
	return withOutput(&cli.Command{
		Name:      "init",
		Usage:     "write a chartpin.yaml from what discovery finds in each chart",
		ArgsUsage: "[CHART_DIR...]",
		Description: "One entry per pin found, each under a comment saying what was found (the float, the current\n" +
			"pin and its platforms). A latest tag and a set pin whose tag now names another digest are held;\n" +
			"a pin key the chart leaves empty, and one chartpin cannot resolve, are commented out with the\n" +
			"reason. `chartpin pin` right after init moves nothing the maintainers did not ask for.\n" +
			"Never overwrites the file: --force replaces it, --dry-run prints it. --digests FILE works offline.",
		Flags: append(resolverFlags(),
			&cli.StringFlag{Name: "config", Value: config.FileName, Usage: "the `FILE` to write (dir: entries are relative to it)"},
			&cli.BoolFlag{Name: "force", Usage: "replace an existing config file"},
			&cli.BoolFlag{Name: "dry-run", Usage: "print the config, write nothing"},
		),
		Action: runInit,
	})
}

func runInit(c *cli.Context) error {
	ctx, cancel, r, err := resolverContext(c)
	if err != nil {
		return err
	}
	defer cancel()
	res, err := adopt.Plan(ctx, adopt.Options{ConfigPath: c.String("config"), ChartDirs: c.Args().Slice(), Resolver: r})
	if err != nil {
		return err
	}
	if err := r.Finish(); err != nil {
		return err
	}
	if !c.Bool("dry-run") {
		if err := res.Write(c.Bool("force")); err != nil {
			return err
		}
	}
	dry := c.Bool("dry-run")
	return show(c, view{value: struct {
		Config string `json:"config"`
		*adopt.Result
	}{string(res.Data), res}, dryRun: dry,
		markdown: func(w io.Writer) error {
			verb := "wrote"
			if dry {
				verb = "dry run: would write"
			}
			_, err := fmt.Fprintf(w, "### %s %s\n\n%d to pin, %d held, %d left as they are (commented out)\n\n%s",
				verb, ghactions.Code(relPath(res.Path)), res.Count(adopt.Pin), res.Count(adopt.Hold), res.Count(adopt.Leave),
				fencedText("yaml", string(res.Data)))
			return err
		},
		text: func(w io.Writer) error {
			if dry {
				if _, err := w.Write(res.Data); err != nil {
					return err
				}
			}
			verb := "wrote"
			if dry {
				verb = "dry run: would write"
			}
			_, err := fmt.Fprintf(w, "%s %s: %d to pin, %d held, %d left as they are (commented out)\n",
				verb, relPath(res.Path), res.Count(adopt.Pin), res.Count(adopt.Hold), res.Count(adopt.Leave))
			return err
		},
	})
}

// relPath shortens an absolute path relative to the working directory.
func relPath(p string) string {
	wd, err := os.Getwd()
	if err != nil {
		return p
	}
	if r, err := filepath.Rel(wd, p); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return p
}
