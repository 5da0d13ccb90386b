// Package ghactions speaks GitHub Actions from inside chartpin: findings as
// workflow-command annotations, a Markdown step summary, and step outputs. It
// is shared by every command. Every value that comes from a repository (an
// image tag, a path, a reason) is escaped, so a hostile values.yaml cannot
// inject workflow commands into the log or extra outputs into $GITHUB_OUTPUT.
package ghactions

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/chartpin/chartpin/internal/relpath"
)

// Level is the kind of annotation.
type Level string

// Annotation levels, as the runner names them.
const (
	Error   Level = "error"
	Warning Level = "warning"
	Notice  Level = "notice"
)

// Annotation is one finding shown on a file and line of a pull request.
type Annotation struct {
	Level Level
	// File is relative to the repository root ("" for none).
	File string
	// Line is 1-based (0 for none).
	Line    int
	Title   string
	Message string
}

// String renders the annotation as one workflow-command line (no newline).
func (a Annotation) String() string {
	level := a.Level
	if level == "" {
		level = Error
	}
	var props []string
	if a.File != "" {
		props = append(props, "file="+EscapeProperty(a.File))
	}
	if a.Line > 0 {
		props = append(props, "line="+strconv.Itoa(a.Line))
	}
	if a.Title != "" {
		props = append(props, "title="+EscapeProperty(a.Title))
	}
	cmd := "::" + string(level)
	if len(props) > 0 {
		cmd += " " + strings.Join(props, ",")
	}
	return cmd + "::" + EscapeData(a.Message)
}

// EscapeData escapes a workflow-command message: %, CR and LF, as the
// runner's own toolkit does, so a value can never end the line early.
func EscapeData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

// EscapeProperty escapes a workflow-command property value: EscapeData plus
// ":" and ",", which would otherwise end the property list or the property.
func EscapeProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}

// AnnotationLimit is how many annotations of one level GitHub shows per step.
const AnnotationLimit = 10

// Output is one step output.
type Output struct{ Name, Value string }

// Report is what a command hands to Actions.
type Report struct {
	Annotations []Annotation
	// Summary is Markdown appended to $GITHUB_STEP_SUMMARY; build it with Code and Text.
	Summary string
	Outputs []Output
}

// Runner writes to GitHub Actions when enabled, and does nothing otherwise.
type Runner struct {
	enabled   bool
	summary   string
	output    string
	workspace string
	token     func() (string, error)
}

// Options configures a Runner; the zero value is what the CLI uses.
type Options struct {
	// Token makes the delimiter/stop-commands token (default: random; golden
	// tests pass a fixed one).
	Token func() (string, error)
}

// FromEnv reads GITHUB_ACTIONS, GITHUB_STEP_SUMMARY, GITHUB_OUTPUT and
// GITHUB_WORKSPACE through getenv (os.Getenv in the CLI).
func FromEnv(getenv func(string) string, opts Options) *Runner {
	r := &Runner{
		enabled:   getenv("GITHUB_ACTIONS") == "true",
		summary:   getenv("GITHUB_STEP_SUMMARY"),
		output:    getenv("GITHUB_OUTPUT"),
		workspace: getenv("GITHUB_WORKSPACE"),
		token:     opts.Token,
	}
	if r.token == nil {
		r.token = randomToken
	}
	return r
}

// Enabled reports whether the command runs inside GitHub Actions.
func (r *Runner) Enabled() bool { return r != nil && r.enabled }

// RelPath makes an absolute path relative to the workspace, where the runner
// looks for annotated files; other paths are returned unchanged.
func (r *Runner) RelPath(path string) string {
	if r == nil || r.workspace == "" || !filepath.IsAbs(path) {
		return filepath.ToSlash(path)
	}
	return filepath.ToSlash(relpath.Show(r.workspace, path))
}

// Untrusted runs print with workflow commands switched off around it when
// enabled: a report full of repository values is then only text to the
// runner, whatever it contains (the documented ::stop-commands:: mechanism).
func (r *Runner) Untrusted(w io.Writer, print func(io.Writer) error) error {
	if !r.Enabled() {
		return print(w)
	}
	tok, err := r.token()
	if err != nil {
		return fmt.Errorf("making a stop-commands token: %w", err)
	}
	if _, err := fmt.Fprintf(w, "::stop-commands::%s\n", tok); err != nil {
		return err
	}
	lw := &lastByte{w: w, last: '\n'}
	perr := print(lw)
	resume := "::" + tok + "::\n"
	if lw.last != '\n' {
		resume = "\n" + resume
	}
	// Resume even after a failed print, so annotations still work.
	if _, err := io.WriteString(w, resume); err != nil {
		return errors.Join(perr, err)
	}
	return perr
}

// lastByte remembers the last byte written, to end the report's last line.
type lastByte struct {
	w    io.Writer
	last byte
}

func (l *lastByte) Write(p []byte) (int, error) {
	n, err := l.w.Write(p)
	if n > 0 {
		l.last = p[n-1]
	}
	return n, err
}

// Emit writes the annotations to w, appends the summary to
// $GITHUB_STEP_SUMMARY and the outputs to $GITHUB_OUTPUT. Disabled, it does
// nothing. A file that cannot be written is an error: CI must not read a
// missing output as "no findings".
func (r *Runner) Emit(w io.Writer, rep Report) error {
	if !r.Enabled() {
		return nil
	}
	count := map[Level]int{}
	for _, a := range rep.Annotations {
		count[a.Level]++
		if _, err := fmt.Fprintln(w, a.String()); err != nil {
			return err
		}
	}
	for _, l := range []Level{Error, Warning, Notice} {
		if count[l] > AnnotationLimit {
			// The runner shows only the first ones; say so rather than lose them quietly.
			n := Annotation{Level: Notice, Title: "more findings than annotations",
				Message: fmt.Sprintf("%d %s annotations; GitHub shows the first %d, the step summary lists all of them", count[l], l, AnnotationLimit)}
			if _, err := fmt.Fprintln(w, n.String()); err != nil {
				return err
			}
		}
	}
	if rep.Summary != "" && r.summary != "" {
		s := rep.Summary
		if !strings.HasSuffix(s, "\n") {
			s += "\n"
		}
		if err := appendFile(r.summary, []byte(s)); err != nil {
			return fmt.Errorf("appending the step summary: %w", err)
		}
	}
	if len(rep.Outputs) > 0 && r.output != "" {
		var b strings.Builder
		for _, o := range rep.Outputs {
			s, err := r.outputLine(o)
			if err != nil {
				return err
			}
			b.WriteString(s)
		}
		if err := appendFile(r.output, []byte(b.String())); err != nil {
			return fmt.Errorf("appending step outputs: %w", err)
		}
	}
	return nil
}

// outputLine renders name<<DELIM\nvalue\nDELIM\n, the multiline-safe form,
// with a fresh random delimiter that the value provably does not contain.
func (r *Runner) outputLine(o Output) (string, error) {
	if o.Name == "" || strings.ContainsAny(o.Name, "\r\n=<") {
		return "", fmt.Errorf("step output name %q: want a plain name", o.Name)
	}
	tok, err := r.token()
	if err != nil {
		return "", fmt.Errorf("making an output delimiter: %w", err)
	}
	delim := "ghadelimiter_" + tok
	if strings.Contains(o.Value, delim) || strings.Contains(o.Name, delim) {
		return "", fmt.Errorf("step output %s: value contains its delimiter; refusing to write it", o.Name)
	}
	return o.Name + "<<" + delim + "\n" + o.Value + "\n" + delim + "\n", nil
}

func appendFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func randomToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}
