package drift

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/chartpin/chartpin/ghactions"
)

// offlineMark starts every line of an offline run, so that a log can never
// pass for a live audit.
const offlineMark = "OFFLINE "

// Summary is the one-line tally.
func (r *Report) Summary() string {
	var counts []string
	for _, st := range Statuses {
		if n := r.Count(st); n > 0 || st != Unsigned {
			counts = append(counts, fmt.Sprintf("%d %s", n, st))
		}
	}
	s := fmt.Sprintf("drift: %d pin(s): %s", len(r.Items), strings.Join(counts, ", "))
	if n := len(r.Deprecated); n > 0 {
		s += fmt.Sprintf("; %d DEPRECATED chart version(s) still named", n)
	}
	if r.Requests != nil {
		q := r.Requests
		s += fmt.Sprintf("; registry requests: HEAD %d, GET %d, token %d, ping %d, other %d (%d in all, %d of them retries)",
			q.HEAD, q.GET, q.Token, q.Ping, q.Other, q.Total(), q.Retries)
	}
	if r.Offline {
		s = offlineMark + s + "; answered from a digest lock file, not the registry: not a live audit"
	}
	return s
}

// WriteText prints one line per pin and the tally; rel shortens file paths.
func WriteText(w io.Writer, r *Report, rel func(string) string) error {
	prefix := ""
	if r.Offline {
		prefix = offlineMark
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "%sSTATUS\tPIN\tFLOAT\tDETAIL\n", prefix)
	for _, it := range r.Items {
		fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\n", prefix, it.Status,
			quote(fmt.Sprintf("%s:%d %s", rel(it.Pin.File), it.Pin.Line, it.Pin.Path)), quote(it.Float), quote(detail(it)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, sh := range r.Shared {
		if _, err := fmt.Fprintf(w, "%s%s\n", prefix, quote(sharedLine(sh))); err != nil {
			return err
		}
	}
	for _, d := range r.Deprecated {
		if _, err := fmt.Fprintf(w, "%sDEPRECATED  %s:%d  %s\n", prefix, quote(rel(d.File)), d.Line, quote(d.Advice())); err != nil {
			return err
		}
	}
	for _, n := range r.Notes {
		if _, err := fmt.Fprintf(w, "%snote: %s\n", prefix, quote(n)); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintln(w, r.Summary())
	return err
}

// drifted: some float names another digest than its pin (a DRIFT, or an
// UNSIGNED pin whose float moved).
func (r *Report) drifted() bool {
	for _, it := range r.Items {
		if it.Status == Drift || it.Status == Unsigned && it.Current != it.Pinned {
			return true
		}
	}
	return false
}

func sharedLine(sh Shared) string {
	if sh.Error != "" {
		return fmt.Sprintf("tags of %s sharing %s: unknown (%s)", sh.Repository, sh.Digest, sh.Error)
	}
	tags := "none"
	if len(sh.Tags) > 0 {
		tags = strings.Join(sh.Tags, ", ")
	}
	return fmt.Sprintf("tags of %s sharing %s: %s (checked %d of %d tags)", sh.Repository, sh.Digest, tags, sh.Checked, sh.Total)
}

func detail(it Item) string {
	switch it.Status {
	case OK:
		return it.Current
	case Drift, Acknowledged:
		return fmt.Sprintf("pinned %s, now %s%s", it.Pinned, it.Current, ackNote(it))
	}
	return it.Message
}

// ackNote is the acknowledgement part of the message, if any.
func ackNote(it Item) string {
	return it.Note
}

// quote makes control characters visible, so one value stays on one line.
func quote(s string) string {
	if strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		q := strconv.Quote(s)
		return q[1 : len(q)-1]
	}
	return s
}

// Markdown renders the report as a table (--output markdown, step summary).
func Markdown(r *Report, rel func(string) string) string {
	var b strings.Builder
	title := "### chartpin drift"
	if r.Offline {
		title += " — OFFLINE (digest lock file, not a live audit)"
	}
	b.WriteString(title + "\n\n")
	b.WriteString("| status | pin | float | detail |\n|---|---|---|---|\n")
	for _, it := range r.Items {
		status := string(it.Status)
		if it.Status.Finding() {
			status = "**" + status + "**"
		}
		if r.Offline {
			status = "OFFLINE " + status
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", status,
			ghactions.Code(fmt.Sprintf("%s:%d", rel(it.Pin.File), it.Pin.Line))+" "+ghactions.Code(it.Pin.Path),
			ghactions.Code(it.Float), ghactions.Text(detail(it)))
	}
	if len(r.Shared) > 0 {
		b.WriteString("\n")
		for _, sh := range r.Shared {
			b.WriteString("- " + ghactions.Text(sharedLine(sh)) + "\n")
		}
	}
	if len(r.Deprecated) > 0 {
		b.WriteString("\n")
		for _, d := range r.Deprecated {
			b.WriteString("- **DEPRECATED** " + ghactions.Code(fmt.Sprintf("%s:%d", rel(d.File), d.Line)) + ": " + ghactions.Text(d.Advice()) + "\n")
		}
	}
	for _, n := range r.Notes {
		b.WriteString("\n- note: " + ghactions.Text(n) + "\n")
	}
	b.WriteString("\n" + ghactions.Text(r.Summary()) + "\n")
	return b.String()
}

// Actions is the GitHub Actions view: an error annotation per finding, a
// notice per acknowledged drift, the summary, and outputs changed (true
// when any pin drifted), version (empty: drift moves no version) and findings.
func Actions(r *Report, rel func(string) string) ghactions.Report {
	rep := ghactions.Report{Summary: Markdown(r, rel)}
	mark := ""
	if r.Offline {
		mark = offlineMark
	}
	for _, it := range r.Items {
		level := ghactions.Error
		switch {
		case it.Status == Acknowledged:
			level = ghactions.Notice
		case !it.Status.Finding():
			continue
		}
		msg := it.Message
		if it.Status == Drift || it.Status == Acknowledged {
			msg = fmt.Sprintf("%s: pinned %s, now %s%s", it.Float, it.Pinned, it.Current, ackNote(it))
		}
		rep.Annotations = append(rep.Annotations, ghactions.Annotation{
			Level: level, File: rel(it.Pin.File), Line: it.Pin.Line,
			Title: mark + string(it.Status) + " " + it.Pin.Path, Message: mark + msg,
		})
	}
	for _, d := range r.Deprecated {
		rep.Annotations = append(rep.Annotations, ghactions.Annotation{
			Level: ghactions.Error, File: rel(d.File), Line: d.Line, Title: mark + "DEPRECATED " + d.Chart + " " + d.Version, Message: mark + d.Advice(),
		})
	}
	for _, n := range r.Notes {
		rep.Annotations = append(rep.Annotations, ghactions.Annotation{Level: ghactions.Warning, Title: mark + "chartpin drift", Message: mark + n})
	}
	rep.Outputs = []ghactions.Output{
		{Name: "changed", Value: strconv.FormatBool(r.drifted())},
		{Name: "version", Value: ""},
		{Name: "findings", Value: strconv.Itoa(r.Findings())},
	}
	return rep
}
