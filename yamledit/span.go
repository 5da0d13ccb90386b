package yamledit

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/chartpin/chartpin/internal/failure"
)

// Scalar is a located scalar value.
type Scalar struct {
	Path         string     // dotted path ("" when unknown)
	Node         *yaml.Node // the node as parsed (an alias node for an alias)
	Value        string     // the decoded value (an alias's target value)
	Line, Column int        // 1-based, as yaml.v3 reports them (column in characters)
	// Start and End are the byte span of the value token including its
	// quotes, after any anchor or tag. An empty plain value (`digest:`) has
	// Start == End at the point where a value is inserted. Both are -1 when
	// the value cannot be spliced (the error then wraps ErrUnsupported).
	Start, End int
	Style      yaml.Style // quoting style without TaggedStyle
	Flow       bool       // inside a flow collection
}

// Scalar locates n, which must be a scalar (or an alias) of this file.
// For a value that cannot be spliced (block scalar, multi-line plain
// scalar, alias) it returns the Scalar with Start = End = -1 and an error
// wrapping ErrUnsupported.
func (f *File) Scalar(n *yaml.Node) (Scalar, error) {
	inf, ok := f.info[n]
	if !ok {
		return Scalar{}, fmt.Errorf("%s: node at line %d is not from this file", f.Name, n.Line)
	}
	s := Scalar{Path: inf.path, Node: n, Value: n.Value, Line: n.Line, Column: n.Column,
		Start: -1, End: -1, Style: n.Style &^ yaml.TaggedStyle, Flow: inf.flow}
	switch n.Kind {
	case yaml.ScalarNode:
	case yaml.AliasNode:
		t := deref(n)
		if t == nil || t.Kind != yaml.ScalarNode {
			return s, failure.Input(fmt.Errorf("%s: %s: %w (alias of %s)", f.Pos(n), label(inf.path), ErrNotScalar, kindName(t)))
		}
		s.Value = t.Value
		return s, failure.Input(fmt.Errorf("%s: %s is the alias *%s: %w; its value is written once at the anchor &%s at %s", f.Pos(n), label(inf.path), n.Value, ErrUnsupported, n.Value, f.Pos(t)))
	default:
		return s, failure.Input(fmt.Errorf("%s: %s: %w (%s)", f.Pos(n), label(inf.path), ErrNotScalar, kindName(n)))
	}
	if s.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		return s, failure.Input(fmt.Errorf("%s: %s is a block scalar (| or >): %w; write it as a one-line value to let chartpin edit it", f.Pos(n), label(inf.path), ErrUnsupported))
	}
	start, end, err := f.span(n, inf.flow)
	if err != nil {
		return s, failure.Input(fmt.Errorf("%s: %s: %w", f.Pos(n), label(inf.path), err))
	}
	s.Start, s.End = start, end
	return s, nil
}

// offset converts yaml.v3's line and character column into a byte offset.
func (f *File) offset(line, col int) (int, error) {
	if line < 1 || line > len(f.lines) || col < 1 {
		return 0, fmt.Errorf("%w: position %d:%d outside the file", ErrUnsupported, line, col)
	}
	off := f.lines[line-1]
	if f.ascii[line-1] {
		end := len(f.Data)
		if line < len(f.lines) {
			end = f.lines[line]
		}
		if off+col-1 > end {
			return 0, fmt.Errorf("%w: column %d past the end of line %d", ErrUnsupported, col, line)
		}
		return off + col - 1, nil
	}
	for i := 1; i < col; i++ {
		if off >= len(f.Data) {
			return 0, fmt.Errorf("%w: column %d past the end of line %d", ErrUnsupported, col, line)
		}
		_, size := utf8.DecodeRune(f.Data[off:])
		off += size
	}
	return off, nil
}

// span finds the byte span of a scalar's value token.
func (f *File) span(n *yaml.Node, flow bool) (int, int, error) {
	d := f.Data
	off, err := f.offset(n.Line, n.Column)
	if err != nil {
		return 0, 0, err
	}
	// Skip node properties: the node's mark points at an anchor or a tag
	// (also the bare `!`, which yaml.v3 does not flag as TaggedStyle). A
	// plain value cannot start with & or !, so this never eats a value.
	if n.Value != "" || n.Anchor != "" || n.Style&yaml.TaggedStyle != 0 {
		for off < len(d) && (d[off] == '&' || d[off] == '!') {
			if d[off] == '!' && off+1 < len(d) && d[off+1] == '<' {
				j := strings.IndexByte(string(d[off:]), '>')
				if j < 0 {
					return 0, 0, fmt.Errorf("%w: unterminated verbatim tag", ErrUnsupported)
				}
				off += j + 1
			} else {
				for off < len(d) && !isBlank(d, off) && !isBreakAt(d, off) && !(flow && isFlowIndicator(d[off])) {
					off++
				}
			}
			propEnd := off
			for off < len(d) && isBlank(d, off) {
				off++
			}
			if n.Value == "" && n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle) == 0 {
				// `key: &a` with nothing after: insert after the properties.
				return propEnd, propEnd, nil
			}
			// The value may follow on a later line, after a comment.
			for off < len(d) && (d[off] == '#' || isBreakAt(d, off) || isBlank(d, off)) {
				if d[off] == '#' {
					for off < len(d) && !isBreakAt(d, off) {
						off++
					}
					continue
				}
				off++
			}
		}
	}
	if off > len(d) {
		return 0, 0, fmt.Errorf("%w: value past the end of the file", ErrUnsupported)
	}
	style := n.Style &^ yaml.TaggedStyle
	switch {
	case style&yaml.DoubleQuotedStyle != 0:
		if off >= len(d) || d[off] != '"' {
			return 0, 0, fmt.Errorf("%w: no double quote where yaml.v3 placed the value", ErrUnsupported)
		}
		for i := off + 1; i < len(d); i++ {
			switch d[i] {
			case '\\':
				i++
			case '"':
				return off, i + 1, f.check(n, off, i+1)
			}
		}
		return 0, 0, fmt.Errorf("%w: unterminated double-quoted value", ErrUnsupported)
	case style&yaml.SingleQuotedStyle != 0:
		if off >= len(d) || d[off] != '\'' {
			return 0, 0, fmt.Errorf("%w: no single quote where yaml.v3 placed the value", ErrUnsupported)
		}
		for i := off + 1; i < len(d); i++ {
			if d[i] == '\'' {
				if i+1 < len(d) && d[i+1] == '\'' {
					i++
					continue
				}
				return off, i + 1, f.check(n, off, i+1)
			}
		}
		return 0, 0, fmt.Errorf("%w: unterminated single-quoted value", ErrUnsupported)
	}
	if n.Value == "" {
		// An empty plain value: the mark is where the value would start.
		return off, off, nil
	}
	end := plainEnd(d, off, flow)
	if string(d[off:end]) != n.Value {
		return 0, 0, fmt.Errorf("%w: a plain value spanning several lines; quote it on one line to let chartpin edit it", ErrUnsupported)
	}
	return off, end, nil
}

// plainEnd returns the end of a one-line plain scalar starting at off.
func plainEnd(d []byte, off int, flow bool) int {
	end := off
	for i := off; i < len(d) && !isBreakAt(d, i); {
		c := d[i]
		switch {
		case c == ' ' || c == '\t':
			i++
			if i < len(d) && d[i] == '#' {
				return end
			}
			continue
		case c == ':' && (i+1 >= len(d) || isBlank(d, i+1) || isBreakAt(d, i+1) || (flow && isFlowIndicator(d[i+1]))):
			return end
		case flow && isFlowIndicator(c):
			return end
		}
		_, size := utf8.DecodeRune(d[i:])
		i += size
		end = i
	}
	return end
}

// check confirms that a quoted span decodes to the node's value.
func (f *File) check(n *yaml.Node, start, end int) error {
	tok := f.Data[start:end]
	if !strings.ContainsAny(string(tok), "\\'\r\n\u0085\u2028\u2029") && string(tok[1:len(tok)-1]) == n.Value {
		return nil
	}
	var v yaml.Node
	if err := yaml.Unmarshal(tok, &v); err == nil && len(v.Content) == 1 && v.Content[0].Value == n.Value {
		return nil
	}
	return fmt.Errorf("%w: the quoted value at bytes %d-%d does not read back as %q", ErrUnsupported, start, end, n.Value)
}

func isBlank(d []byte, i int) bool { return d[i] == ' ' || d[i] == '\t' }

func isBreakAt(d []byte, i int) bool {
	switch {
	case d[i] == '\r' || d[i] == '\n':
		return true
	case d[i] == 0xC2 && i+1 < len(d) && d[i+1] == 0x85:
		return true
	case d[i] == 0xE2 && i+2 < len(d) && d[i+1] == 0x80 && (d[i+2] == 0xA8 || d[i+2] == 0xA9):
		return true
	}
	return false
}

func isFlowIndicator(c byte) bool {
	return c == ',' || c == '[' || c == ']' || c == '{' || c == '}'
}
