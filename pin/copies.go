package pin

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// Copies (lesson 5): rewriting a pin once broke four unit tests that
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

// findCopies searches values.yaml scalars (other than pins and tags) and
// every other file of the chart for old digests. Comment lines are never
// touched, as in values.yaml.
func (c *chart) findCopies() ([]copyHit, error) {
	moves := c.moves()
	if len(moves) == 0 {
		return nil, nil
	}
	own := map[*yaml.Node]bool{}
	for _, s := range c.pins {
		own[s.Node] = true
		own[s.TagNode] = true
	}
	var hits []copyHit
	err := c.values.Walk(func(_ string, key, v *yaml.Node) error {
		if v.Kind != yaml.ScalarNode || own[v] {
			return nil
		}
		for _, m := range moves {
			if strings.Contains(v.Value, m.oldHex) {
				newValue, oldTok, newTok := rewrite(v.Value, moves)
				hits = append(hits, copyHit{
					CopyChange: CopyChange{File: c.values.Name, Line: v.Line, Pin: m.pin, Old: oldTok, New: newTok},
					node:       v, newValue: newValue, conflict: m.conflict,
				})
				break
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var paths []string
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
		if d.Type().IsRegular() && path != c.values.Name {
			paths = append(paths, path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("searching %s for copies of old digests: %w", c.dir, err)
	}
	sort.Strings(paths)
	for _, path := range paths {
		fi, err := os.Stat(path)
		if err != nil || fi.Size() > maxCopyFile {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("searching for copies: %w", err)
		}
		if bytes.IndexByte(data, 0) >= 0 {
			continue // binary (a packaged subchart)
		}
		for i, line := range bytes.SplitAfter(data, []byte("\n")) {
			if bytes.HasPrefix(bytes.TrimLeft(line, " \t"), []byte("#")) {
				continue
			}
			for _, m := range moves {
				if bytes.Contains(line, []byte(m.oldHex)) {
					_, oldTok, newTok := rewrite(string(line), moves)
					hits = append(hits, copyHit{
						CopyChange: CopyChange{File: path, Line: i + 1, Pin: m.pin, Old: oldTok, New: newTok},
						conflict:   m.conflict,
					})
					break
				}
			}
		}
	}
	var conflicts []string
	for _, h := range hits {
		if h.conflict != "" {
			conflicts = append(conflicts, fmt.Sprintf("  %s:%d: %s: %s", h.File, h.Line, h.Old, h.conflict))
		}
	}
	if len(conflicts) > 0 {
		return nil, fmt.Errorf("copies of an old digest that moves to two different digests; fix them by hand:\n%s", strings.Join(conflicts, "\n"))
	}
	return hits, nil
}

// rewrite replaces every old digest in s. A full reference
// repo:oldtag@sha256:old becomes repo:newtag@sha256:new (an Artifact Hub
// image annotation must not name the old tag beside the new digest). It
// returns the new text and the first old and new tokens, for the report.
func rewrite(s string, moves map[string]*move) (string, string, string) {
	var oldTok, newTok string
	for _, m := range moves {
		for from := 0; ; {
			i := strings.Index(s[from:], m.oldHex)
			if i < 0 {
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
	}
	return s, oldTok, newTok
}

func isTagChar(b byte) bool {
	return b == '_' || b == '.' || b == '-' || (b >= '0' && b <= '9') || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z')
}

func isRefChar(b byte) bool { return isTagChar(b) || b == '/' || b == ':' }

// rewriteFiles applies the copies in files other than values.yaml, line by
// line, leaving comment lines alone.
func (c *chart) rewriteFiles(hits []copyHit) ([]FileChange, error) {
	moves := c.moves()
	seen := map[string]bool{}
	var out []FileChange
	for _, h := range hits {
		if h.node != nil || seen[h.File] {
			continue
		}
		seen[h.File] = true
		before, err := os.ReadFile(h.File)
		if err != nil {
			return nil, fmt.Errorf("rewriting copies: %w", err)
		}
		var after bytes.Buffer
		for _, line := range bytes.SplitAfter(before, []byte("\n")) {
			if !bytes.HasPrefix(bytes.TrimLeft(line, " \t"), []byte("#")) {
				s, _, _ := rewrite(string(line), moves)
				line = []byte(s)
			}
			after.Write(line)
		}
		out = append(out, FileChange{Path: h.File, Before: before, After: after.Bytes()})
	}
	return out, nil
}

func copiesError(hits []copyHit) error {
	var lines []string
	for _, h := range hits {
		lines = append(lines, fmt.Sprintf("  %s:%d: %s (old digest of %s)", h.File, h.Line, h.Old, h.Pin))
	}
	return errors.New("the old digest of a moving pin is copied elsewhere in the chart; rerun with --rewrite-copies to update them, or remove them:\n" +
		strings.Join(lines, "\n"))
}
