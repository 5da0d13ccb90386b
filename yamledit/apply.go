package yamledit

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/chartpin/chartpin/internal/failure"
)

// Edit sets the value of one scalar node of a File.
type Edit struct {
	Node  *yaml.Node
	Value string
}

type splice struct {
	start, end int
	text       string
	edit       Edit
}

// Apply returns the file's bytes with every edit spliced in; nothing else
// changes. The quoting style of each value is kept where the new value allows
// it (a plain value that would read back as another type or break the syntax
// is double-quoted). The result is re-parsed and checked: every edited value
// reads back as intended and every other node is unchanged, or Apply returns
// an error wrapping ErrVerify and no bytes.
func (f *File) Apply(edits ...Edit) ([]byte, error) {
	if len(edits) == 0 {
		return bytes.Clone(f.Data), nil
	}
	var splices []splice
	byNode := map[*yaml.Node]string{}
	for _, e := range edits {
		if e.Node == nil {
			return nil, fmt.Errorf("%s: edit with no node", f.Name)
		}
		if prev, ok := byNode[e.Node]; ok {
			if prev != e.Value {
				return nil, failure.Input(fmt.Errorf("%s: two edits of %s want %q and %q", f.Pos(e.Node), label(f.Path(e.Node)), prev, e.Value))
			}
			continue
		}
		if !utf8.ValidString(e.Value) {
			return nil, failure.Input(fmt.Errorf("%s: %s: new value %q is not valid UTF-8", f.Pos(e.Node), label(f.Path(e.Node)), e.Value))
		}
		s, err := f.Scalar(e.Node)
		if err != nil {
			return nil, err
		}
		byNode[e.Node] = e.Value
		text := token(e.Node, s, e.Value)
		start, end := s.Start, s.End
		if start == end {
			start, text = f.padInsert(start, text)
			end = start
		}
		splices = append(splices, splice{start: start, end: end, text: text, edit: e})
	}
	sort.Slice(splices, func(i, j int) bool { return splices[i].start < splices[j].start })
	size := len(f.Data)
	for i, s := range splices {
		if i > 0 && s.start < splices[i-1].end {
			return nil, fmt.Errorf("%s and %s: %w: overlapping edits", f.Pos(splices[i-1].edit.Node), f.Pos(s.edit.Node), ErrUnsupported)
		}
		size += len(s.text) - (s.end - s.start)
	}
	out := make([]byte, 0, size)
	last := 0
	for _, s := range splices {
		out = append(out, f.Data[last:s.start]...)
		out = append(out, s.text...)
		last = s.end
	}
	out = append(out, f.Data[last:]...)
	if err := f.verify(out, byNode); err != nil {
		return nil, err
	}
	return out, nil
}

// token renders value in the style of the scalar it replaces.
func token(n *yaml.Node, s Scalar, value string) string {
	switch {
	case s.Style&yaml.SingleQuotedStyle != 0 && singleSafe(value):
		return "'" + strings.ReplaceAll(value, "'", "''") + "'"
	case s.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle) != 0:
		return doubleQuote(value)
	case plainKeeps(n, value, s.Flow):
		return value
	}
	return doubleQuote(value)
}

// padInsert places a value into an empty slot: after the blank that follows
// the key's colon (or with a new one), and apart from a comment after it.
func (f *File) padInsert(at int, text string) (int, string) {
	d := f.Data
	if at > 0 && !isBlank(d, at-1) && !isBreakAt(d, at-1) {
		if at < len(d) && isBlank(d, at) {
			at++
		} else {
			text = " " + text
		}
	}
	if at < len(d) && d[at] == '#' {
		text += " "
	}
	return at, text
}

// plainKeeps reports whether value can be written plain in place of n and
// read back as the same string with the type n had (or as a string where n
// was null).
func plainKeeps(n *yaml.Node, value string, flow bool) bool {
	if value == "" || value != strings.TrimSpace(value) {
		return false
	}
	for _, r := range value {
		if !unicode.IsPrint(r) || r == '\ufeff' {
			return false
		}
	}
	if strings.Contains(value, " #") || strings.Contains(value, ": ") || strings.HasSuffix(value, ":") {
		return false
	}
	if flow && strings.ContainsAny(value, ",[]{}") {
		return false
	}
	var v yaml.Node
	if err := yaml.Unmarshal([]byte(value), &v); err != nil || len(v.Content) != 1 {
		return false
	}
	c := v.Content[0]
	if c.Kind != yaml.ScalarNode || c.Style != 0 || c.Value != value || c.Anchor != "" {
		return false
	}
	if n.Style&yaml.TaggedStyle != 0 {
		return true // the explicit tag decides the type; verify checks it
	}
	want := n.Tag
	if want == "!!null" {
		want = "!!str"
	}
	return c.Tag == want
}

func singleSafe(value string) bool {
	for _, r := range value {
		if !unicode.IsPrint(r) || r == '\ufeff' {
			return false
		}
	}
	return true
}

// doubleQuote renders value as a one-line YAML double-quoted scalar.
func doubleQuote(value string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range value {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		default:
			switch {
			case r == '\ufeff' || !unicode.IsPrint(r) && r != ' ':
				if r <= 0xffff {
					fmt.Fprintf(&b, `\u%04X`, r)
				} else {
					fmt.Fprintf(&b, `\U%08X`, r)
				}
			default:
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// verify re-parses out and compares it with f node by node.
func (f *File) verify(out []byte, edits map[*yaml.Node]string) error {
	g, err := Parse(f.Name, out)
	if err != nil {
		return fmt.Errorf("%s: %w: the edited file does not parse (%v); nothing written", f.Name, ErrVerify, err)
	}
	if len(g.Docs) != len(f.Docs) {
		return fmt.Errorf("%s: %w: %d documents became %d; nothing written", f.Name, ErrVerify, len(f.Docs), len(g.Docs))
	}
	for i := range f.Docs {
		if err := f.same(f.Docs[i], g.Docs[i], edits); err != nil {
			return err
		}
	}
	// Comments may move between a key, its newly filled value and the next
	// key (yaml.v3 attaches them by position), but no comment line may
	// appear or disappear.
	var ca, cb []string
	for i := range f.Docs {
		ca = comments(f.Docs[i], ca)
		cb = comments(g.Docs[i], cb)
	}
	sort.Strings(ca)
	sort.Strings(cb)
	if strings.Join(ca, "\n") != strings.Join(cb, "\n") {
		return fmt.Errorf("%s: %w: comments changed after the edit; nothing written", f.Name, ErrVerify)
	}
	return nil
}

// comments collects every non-empty comment line under n.
func comments(n *yaml.Node, out []string) []string {
	for _, c := range []string{n.HeadComment, n.LineComment, n.FootComment} {
		for _, l := range strings.Split(c, "\n") {
			if l = strings.TrimSpace(l); l != "" {
				out = append(out, l)
			}
		}
	}
	if n.Kind != yaml.AliasNode {
		for _, c := range n.Content {
			out = comments(c, out)
		}
	}
	return out
}

func (f *File) same(a, b *yaml.Node, edits map[*yaml.Node]string) error {
	fail := func(what string) error {
		return fmt.Errorf("%s: %s: %w: %s after the edit; nothing written", f.Pos(a), label(f.Path(a)), ErrVerify, what)
	}
	if a.Kind != b.Kind {
		return fail(fmt.Sprintf("%s became %s", kindName(a), kindName(b)))
	}
	if want, ok := edits[a]; ok {
		if b.Value != want {
			return fail(fmt.Sprintf("value reads %q, not %q", b.Value, want))
		}
		if a.Anchor != b.Anchor {
			return fail("anchor changed")
		}
		return nil
	}
	if a.Value != b.Value || a.Anchor != b.Anchor || a.Tag != b.Tag || a.Style != b.Style {
		return fail(fmt.Sprintf("value %q (tag %s, anchor %q) reads %q (tag %s, anchor %q)", a.Value, a.Tag, a.Anchor, b.Value, b.Tag, b.Anchor))
	}
	if a.Kind == yaml.AliasNode {
		return nil
	}
	if len(a.Content) != len(b.Content) {
		return fail(fmt.Sprintf("%d children became %d", len(a.Content), len(b.Content)))
	}
	for i := range a.Content {
		if err := f.same(a.Content[i], b.Content[i], edits); err != nil {
			return err
		}
	}
	return nil
}
