package pin

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/chartpin/chartpin/internal/chartfile"
	"github.com/chartpin/chartpin/internal/failure"
)

// Copies (docs/design.md#copies-of-an-old-pin): rewriting a pin once broke four unit tests that
// hard-coded the old digest, and a helper carried it as a literal. After a
// pin moves, every other occurrence of its old digest in the chart directory
// is rewritten (--rewrite-copies) or listed, never left stale silently.

// maxCopyFile bounds the files searched for copies; charts are small.
const maxCopyFile = 8 << 20

// copyHit is one occurrence of an old digest outside the pin itself.
type copyHit struct {
	CopyChange
	node     *yaml.Node // set for a scalar of the chart's values.yaml
	newValue string
	conflict string // non-empty: the old digest moves to two different digests
	// keep is why the copy is listed but never rewritten ("" = rewritten
	// under --rewrite-copies); its CopyChange.New is then "".
	keep string
}

// move is an old digest and what replaces it.
type move struct {
	oldHex, newHex string
	newTag         string
	pin            string
	conflict       string
}

func (c *chart) moves() map[string]*move {
	out := map[string]*move{}
	for _, s := range c.pins {
		if !s.changed || s.Digest == "" || s.Digest == s.newDigest {
			continue
		}
		old := strings.TrimPrefix(s.Digest, "sha256:")
		m := &move{oldHex: old, newHex: strings.TrimPrefix(s.newDigest, "sha256:"), newTag: s.useTag, pin: s.Path}
		if prev, ok := out[old]; ok {
			if prev.newHex != m.newHex {
				prev.conflict = fmt.Sprintf("%s and %s both held it and move to different digests", prev.pin, s.Path)
			}
			continue
		}
		out[old] = m
	}
	return out
}

// findCopies searches values.yaml scalars (other than pins and tags),
// values.yaml comments, and every line of every other file of the chart
// (comment lines included) for old digests. A file it cannot search is an
// error, never a silent skip.
func (c *chart) findCopies() ([]copyHit, error) {
	moves := c.moves()
	if len(moves) == 0 {
		return nil, nil
	}
	hits, scalars, err := c.valuesCopies(moves)
	if err != nil {
		return nil, err
	}
	hits = append(hits, c.commentCopies(moves, scalars)...)
	paths, links, err := c.otherFiles()
	if err != nil {
		return nil, fmt.Errorf("searching %s for copies of old digests: %w", c.dir, err)
	}
	for _, path := range paths {
		found, err := fileCopies(path, links[path], moves)
		if err != nil {
			return nil, err
		}
		hits = append(hits, found...)
	}
	if err := conflicts(hits); err != nil {
		return nil, err
	}
	return hits, nil
}

// valuesCopies finds old digests in the scalars of values.yaml other than
// the pins and their tags, and returns the byte spans of every scalar (the
// rest of the file is comments and syntax).
func (c *chart) valuesCopies(moves map[string]*move) ([]copyHit, [][2]int, error) {
	own := map[*yaml.Node]bool{}
	for _, s := range c.pins {
		own[s.Node] = true
		own[s.TagNode] = true
	}
	var hits []copyHit
	var scalars [][2]int
	err := c.values.Walk(func(_ string, key, v *yaml.Node) error {
		for _, n := range []*yaml.Node{key, v} {
			if n == nil || n.Kind != yaml.ScalarNode {
				continue
			}
			// A span that cannot be computed counts as comment text: the
			// copy is then listed rather than missed.
			if sc, err := c.values.Scalar(n); err == nil {
				scalars = append(scalars, [2]int{sc.Start, sc.End})
			}
		}
		if v.Kind != yaml.ScalarNode || own[v] {
			return nil
		}
		if m, _ := firstMove(v.Value, moves); m != nil {
			newValue, oldTok, newTok := rewrite(v.Value, moves)
			hits = append(hits, copyHit{
				CopyChange: CopyChange{File: c.values.Name, Line: v.Line, Pin: m.pin, Old: oldTok, New: newTok},
				node:       v, newValue: newValue, conflict: m.conflict,
			})
		}
		return nil
	})
	return hits, scalars, err
}

// otherFiles lists, sorted, every file of the chart directory but
// values.yaml and those under dot directories; links are the ones reached
// through a symbolic link.
func (c *chart) otherFiles() (paths []string, links map[string]bool, err error) {
	links = map[string]bool{}
	err = filepath.WalkDir(c.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != c.dir && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case path == c.values.Name:
		case d.Type().IsRegular():
			paths = append(paths, path)
		case d.Type()&fs.ModeSymlink != 0:
			// Helm follows links when it loads a chart; search what they
			// reach, but never write through one (atomicfile would replace
			// the link with a file).
			fi, err := os.Stat(path)
			if err != nil {
				return fmt.Errorf("%s: %w; fix or remove the link", path, err)
			}
			if !fi.Mode().IsRegular() {
				return fmt.Errorf("%s: a link to a %s, which is not searched; replace it with the files it holds", path, fi.Mode().Type())
			}
			paths = append(paths, path)
			links[path] = true
		default:
			return fmt.Errorf("%s: a %s, which cannot be searched; remove it from the chart directory", path, d.Type())
		}
		return nil
	})
	sort.Strings(paths)
	return paths, links, err
}

// fileCopies finds old digests in the lines of one file other than
// values.yaml; a copy reached through a link is listed, never rewritten.
func fileCopies(path string, link bool, moves map[string]*move) ([]copyHit, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("searching %s for copies of old digests: %w; make it readable or remove it from the chart", path, err)
	}
	if fi.Size() > maxCopyFile {
		return nil, fmt.Errorf("searching %s for copies of old digests: %d bytes, larger than the %d MiB searched; it may hold a stale digest: remove it from the chart directory or check it by hand", path, fi.Size(), maxCopyFile>>20)
	}
	data, err := chartfile.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("searching %s for copies of old digests: %w; make it readable or remove it from the chart", path, err)
	}
	if bytes.IndexByte(data, 0) >= 0 {
		return nil, nil // binary (a packaged subchart): no text line to rewrite
	}
	var hits []copyHit
	for i, line := range bytes.SplitAfter(data, []byte("\n")) {
		if m, _ := firstMove(string(line), moves); m != nil {
			_, oldTok, newTok := rewrite(string(line), moves)
			h := copyHit{
				CopyChange: CopyChange{File: path, Line: i + 1, Pin: m.pin, Old: oldTok, New: newTok},
				conflict:   m.conflict,
			}
			if link {
				h.New, h.keep = "", "reached through a symbolic link: listed, never rewritten through it; update its target by hand"
			}
			hits = append(hits, h)
		}
	}
	return hits, nil
}

// conflicts refuses copies of an old digest that two pins move to different digests.
func conflicts(hits []copyHit) error {
	var lines []string
	for _, h := range hits {
		if h.conflict != "" {
			lines = append(lines, fmt.Sprintf("  %s:%d: %s: %s", h.File, h.Line, h.Old, h.conflict))
		}
	}
	if len(lines) > 0 {
		return fmt.Errorf("copies of an old digest that moves to two different digests; fix them by hand:\n%s", strings.Join(lines, "\n"))
	}
	return nil
}

// rewrite replaces every old digest in s. A full reference
// repo:oldtag@sha256:old becomes repo:newtag@sha256:new (an Artifact Hub
// image annotation must not name the old tag beside the new digest). It
// returns the new text and the first old and new tokens, for the report.
func rewrite(s string, moves map[string]*move) (string, string, string) {
	var oldTok, newTok string
	// One pass, left to right: a digest just written is never read again as
	// an old one (pin A moving X to Y while pin B moves Y to Z).
	for from := 0; ; {
		m, i := firstMove(s[from:], moves)
		if m == nil {
			break
		}
		i += from
		start, end := i, i+len(m.oldHex)
		repl := m.newHex
		if start >= 7 && s[start-7:start] == "sha256:" {
			start -= 7
			repl = "sha256:" + m.newHex
			if start >= 1 && s[start-1] == '@' {
				at := start - 1
				t := at
				for t > 0 && isTagChar(s[t-1]) {
					t--
				}
				if t < at && (t == 0 || !isRefChar(s[t-1]) || s[t-1] == ':') && m.newTag != "" {
					start = t
					repl = m.newTag + "@sha256:" + m.newHex
				}
			}
		}
		tokStart := start
		// for the report, include the repository of a full reference
		for tokStart > 0 && (isRefChar(s[tokStart-1]) || (s[tokStart-1] == '@' && tokStart == start)) {
			tokStart--
		}
		if oldTok == "" {
			oldTok = s[tokStart:end]
			newTok = s[tokStart:start] + repl
		}
		s = s[:start] + repl + s[end:]
		from = start + len(repl)
	}
	return s, oldTok, newTok
}

// firstMove is the move whose old digest occurs first in s, and where: a
// line naming two old digests is credited to the same pin on every run.
func firstMove(s string, moves map[string]*move) (*move, int) {
	var first *move
	at := -1
	for _, m := range moves {
		if i := strings.Index(s, m.oldHex); i >= 0 && (at < 0 || i < at) {
			first, at = m, i
		}
	}
	return first, at
}

func isTagChar(b byte) bool {
	return b == '_' || b == '.' || b == '-' || (b >= '0' && b <= '9') || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z')
}

func isRefChar(b byte) bool { return isTagChar(b) || b == '/' || b == ':' }

// rewriteFiles applies the copies in files other than values.yaml, line by
// line, comment lines included (they are not values.yaml's YAML).
func (c *chart) rewriteFiles(hits []copyHit) ([]FileChange, error) {
	moves := c.moves()
	seen := map[string]bool{}
	var out []FileChange
	for _, h := range hits {
		if h.node != nil || h.keep != "" || seen[h.File] {
			continue
		}
		seen[h.File] = true
		before, err := chartfile.ReadFile(h.File)
		if err != nil {
			return nil, fmt.Errorf("rewriting copies: %w", err)
		}
		var after bytes.Buffer
		for _, line := range bytes.SplitAfter(before, []byte("\n")) {
			s, _, _ := rewrite(string(line), moves)
			after.WriteString(s)
		}
		out = append(out, FileChange{Path: h.File, Before: before, After: after.Bytes()})
	}
	return out, nil
}

// refuseCopies lists every copy of an old digest as a refusal; the first
// carries the whole explanation for the error message.
func (c *chart) refuseCopies(hits []copyHit) {
	for i, h := range hits {
		r := Refusal{File: h.File, Line: h.Line, Path: h.Pin,
			Reason: fmt.Sprintf("%s is a copy of the old digest of %s; rerun with --rewrite-copies to update it, or remove it", h.Old, h.Pin)}
		if h.keep != "" {
			r.Reason = fmt.Sprintf("%s is a copy of the old digest of %s: %s", h.Old, h.Pin, h.keep)
		}
		if i == 0 {
			r.err = copiesError(hits)
		}
		c.res.Refused = append(c.res.Refused, r)
	}
}

func copiesError(hits []copyHit) error {
	var lines []string
	kept := false
	for _, h := range hits {
		l := fmt.Sprintf("  %s:%d: %s (old digest of %s)", h.File, h.Line, h.Old, h.Pin)
		if h.keep != "" {
			l += ": " + h.keep
			kept = true
		}
		lines = append(lines, l)
	}
	msg := "the old digest of a moving pin is copied elsewhere in the chart; rerun with {{RewriteCopies}} to update them, or remove them"
	if kept {
		msg += " ({{RewriteCopies}} lists values.yaml comments but never edits them)"
	}
	return failure.Optionf(msg+":\n%s", strings.Join(lines, "\n"))
}

// commentCopies finds old digests in values.yaml outside every scalar: in
// comments. They are listed, never rewritten: yamledit keeps values.yaml's
// comments byte for byte, and commented-out YAML is never touched (PRODUCT).
func (c *chart) commentCopies(moves map[string]*move, scalars [][2]int) []copyHit {
	data := c.values.Data
	inScalar := func(off int) bool {
		for _, sp := range scalars {
			if off >= sp[0] && off < sp[1] {
				return true
			}
		}
		return false
	}
	var hits []copyHit
	lineStart, lineNo := 0, 1
	for lineStart < len(data) {
		end := bytes.IndexByte(data[lineStart:], '\n')
		if end < 0 {
			end = len(data)
		} else {
			end += lineStart + 1
		}
		line := data[lineStart:end]
		var hit *move
		for _, m := range moves {
			i := bytes.Index(line, []byte(m.oldHex))
			for i >= 0 && inScalar(lineStart+i) {
				j := bytes.Index(line[i+1:], []byte(m.oldHex))
				if j < 0 {
					i = -1
					break
				}
				i += 1 + j
			}
			if i >= 0 {
				hit = m
				break
			}
		}
		if hit != nil {
			text := commentText(line, lineStart, inScalar)
			_, oldTok, _ := rewrite(text, moves)
			if m, _ := firstMove(text, moves); m != nil {
				hit = m // the pin of the first digest the comment names
			}
			keep := "a comment in values.yaml: listed, never rewritten; update or remove it by hand"
			if commentedOutYAML(text) {
				keep = "commented-out YAML in values.yaml: never rewritten; update or remove it by hand"
			}
			hits = append(hits, copyHit{
				CopyChange: CopyChange{File: c.values.Name, Line: lineNo, Pin: hit.pin, Old: oldTok},
				conflict:   hit.conflict, keep: keep,
			})
		}
		lineStart, lineNo = end, lineNo+1
	}
	return hits
}

// commentText is the text after the '#' that starts the comment of line
// (at offset base in the file), trimmed of blanks and line ends.
func commentText(line []byte, base int, inScalar func(int) bool) string {
	for i, b := range line {
		if b == '#' && !inScalar(base+i) && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t') {
			return strings.TrimSpace(string(line[i+1:]))
		}
	}
	return strings.TrimSpace(string(line))
}

// commentedOutYAMLRe: a comment reading as a YAML key with a plain
// (space-free) name, or a sequence item, is commented-out YAML, such as
// "# digest: sha256:…" or "# - image: repo@sha256:…". Prose that merely
// holds a colon ("# pinned by hand: sha256:…") is not.
var commentedOutYAMLRe = regexp.MustCompile(`^(- |-$|[A-Za-z0-9_.\-/"']+:(\s|$))`)

// commentedOutYAML reports whether comment text is a YAML mapping entry or
// sequence item that parses.
func commentedOutYAML(text string) bool {
	if !commentedOutYAMLRe.MatchString(text) {
		return false
	}
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(text), &n); err != nil || len(n.Content) == 0 {
		return false
	}
	k := n.Content[0].Kind
	return k == yaml.MappingNode || k == yaml.SequenceNode
}
