package pin

import (
	"bytes"
	"fmt"
	"log/slog"
	"slices"

	"gopkg.in/yaml.v3"

	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/pinrule"
	"github.com/chartpin/chartpin/yamledit"
)

// edits computes the chart's pin and tag edits, the copies of old digests,
// and the version bump, and returns the files that change.
func (c *chart) edits(opts Options, log *slog.Logger) ([]FileChange, error) {
	if err := c.reparse(); err != nil {
		return nil, err
	}
	defer c.drop()
	edits := c.pinEdits(log)
	if err := c.checkShared(edits); err != nil {
		return nil, err
	}
	for _, s := range c.pins {
		if s.refused != nil {
			c.res.Refused = append(c.res.Refused, *s.refused)
		}
	}
	copies, err := c.findCopies()
	if err != nil {
		return nil, err
	}
	if len(copies) > 0 && !opts.RewriteCopies {
		c.refuseCopies(copies)
		copies = nil
	}
	files, err := c.changedFiles(edits, copies)
	if err != nil {
		return nil, err
	}
	c.report(copies)
	if len(files) == 0 {
		return nil, nil
	}
	bumped, err := c.bump(opts, files)
	if err != nil {
		return nil, err
	}
	return bumped, nil
}

// pinEdits renders each resolved pin's new value, holds the pins whose
// when: is false, and returns the edits of the pins and tags that move. In
// discovery a pin that cannot follow its moving block is refused.
func (c *chart) pinEdits(log *slog.Logger) []yamledit.Edit {
	var edits []yamledit.Edit
	moved := map[string]bool{} // image blocks with a moving pin
	for _, s := range c.pins {
		if s.Problem != "" || s.held != "" || s.refused != nil {
			continue
		}
		current := value(s.Node)
		s.newValue = render(s.Pin, s.newDigest, s.useTag, current)
		tagEdit := s.tagMoved && s.TagNode != nil && s.TagNode != s.Node
		s.changed = s.newValue != current || tagEdit
		if !s.changed {
			continue
		}
		if s.When != "" {
			held, err := c.checkWhen(s)
			if err != nil {
				s.refuse(s.ref, err)
				s.changed = false
				continue
			}
			if held != "" {
				s.held, s.changed = held, false
				log.Debug("pin held", "pin", s.Path, "reason", held)
				continue
			}
		}
		moved[s.At] = true
		if s.newValue != current {
			edits = append(edits, yamledit.Edit{Node: s.Node, Value: s.newValue})
		}
		if tagEdit {
			edits = append(edits, yamledit.Edit{Node: s.TagNode, Value: s.Tag})
		}
		log.Debug("pin moves", "pin", s.Path, "image", s.ref, "old", s.Digest, "new", s.newDigest)
	}
	for _, s := range c.pins {
		if k := s.Problem; k != "" && c.cfg == nil && moved[s.At] && s.Digest != "" {
			s.refuse(s.At, fmt.Errorf("its block moves but this pin cannot follow it: %s", k))
		}
	}
	return edits
}

// changedFiles applies the edits and the copies in values.yaml to its bytes
// and rewrites the copies in the chart's other files.
func (c *chart) changedFiles(edits []yamledit.Edit, copies []copyHit) ([]FileChange, error) {
	for _, cp := range copies {
		if cp.node != nil {
			edits = append(edits, yamledit.Edit{Node: cp.node, Value: cp.newValue})
		}
	}
	var files []FileChange
	if len(edits) > 0 {
		after, err := c.values.Apply(edits...)
		if err != nil {
			return nil, fmt.Errorf("writing pins into %s: %w", c.values.Name, err)
		}
		if !bytes.Equal(after, c.values.Data) {
			files = append(files, FileChange{Path: c.values.Name, Before: c.values.Data, After: after})
		}
	}
	other, err := c.rewriteFiles(copies)
	if err != nil {
		return nil, err
	}
	return append(files, other...), nil
}

// report records the chart's pins, skips and copies in its result.
func (c *chart) report(copies []copyHit) {
	c.res.Skipped = c.skips
	for _, s := range c.pins {
		if (s.Problem != "" && s.held == "") || s.refused != nil {
			continue
		}
		ch := Change{File: s.File, Line: s.Line, Path: s.Path, Image: s.ref, Tag: s.useTag, OldDigest: s.Digest,
			NewDigest: s.newDigest, Platforms: s.Platforms, Follows: s.Follows, Changed: s.changed, Held: s.held, Signature: s.signature}
		if s.tagMoved {
			ch.OldTag, ch.TagLine = s.oldTag, s.TagLine
		}
		if len(ch.Platforms) == 0 {
			ch.Platforms = s.img.Platforms
		}
		c.res.Pins = append(c.res.Pins, ch)
	}
	for _, cp := range copies {
		c.res.Copies = append(c.res.Copies, cp.CopyChange)
	}
}

// value is a scalar's current text ("" for null).
func value(n *yaml.Node) string {
	if n == nil || n.ShortTag() == "!!null" {
		return ""
	}
	return n.Value
}

// checkWhen decides whether a pin may move by its condition: false holds
// this pin only (the reason is returned); an absent or unreadable value is
// not permission, so it is a refusal (docs/design.md#ceilings-fail-closed).
func (c *chart) checkWhen(s *state) (held string, err error) {
	cond, err := pinrule.ParseWhen(s.When)
	if err != nil {
		return "", fmt.Errorf("when: %w", err)
	}
	ok, err := cond.Eval(func(path string) (*yaml.Node, error) { return yamledit.LookupNode(c.root, path) })
	if err != nil {
		return "", fmt.Errorf("refusing to move the pin from %s to %s: %w (fail closed)", orNone(s.Digest), s.newDigest, err)
	}
	if !ok {
		return fmt.Sprintf("when %q does not hold in values.yaml (would move to %s)", s.When, s.newDigest), nil
	}
	return "", nil
}

func orNone(d string) string {
	if d == "" {
		return "(none)"
	}
	return d
}

// claim is one pin's wish for a scalar it may share with others through an
// anchor: the value it needs there, and the node its path reads (an alias or
// merge when the scalar is written elsewhere).
type claim struct {
	s     *state
	path  string
	ref   *yaml.Node
	value string
}

// checkShared refuses an edit of a scalar that more than one place reads
// (docs/design.md#one-scalar-one-image): every pin reading it must want the
// same value, and every alias of it must be a pin. Agreeing pins make one
// edit, reported for each of them.
func (c *chart) checkShared(edits []yamledit.Edit) error {
	claims := map[*yaml.Node][]claim{}
	for _, s := range c.pins {
		moving := s.Problem == "" && s.held == "" && s.refused == nil && s.changed
		if s.Node != nil {
			want := value(s.Node)
			if moving {
				want = s.newValue
			}
			ref := s.Via
			if ref == nil {
				ref = s.Node
			}
			claims[s.Node] = append(claims[s.Node], claim{s, s.Path, ref, want})
		}
		if s.TagNode != nil && s.TagNode != s.Node {
			want := value(s.TagNode)
			if moving && s.tagMoved {
				want = s.Tag
			}
			claims[s.TagNode] = append(claims[s.TagNode], claim{s, s.TagPath, s.TagNode, want})
		}
	}
	aliases := map[*yaml.Node][]*yaml.Node{}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.AliasNode {
			if n.Alias != nil && n.Alias.Kind == yaml.ScalarNode {
				aliases[n.Alias] = append(aliases[n.Alias], n)
			}
			return
		}
		for _, ch := range n.Content {
			walk(ch)
		}
	}
	walk(c.root)
	name := c.values.Name
	for _, e := range edits {
		group := claims[e.Node]
		for _, a := range group {
			for _, b := range group {
				if a.value != b.value {
					return failure.Input(fmt.Errorf("%s: ambiguous pin: %s (line %d, image %s) and %s (line %d, image %s) read one scalar (line %d) through an anchor, but need %s and %s there; nothing written. Give each image its own value: at line %d, write the value instead of the alias, or set the key in the block instead of taking it through the << merge",
						name, a.path, a.ref.Line, c.imageOf(a.s), b.path, b.ref.Line, c.imageOf(b.s), e.Node.Line, orEmpty(a.value), orEmpty(b.value), laterRef(a, b).Line))
				}
			}
		}
		refs := aliases[e.Node]
		if e.Node.Anchor != "" {
			refs = append(refs, e.Node)
		}
		for _, r := range refs {
			if !slices.ContainsFunc(group, func(cl claim) bool { return cl.ref == r }) && len(group) > 0 {
				return failure.Input(fmt.Errorf("%s: pinning %s (line %d) to %s would change the scalar at line %d, which %s (line %d) also reads through the anchor &%s and which is no pin of that image; nothing written. Give %s its own value instead of sharing the anchor",
					name, group[0].path, group[0].ref.Line, e.Value, e.Node.Line, c.values.Path(r), r.Line, e.Node.Anchor, group[0].path))
			}
		}
	}
	return nil
}

// imageOf names a pin's image for messages.
func (c *chart) imageOf(s *state) string {
	if s.ref != "" {
		return s.ref
	}
	return s.Ref()
}

// laterRef is the reference that made the scalar shared: an alias or merge
// rather than the anchor itself, else the later of the two.
func laterRef(a, b claim) *yaml.Node {
	if a.ref.Kind == yaml.AliasNode || (b.ref.Kind != yaml.AliasNode && a.ref.Line > b.ref.Line) {
		return a.ref
	}
	return b.ref
}

func orEmpty(v string) string {
	if v == "" {
		return `""`
	}
	return v
}
