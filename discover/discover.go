// Package discover finds the image pins a chart's values.yaml declares: with
// a config, exactly the configured images; without one, every image block that
// carries a pin key, anywhere in the file (a watcher that walked only images:
// watched 1 of 3 pins). A pin whose image cannot be determined is
// returned with Problem set, never dropped.
package discover

import (
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/chartpin/chartpin/config"
	"github.com/chartpin/chartpin/internal/chartfile"
	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/resolver"
	"github.com/chartpin/chartpin/yamledit"
)

// Pin is one pin location in values.yaml and the image it pins.
type Pin struct {
	// File is the absolute path of values.yaml.
	File string `json:"file"`
	// Line and Column locate the pin scalar (1-based).
	Line   int `json:"line"`
	Column int `json:"column"`
	// Path is the yamledit path of the pin scalar, e.g.
	// images.ingestor.prodDigest or podLabels."app.kubernetes.io".image.digest
	// (a key holding . [ ] " or \ is quoted).
	Path string `json:"path"`
	// At is the yamledit path of the image block (for a single-string image, the scalar).
	At string `json:"at"`
	// Key is the pin key inside the block ("" for a single-string image).
	Key string `json:"key,omitempty"`
	// Repository is registry/repository, normalized; "" if unknown.
	Repository string `json:"repository,omitempty"`
	// Tag is the float the pin is resolved from; TagPath is where it is read.
	Tag     string `json:"tag,omitempty"`
	TagPath string `json:"tag_path,omitempty"`
	// TagLine is the line of the tag scalar (0 if there is none).
	TagLine int `json:"tag_line,omitempty"`
	// Digest is the current pin (sha256:…); "" means not pinned.
	Digest string `json:"digest,omitempty"`
	// Format is how the pin is written: digest | hex | tag@digest | ref@digest.
	Format    string   `json:"format"`
	Platforms []string `json:"platforms,omitempty"`
	// SingleArch allows a single-platform manifest where no platform is required.
	SingleArch bool   `json:"single_arch,omitempty"`
	Versions   string `json:"versions,omitempty"`
	When       string `json:"when,omitempty"`
	Follows    string `json:"follows,omitempty"`
	// Hold is why the config says this pin never moves ("" means it moves).
	Hold string `json:"hold,omitempty"`
	// VerifyKey is the public key a new digest's signature must verify with ("" means none).
	VerifyKey string `json:"verify_key,omitempty"`
	// VerifyIdentity, VerifyIssuer and VerifyTrustedRoot are the keyless
	// signature a new digest must carry instead ("" means none).
	VerifyIdentity    string `json:"verify_identity,omitempty"`
	VerifyIssuer      string `json:"verify_issuer,omitempty"`
	VerifyTrustedRoot string `json:"verify_trusted_root,omitempty"`
	// Problem is non-empty when the image cannot be determined (unwatchable).
	Problem string `json:"problem,omitempty"`
	// ConfigLine is the chartpin.yaml line that configured this pin (0 in discovery).
	ConfigLine int `json:"config_line,omitempty"`
	// Node is the pin scalar (for an alias, its anchored scalar: written once);
	// TagNode the tag scalar (nil if none). They belong to the tree passed to Find.
	Node    *yaml.Node `json:"-"`
	TagNode *yaml.Node `json:"-"`
	// Via is the alias or `<<` merge through which Path reaches Node when
	// Node is written elsewhere (an anchor it shares); nil otherwise.
	Via *yaml.Node `json:"-"`
}

// Ref is the float this pin follows: Repository:Tag.
func (p Pin) Ref() string { return p.Repository + ":" + p.Tag }

// Verifies reports whether a new digest of this pin needs a signature
// (verify: with a key or a keyless identity).
func (p Pin) Verifies() bool {
	return p.VerifyKey != "" || p.VerifyIdentity != "" || p.VerifyIssuer != "" || p.VerifyTrustedRoot != ""
}

// Where names the pin for messages: file:line (path).
func (p Pin) Where() string { return fmt.Sprintf("%s:%d (%s)", p.File, p.Line, p.Path) }

// Chart returns the pins of the chart in dir: with cfg nil by discovery, else
// exactly cfg's images. values.yaml is parsed by yamledit.Parse, so
// malformed YAML, duplicate keys (`<<` merge keys too), invalid UTF-8 and
// configured paths that do not exist are input errors naming file:line.
func Chart(dir string, cfg *config.Chart) ([]Pin, error) {
	name, root, err := readValues(dir)
	if err != nil {
		return nil, err
	}
	return Find(name, root, cfg)
}

// readValues parses dir's values.yaml and returns its absolute path and values tree.
func readValues(dir string) (string, *yaml.Node, error) {
	name, data, err := chartfile.ReadValues(dir)
	if err != nil {
		return "", nil, err
	}
	if abs, err := filepath.Abs(name); err == nil {
		name = abs
	}
	f, err := yamledit.Parse(name, data)
	if err != nil {
		return "", nil, err
	}
	root, err := Values(f)
	return name, root, err
}

// Values returns the values tree of a parsed values.yaml: the first
// document's root mapping (Helm reads only the first; yamledit.Parse has
// checked that the others parse). An empty file or a null document is an
// empty mapping; any other top level is an input error naming file:line.
func Values(f *yamledit.File) (*yaml.Node, error) {
	empty := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	if len(f.Docs) == 0 || len(f.Docs[0].Content) == 0 {
		return empty, nil
	}
	root := f.Docs[0].Content[0]
	switch {
	case root.Kind == yaml.MappingNode:
		return root, nil
	case root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null":
		return empty, nil
	}
	return nil, failure.Input(fmt.Errorf("%s:%d: values must be a mapping at the top level", f.Name, root.Line))
}

// Find returns the pins in a parsed values tree (see Chart).
func Find(name string, root *yaml.Node, cfg *config.Chart) ([]Pin, error) {
	if cfg == nil {
		return discover(name, root, false)
	}
	return configured(name, root, cfg)
}

// Survey is discovery for read-only checks (drift): a block that cannot be
// pinned unambiguously comes back as a Pin with Problem set, and the walk
// goes on, so one bad block never hides the pins after it.
func Survey(dir string) ([]Pin, error) {
	name, root, err := readValues(dir)
	if err != nil {
		return nil, err
	}
	return discover(name, root, true)
}

var (
	hexRe       = regexp.MustCompile(`^[0-9a-f]{64}$`)
	digestRe    = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	tagRe       = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
	tagDigestRe = regexp.MustCompile(`^([A-Za-z0-9_][A-Za-z0-9_.-]{0,127})@(sha256:[0-9a-f]{64})$`)
	// refRe matches a reference with a repository path: [host[:port]/]path[:tag][@digest].
	// Compiled on first use: it is the costliest regexp in the binary, and
	// commands that never discover images (--version, completion) should not pay for it.
	refRe = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^([a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?/)?[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?$`)
	})
	// variantRe matches fooDigest and digestFoo pin keys.
	suffixRe = regexp.MustCompile(`^([a-z][A-Za-z0-9]*)Digest$`)
	prefixRe = regexp.MustCompile(`^digest([A-Z][A-Za-z0-9]*)$`)
)

// IsPinKey reports whether a mapping key names a pin: digest, sha, or a
// camelCase *Digest / digest* variant such as prodDigest or digestChroot.
func IsPinKey(k string) bool {
	return k == "digest" || k == "sha" || suffixRe.MatchString(k) || prefixRe.MatchString(k)
}

// sub appends rel, a path inside a block in yamledit syntax (tag,
// channelTags.prod, a configured pin: or tagFrom:), to the block's path.
// A single mapping key is appended with yamledit.Join, which quotes it.
func sub(base, rel string) string {
	if base == "" {
		return rel
	}
	return base + "." + rel
}

// block is an image block: a mapping and its path.
type block struct {
	name   string
	path   string
	node   *yaml.Node
	root   *yaml.Node
	via    *yaml.Node                // how the walk reached the block (see Pin.Via)
	merged map[*yaml.Node]*yaml.Node // value → the `<<` merge it came through
}

// at is the path of one key of the block.
func (b block) at(key string) string { return yamledit.Join(b.path, key) }

func (b block) scalar(key string) (*yaml.Node, *yaml.Node) {
	var k, v *yaml.Node
	for i := 0; i+1 < len(b.node.Content); i += 2 {
		if b.node.Content[i].Value == key {
			k, v = b.node.Content[i], b.node.Content[i+1]
		}
	}
	return k, v
}

// str returns the string value of a scalar child, and whether it is set (non-null, non-empty).
func (b block) str(key string) string {
	_, v := b.scalar(key)
	v = yamledit.Deref(v)
	if v == nil || v.Kind != yaml.ScalarNode || v.ShortTag() == "!!null" {
		return ""
	}
	return v.Value
}

// globalRegistry is the chart-wide registry default that Bitnami-style and
// ingress-nginx-style charts apply to blocks without their own registry.
// An empty value is "no override", never an empty registry.
func globalRegistry(root *yaml.Node) string {
	for _, p := range []string{"global.imageRegistry", "global.image.registry"} {
		if n, err := yamledit.LookupNode(root, p); err == nil && n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" && n.Value != "" {
			return n.Value
		}
	}
	return ""
}

// repository works out registry/repository from the block's siblings.
func (b block) repository(override string) (string, string) {
	if override != "" {
		return normalizeRepo(override)
	}
	registry := b.str("registry")
	repo := b.str("repository")
	keyUsed := "repository"
	if repo == "" {
		if img := b.str("image"); img != "" && !strings.ContainsAny(img, ":@") {
			repo, keyUsed = img, "image"
		}
	}
	if repo == "" {
		if _, v := b.scalar("repository"); v != nil {
			return "", fmt.Sprintf("%s is empty", b.at("repository"))
		}
		return "", fmt.Sprintf("block %s has no repository or image key (configure repository: in chartpin.yaml)", b.path)
	}
	if registry == "" && !hasHost(repo) {
		registry = globalRegistry(b.root)
	}
	if registry != "" {
		if hasHost(repo) {
			return "", fmt.Sprintf("%s %q and %s %q both name a registry; ambiguous", b.at("registry"), registry, b.at(keyUsed), repo)
		}
		repo = strings.TrimSuffix(registry, "/") + "/" + repo
	}
	return normalizeRepo(repo)
}

func hasHost(repo string) bool {
	h, _, ok := strings.Cut(repo, "/")
	return ok && (strings.ContainsAny(h, ".:") || h == "localhost")
}

// normalizeRepo returns registry/repository fully qualified, or a problem.
func normalizeRepo(repo string) (string, string) {
	n, err := resolver.Normalize(repo + ":latest")
	if err != nil {
		return "", fmt.Sprintf("repository %q is not a valid image name", repo)
	}
	return strings.TrimSuffix(n, ":latest"), ""
}

// formatOf infers how an existing pin value is written.
func formatOf(key, value string) string {
	switch {
	case digestRe.MatchString(value):
		return config.FormatDigest
	case hexRe.MatchString(value):
		return config.FormatHex
	case tagDigestRe.MatchString(value):
		return config.FormatTagDigest
	case strings.Contains(value, "@sha256:"):
		return config.FormatRefDigest
	case key == "sha":
		// kube-prometheus-stack and node-exporter render @sha256:{{ .sha }}
		return config.FormatHex
	}
	return config.FormatDigest
}

// digestOf returns the sha256:… digest held by a pin value in any format.
func digestOf(value string) string {
	switch {
	case digestRe.MatchString(value):
		return value
	case hexRe.MatchString(value):
		return "sha256:" + value
	}
	if _, d, ok := strings.Cut(value, "@"); ok && digestRe.MatchString(d) {
		return d
	}
	return ""
}

func sortPins(pins []Pin) {
	sort.SliceStable(pins, func(i, j int) bool {
		if pins[i].Line != pins[j].Line {
			return pins[i].Line < pins[j].Line
		}
		return pins[i].Column < pins[j].Column
	})
}
