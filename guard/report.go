package guard

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/chartpin/chartpin/ghactions"
)

// WriteText prints the result for a terminal or a CI log.
func WriteText(w io.Writer, r *Result) error {
	if _, err := fmt.Fprintf(w, "guard: %s\n", r.Compared); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range r.Charts {
		status := string(c.State)
		if len(c.Findings) > 0 {
			status = "FAIL"
		} else if c.State == Changed {
			status = "ok"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", status, quote(c.Dir), versions(c), detail(c))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, f := range r.Findings() {
		if _, err := fmt.Fprintf(w, "  %s:%d: %s\n", quote(f.File), f.Line, quote(f.Message)); err != nil {
			return err
		}
	}
	for _, d := range r.Deprecated() {
		if _, err := fmt.Fprintf(w, "  %s:%d: still referenced: %s\n", quote(d.File), d.Line, quote(d.Advice())); err != nil {
			return err
		}
	}
	n := len(r.Findings())
	verdict := "ok"
	if n > 0 {
		verdict = fmt.Sprintf("%d finding(s)", n)
	}
	_, err := fmt.Fprintf(w, "guard: %d chart(s) checked, %s\n", len(r.Charts), verdict)
	return err
}

// quote makes control characters visible, so one value is one line.
func quote(s string) string {
	if strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		q := strconv.Quote(s)
		return q[1 : len(q)-1]
	}
	return s
}

func versions(c Chart) string {
	switch c.State {
	case Added:
		return quote(c.NewVersion)
	case Removed:
		return "(was " + quote(c.OldVersion) + ")"
	case Unchanged:
		return quote(c.NewVersion)
	}
	return quote(c.OldVersion) + " -> " + quote(c.NewVersion)
}

func detail(c Chart) string {
	if c.State != Changed {
		return ""
	}
	return fmt.Sprintf("%d file(s) changed: %s", len(c.Files), quote(fileList(c.Files)))
}

// Markdown renders the result as a step summary or --output markdown.
func Markdown(r *Result) string {
	var b strings.Builder
	b.WriteString("### chartpin guard\n\n")
	b.WriteString(ghactions.Text(r.Compared) + "\n\n")
	b.WriteString("| chart | state | version | files |\n|---|---|---|---|\n")
	for _, c := range r.Charts {
		state := string(c.State)
		if len(c.Findings) > 0 {
			state = "**FAIL**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", ghactions.Code(c.Dir), state, ghactions.Text(versions(c)), ghactions.Text(fileList(c.Files)))
	}
	if f := r.Findings(); len(f) > 0 {
		b.WriteString("\n")
		for _, x := range f {
			fmt.Fprintf(&b, "- %s:%d: %s\n", ghactions.Code(x.File), x.Line, ghactions.Text(x.Message))
		}
	}
	if d := r.Deprecated(); len(d) > 0 {
		b.WriteString("\nStill referenced, though recalled:\n\n")
		for _, x := range d {
			fmt.Fprintf(&b, "- %s:%d: %s\n", ghactions.Code(x.File), x.Line, ghactions.Text(x.Advice()))
		}
	}
	return b.String()
}

// Actions is the GitHub Actions view: an error annotation per finding, the
// Markdown summary, and the outputs changed (true when a chart changed),
// version (the new version; name=version lines for several charts) and findings.
func Actions(r *Result) ghactions.Report {
	rep := ghactions.Report{Summary: Markdown(r)}
	for _, f := range r.Findings() {
		rep.Annotations = append(rep.Annotations, ghactions.Annotation{
			Level: ghactions.Error, File: f.File, Line: f.Line, Title: "chartpin guard: " + f.Chart, Message: f.Message,
		})
	}
	for _, d := range r.Deprecated() {
		rep.Annotations = append(rep.Annotations, ghactions.Annotation{
			Level: ghactions.Warning, File: d.File, Line: d.Line, Title: "chartpin guard: deprecated version", Message: d.Advice(),
		})
	}
	var moved []Chart
	for _, c := range r.Charts {
		if c.State == Changed || c.State == Added {
			moved = append(moved, c)
		}
	}
	version := ""
	switch {
	case len(moved) == 1:
		version = moved[0].NewVersion
	case len(moved) > 1:
		var lines []string
		for _, c := range moved {
			lines = append(lines, c.Name+"="+c.NewVersion)
		}
		version = strings.Join(lines, "\n")
	}
	rep.Outputs = []ghactions.Output{
		{Name: "changed", Value: strconv.FormatBool(len(moved) > 0)},
		{Name: "version", Value: version},
		{Name: "findings", Value: strconv.Itoa(len(r.Findings()))},
	}
	return rep
}
