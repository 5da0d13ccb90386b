package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode"

	"github.com/urfave/cli/v2"

	"github.com/chartpin/chartpin/internal/failure"
)

// version is set at link time: -ldflags "-X main.version=…".
var version = "dev"

// commands lists every command, in the order help shows them. They are
// built afresh for every app: urfave/cli keeps parsed and environment
// values in its flag structs.
func commands() []*cli.Command {
	return []*cli.Command{
		resolveCommand(),
		pinCommand(),
		bumpCommand(),
		driftCommand(),
		guardCommand(),
		releaseCommand(),
		publishCommand(),
		reconcileCommand(),
		upgradeCommand(),
		demoCommand(),
		initCommand(),
		completionCommand(),
	}
}

func newApp() *cli.App {
	commands := commands()
	globals := map[string]bool{}
	for _, f := range globalFlags() {
		globals[f.Names()[0]] = true
	}
	for _, c := range commands {
		bindEnv(c.Flags, "CHARTPIN_", func(flag string) string {
			if globals[flag] || commandScoped[flag] { // e.g. CHARTPIN_UPGRADE_TIMEOUT, CHARTPIN_PIN_VERSION
				return "CHARTPIN_" + envName(c.Name) + "_"
			}
			return "CHARTPIN_"
		})
	}
	// -v is --verbose here, so --version has no short form.
	cli.VersionFlag = &cli.BoolFlag{Name: "version", Usage: "print the version"}
	app := &cli.App{
		Name:                 "chartpin",
		Usage:                "pin every image a Helm chart runs to its immutable index digest",
		Version:              version,
		EnableBashCompletion: true,
		Commands:             commands,
		Flags:                bindEnv(globalFlags(), "CHARTPIN_", nil),
		ExitErrHandler:       func(*cli.Context, error) {}, // main maps errors to exit codes
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usage("unknown command %q; see chartpin --help", c.Args().First())
			}
			return cli.ShowAppHelp(c)
		},
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return failure.Input(err)
		},
	}
	for _, c := range commands {
		c.OnUsageError = app.OnUsageError
		withExamples(c)
	}
	return app
}

// optionFlags map the options fields libraries name in errors to the flags
// that set them, where the flag is not the field's name in kebab case.
var optionFlags = map[string]string{
	"RepoURL":            "repo",
	"SetTags":            "set-tag",
	"SignKey":            "key",
	"API":                "github-api",
	"InsecureRegistries": "insecure-registry",
	"Mirrors":            "registry-mirror",
	"ConfigPath":         "config",
}

// flagOf is the flag that sets an options field: PrereleaseBaseURL is
// --prerelease-base-url.
func flagOf(field string) string {
	if f, ok := optionFlags[field]; ok {
		return "--" + f
	}
	var b strings.Builder
	r := []rune(field)
	for i, c := range r {
		upper := unicode.IsUpper(c)
		if i > 0 && upper && (!unicode.IsUpper(r[i-1]) || (i+1 < len(r) && unicode.IsLower(r[i+1]))) {
			b.WriteByte('-')
		}
		b.WriteRune(unicode.ToLower(c))
	}
	return "--" + b.String()
}

// commandScoped flags bind CHARTPIN_<COMMAND>_<FLAG>: a CI variable as
// generic as CHARTPIN_VERSION must not silently set a chart's version.
var commandScoped = map[string]bool{"version": true, "app-version": true}

func globalFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "registry-mirror", Usage: "resolve and pull `FROM=TO` (e.g. docker.io=mirror.local:5000)"},
		&cli.StringSliceFlag{Name: "insecure-registry", Usage: "talk plain HTTP to `HOST` (loopback test registries)"},
		&cli.DurationFlag{Name: "timeout", Value: 5 * time.Minute, Usage: "deadline for the whole command"},
		&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "log every request and decision to stderr"},
	}
}

// bindEnv binds every flag to CHARTPIN_<FLAG>, so CI can configure by
// environment; prefixFor, when set, picks another prefix for some flags.
func bindEnv(flags []cli.Flag, prefix string, prefixFor func(flag string) string) []cli.Flag {
	for _, f := range flags {
		p := prefix
		if prefixFor != nil {
			p = prefixFor(f.Names()[0])
		}
		env := p + envName(f.Names()[0])
		switch f := f.(type) {
		case *cli.StringFlag:
			f.EnvVars = appendOnce(f.EnvVars, env)
		case *cli.StringSliceFlag:
			f.EnvVars = appendOnce(f.EnvVars, env)
		case *cli.BoolFlag:
			f.EnvVars = appendOnce(f.EnvVars, env)
		case *cli.DurationFlag:
			f.EnvVars = appendOnce(f.EnvVars, env)
		case *cli.IntFlag:
			f.EnvVars = appendOnce(f.EnvVars, env)
		case *cli.GenericFlag:
			f.EnvVars = appendOnce(f.EnvVars, env)
		}
	}
	return flags
}

func envName(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "-", "_")) }

func appendOnce(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// logger returns a logger on stderr with -v, and a silent one otherwise.
func logger(c *cli.Context) *slog.Logger {
	if !c.Bool("verbose") {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// mirrors parses --registry-mirror FROM=TO values.
func mirrors(c *cli.Context) (map[string]string, error) {
	out := map[string]string{}
	for _, m := range c.StringSlice("registry-mirror") {
		from, to, ok := strings.Cut(m, "=")
		if !ok || from == "" || to == "" {
			return nil, failure.Input(fmt.Errorf("--registry-mirror %q: want FROM=TO, e.g. docker.io=mirror.local:5000", m))
		}
		out[from] = to
	}
	return out, nil
}

// usage marks a flag or argument problem as exit status 2.
func usage(format string, args ...any) error {
	return failure.Input(fmt.Errorf(format, args...))
}

// commandContext is the command's context bounded by --timeout.
// run names --timeout when that deadline ends the command.
func commandContext(c *cli.Context) (context.Context, context.CancelFunc) {
	d := c.Duration("timeout")
	sessionOf(c).timeout = d
	return context.WithTimeout(c.Context, d)
}

// resolverContext is commandContext and the resolver the flags ask for;
// the caller defers cancel once err is nil.
func resolverContext(c *cli.Context) (context.Context, context.CancelFunc, *resolverSession, error) {
	ctx, cancel := commandContext(c)
	r, err := newResolver(c)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return ctx, cancel, r, nil
}
