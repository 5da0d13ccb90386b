package discover

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"gopkg.in/yaml.v3"

	"github.com/chartpin/chartpin/config"
	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/resolver"
	"github.com/chartpin/chartpin/yamledit"
)

// discover walks every mapping in the values tree. Comments are not nodes,
// so commented-out YAML is never matched. With lenient, a block that cannot
// be pinned unambiguously is returned as a Pin with Problem set instead of
// stopping the walk.
func discover(name string, root *yaml.Node, lenient bool) ([]Pin, error) {
	var pins []Pin
	visits := 0
	// via is the alias or merge through which the walk reached n (nil: n is
	// written at its own path); pins below it share their scalars with n's
	// anchor.
	var walk func(n *yaml.Node, path string, via *yaml.Node) error
	walk = func(n *yaml.Node, path string, via *yaml.Node) error {
		if visits++; visits > maxVisits {
			return failure.Input(fmt.Errorf("%s: the values, with their << merge keys followed, exceed %d nodes; simplify the merges", name, maxVisits))
		}
		switch n.Kind {
		case yaml.MappingNode:
			b := mergedBlock(name, path, n, root, via)
			found, err := b.pins()
			var amb *ambiguousError
			switch {
			case err != nil && lenient && errors.As(err, &amb):
				pins = append(pins, Pin{File: name, Line: n.Line, Column: n.Column, Path: path, At: path, Problem: amb.msg})
			case err != nil:
				return err
			}
			pins = append(pins, found...)
			for i := 0; i+1 < len(b.node.Content); i += 2 {
				// An alias is the anchored node again: its pins are found once, at the anchor.
				if v := b.node.Content[i+1]; v.Kind != yaml.AliasNode {
					if err := walk(v, yamledit.Join(path, keyName(b.node.Content[i])), b.viaOf(v)); err != nil {
						return err
					}
				}
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				if c.Kind != yaml.AliasNode {
					if err := walk(c, fmt.Sprintf("%s[%d]", path, i), via); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	if err := walk(root, "", nil); err != nil {
		return nil, err
	}
	sortPins(pins)
	return pins, nil
}

// maxVisits bounds the walk: merge keys can nest an anchored tree into
// itself many times over.
const maxVisits = 100000

// mergedBlock is mapping n as Helm reads it: its own keys, then what its
// `<<` merge keys add (a block whose image comes through a merge is an image
// block too). via is how the walk reached n.
func mergedBlock(name, path string, n, root, via *yaml.Node) block {
	b := block{name: name, path: path, node: n, root: root, via: via}
	entries := yamledit.Entries(n)
	if !slices.ContainsFunc(entries, func(e yamledit.Entry) bool { return e.Via != nil }) {
		return b
	}
	b.node = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: n.Line, Column: n.Column}
	b.merged = map[*yaml.Node]*yaml.Node{}
	for _, e := range entries {
		b.node.Content = append(b.node.Content, e.Key, e.Value)
		if e.Via != nil {
			b.merged[e.Value] = e.Via
		}
	}
	return b
}

// viaOf is how the block's value v is reached: through the block's own
// route, else a merge, else v itself when it is an alias.
func (b block) viaOf(v *yaml.Node) *yaml.Node {
	switch {
	case b.via != nil:
		return b.via
	case b.merged[v] != nil:
		return b.merged[v]
	case v.Kind == yaml.AliasNode:
		return v
	}
	return nil
}

// ambiguousError is a block with two pins of one image.
type ambiguousError struct{ full, msg string }

func (e *ambiguousError) Error() string { return e.full }

// keyName is a mapping key as a path segment: an alias key is the key it
// names, as yamledit.LookupNode reads it.
func keyName(k *yaml.Node) string {
	if d := yamledit.Deref(k); d != nil && d.Kind == yaml.ScalarNode {
		return d.Value
	}
	return k.Value
}

// pins returns the pins of one mapping in discovery mode.
func (b block) pins() ([]Pin, error) {
	var out []Pin
	var primary []string // keys holding the block's own (non-variant) pin
	for i := 0; i+1 < len(b.node.Content); i += 2 {
		k, v := b.node.Content[i], b.node.Content[i+1]
		key := k.Value
		val := yamledit.Deref(v)
		if val == nil || val.Kind != yaml.ScalarNode {
			continue
		}
		n := len(out)
		switch {
		case IsPinKey(key):
			p := b.keyPin(key, k, val)
			out = append(out, p)
			if key == "digest" || key == "sha" {
				primary = append(primary, key)
			}
		case val.ShortTag() == "!!str" && tagDigestRe.MatchString(val.Value) && !b.hasSibling("repository", "image", "registry") && key != "tag":
			// v1@sha256:… with nothing saying which image: report, don't guess.
			out = append(out, b.problemPin(key, val, config.FormatTagDigest,
				fmt.Sprintf("%s holds a tag@digest but the block has no repository or image key; configure it in chartpin.yaml", b.at(key))))
		case val.ShortTag() == "!!str" && tagDigestRe.MatchString(val.Value):
			out = append(out, b.embeddedPin(key, val))
			primary = append(primary, key)
		case val.ShortTag() == "!!str" && isImageRef(key, val.Value):
			out = append(out, b.stringPin(key, val))
		}
		if len(out) > n {
			out[n].Via = b.viaOf(v)
		}
	}
	if len(primary) > 1 {
		var where []string
		for _, k := range primary {
			_, v := b.scalar(k)
			where = append(where, fmt.Sprintf("%s (line %d)", b.at(k), yamledit.Deref(v).Line))
		}
		msg := fmt.Sprintf("ambiguous pin: %s hold the same image's digest; keep one, or say which with pin: in chartpin.yaml", strings.Join(where, " and "))
		return nil, failure.Input(&ambiguousError{fmt.Sprintf("%s:%d: %s", b.name, b.node.Line, msg), msg})
	}
	return out, nil
}

func (b block) hasSibling(keys ...string) bool {
	for _, k := range keys {
		if _, v := b.scalar(k); v != nil {
			return true
		}
	}
	return false
}

// isImageRef reports whether a string value is a single-string image: a key
// named image (or fooImage) holding repo:tag, or any value holding repo…@sha256:….
func isImageRef(key, value string) bool {
	if !refRe().MatchString(value) {
		return false
	}
	repo, tag, digest := resolver.SplitRef(value)
	if digest != "" {
		return strings.Contains(repo, "/") || tag != ""
	}
	imageKey := key == "image" || (strings.HasSuffix(key, "Image") && len(key) > 5)
	return imageKey && tag != ""
}

// base is the pin at path, key key of the block.
func (b block) base(path, key string, val *yaml.Node) Pin {
	return Pin{
		File:   b.name,
		Line:   val.Line,
		Column: val.Column,
		Path:   path,
		At:     b.path,
		Key:    key,
		Node:   val,
	}
}

func (b block) problemPin(key string, val *yaml.Node, format, problem string) Pin {
	p := b.base(b.at(key), key, val)
	p.Format = format
	p.Digest = digestOf(val.Value)
	p.Problem = problem
	return p
}

// keyPin is a digest / sha / *Digest key in an image block.
func (b block) keyPin(key string, k, val *yaml.Node) Pin {
	p := b.base(b.at(key), key, val)
	value := ""
	if val.ShortTag() != "!!null" {
		value = val.Value
	}
	p.Format = formatOf(key, value)
	p.Digest = digestOf(value)
	if value != "" && p.Digest == "" {
		p.Problem = fmt.Sprintf("%s holds %q, which is not a digest", p.Path, value)
		return p
	}
	if p.Format == config.FormatTagDigest || p.Format == config.FormatRefDigest {
		p.Problem = fmt.Sprintf("%s holds a tag or reference with a digest; configure its format in chartpin.yaml", p.Path)
		return p
	}
	tagKey, problem := b.variantTag(key)
	if problem != "" {
		p.Problem = problem
		return p
	}
	p.Repository, p.Problem = b.repository("")
	if p.Problem != "" {
		return p
	}
	p.TagPath = sub(b.path, tagKey)
	tn, err := yamledit.LookupNode(b.node, tagKey)
	switch {
	case err != nil:
		p.TagPath = ""
		p.Problem = fmt.Sprintf("block %s has no %s key, so the float to pin is unknown; configure tagFrom: in chartpin.yaml", b.path, tagKey)
	case tn.Kind != yaml.ScalarNode || tn.ShortTag() == "!!null" || tn.Value == "":
		p.TagLine = tn.Line
		if tn.Kind == yaml.ScalarNode {
			p.TagNode = tn
		}
		p.Problem = fmt.Sprintf("%s is empty (the templates likely default it, e.g. to appVersion); set a tag or configure tagFrom: in chartpin.yaml", p.TagPath)
	default:
		p.TagLine, p.TagNode = tn.Line, tn
		p.Tag = tn.Value
		if m := tagDigestRe.FindStringSubmatch(tn.Value); m != nil {
			p.Tag = m[1]
		}
		if !tagRe.MatchString(p.Tag) {
			p.Problem = fmt.Sprintf("%s %q is not an image tag", p.TagPath, tn.Value)
		}
	}
	return p
}

// variantTag says where the tag of a pin key is read: digest and sha take the
// block's tag; prodDigest takes channelTags.prod (or prodTag); digestChroot
// names another image (ingress-nginx's -chroot variant) that discovery
// cannot name, so it is reported.
func (b block) variantTag(key string) (string, string) {
	if key == "digest" || key == "sha" {
		return "tag", ""
	}
	if m := suffixRe.FindStringSubmatch(key); m != nil {
		v := m[1]
		if _, err := yamledit.LookupNode(b.node, "channelTags."+v); err == nil {
			return "channelTags." + v, ""
		}
		if _, err := yamledit.LookupNode(b.node, v+"Tag"); err == nil {
			return v + "Tag", ""
		}
		return "", fmt.Sprintf("%s: no channelTags.%s or %sTag in %s says which tag this variant pins; configure it in chartpin.yaml (tagFrom:, pin: %s)",
			b.at(key), v, v, blockName(b.path), key)
	}
	m := prefixRe.FindStringSubmatch(key)
	v := string(unicode.ToLower(rune(m[1][0]))) + m[1][1:]
	return "", fmt.Sprintf("%s pins the %s variant of the image, whose repository discovery cannot tell; configure it in chartpin.yaml (at: %s, repository: …, pin: %s)",
		b.at(key), v, blockName(b.path), key)
}

func blockName(p string) string {
	if p == "" {
		return "the top level"
	}
	return p
}

// embeddedPin is a tag: v1@sha256:… value: the tag and its pin in one scalar.
func (b block) embeddedPin(key string, val *yaml.Node) Pin {
	p := b.base(b.at(key), key, val)
	m := tagDigestRe.FindStringSubmatch(val.Value)
	p.Tag, p.Digest = m[1], m[2]
	p.TagPath, p.TagLine, p.TagNode = p.Path, val.Line, val
	p.Format = config.FormatTagDigest
	p.Repository, p.Problem = b.repository("")
	return p
}

// stringPin is a single-string image: image: repo:tag[@sha256:…].
func (b block) stringPin(key string, val *yaml.Node) Pin {
	p := b.base(b.at(key), key, val)
	p.At, p.Key = p.Path, ""
	repo, tag, digest := resolver.SplitRef(val.Value)
	p.Tag, p.Digest = tag, digest
	p.TagPath, p.TagLine, p.TagNode = p.Path, val.Line, val
	p.Format = config.FormatRefDigest
	p.Repository, p.Problem = normalizeRepo(repo)
	if p.Problem == "" && tag == "" {
		p.Problem = fmt.Sprintf("%s %q has a digest but no tag, so the float to pin is unknown", p.Path, val.Value)
	}
	return p
}
