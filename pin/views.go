package pin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/chartpin/chartpin/ghactions"
	"github.com/chartpin/chartpin/internal/relpath"
	"github.com/chartpin/chartpin/resolver"
)

// Text is the human summary: per chart, each pin and what happened to it.
func (r *Result) Text() string {
	var b strings.Builder
	for _, c := range r.Charts {
		fmt.Fprintf(&b, "chart %s (%s)\n", c.Name, rel(c.Dir))
		for _, p := range c.Pins {
			state := "ok     "
			if p.Changed {
				state = "pinned "
			}
			from := ""
			if p.Follows != "" {
				from = " (follows " + p.Follows + ")"
			}
			if p.Held != "" {
				fmt.Fprintf(&b, "  HELD    %s:%d %s %s %s: %s%s\n", rel(p.File), p.Line, p.Path, p.Image, short(p.OldDigest), p.Held, from)
				continue
			}
			fmt.Fprintf(&b, "  %s %s:%d %s %s %s -> %s%s\n", state, rel(p.File), p.Line, p.Path, p.Image, short(p.OldDigest), short(p.NewDigest), from)
		}
		for _, cp := range c.Copies {
			if cp.New == "" {
				fmt.Fprintf(&b, "  LEFT    %s:%d %s (a values.yaml comment or a linked file, never rewritten: update it by hand)\n", rel(cp.File), cp.Line, cp.Old)
				continue
			}
			fmt.Fprintf(&b, "  copy    %s:%d %s -> %s\n", rel(cp.File), cp.Line, cp.Old, cp.New)
		}
		for _, s := range c.Skipped {
			fmt.Fprintf(&b, "  SKIPPED %s:%d %s: %s\n", rel(s.File), s.Line, s.Path, s.Problem)
		}
		for _, f := range c.Refused {
			fmt.Fprintf(&b, "  REFUSED %s:%d %s: %s\n", rel(f.File), f.Line, f.Path, f.Reason)
		}
		if v := versionChange(c, func(a, b string) string { return a + " -> " + b }); v != "" {
			fmt.Fprintf(&b, "  %s\n", v)
		}
	}
	if n := r.refused(); n > 0 {
		fmt.Fprintf(&b, "nothing written: %d %s refused (REFUSED above)\n", n, plural(n, "move is", "moves are"))
		return b.String()
	}
	if r.DryRun && r.Changed() {
		b.WriteString("dry run: nothing written\n")
	}
	if !r.Changed() {
		switch n, h := r.skipped(), r.held(); {
		case n > 0:
			fmt.Fprintf(&b, "nothing written: every pinned image is current, but %d %s not pinned (SKIPPED above)\n", n, plural(n, "pin is", "pins are"))
		case h > 0:
			fmt.Fprintf(&b, "nothing to do: every pin is current or held (%d HELD above)\n", h)
		default:
			b.WriteString("nothing to do: every pin is current\n")
		}
	}
	return b.String()
}

func (r *Result) refused() int {
	n := 0
	for _, c := range r.Charts {
		n += len(c.Refused)
	}
	return n
}

func (r *Result) held() int {
	n := 0
	for _, c := range r.Charts {
		for _, p := range c.Pins {
			if p.Held != "" {
				n++
			}
		}
	}
	return n
}

// versionChange renders "version A -> B, appVersion C -> D", each pair
// through arrow; a chart without appVersion before and after shows only its
// version, one that gains it shows "(none)", one whose appVersion stays says
// so; "" means nothing moved.
func versionChange(c ChartResult, arrow func(from, to string) string) string {
	if c.NewVersion == c.OldVersion && c.NewAppVersion == c.OldAppVersion {
		return ""
	}
	s := "version " + arrow(c.OldVersion, c.NewVersion)
	switch {
	case c.OldAppVersion == c.NewAppVersion && c.NewAppVersion != "":
		// Said, not drawn as a move: a reader expecting lockstep sees it held.
		s += ", appVersion " + c.NewAppVersion + " (unchanged)"
	case c.OldAppVersion != "" || c.NewAppVersion != "":
		s += ", appVersion " + arrow(orNone(c.OldAppVersion), orNone(c.NewAppVersion))
	}
	return s
}

func (r *Result) skipped() int {
	n := 0
	for _, c := range r.Charts {
		n += len(c.Skipped)
	}
	return n
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Markdown is a table per chart: image, tag, old → new digest, platforms;
// then the version change and the copies rewritten. For PR bodies.
func (r *Result) Markdown() string {
	var b strings.Builder
	for _, c := range r.Charts {
		markdownPins(&b, c)
		markdownCopies(&b, c)
		markdownNotMoved(&b, c)
	}
	return b.String()
}

// markdownPins writes a chart's heading, its moved pins as a table, and its version change.
func markdownPins(b *strings.Builder, c ChartResult) {
	fmt.Fprintf(b, "### %s\n\n", ghactions.Text(c.Name))
	var moved []Change
	for _, p := range c.Pins {
		if p.Changed {
			moved = append(moved, p)
		}
	}
	if len(moved) == 0 {
		b.WriteString("No pin changed.\n\n")
	} else {
		b.WriteString("| image | tag | old → new digest | platforms |\n|---|---|---|---|\n")
		for _, p := range moved {
			// Repository values are rendered as escaped inline code: a
			// hostile tag must not break the table or inject markup.
			tag := ghactions.Code(p.Tag)
			if p.OldTag != "" && p.OldTag != p.Tag {
				tag = ghactions.Code(p.OldTag) + " → " + ghactions.Code(p.Tag)
			}
			fmt.Fprintf(b, "| %s | %s | %s → %s | %s |\n", ghactions.Code(resolver.RepositoryOf(p.Image)), tag,
				ghactions.Code(short(p.OldDigest)), ghactions.Code(short(p.NewDigest)), ghactions.Text(strings.Join(p.Platforms, ", ")))
		}
		b.WriteString("\n")
	}
	if v := versionChange(c, func(a, b string) string { return ghactions.Code(a) + " → " + ghactions.Code(b) }); v != "" {
		fmt.Fprintf(b, "Chart %s.\n\n", v)
	}
}

// markdownCopies lists the copies of old digests, rewritten and left.
func markdownCopies(b *strings.Builder, c ChartResult) {
	var rewritten, left []CopyChange
	for _, cp := range c.Copies {
		if cp.New == "" {
			left = append(left, cp)
		} else {
			rewritten = append(rewritten, cp)
		}
	}
	if len(rewritten) > 0 {
		b.WriteString("Copies of old digests rewritten:\n\n")
		for _, cp := range rewritten {
			fmt.Fprintf(b, "- %s\n", ghactions.Code(fmt.Sprintf("%s:%d", relTo(c.Dir, cp.File), cp.Line)))
		}
		b.WriteString("\n")
	}
	if len(left) > 0 {
		b.WriteString("Copies of old digests left as they are (values.yaml comments and linked files are never rewritten; update them by hand):\n\n")
		for _, cp := range left {
			fmt.Fprintf(b, "- %s\n", ghactions.Code(fmt.Sprintf("%s:%d", relTo(c.Dir, cp.File), cp.Line)))
		}
		b.WriteString("\n")
	}
}

// markdownNotMoved lists the held, refused and skipped pins.
func markdownNotMoved(b *strings.Builder, c ChartResult) {
	var held []Change
	for _, p := range c.Pins {
		if p.Held != "" {
			held = append(held, p)
		}
	}
	if len(held) > 0 {
		b.WriteString("Held (not moved):\n\n")
		for _, p := range held {
			fmt.Fprintf(b, "- %s (%s): %s\n", ghactions.Code(p.Path), ghactions.Text(fmt.Sprintf("%s:%d", relTo(c.Dir, p.File), p.Line)), ghactions.Text(p.Held))
		}
		b.WriteString("\n")
	}
	if len(c.Refused) > 0 {
		b.WriteString("**Refused** (nothing is written until these are settled):\n\n")
		for _, f := range c.Refused {
			fmt.Fprintf(b, "- %s (%s): %s\n", ghactions.Code(f.Path), ghactions.Text(fmt.Sprintf("%s:%d", relTo(c.Dir, f.File), f.Line)), ghactions.Text(f.Reason))
		}
		b.WriteString("\n")
	}
	if len(c.Skipped) > 0 {
		b.WriteString("Not pinned (image unknown):\n\n")
		for _, s := range c.Skipped {
			fmt.Fprintf(b, "- %s (%s): %s\n", ghactions.Code(s.Path), ghactions.Text(fmt.Sprintf("%s:%d", relTo(c.Dir, s.File), s.Line)), ghactions.Text(s.Problem))
		}
		b.WriteString("\n")
	}
}

// Subject is a one-line commit subject.
func (r *Result) Subject() string {
	var names []string
	n := 0
	for _, c := range r.Charts {
		moved := 0
		for _, p := range c.Pins {
			if p.Changed {
				moved++
			}
		}
		if moved == 0 && c.NewVersion == c.OldVersion {
			continue
		}
		n += moved
		s := c.Name
		if c.NewVersion != c.OldVersion {
			s += " " + c.NewVersion
		}
		names = append(names, s)
	}
	if len(names) == 0 {
		return "chartpin: nothing to pin"
	}
	img := "images"
	if n == 1 {
		img = "image"
	}
	return fmt.Sprintf("chart(%s): pin %d %s to index digests", strings.Join(names, ", "), n, img)
}

// MarshalJSON adds whether anything changed and which files.
func (r *Result) MarshalJSON() ([]byte, error) {
	files := []string{}
	for _, f := range r.files {
		files = append(files, f.Path)
	}
	charts := r.Charts
	if charts == nil {
		charts = []ChartResult{}
	}
	refusals := []Refusal{}
	for _, c := range charts {
		refusals = append(refusals, c.Refused...)
	}
	return json.Marshal(struct {
		Changed  bool          `json:"changed"`
		DryRun   bool          `json:"dry_run"`
		Files    []string      `json:"files"`
		Refusals []Refusal     `json:"refusals"`
		Charts   []ChartResult `json:"charts"`
	}{r.Changed(), r.DryRun, files, refusals, charts})
}

// Diff is a unified diff of every file of the run (git apply -p1 compatible
// from the working directory).
func (r *Result) Diff() string {
	var b strings.Builder
	for _, f := range r.files {
		name := strings.TrimPrefix(filepath.ToSlash(rel(f.Path)), "/")
		b.WriteString(unified("a/"+name, "b/"+name, f.Before, f.After))
	}
	return b.String()
}

func short(d string) string {
	if d == "" {
		return "(none)"
	}
	if len(d) > 19 {
		return d[:19]
	}
	return d
}

// rel shortens an absolute path relative to the working directory.
func rel(p string) string {
	wd, err := os.Getwd()
	if err != nil {
		return p
	}
	return relTo(wd, p)
}

func relTo(base, p string) string { return relpath.Show(base, p) }

// unified renders a unified diff with three lines of context. Pins are
// one-line splices, so before and after mostly pair line by line; a block
// of unequal length is shown as a replacement.
func unified(aName, bName string, a, b []byte) string {
	ops := diffOps(lines(a), lines(b))
	minusFirst(ops)
	var out bytes.Buffer
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", aName, bName)
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		start, end := max(i-diffContext, 0), hunkEnd(ops, i)
		writeHunk(&out, ops[start:end])
		i = end
	}
	return out.String()
}

// diffOp is one line of a diff: kept, removed or added, at line ai of the
// old text and bi of the new.
type diffOp struct {
	kind byte // ' ', '-', '+'
	text string
	ai   int
	bi   int
}

// diffContext is the lines of context around a change.
const diffContext = 3

// diffOps lines up al and bl: the common prefix and suffix are kept, and a
// middle of equal length is compared line by line, else replaced whole.
func diffOps(al, bl []string) []diffOp {
	pre := 0
	for pre < len(al) && pre < len(bl) && al[pre] == bl[pre] {
		pre++
	}
	suf := 0
	for suf < len(al)-pre && suf < len(bl)-pre && al[len(al)-1-suf] == bl[len(bl)-1-suf] {
		suf++
	}
	var ops []diffOp
	for i := 0; i < pre; i++ {
		ops = append(ops, diffOp{' ', al[i], i, i})
	}
	am, bm := al[pre:len(al)-suf], bl[pre:len(bl)-suf]
	if len(am) == len(bm) {
		for i := range am {
			if am[i] == bm[i] {
				ops = append(ops, diffOp{' ', am[i], pre + i, pre + i})
				continue
			}
			ops = append(ops, diffOp{'-', am[i], pre + i, pre + i}, diffOp{'+', bm[i], pre + i, pre + i})
		}
	} else {
		for i := range am {
			ops = append(ops, diffOp{'-', am[i], pre + i, pre})
		}
		for i := range bm {
			ops = append(ops, diffOp{'+', bm[i], pre + len(am), pre + i})
		}
	}
	for i := 0; i < suf; i++ {
		ops = append(ops, diffOp{' ', al[len(al)-suf+i], len(al) - suf + i, len(bl) - suf + i})
	}
	return ops
}

// minusFirst reorders each run of paired -/+ so all - lines precede the + lines.
func minusFirst(ops []diffOp) {
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		j := i
		for j < len(ops) && ops[j].kind != ' ' {
			j++
		}
		run := append([]diffOp(nil), ops[i:j]...)
		k := i
		for _, o := range run {
			if o.kind == '-' {
				ops[k] = o
				k++
			}
		}
		for _, o := range run {
			if o.kind == '+' {
				ops[k] = o
				k++
			}
		}
		i = j
	}
}

// hunkEnd is the end of the hunk whose first change is ops[i]: changes
// closer than 2*diffContext lines share one hunk.
func hunkEnd(ops []diffOp, i int) int {
	end := i
	for end < len(ops) {
		if ops[end].kind != ' ' {
			end++
			continue
		}
		// stop when the next change is more than 2*diffContext lines away
		k := end
		for k < len(ops) && ops[k].kind == ' ' {
			k++
		}
		if k == len(ops) || k-end > 2*diffContext {
			return min(end+diffContext, len(ops))
		}
		end = k
	}
	return end
}

// writeHunk writes one hunk: its @@ header and its lines.
func writeHunk(out *bytes.Buffer, hunk []diffOp) {
	aStart, bStart, aLen, bLen := -1, -1, 0, 0
	for _, o := range hunk {
		if o.kind != '+' {
			if aStart < 0 {
				aStart = o.ai
			}
			aLen++
		}
		if o.kind != '-' {
			if bStart < 0 {
				bStart = o.bi
			}
			bLen++
		}
	}
	if aStart < 0 {
		aStart = hunk[0].ai - 1
	}
	if bStart < 0 {
		bStart = hunk[0].bi - 1
	}
	fmt.Fprintf(out, "@@ -%s +%s @@\n", hunkRange(aStart, aLen), hunkRange(bStart, bLen))
	for _, o := range hunk {
		out.WriteByte(o.kind)
		out.WriteString(o.text)
		if !strings.HasSuffix(o.text, "\n") {
			out.WriteString("\n\\ No newline at end of file\n")
		}
	}
}

func hunkRange(start, n int) string {
	if n == 1 {
		return fmt.Sprintf("%d", start+1)
	}
	if n == 0 {
		return fmt.Sprintf("%d,0", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

func lines(d []byte) []string {
	var out []string
	for len(d) > 0 {
		i := bytes.IndexByte(d, '\n')
		if i < 0 {
			out = append(out, string(d))
			break
		}
		out = append(out, string(d[:i+1]))
		d = d[i+1:]
	}
	return out
}
