package main

import (
	"github.com/urfave/cli/v2"

	"github.com/chartpin/chartpin"
	"github.com/chartpin/chartpin/demo"
)

func demoCommand() *cli.Command {
	return &cli.Command{
		Name:  "demo",
		Usage: "run the whole release-time job against an embedded registry (no network needed)",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "dir", Usage: "keep the pinned chart copy in `DIR` (default: a temporary directory, removed)"},
		},
		Action: func(c *cli.Context) error {
			ctx, cancel := commandContext(c)
			defer cancel()
			return demo.Run(ctx, c.App.Writer, demo.Options{Charts: chartpin.Charts(), Config: chartpin.Config, Dir: c.String("dir")})
		},
	}
}
