// Package config reads chartpin.yaml: which charts chartpin pins, which images
// in each chart, and how. The file is parsed by yamledit.Parse, like every
// YAML file chartpin reads, and validated strictly: an unknown key, a bad
// value or a malformed range is an input error naming chartpin.yaml:line,
// never ignored.
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	"gopkg.in/yaml.v3"

	"github.com/chartpin/chartpin/chartbump"
	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/pinrule"
	"github.com/chartpin/chartpin/yamledit"
)

// FileName is the config file chartpin looks for in the working directory.
const FileName = "chartpin.yaml"

// Pin formats: how a digest is written into its key.
const (
	FormatDigest    = "digest"     // sha256:<hex>
	FormatHex       = "hex"        // <hex>
	FormatTagDigest = "tag@digest" // <tag>@sha256:<hex>
	FormatRefDigest = "ref@digest" // <registry/repository>:<tag>@sha256:<hex>
)

// Formats lists the valid format values.
var Formats = []string{FormatDigest, FormatHex, FormatTagDigest, FormatRefDigest}

// File is a parsed chartpin.yaml.
type File struct {
	// Path is the absolute path of the config file.
	Path   string
	Charts []Chart
}

// Chart is one configured chart.
type Chart struct {
	// Dir is the chart directory, absolute (written relative to the config file).
	Dir string
	// Bump is patch | minor | major | none ("" means patch).
	Bump string
	// AppVersion is auto | lockstep | keep | from:<image path> ("" means auto).
	AppVersion  string
	Images      []Image
	Acknowledge []Ack
	// Line is where the chart entry starts in the config file.
	Line int
	// Config is the path of the config file (for file:line in messages).
	Config string
}

// Image is one configured pin: an image block and the key that receives its digest.
type Image struct {
	// At is the dotted path of the image block in values.yaml (for a
	// single-string image, the scalar itself).
	At string
	// Repository is registry/repository when the block has none.
	Repository string
	// TagFrom is the key inside the block holding the tag ("" means tag).
	TagFrom string
	// Pin is the key receiving the pin ("" means digest; "" for a single-string image).
	Pin string
	// Format is digest | hex | tag@digest | ref@digest ("" means: from the key and its value).
	Format string
	// Platforms the pinned index must contain.
	Platforms []string
	// SingleArch allows a single-platform manifest where no platform is
	// required (a first pin of an image built for one platform only).
	SingleArch bool
	// Versions is a semver range: pin the highest tag in it instead of the float.
	Versions string
	// When is a values condition that must hold for the pin to move.
	When string
	// Follows is the At of another image whose digest this one takes.
	Follows string
	// Hold is why this pin is never moved ("" means it moves).
	Hold string
	// VerifyKey is the PEM public key (absolute; written relative to the
	// config file) whose signature a new digest must carry ("" means none).
	VerifyKey string
	// VerifyIdentity and VerifyIssuer are the exact certificate identity and
	// OIDC issuer of a keyless signature, under the Sigstore trusted root
	// VerifyTrustedRoot (absolute; written relative to the config file).
	VerifyIdentity, VerifyIssuer, VerifyTrustedRoot string
	// Line is where the entry starts in the config file.
	Line int
}

// Ack silences known drift of one pin until a date.
type Ack struct {
	At     string    `json:"at"`
	Digest string    `json:"digest"`
	Until  time.Time `json:"until"`
	Reason string    `json:"reason"`
	Line   int       `json:"line"`
}

// At is "FILE:LINE" for a line of the config file this chart came from, so
// that messages name the file the user gave (--config other.yaml).
func (c *Chart) At(line int) string {
	name := FileName
	if c != nil && c.Config != "" {
		name = c.Config
	}
	return fmt.Sprintf("%s:%d", name, line)
}

// Find returns the path of chartpin.yaml in dir, or "" when there is none.
func Find(dir string) (string, error) {
	p := filepath.Join(dir, FileName)
	if _, err := os.Stat(p); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", nil
		}
		return "", fmt.Errorf("looking for %s: %w", p, err)
	}
	return p, nil
}

// Load reads and validates a config file. Every problem is an input error
// (exit 2) naming file:line.
func Load(path string) (*File, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("reading config %s: %w", path, err)
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		return nil, failure.Input(failure.Optionf("reading config: %w; pass {{ConfigPath}} FILE or run without one for discovery", err))
	}
	return Parse(abs, data)
}

// Parse validates config bytes; path (absolute) anchors relative chart dirs and error messages.
func Parse(path string, data []byte) (*File, error) {
	p := parser{path: path}
	f, err := p.file(data)
	if err != nil {
		return nil, failure.Input(err)
	}
	return f, nil
}

// Target is one chart a command runs on.
type Target struct {
	// Dir is the chart directory as the user named it, or the configured
	// (absolute) dir when no argument named it.
	Dir string
	// Config is the chart's entry in chartpin.yaml, nil without a config.
	Config *Chart
}

// Select is the chart selection of every command that takes CHART_DIR
// arguments. With a config f, each argument must name a configured chart
// (another directory is an input error naming the config and its charts:
// chartpin.yaml says exactly which charts run, and how) and no argument
// means every configured chart. Without one (f nil), each argument is a
// chart whose pins are discovered, and no argument means the current
// directory. A directory named twice runs once.
func Select(f *File, dirs []string) ([]Target, error) {
	if len(dirs) == 0 {
		if f == nil {
			return []Target{{Dir: "."}}, nil
		}
		out := make([]Target, 0, len(f.Charts))
		for i := range f.Charts {
			out = append(out, Target{Dir: f.Charts[i].Dir, Config: &f.Charts[i]})
		}
		return out, nil
	}
	var out []Target
	seen := map[string]bool{}
	for _, d := range dirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			return nil, failure.Input(fmt.Errorf("chart dir %s: %w", d, err))
		}
		if seen[abs] {
			continue
		}
		seen[abs] = true
		t := Target{Dir: d}
		if f != nil {
			if t.Config = f.Chart(abs); t.Config == nil {
				var known []string
				for _, c := range f.Charts {
					known = append(known, c.Dir)
				}
				return nil, failure.Input(fmt.Errorf("chart dir %s is not configured in %s (configured: %s); add it under charts: there, or name a configured chart",
					d, f.Path, strings.Join(known, ", ")))
			}
		}
		out = append(out, t)
	}
	return out, nil
}

// Chart returns the configured chart with the given absolute dir, or nil.
func (f *File) Chart(dir string) *Chart {
	for i := range f.Charts {
		if f.Charts[i].Dir == dir {
			return &f.Charts[i]
		}
	}
	return nil
}

type parser struct{ path string }

func (p parser) errf(n *yaml.Node, format string, args ...any) error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return fmt.Errorf("%s:%d: %s", p.path, line, fmt.Sprintf(format, args...))
}

func (p parser) file(data []byte) (*File, error) {
	// yamledit.Parse refuses malformed YAML (in any document), duplicate
	// keys and invalid UTF-8, naming file:line.
	y, err := yamledit.Parse(p.path, data)
	if err != nil {
		return nil, err
	}
	if len(y.Docs) > 1 {
		return nil, p.errf(y.Docs[1], "a second YAML document; a config file holds one")
	}
	if len(y.Docs) == 0 || len(y.Docs[0].Content) == 0 {
		return nil, fmt.Errorf("%s: empty config; it needs a charts: list", p.path)
	}
	root := y.Docs[0].Content[0]
	f := &File{Path: p.path}
	fields, err := p.mapping(root, "charts")
	if err != nil {
		return nil, err
	}
	charts, ok := fields["charts"]
	if !ok {
		return nil, p.errf(root, "missing charts: list")
	}
	if charts.Kind != yaml.SequenceNode || len(charts.Content) == 0 {
		return nil, p.errf(charts, "charts: must be a non-empty list of charts")
	}
	seenDir := map[string]int{}
	for _, cn := range charts.Content {
		c, err := p.chart(cn)
		if err != nil {
			return nil, err
		}
		if l, dup := seenDir[c.Dir]; dup {
			return nil, p.errf(cn, "chart dir %s already configured at line %d", c.Dir, l)
		}
		seenDir[c.Dir] = c.Line
		f.Charts = append(f.Charts, c)
	}
	return f, nil
}

// mapping checks that n is a mapping with only the allowed keys and returns
// the values by key (yamledit.Parse has refused duplicate keys).
func (p parser) mapping(n *yaml.Node, allowed ...string) (map[string]*yaml.Node, error) {
	if n.Kind != yaml.MappingNode {
		return nil, p.errf(n, "expected a mapping with keys %s", strings.Join(allowed, ", "))
	}
	out := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !contains(allowed, k.Value) {
			return nil, p.errf(k, "unknown key %q (allowed: %s)", k.Value, strings.Join(allowed, ", "))
		}
		out[k.Value] = v
	}
	return out, nil
}

func (p parser) str(n *yaml.Node, key string) (string, error) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return "", p.errf(n, "%s: expected a string", key)
	}
	return n.Value, nil
}

func (p parser) chart(n *yaml.Node) (Chart, error) {
	fields, err := p.mapping(n, "dir", "bump", "appVersion", "images", "acknowledge")
	if err != nil {
		return Chart{}, err
	}
	c := Chart{Line: n.Line, Config: p.path}
	dn, ok := fields["dir"]
	if !ok {
		return Chart{}, p.errf(n, "chart entry without dir:")
	}
	dir, err := p.str(dn, "dir")
	if err != nil {
		return Chart{}, err
	}
	if dir == "" {
		return Chart{}, p.errf(dn, "dir: is empty")
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(filepath.Dir(p.path), dir)
	}
	c.Dir = filepath.Clean(dir)
	if b, ok := fields["bump"]; ok {
		if c.Bump, err = p.str(b, "bump"); err != nil {
			return Chart{}, err
		}
		if !chartbump.ValidBump(c.Bump) {
			return Chart{}, p.errf(b, "bump: %q is not one of %s", c.Bump, strings.Join(chartbump.BumpKinds, ", "))
		}
	}
	if a, ok := fields["appVersion"]; ok {
		if c.AppVersion, err = p.str(a, "appVersion"); err != nil {
			return Chart{}, err
		}
		if err := ValidAppVersion(c.AppVersion); err != nil {
			return Chart{}, p.errf(a, "%v", err)
		}
	}
	// An empty images: (every entry commented out) configures no image.
	if in, ok := fields["images"]; ok && !(in.Kind == yaml.ScalarNode && in.ShortTag() == "!!null") {
		if in.Kind != yaml.SequenceNode {
			return Chart{}, p.errf(in, "images: must be a list")
		}
		seen := map[string]int{}
		for _, im := range in.Content {
			img, err := p.image(im)
			if err != nil {
				return Chart{}, err
			}
			key := img.At + "\x00" + img.Pin
			if l, dup := seen[key]; dup {
				return Chart{}, p.errf(im, "image %s with pin %q is already configured at line %d", img.At, img.Pin, l)
			}
			seen[key] = img.Line
			c.Images = append(c.Images, img)
		}
	}
	if err := p.checkFollows(c); err != nil {
		return Chart{}, err
	}
	if from, ok := strings.CutPrefix(c.AppVersion, "from:"); ok && len(c.Images) > 0 {
		found := false
		for _, img := range c.Images {
			found = found || img.At == from
		}
		if !found {
			return Chart{}, p.errf(fields["appVersion"], "appVersion: from:%s names no configured image", from)
		}
	}
	if an, ok := fields["acknowledge"]; ok {
		if an.Kind != yaml.SequenceNode {
			return Chart{}, p.errf(an, "acknowledge: must be a list")
		}
		for _, a := range an.Content {
			ack, err := p.ack(a)
			if err != nil {
				return Chart{}, err
			}
			c.Acknowledge = append(c.Acknowledge, ack)
		}
	}
	return c, nil
}

// ValidAppVersion checks an appVersion policy value.
func ValidAppVersion(s string) error {
	switch s {
	case "", "auto", "lockstep", "keep":
		return nil
	}
	if from, ok := strings.CutPrefix(s, "from:"); ok {
		if err := pinrule.ValidPath(from); err != nil {
			return fmt.Errorf("appVersion: %q: %w", s, err)
		}
		return nil
	}
	return fmt.Errorf("appVersion: %q is not one of auto, lockstep, keep, from:<image path>", s)
}

var (
	platformRe = regexp.MustCompile(`^[a-z0-9]+/[a-z0-9_]+(/[a-z0-9]+)?$`)
	keyRe      = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)
	digestRe   = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

// ValidPlatform checks an os/arch[/variant] platform.
func ValidPlatform(s string) error {
	if !platformRe.MatchString(s) {
		return fmt.Errorf("%q is not os/arch[/variant] like linux/arm64", s)
	}
	return nil
}

func (p parser) image(n *yaml.Node) (Image, error) {
	fields, err := p.mapping(n, "at", "repository", "tagFrom", "pin", "format", "platforms", "singleArch", "versions", "when", "follows", "hold", "verify")
	if err != nil {
		return Image{}, err
	}
	img := Image{Line: n.Line}
	if sn, ok := fields["singleArch"]; ok {
		if sn.Kind != yaml.ScalarNode || sn.Tag != "!!bool" || sn.Decode(&img.SingleArch) != nil {
			return Image{}, p.errf(sn, "singleArch: must be true or false")
		}
	}
	strs := map[string]*string{"at": &img.At, "repository": &img.Repository, "tagFrom": &img.TagFrom, "pin": &img.Pin,
		"format": &img.Format, "versions": &img.Versions, "when": &img.When, "follows": &img.Follows, "hold": &img.Hold}
	for k, dst := range strs {
		if v, ok := fields[k]; ok {
			if *dst, err = p.str(v, k); err != nil {
				return Image{}, err
			}
		}
	}
	if img.At == "" {
		return Image{}, p.errf(n, "image entry without at: (the dotted path of the image block in values.yaml)")
	}
	if err := pinrule.ValidPath(img.At); err != nil {
		return Image{}, p.errf(fields["at"], "at: %v", err)
	}
	if h, ok := fields["hold"]; ok && strings.TrimSpace(img.Hold) == "" {
		return Image{}, p.errf(h, "hold: is empty; say why this pin must not move")
	}
	if img.TagFrom != "" && !keyRe.MatchString(img.TagFrom) {
		return Image{}, p.errf(fields["tagFrom"], "tagFrom: %q is not a key path inside the block, like channelTags.prod", img.TagFrom)
	}
	if img.Pin != "" && !keyRe.MatchString(img.Pin) {
		return Image{}, p.errf(fields["pin"], "pin: %q is not a key inside the block, like prodDigest", img.Pin)
	}
	if img.Format != "" && !contains(Formats, img.Format) {
		return Image{}, p.errf(fields["format"], "format: %q is not one of %s", img.Format, strings.Join(Formats, ", "))
	}
	if img.Repository != "" && (strings.ContainsAny(img.Repository, "@ ") || strings.HasSuffix(img.Repository, "/")) {
		return Image{}, p.errf(fields["repository"], "repository: %q must be registry/repository without tag or digest", img.Repository)
	}
	if pn, ok := fields["platforms"]; ok {
		if pn.Kind != yaml.SequenceNode || len(pn.Content) == 0 {
			return Image{}, p.errf(pn, "platforms: must be a non-empty list like [linux/amd64, linux/arm64]")
		}
		for _, e := range pn.Content {
			s, err := p.str(e, "platforms")
			if err != nil {
				return Image{}, err
			}
			if err := ValidPlatform(s); err != nil {
				return Image{}, p.errf(e, "platforms: %v", err)
			}
			img.Platforms = append(img.Platforms, s)
		}
	}
	if vn, ok := fields["verify"]; ok {
		if err := p.verify(vn, &img); err != nil {
			return Image{}, err
		}
	}
	if img.Versions != "" {
		if _, err := semver.NewConstraint(img.Versions); err != nil {
			return Image{}, p.errf(fields["versions"], "versions: %q is not a semver range (e.g. \">=0.8.0 <=0.8.4\"): %v", img.Versions, err)
		}
	}
	if w, ok := fields["when"]; ok && strings.TrimSpace(img.When) == "" {
		// Read as "no condition", it would let a guarded pin move.
		return Image{}, p.errf(w, "when: is empty; write the condition that must hold (e.g. flags.prod == true), or drop when:")
	}
	if img.When != "" {
		if _, err := pinrule.ParseWhen(img.When); err != nil {
			return Image{}, p.errf(fields["when"], "when: %v", err)
		}
	}
	if img.Follows != "" {
		if err := pinrule.ValidPath(img.Follows); err != nil {
			return Image{}, p.errf(fields["follows"], "follows: %v", err)
		}
		for _, k := range []string{"repository", "tagFrom", "versions", "platforms", "singleArch", "verify"} {
			if _, ok := fields[k]; ok {
				return Image{}, p.errf(fields[k], "%s: has no effect with follows: (the digest comes from %s); drop one of them", k, img.Follows)
			}
		}
		if img.Follows == img.At {
			return Image{}, p.errf(fields["follows"], "follows: %s follows itself", img.At)
		}
	}
	return img, nil
}

// verify reads verify: {key: cosign.pub} or verify: {identity, issuer,
// trustedRoot}; paths are relative to the config file, like chart dirs.
func (p parser) verify(n *yaml.Node, img *Image) error {
	fields, err := p.mapping(n, "key", "identity", "issuer", "trustedRoot")
	if err != nil {
		return err
	}
	vals := map[string]*string{"key": &img.VerifyKey, "identity": &img.VerifyIdentity, "issuer": &img.VerifyIssuer, "trustedRoot": &img.VerifyTrustedRoot}
	for k, dst := range vals {
		if vn, ok := fields[k]; ok {
			if *dst, err = p.str(vn, "verify."+k); err != nil {
				return err
			}
			if strings.TrimSpace(*dst) == "" {
				return p.errf(vn, "verify.%s: is empty; %s", k, verifyHelp[k])
			}
		}
	}
	rel := func(path string) string {
		if filepath.IsAbs(path) {
			return path
		}
		return filepath.Join(filepath.Dir(p.path), path)
	}
	keyless := []string{"identity", "issuer", "trustedRoot"}
	if kn, ok := fields["key"]; ok {
		for _, k := range keyless {
			if _, ok := fields[k]; ok {
				return p.errf(kn, "verify: key: and %s: are two policies (a key, or a keyless identity); keep one", k)
			}
		}
		img.VerifyKey = rel(img.VerifyKey)
		// Checked now, like the trusted root: a run that only later needs the
		// key should not fail halfway for a path typed wrong.
		if fi, err := os.Stat(img.VerifyKey); err != nil || !fi.Mode().IsRegular() {
			return p.errf(kn, "verify.key: %s is not a readable file; write the PEM public key there (cosign generate-key-pair writes cosign.pub)", img.VerifyKey)
		}
		return nil
	}
	var missing []string
	for _, k := range keyless {
		if _, ok := fields[k]; !ok {
			missing = append(missing, k+": ("+verifyHelp[k]+")")
		}
	}
	if len(missing) == 3 {
		return p.errf(n, "verify: needs key: (%s) or identity:, issuer: and trustedRoot: for a keyless signature", verifyHelp["key"])
	}
	if len(missing) > 0 {
		return p.errf(n, "verify: a keyless policy needs %s", strings.Join(missing, " and "))
	}
	img.VerifyTrustedRoot = rel(img.VerifyTrustedRoot)
	// Checked now, not when a digest moves: without the root nothing can verify.
	if fi, err := os.Stat(img.VerifyTrustedRoot); err != nil || !fi.Mode().IsRegular() {
		return p.errf(fields["trustedRoot"], "verify.trustedRoot: %s is not a readable file; save the trusted_root.json of your Sigstore there (for the public Sigstore, the trusted_root.json target of its TUF repository)", img.VerifyTrustedRoot)
	}
	return nil
}

var verifyHelp = map[string]string{
	"key":         "the path of a PEM public key, e.g. cosign.pub",
	"identity":    "the exact certificate identity, e.g. https://github.com/OWNER/REPO/.github/workflows/release.yaml@refs/heads/main",
	"issuer":      "the exact OIDC issuer, e.g. https://token.actions.githubusercontent.com",
	"trustedRoot": "the path of the Sigstore trusted_root.json",
}

// checkFollows rejects follows targets that do not exist, are ambiguous, or loop.
func (p parser) checkFollows(c Chart) error {
	for _, img := range c.Images {
		if img.Follows == "" {
			continue
		}
		seen := map[string]bool{img.At + "\x00" + img.Pin: true}
		cur := img
		for cur.Follows != "" {
			t, err := pinrule.FollowStep(c.Images, imageLink, imageLink(cur))
			if err != nil {
				return fmt.Errorf("%s:%d: image %s: %w", p.path, img.Line, img.At, err)
			}
			k := t.At + "\x00" + t.Pin
			if seen[k] {
				return fmt.Errorf("%s:%d: image %s: follows loops back through %s", p.path, img.Line, img.At, t.At)
			}
			seen[k] = true
			cur = t
		}
	}
	return nil
}

func imageLink(img Image) pinrule.Link {
	return pinrule.Link{At: img.At, Pin: img.Pin, Follows: img.Follows}
}

func (p parser) ack(n *yaml.Node) (Ack, error) {
	fields, err := p.mapping(n, "at", "digest", "until", "reason")
	if err != nil {
		return Ack{}, err
	}
	a := Ack{Line: n.Line}
	for _, k := range []string{"at", "digest", "until", "reason"} {
		if _, ok := fields[k]; !ok {
			return Ack{}, p.errf(n, "acknowledge entry without %s: (at, digest, until and reason are all required)", k)
		}
	}
	if a.At, err = p.str(fields["at"], "at"); err != nil {
		return Ack{}, err
	}
	if err := pinrule.ValidPath(a.At); err != nil {
		return Ack{}, p.errf(fields["at"], "at: %v", err)
	}
	if a.Digest, err = p.str(fields["digest"], "digest"); err != nil {
		return Ack{}, err
	}
	if !digestRe.MatchString(a.Digest) {
		return Ack{}, p.errf(fields["digest"], "digest: %q is not sha256:<64 hex>", a.Digest)
	}
	u, err := p.str(fields["until"], "until")
	if err != nil {
		return Ack{}, err
	}
	if a.Until, err = time.Parse("2006-01-02", u); err != nil {
		return Ack{}, p.errf(fields["until"], "until: %q is not a date like 2027-01-31", u)
	}
	if a.Reason, err = p.str(fields["reason"], "reason"); err != nil {
		return Ack{}, err
	}
	if strings.TrimSpace(a.Reason) == "" {
		return Ack{}, p.errf(fields["reason"], "reason: is empty; say why the drift is known")
	}
	return a, nil
}

func contains(list []string, s string) bool { return slices.Contains(list, s) }
