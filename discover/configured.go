package discover

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/chartpin/chartpin/config"
	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/resolver"
	"github.com/chartpin/chartpin/yamledit"
)

// configured returns exactly the pins cfg names. A configured path or pin key
// that values.yaml lacks is an input error: chartpin never invents a key.
// A hold or an acknowledgement that names no pin is an input error too: a
// typo in it would otherwise silence nothing while looking like it works.
func configured(name string, root *yaml.Node, cfg *config.Chart) ([]Pin, error) {
	var pins []Pin
	for _, img := range cfg.Images {
		p, err := configuredPin(name, root, img)
		if err != nil {
			return nil, failure.Input(fmt.Errorf("%s:%d: image %s: %w", configName(cfg), img.Line, img.At, err))
		}
		p.Platforms, p.Versions, p.When, p.Follows, p.Hold, p.ConfigLine = img.Platforms, img.Versions, img.When, img.Follows, img.Hold, img.Line
		p.VerifyKey, p.SingleArch = img.VerifyKey, img.SingleArch
		p.VerifyIdentity, p.VerifyIssuer, p.VerifyTrustedRoot = img.VerifyIdentity, img.VerifyIssuer, img.VerifyTrustedRoot
		pins = append(pins, p)
	}
	if len(cfg.Acknowledge) == 0 {
		return pins, nil
	}
	found, err := discover(name, root, true)
	if err != nil {
		return nil, err
	}
	for _, a := range cfg.Acknowledge {
		if !namesPin(a.At, pins) && !namesPin(a.At, found) {
			return nil, failure.Input(fmt.Errorf("%s:%d: acknowledge at: %s names no pin in %s; fix at: (an image path like images.ingestor, or a pin path) or drop the entry",
				configName(cfg), a.Line, a.At, name))
		}
	}
	return pins, nil
}

// namesPin reports whether at is the image path or the pin path of one of pins
// (the two ways drift matches an acknowledgement).
func namesPin(at string, pins []Pin) bool {
	for _, p := range pins {
		if p.At == at || p.Path == at {
			return true
		}
	}
	return false
}

func configName(cfg *config.Chart) string {
	if cfg.Config == "" {
		return config.FileName
	}
	return cfg.Config
}

func configuredPin(name string, root *yaml.Node, img config.Image) (Pin, error) {
	at, err := yamledit.LookupNode(root, img.At)
	if err != nil {
		return Pin{}, fmt.Errorf("%s: %v; fix at: or the values", name, err)
	}
	if at.Kind == yaml.ScalarNode {
		return configuredString(name, at, img)
	}
	if at.Kind != yaml.MappingNode {
		return Pin{}, fmt.Errorf("%s:%d: %s is a list, not an image block or image string", name, at.Line, img.At)
	}
	b := block{name: name, path: img.At, node: at, root: root}
	p, pinKey, tagKey, err := b.configuredKey(img)
	if err != nil {
		return Pin{}, err
	}
	if img.Follows != "" {
		// The digest comes from the followed image; the block's own image is informational.
		p.Repository, _ = b.repository(img.Repository)
		if tn, err := yamledit.LookupNode(at, tagKey); err == nil && tn.Kind == yaml.ScalarNode {
			p.Tag, p.TagPath, p.TagLine, p.TagNode = stripDigest(tn.Value), sub(img.At, tagKey), tn.Line, tn
		}
		return p, nil
	}
	return b.configuredTag(p, img, pinKey, tagKey)
}

// configuredKey finds the pin scalar of a configured image block (pin:, or
// the block's one pin key) and its format and digest; tagKey is where its
// tag is read (tagFrom:, tag, or the pin itself when it holds its tag).
func (b block) configuredKey(img config.Image) (Pin, string, string, error) {
	name, at := b.name, b.node
	tagKey := img.TagFrom
	if tagKey == "" {
		tagKey = "tag"
	}
	pinKey := img.Pin
	if pinKey == "" {
		var err error
		if pinKey, err = b.defaultPinKey(tagKey); err != nil {
			return Pin{}, "", "", err
		}
	}
	pn, err := yamledit.LookupNode(at, pinKey)
	if err != nil {
		return Pin{}, "", "", fmt.Errorf("%s:%d: %s has no %s key (%v); chartpin never invents a key: add %s: \"\" to the block",
			name, at.Line, img.At, pinKey, err, pinKey)
	}
	if pn.Kind != yaml.ScalarNode {
		return Pin{}, "", "", fmt.Errorf("%s:%d: %s.%s is not a scalar", name, pn.Line, img.At, pinKey)
	}
	value := ""
	if pn.ShortTag() != "!!null" {
		value = pn.Value
	}
	p := b.base(sub(img.At, pinKey), pinKey, pn)
	p.Via = entryVia(at, pinKey)
	p.Format = img.Format
	if p.Format == "" {
		p.Format = formatOf(pinKey, value)
		if pinKey == tagKey && p.Format != config.FormatRefDigest {
			p.Format = config.FormatTagDigest
		}
	}
	if img.TagFrom == "" && (p.Format == config.FormatTagDigest || p.Format == config.FormatRefDigest) {
		// The value holds its own tag: version: v1.5.3@sha256:… needs no tagFrom:.
		tagKey = pinKey
	}
	p.Digest = digestOf(value)
	if value != "" && p.Digest == "" && pinKey != tagKey {
		return Pin{}, "", "", fmt.Errorf("%s:%d: %s holds %q, which is not a digest", name, pn.Line, p.Path, value)
	}
	if (p.Format == config.FormatTagDigest || p.Format == config.FormatRefDigest) && pinKey != tagKey {
		return Pin{}, "", "", fmt.Errorf("%s:%d: format %s writes the tag too, so pin: must be the tag key %s (tagFrom)", name, pn.Line, p.Format, tagKey)
	}
	return p, pinKey, tagKey, nil
}

// configuredTag reads the tag of a configured pin that does not follow
// another: the float it is resolved from, or the Problem that names why it
// is unknown.
func (b block) configuredTag(p Pin, img config.Image, pinKey, tagKey string) (Pin, error) {
	name, at := b.name, b.node
	p.Repository, p.Problem = b.repository(img.Repository)
	tn, err := yamledit.LookupNode(at, tagKey)
	if err != nil {
		if img.Versions == "" && p.Problem == "" {
			p.Problem = fmt.Sprintf("%s has no %s key, so the float to pin is unknown; set tagFrom: or versions:", img.At, tagKey)
		}
		return p, nil
	}
	if tn.Kind != yaml.ScalarNode {
		return Pin{}, fmt.Errorf("%s:%d: %s.%s is not a scalar tag", name, tn.Line, img.At, tagKey)
	}
	p.TagPath, p.TagLine, p.TagNode = sub(img.At, tagKey), tn.Line, tn
	if tn.ShortTag() != "!!null" {
		p.Tag = tn.Value
	}
	if pinKey == tagKey && p.Format == config.FormatRefDigest {
		repo, tag, _ := resolver.SplitRef(p.Tag)
		p.Tag = tag
		if img.Repository == "" {
			p.Repository, p.Problem = normalizeRepo(repo)
		}
	} else if m := tagDigestRe.FindStringSubmatch(p.Tag); m != nil {
		if pinKey != tagKey {
			return Pin{}, fmt.Errorf("%s:%d: ambiguous pin: %s holds %q and %s is a second pin of the same image; keep one",
				name, tn.Line, p.TagPath, p.Tag, p.Path)
		}
		p.Tag = m[1]
	}
	if p.Problem == "" && p.Tag == "" && img.Versions == "" {
		p.Problem = fmt.Sprintf("%s is empty (the templates likely default it, e.g. to appVersion); set a tag, tagFrom: or versions:", p.TagPath)
	}
	return p, nil
}

// entryVia is the alias or `<<` merge through which mapping m's key reaches
// its value (see Pin.Via); nil when the value is written at the key.
func entryVia(m *yaml.Node, key string) *yaml.Node {
	for _, e := range yamledit.Entries(m) {
		if keyName(e.Key) != key {
			continue
		}
		if e.Via != nil {
			return e.Via
		}
		if e.Value.Kind == yaml.AliasNode {
			return e.Value
		}
	}
	return nil
}

func stripDigest(s string) string {
	base, _, _ := strings.Cut(s, "@")
	return base
}

// defaultPinKey picks the block's one primary pin location: digest, sha, or
// a tag holding tag@digest. None or several is an error.
func (b block) defaultPinKey(tagKey string) (string, error) {
	var cands []string
	for _, k := range []string{"digest", "sha"} {
		if _, v := b.scalar(k); v != nil {
			cands = append(cands, k)
		}
	}
	if tn, err := yamledit.LookupNode(b.node, tagKey); err == nil && tn.Kind == yaml.ScalarNode && tagDigestRe.MatchString(tn.Value) {
		cands = append(cands, tagKey)
	}
	switch len(cands) {
	case 0:
		return "", fmt.Errorf("%s:%d: %s has no digest or sha key and no tag@digest; chartpin never invents a key: add digest: \"\" or set pin:",
			b.name, b.node.Line, b.path)
	case 1:
		return cands[0], nil
	}
	return "", fmt.Errorf("%s:%d: ambiguous pin: %s has %s; say which with pin:", b.name, b.node.Line, b.path, strings.Join(cands, " and "))
}

// configuredString is a single-string image: the scalar holds repo:tag[@digest],
// or tag[@digest] with the repository from the config.
func configuredString(name string, n *yaml.Node, img config.Image) (Pin, error) {
	if img.Pin != "" || img.TagFrom != "" {
		return Pin{}, fmt.Errorf("%s:%d: %s is a string, not a block: drop pin:/tagFrom:", name, n.Line, img.At)
	}
	p := Pin{File: name, Line: n.Line, Column: n.Column, Path: img.At, At: img.At, TagPath: img.At, TagLine: n.Line, Node: n, TagNode: n}
	value := n.Value
	if n.ShortTag() == "!!null" {
		value = ""
	}
	if img.Repository != "" && !strings.Contains(value, "/") {
		// tag or tag@digest; the repository is configured.
		p.Format = config.FormatTagDigest
		p.Tag, p.Digest = stripDigest(value), digestOf(value)
		p.Repository, p.Problem = normalizeRepo(img.Repository)
	} else {
		if !refRe().MatchString(value) {
			return Pin{}, fmt.Errorf("%s:%d: %s holds %q, not an image reference repo:tag[@sha256:…]", name, n.Line, img.At, value)
		}
		repo, tag, digest := resolver.SplitRef(value)
		p.Format = config.FormatRefDigest
		p.Tag, p.Digest = tag, digest
		if img.Repository != "" {
			repo = img.Repository
		}
		p.Repository, p.Problem = normalizeRepo(repo)
	}
	if img.Format != "" && img.Format != p.Format {
		return Pin{}, fmt.Errorf("%s:%d: %s is a single string written as %s; format %s does not fit it", name, n.Line, img.At, p.Format, img.Format)
	}
	if p.Problem == "" && p.Tag == "" && img.Versions == "" {
		p.Problem = fmt.Sprintf("%s %q has no tag, so the float to pin is unknown", img.At, value)
	}
	return p, nil
}
