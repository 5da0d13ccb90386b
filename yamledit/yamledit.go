// Package yamledit edits YAML scalars byte-exactly: gopkg.in/yaml.v3 nodes
// find a scalar (line, column, style), and the new value is spliced into the
// original bytes, so comments, quoting, indentation, anchors, `---`
// separators, CRLF line ends and everything else outside the edited value
// survive. Values are addressed by path in the parse tree, never by grep or
// sed, and every write is verified (docs/design.md#address-values-by-path).
package yamledit

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/chartpin/chartpin/internal/failure"
)

// Sentinel errors; every error returned by this package wraps one of them or
// a parse error.
var (
	// ErrNotFound: a path names nothing in the file.
	ErrNotFound = errors.New("not found")
	// ErrAmbiguous: a path names more than one value.
	ErrAmbiguous = errors.New("ambiguous")
	// ErrNotScalar: a path names a mapping, a sequence or a document.
	ErrNotScalar = errors.New("not a scalar")
	// ErrUnsupported: a scalar that cannot be spliced byte-exactly (block
	// scalar, multi-line plain scalar, alias).
	ErrUnsupported = errors.New("unsupported")
	// ErrVerify: the edited bytes did not re-parse to the intended values.
	ErrVerify = errors.New("verification failed")
)

// SkipChildren, returned by a Walk callback, skips the children of the
// current value.
var SkipChildren = errors.New("skip children")

// File is one parsed YAML file: its name, its bytes and one root node per
// document.
type File struct {
	Name string
	Data []byte
	Docs []*yaml.Node

	lines []int               // byte offset of the start of each line
	ascii []bool              // whether each line is pure ASCII (column = byte)
	bom   int                 // bytes of a leading UTF-8 byte order mark
	info  map[*yaml.Node]info // every node reachable without following aliases
}

type info struct {
	path  string
	doc   int
	flow  bool // inside a flow collection ({…} or […])
	isKey bool
}

var lineRe = regexp.MustCompile(`^yaml: line (\d+): `)

// Parse parses every document of data. Errors name the file and line and are
// marked as bad input; duplicate mapping keys are an error.
func Parse(name string, data []byte) (*File, error) {
	if !utf8.Valid(data) {
		line := 1
		for i := 0; i < len(data); {
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size <= 1 {
				break
			}
			if r == '\n' {
				line++
			}
			i += size
		}
		return nil, failure.Input(fmt.Errorf("%s:%d: not valid UTF-8; chartpin edits UTF-8 YAML only, convert the file first", name, line))
	}
	f := &File{Name: name, Data: data, info: map[*yaml.Node]info{}}
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
		f.bom = 3
	}
	f.lines, f.ascii = lineStarts(data, f.bom)
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, failure.Input(newParseError(name, err))
		}
		f.Docs = append(f.Docs, &doc)
	}
	for i, d := range f.Docs {
		if err := f.index(d, i, "", false, false); err != nil {
			return nil, failure.Input(err)
		}
	}
	return f, nil
}

// parseError renders yaml.v3's "yaml: line N: msg" as "file:N: parsing yaml: msg".
type parseError struct {
	msg string
	err error
}

func (e parseError) Error() string { return e.msg }
func (e parseError) Unwrap() error { return e.err }

func newParseError(name string, err error) error {
	msg := err.Error()
	if m := lineRe.FindStringSubmatch(msg); m != nil {
		return parseError{fmt.Sprintf("%s:%s: parsing yaml: %s; fix the file and retry", name, m[1], msg[len(m[0]):]), err}
	}
	return parseError{fmt.Sprintf("%s: parsing yaml: %s; fix the file and retry", name, strings.TrimPrefix(msg, "yaml: ")), err}
}

// lineStarts returns the byte offset of each line, counting line breaks the
// way yaml.v3 does (CRLF, CR, LF, NEL, LS, PS), and which lines are ASCII.
func lineStarts(data []byte, bom int) ([]int, []bool) {
	lines := []int{bom}
	ascii := []bool{true}
	for i := bom; i < len(data); {
		if data[i] >= utf8.RuneSelf {
			ascii[len(ascii)-1] = false
		}
		switch {
		case data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n':
			i += 2
		case data[i] == '\r' || data[i] == '\n':
			i++
		case data[i] == 0xC2 && i+1 < len(data) && data[i+1] == 0x85:
			i += 2
		case data[i] == 0xE2 && i+2 < len(data) && data[i+1] == 0x80 && (data[i+2] == 0xA8 || data[i+2] == 0xA9):
			i += 3
		default:
			i++
			continue
		}
		lines = append(lines, i)
		ascii = append(ascii, true)
	}
	return lines, ascii
}

// index records the path of every node and refuses duplicate keys.
func (f *File) index(n *yaml.Node, doc int, path string, flow, isKey bool) error {
	f.info[n] = info{path: path, doc: doc, flow: flow, isKey: isKey}
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if err := f.index(c, doc, path, flow, false); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		inner := flow || n.Style&yaml.FlowStyle != 0
		for i, c := range n.Content {
			if err := f.index(c, doc, fmt.Sprintf("%s[%d]", path, i), inner, false); err != nil {
				return err
			}
		}
	case yaml.MappingNode:
		inner := flow || n.Style&yaml.FlowStyle != 0
		seen := map[string]*yaml.Node{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind == yaml.ScalarNode {
				if prev, ok := seen[k.Value]; ok {
					return fmt.Errorf("%s:%d: mapping key %q already defined at line %d; remove one of them", f.Name, k.Line, k.Value, prev.Line)
				}
				seen[k.Value] = k
			}
			p := Join(path, keyName(k))
			if err := f.index(k, doc, p, inner, true); err != nil {
				return err
			}
			if err := f.index(v, doc, p, inner, false); err != nil {
				return err
			}
		}
	}
	return nil
}

func keyName(k *yaml.Node) string {
	switch k.Kind {
	case yaml.ScalarNode:
		return k.Value
	case yaml.AliasNode:
		if k.Alias != nil && k.Alias.Kind == yaml.ScalarNode {
			return k.Alias.Value
		}
	}
	return fmt.Sprintf("?%d:%d", k.Line, k.Column) // a complex key: not addressable
}

// Join appends one mapping key to a path, quoting a key that is empty or
// holds . [ ] " or \, so the result is a path Lookup and LookupNode read back.
func Join(path, key string) string {
	seg := key
	if key == "" || strings.ContainsAny(key, `.[]"\`) {
		seg = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`
	}
	if path == "" {
		return seg
	}
	return path + "." + seg
}

// Pos names a node's position as file:line.
func (f *File) Pos(n *yaml.Node) string {
	return fmt.Sprintf("%s:%d", f.Name, n.Line)
}

// Path is the dotted path of a node of this file ("" for a document root or
// a node from elsewhere).
func (f *File) Path(n *yaml.Node) string {
	return f.info[n].path
}

// Walk calls fn for every mapping entry (key and value) and every sequence
// item (key nil), in document order, across all documents, with the entry's
// dotted path. Aliases are passed as they are and not followed. Returning
// SkipChildren skips the value's children; any other error stops the walk.
func (f *File) Walk(fn func(path string, key, value *yaml.Node) error) error {
	var walk func(n *yaml.Node) error
	visit := func(key, value *yaml.Node) error {
		err := fn(f.info[value].path, key, value)
		if errors.Is(err, SkipChildren) {
			return nil
		}
		if err != nil {
			return err
		}
		return walk(value)
	}
	walk = func(n *yaml.Node) error {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				if err := walk(c); err != nil {
					return err
				}
			}
		case yaml.SequenceNode:
			for _, c := range n.Content {
				if err := visit(nil, c); err != nil {
					return err
				}
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if err := visit(n.Content[i], n.Content[i+1]); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, d := range f.Docs {
		if err := walk(d); err != nil {
			return err
		}
	}
	return nil
}

// segment is one step of a path: a mapping key or a sequence index.
type segment struct {
	key   string
	index int // -1 for a key
}

// splitPath parses `a.b[0]."c.d"` into segments.
func splitPath(path string) ([]segment, error) {
	var segs []segment
	i := 0
	expectKey := true
	for i < len(path) {
		switch {
		case path[i] == '[':
			j := strings.IndexByte(path[i:], ']')
			if j < 0 {
				return nil, fmt.Errorf("path %q: unclosed [ at %d", path, i)
			}
			n, err := strconv.Atoi(path[i+1 : i+j])
			if err != nil || n < 0 {
				return nil, fmt.Errorf("path %q: bad index %q", path, path[i+1:i+j])
			}
			segs = append(segs, segment{index: n})
			i += j + 1
			expectKey = false
		case path[i] == '.' && !expectKey:
			i++
			expectKey = true
		case expectKey && path[i] == '"':
			var b strings.Builder
			j := i + 1
			for ; j < len(path) && path[j] != '"'; j++ {
				if path[j] == '\\' && j+1 < len(path) {
					j++
				}
				b.WriteByte(path[j])
			}
			if j >= len(path) {
				return nil, fmt.Errorf("path %q: unclosed quote at %d", path, i)
			}
			segs = append(segs, segment{key: b.String(), index: -1})
			i = j + 1
			expectKey = false
		case expectKey:
			j := i
			for j < len(path) && path[j] != '.' && path[j] != '[' {
				j++
			}
			if j == i {
				return nil, fmt.Errorf("path %q: empty key at %d", path, i)
			}
			segs = append(segs, segment{key: path[i:j], index: -1})
			i = j
			expectKey = false
		default:
			return nil, fmt.Errorf("path %q: unexpected %q at %d", path, path[i], i)
		}
	}
	if len(segs) == 0 || expectKey {
		return nil, fmt.Errorf("path %q: empty or ends with a dot", path)
	}
	return segs, nil
}

// Lookup returns every node the path names, across documents, following
// aliases and `<<` merge keys on the way. The last node may be an alias.
func (f *File) Lookup(path string) ([]*yaml.Node, error) {
	segs, err := splitPath(path)
	if err != nil {
		return nil, failure.Input(fmt.Errorf("%s: %w", f.Name, err))
	}
	var out []*yaml.Node
	for _, d := range f.Docs {
		if len(d.Content) == 0 {
			continue
		}
		if n, i := lookup(d.Content[0], segs); i == len(segs) {
			out = append(out, n)
		}
	}
	return out, nil
}

// LookupNode returns the value a path names under root (a node of a parsed
// tree, e.g. a document's root mapping), with the same path syntax and rules
// as Lookup: aliases are followed, the last one too, and so are `<<` merge
// keys. A missing path is an error wrapping ErrNotFound that says where the
// path stops; a malformed path is an input error.
func LookupNode(root *yaml.Node, path string) (*yaml.Node, error) {
	segs, err := splitPath(path)
	if err != nil {
		return nil, failure.Input(err)
	}
	n, i := lookup(root, segs)
	if i == len(segs) {
		if n = deref(n); n != nil {
			return n, nil
		}
		return nil, notFound(fmt.Sprintf("%s is an alias of nothing", path))
	}
	where := render(segs[:i])
	if where == "" {
		where = "the top level"
	}
	s := segs[i]
	switch {
	case n == nil:
		return nil, notFound(fmt.Sprintf("%s is an alias of nothing", where))
	case s.index >= 0 && n.Kind == yaml.SequenceNode:
		return nil, notFound(fmt.Sprintf("%s (line %d) has %d list items, so no item %d", where, n.Line, len(n.Content), s.index))
	case s.index >= 0:
		return nil, notFound(fmt.Sprintf("%s is %s (line %d), not a list, so it has no item %d", where, kindName(n), n.Line, s.index))
	case n.Kind == yaml.MappingNode:
		return nil, notFound(fmt.Sprintf("no key %q under %s (line %d)", s.key, where, n.Line))
	}
	return nil, notFound(fmt.Sprintf("%s is not a mapping (line %d), so it has no key %q", where, n.Line, s.key))
}

// notFound is a LookupNode miss: its own words, and ErrNotFound for errors.Is.
type notFound string

func (e notFound) Error() string { return string(e) }
func (e notFound) Unwrap() error { return ErrNotFound }

// Deref follows an alias to its anchored node (nil for a hand-built alias of
// nothing); other nodes are returned as they are.
func Deref(n *yaml.Node) *yaml.Node { return deref(n) }

func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n
}

// lookup follows segs from n. It returns the node reached (the last alias not
// followed) and len(segs), or the node where the walk stopped (aliases
// followed; nil for an alias of nothing) and the index of the segment it
// could not take.
func lookup(n *yaml.Node, segs []segment) (*yaml.Node, int) {
	for i, s := range segs {
		d := deref(n)
		var next *yaml.Node
		switch {
		case d == nil:
		case s.index >= 0:
			if d.Kind == yaml.SequenceNode && s.index < len(d.Content) {
				next = d.Content[s.index]
			}
		case d.Kind == yaml.MappingNode:
			next = mapGet(d, s.key, 0)
		}
		if next == nil {
			return d, i
		}
		n = next
	}
	return n, len(segs)
}

// mapGet finds key in a mapping, then in its `<<` merge sources.
func mapGet(m *yaml.Node, key string, depth int) *yaml.Node {
	if depth > 20 {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := deref(m.Content[i]); k != nil && k.Kind == yaml.ScalarNode && k.Value == key {
			return m.Content[i+1]
		}
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := m.Content[i]; k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
			srcs := []*yaml.Node{deref(m.Content[i+1])}
			if srcs[0] != nil && srcs[0].Kind == yaml.SequenceNode {
				srcs = srcs[0].Content
			}
			for _, s := range srcs {
				if s = deref(s); s != nil && s.Kind == yaml.MappingNode {
					if v := mapGet(s, key, depth+1); v != nil {
						return v
					}
				}
			}
		}
	}
	return nil
}

// Entry is one key of a mapping as Helm reads it. Via is the `<<` merge value
// (an alias, or a sequence of them) the entry came through; nil for the
// mapping's own keys.
type Entry struct {
	Key, Value, Via *yaml.Node
}

// Entries returns m's own entries (merge keys left out), then the entries
// its `<<` merge sources add, each key once, with the precedence mapGet
// uses: own keys first, then the sources in order, recursively.
func Entries(m *yaml.Node) []Entry {
	seen := map[string]bool{}
	var out []Entry
	var add func(m, via *yaml.Node, depth int)
	add = func(m, via *yaml.Node, depth int) {
		if depth > 20 {
			return
		}
		for i := 0; i+1 < len(m.Content); i += 2 {
			k := m.Content[i]
			if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
				continue
			}
			name := k.Value
			if d := deref(k); d != nil && d.Kind == yaml.ScalarNode {
				name = d.Value
			}
			if !seen[name] {
				seen[name] = true
				out = append(out, Entry{Key: k, Value: m.Content[i+1], Via: via})
			}
		}
		for i := 0; i+1 < len(m.Content); i += 2 {
			if k := m.Content[i]; k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
				v := via
				if v == nil {
					v = m.Content[i+1]
				}
				srcs := []*yaml.Node{deref(m.Content[i+1])}
				if srcs[0] != nil && srcs[0].Kind == yaml.SequenceNode {
					srcs = srcs[0].Content
				}
				for _, s := range srcs {
					if s = deref(s); s != nil && s.Kind == yaml.MappingNode {
						add(s, v, depth+1)
					}
				}
			}
		}
	}
	add(m, nil, 0)
	return out
}

// Get returns the one scalar that path names across all documents; absent,
// ambiguous (several documents) or non-scalar paths are errors.
func (f *File) Get(path string) (Scalar, error) {
	nodes, err := f.Lookup(path)
	if err != nil {
		return Scalar{}, err
	}
	switch len(nodes) {
	case 0:
		return Scalar{}, failure.Input(fmt.Errorf("%s: %s: %w%s", f.Name, path, ErrNotFound, f.nearest(path)))
	case 1:
	default:
		var at []string
		for _, n := range nodes {
			at = append(at, f.Pos(n))
		}
		return Scalar{}, failure.Input(fmt.Errorf("%s: %s: %w: %d candidates at %s; keep one, or address it in one document", f.Name, path, ErrAmbiguous, len(nodes), strings.Join(at, ", ")))
	}
	n := nodes[0]
	if t := deref(n); t == nil || t.Kind != yaml.ScalarNode {
		return Scalar{}, failure.Input(fmt.Errorf("%s: %s: %w (%s at line %d)", f.Name, path, ErrNotScalar, kindName(t), n.Line))
	}
	s, err := f.Scalar(n)
	s.Path = path
	return s, err
}

// nearest describes the longest prefix of path that exists, for an error.
func (f *File) nearest(path string) string {
	segs, err := splitPath(path)
	if err != nil {
		return ""
	}
	for i := len(segs) - 1; i > 0; i-- {
		for _, d := range f.Docs {
			if len(d.Content) == 0 {
				continue
			}
			if n, j := lookup(d.Content[0], segs[:i]); j == i {
				return fmt.Sprintf(" (%s has %s at line %d, without %s)", f.Name, f.Path(n), n.Line, render(segs[i:i+1]))
			}
		}
	}
	return ""
}

func render(segs []segment) string {
	p := ""
	for _, s := range segs {
		if s.index >= 0 {
			p += fmt.Sprintf("[%d]", s.index)
		} else {
			p = Join(p, s.key)
		}
	}
	return p
}

func kindName(n *yaml.Node) string {
	if n == nil {
		return "nothing"
	}
	switch n.Kind {
	case yaml.DocumentNode:
		return "a document"
	case yaml.SequenceNode:
		return "a sequence"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.AliasNode:
		return "an alias"
	}
	return "a scalar"
}

// label names a path in a message.
func label(path string) string {
	if path == "" {
		return "the document root"
	}
	return path
}
