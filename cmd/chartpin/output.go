package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/chartpin/chartpin/ghactions"
	"github.com/chartpin/chartpin/internal/failure"
)

// The output layer: every command prints its result through show, in the
// format -o names. text (also called table) is for people, markdown for pull
// requests and step summaries, json for scripts: exactly one document on
// stdout, on success and on failure, with snake_case keys (docs/output.md).

// outputFlag is every command's -o.
func outputFlag() cli.Flag {
	return &cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "text", Usage: "`FORMAT`: text, json or markdown (table is text)"}
}

// withOutput adds -o as cmd's last flag and checks it before cmd's action
// runs, so a bad format is refused before any work.
func withOutput(cmd *cli.Command) *cli.Command {
	cmd.Flags = append(cmd.Flags, outputFlag())
	action := cmd.Action
	cmd.Action = func(c *cli.Context) error {
		if _, err := format(c); err != nil {
			return err
		}
		return action(c)
	}
	return cmd
}

// formats are the values -o takes, with the format each one means.
var formats = map[string]string{"text": "text", "table": "text", "json": "json", "markdown": "markdown"}

// view is one command's result in every format.
type view struct {
	// value is the JSON document: a struct with snake_case json tags.
	value any
	// text prints the result for a terminal.
	text func(io.Writer) error
	// markdown prints it for a pull request or a step summary; nil: the
	// text in a fenced code block.
	markdown func(io.Writer) error
	// actions are the GitHub Actions outputs, summary and annotations.
	actions func(*ghactions.Runner) ghactions.Report
	// dryRun marks a result for which --dry-run wrote nothing.
	dryRun bool
}

// session is what the output layer keeps for one run: under -o json the
// document is written once, after the command, so that an error joins it.
type session struct {
	format string
	doc    any
	shown  bool
	dryRun bool
	// timeout is --timeout, once a command has set its deadline by it.
	timeout time.Duration
	// stops end what the run started beside the command (the progress line).
	stops []func()
}

const sessionKey = "chartpin.session"

func sessionOf(c *cli.Context) *session {
	if s, ok := c.App.Metadata[sessionKey].(*session); ok {
		return s
	}
	return &session{} // an app not started by run (tests of one command)
}

// format reads -o (exit 2 for an unknown format) and remembers it for the
// error document.
func format(c *cli.Context) (string, error) {
	f, ok := formats[c.String("output")]
	if !ok {
		return "", usage("--output %q: want text, json or markdown", c.String("output"))
	}
	sessionOf(c).format = f
	return f, nil
}

// show prints v in the format -o names, then hands its GitHub Actions
// report to the runner (to stderr under -o json, so stdout stays one
// parseable document).
func show(c *cli.Context, v view) error {
	f, err := format(c)
	if err != nil {
		return err
	}
	gh := ghactions.FromEnv(os.Getenv, ghactions.Options{})
	annotations := c.App.Writer
	switch f {
	case "json":
		s := sessionOf(c)
		s.doc, s.shown, s.dryRun = v.value, true, v.dryRun
		annotations = c.App.ErrWriter
	case "markdown":
		md := v.markdown
		if md == nil {
			md = fenced(v.text)
		}
		err = gh.Untrusted(c.App.Writer, md)
	default:
		err = gh.Untrusted(c.App.Writer, v.text)
	}
	if err != nil || v.actions == nil {
		return err
	}
	return gh.Emit(annotations, v.actions(gh))
}

// fenced is text as a Markdown code block.
func fenced(text func(io.Writer) error) func(io.Writer) error {
	return func(w io.Writer) error {
		var b bytes.Buffer
		if err := text(&b); err != nil {
			return err
		}
		_, err := io.WriteString(w, fencedText("", b.String()))
		return err
	}
}

// fencedText is body as a Markdown code block in language lang.
func fencedText(lang, body string) string {
	body = strings.TrimRight(body, "\n")
	fence := "```"
	for strings.Contains(body, fence) {
		fence += "`"
	}
	return fence + lang + "\n" + body + "\n" + fence + "\n"
}

// mdTable writes a GitHub-flavoured Markdown table. Cells are Markdown
// already: escape text with ghactions.Text, quote values with ghactions.Code.
func mdTable(w io.Writer, header []string, rows [][]string) error {
	line := func(cells []string) string { return "| " + strings.Join(cells, " | ") + " |\n" }
	var b strings.Builder
	b.WriteString(line(header))
	dashes := make([]string, len(header))
	for i := range dashes {
		dashes[i] = "---"
	}
	b.WriteString(line(dashes))
	for _, r := range rows {
		b.WriteString(line(r))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// message is err as the command line says it: the options a library names
// by field appear as the flags that set them.
func message(err error) string { return failure.Render(err, flagOf) }

// errorJSON is the error object of a failed run's JSON document.
type errorJSON struct {
	Message string `json:"message"`
	// Class is "findings" (a check found something, exit 1), "failure" (an
	// operation failed, exit 1) or "usage" (bad usage or input, exit 2).
	Class    string `json:"class"`
	ExitCode int    `json:"exit_code"`
}

func errorClass(err error) string {
	switch {
	case failure.IsInput(err):
		return "usage"
	case errors.Is(err, failure.ErrFindings):
		return "findings"
	}
	return "failure"
}

// writeDocument writes the run's one JSON document: the command's result
// (an empty object when it never got that far) with dry_run and error added.
func writeDocument(w io.Writer, doc any, dryRun bool, runErr error) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if doc == nil {
		doc = struct{}{}
	}
	if err := enc.Encode(doc); err != nil {
		return err
	}
	obj := bytes.Clone(bytes.TrimSpace(b.Bytes()))
	if len(obj) < 2 || obj[0] != '{' {
		return fmt.Errorf("json output: %T is not an object", doc)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(obj, &top); err != nil {
		return err
	}
	var extra []string
	if _, has := top["dry_run"]; dryRun && !has { // some results mark it themselves
		extra = append(extra, `"dry_run":true`)
	}
	if runErr != nil {
		b.Reset()
		if err := enc.Encode(errorJSON{Message: message(runErr), Class: errorClass(runErr), ExitCode: failure.Code(runErr)}); err != nil {
			return err
		}
		extra = append(extra, `"error":`+strings.TrimSpace(b.String()))
	}
	if len(extra) > 0 {
		body := obj[1 : len(obj)-1]
		parts := append([]string{}, extra...)
		if len(bytes.TrimSpace(body)) > 0 {
			parts = append([]string{string(body)}, extra...)
		}
		obj = []byte("{" + strings.Join(parts, ",") + "}")
	}
	var out bytes.Buffer
	if err := json.Indent(&out, obj, "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err := w.Write(out.Bytes())
	return err
}

// sniffFormat is -o as given on the line (or CHARTPIN_OUTPUT), for a run
// that failed before its command read it.
func sniffFormat(args []string) string {
	val := os.Getenv("CHARTPIN_OUTPUT")
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		switch k, v, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "="); {
		case !isFlag(a) || (k != "o" && k != "output"):
		case hasValue:
			val = v
		case i+1 < len(args):
			val = args[i+1]
		}
	}
	return formats[val]
}

// run is one invocation of chartpin, as main runs it: flags anywhere on the
// line; under -o json exactly one document on stdout whatever happens; the
// error on stderr; the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// Option fields read as flags everywhere: in errors and in the reports
	// (a refused pin's reason, a held entry) that quote one.
	failure.SpellFields(flagOf)
	return runApp(ctx, newApp(), args, stdout, stderr)
}

// runApp is run with app in place of chartpin's own (tests render one view).
func runApp(ctx context.Context, app *cli.App, args []string, stdout, stderr io.Writer) int {
	s := &session{}
	app.Writer, app.ErrWriter = stdout, stderr
	app.Metadata = map[string]any{sessionKey: s}
	args = flagsFirst(app, args)
	err := app.RunContext(ctx, args)
	for _, stop := range s.stops {
		stop()
	}
	if err != nil && ctx.Err() != nil && context.Cause(ctx) != ctx.Err() {
		// SIGINT or SIGTERM (main's context): whatever step it stopped.
		err = fmt.Errorf("interrupted (%v): %w", context.Cause(ctx), err)
	}
	if s.timeout > 0 && errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("%w (the command's --timeout %s ran out; raise it, e.g. --timeout %s)", err, s.timeout, 2*s.timeout)
	}
	if s.format == "" {
		s.format = sniffFormat(args)
	}
	if s.format == "json" && (s.shown || err != nil) {
		if werr := writeDocument(stdout, s.doc, s.dryRun, err); werr != nil && err == nil {
			err = werr
		}
	}
	if err != nil {
		msg := message(err)
		if os.Getenv("GITHUB_ACTIONS") == "true" {
			// An error can quote repository values: keep them from starting workflow commands.
			msg = ghactions.EscapeData(msg)
		}
		fmt.Fprintln(stderr, "chartpin:", msg)
	}
	return failure.Code(err)
}
