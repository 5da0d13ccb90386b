package pin

import (
	"bytes"
	"fmt"
	"log/slog"

	"gopkg.in/yaml.v3"

	"github.com/chartpin/chartpin/config"
	"github.com/chartpin/chartpin/yamledit"
)

// edits computes the chart's pin and tag edits, the copies of old digests,
// and the version bump, and returns the files that change.
func (c *chart) edits(opts Options, log *slog.Logger) ([]FileChange, error) {
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
	files = append(files, other...)

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
	if len(files) == 0 {
		return nil, nil
	}
	bumped, err := c.bump(opts, files)
	if err != nil {
		return nil, err
	}
	return bumped, nil
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
	cond, err := config.ParseWhen(s.When)
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
