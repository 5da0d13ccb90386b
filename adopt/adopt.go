// Package adopt decides how chartpin takes over a chart that already
// exists: for every pin discovery finds, whether `chartpin pin` should move
// it with its float, hold it, or leave it to the maintainers, and writes
// that decision as a chartpin.yaml a maintainer can read and edit. Nothing
// it writes moves a pin the maintainers did not ask chartpin to move.
package adopt

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/chartpin/chartpin/config"
	"github.com/chartpin/chartpin/discover"
	"github.com/chartpin/chartpin/internal/atomicfile"
	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/internal/fanout"
	"github.com/chartpin/chartpin/pinrule"
	"github.com/chartpin/chartpin/resolver"
)

// Decision is what the written config tells pin to do with one pin.
type Decision string

// Decisions.
const (
	// Pin: an entry; pin moves it with its float.
	Pin Decision = "pin"
	// Hold: an entry with hold: and the reason; pin never moves it.
	Hold Decision = "hold"
	// Leave: a commented-out entry with the reason; pin does not touch it.
	Leave Decision = "leave"
)

// Options says which charts to adopt and where the config goes.
type Options struct {
	// ConfigPath is the file to write; dir: entries are relative to its directory.
	ConfigPath string
	// ChartDirs are the charts to adopt (config.Select without a config:
	// the current directory when empty).
	ChartDirs []string
	// Resolver answers what each pinned tag names today (online or --digests).
	Resolver resolver.Interface
}

// Entry is the decision on one discovered pin.
type Entry struct {
	Pin      discover.Pin `json:"pin"`
	Decision Decision     `json:"decision"`
	// Reason says why a pin is held or left ("" for Pin).
	Reason string `json:"reason,omitempty"`
	// Found says what discovery and the registry found: the float, the
	// current pin and its platforms.
	Found string `json:"found"`
}

// Chart is the decisions for one chart.
type Chart struct {
	Dir     string  `json:"dir"`
	Entries []Entry `json:"entries"`
}

// Result is the config init writes.
type Result struct {
	Path   string  `json:"path"`
	Charts []Chart `json:"charts"`
	// Data is the config file's content.
	Data []byte `json:"-"`
}

// Plan discovers every chart's pins and decides each one; it writes nothing.
func Plan(ctx context.Context, opts Options) (*Result, error) {
	if opts.Resolver == nil {
		return nil, errors.New("adopt: no resolver")
	}
	cfgPath, err := filepath.Abs(opts.ConfigPath)
	if err != nil {
		return nil, failure.Input(fmt.Errorf("config %s: %w", opts.ConfigPath, err))
	}
	// The config is being written, not read: every chart named is discovered.
	sel, err := config.Select(nil, opts.ChartDirs)
	if err != nil {
		return nil, err
	}
	res := &Result{Path: cfgPath}
	for _, t := range sel {
		dir, err := filepath.Abs(t.Dir)
		if err != nil {
			return nil, failure.Input(fmt.Errorf("chart dir %s: %w", t.Dir, err))
		}
		if _, err := os.Stat(filepath.Join(dir, "Chart.yaml")); err != nil {
			return nil, failure.Input(fmt.Errorf("chart dir %s: no Chart.yaml; name a chart directory", t.Dir))
		}
		pins, err := discover.Survey(dir)
		if err != nil {
			return nil, err
		}
		c := Chart{Dir: dir}
		for _, p := range pins {
			c.Entries = append(c.Entries, Entry{Pin: p})
		}
		res.Charts = append(res.Charts, c)
	}
	if err := decide(ctx, res, opts.Resolver); err != nil {
		return nil, err
	}
	res.Data = render(res)
	// What init writes, pin must read: parse it and find every entry.
	cf, err := config.Parse(cfgPath, res.Data)
	if err != nil {
		return nil, fmt.Errorf("the config init would write does not load (a bug in init): %w", err)
	}
	for i := range cf.Charts {
		if _, err := discover.Chart(cf.Charts[i].Dir, &cf.Charts[i]); err != nil {
			return nil, fmt.Errorf("the config init would write does not match the chart (a bug in init): %w", err)
		}
	}
	return res, nil
}

// Write writes the config atomically; an existing file is replaced only with force.
func (r *Result) Write(force bool) error {
	if _, err := os.Stat(r.Path); err == nil && !force {
		return failure.Input(failure.Optionf("%s exists; init never overwrites it: {{Force}} replaces it, {{DryRun}} prints what init would write", r.Path))
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("checking %s: %w", r.Path, err)
	}
	return atomicfile.WriteFile(r.Path, r.Data, 0o644)
}

// Count is the number of entries with decision d.
func (r *Result) Count(d Decision) int {
	n := 0
	for _, c := range r.Charts {
		for _, e := range c.Entries {
			if e.Decision == d {
				n++
			}
		}
	}
	return n
}

// semverTag is a full release version (1.2.3, v1.2.3, 1.2.3-alpine): a tag
// meant never to move, so a new digest under it is a re-publish.
var semverTag = regexp.MustCompile(`^v?[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.-]+)?$`)

// decide resolves what each set pin's float names today and reads the
// platforms of the current pin (one HEAD per unique ref, one GET per
// pinned digest), then decides.
func decide(ctx context.Context, res *Result, r resolver.Interface) error {
	// A tag's HEAD and a pinned digest's manifest are lookups of one run:
	// all concurrent, each unique one once.
	type lookup struct {
		ref      string
		manifest bool
	}
	type answer struct {
		img       resolver.Image
		platforms []string
	}
	var keys []lookup
	for _, c := range res.Charts {
		for _, e := range c.Entries {
			p := e.Pin
			if p.Problem != "" || p.Repository == "" || p.Tag == "" || p.Tag == "latest" || p.Digest == "" {
				continue
			}
			keys = append(keys, lookup{p.Ref(), false}, lookup{resolver.DigestRef(p.Ref(), p.Digest), true})
		}
	}
	answers, errs := fanout.Map(keys, func(k lookup) (answer, error) {
		if k.manifest {
			m, err := r.Manifest(ctx, k.ref)
			return answer{platforms: m.Platforms}, err
		}
		img, err := r.Resolve(ctx, k.ref)
		return answer{img: img}, err
	})
	if err := ctx.Err(); err != nil {
		return err
	}
	for ci := range res.Charts {
		for ei := range res.Charts[ci].Entries {
			e := &res.Charts[ci].Entries[ei]
			p := e.Pin
			var img resolver.Image
			var err error
			var platforms string
			if p.Digest != "" && p.Problem == "" && p.Repository != "" && p.Tag != "" {
				head := lookup{p.Ref(), false}
				img, err = answers[head].img, errs[head]
				man := lookup{resolver.DigestRef(p.Ref(), p.Digest), true}
				switch {
				case errs[man] != nil:
					platforms = "platforms unknown"
				case len(answers[man].platforms) == 0:
					platforms = "single-arch or platforms not recorded"
				default:
					platforms = strings.Join(answers[man].platforms, ", ")
				}
			}
			e.Decision, e.Reason = choose(p, img, err)
			e.Found = found(p, platforms)
		}
	}
	return nil
}

// choose is the adoption rule for one pin.
func choose(p discover.Pin, now resolver.Image, err error) (Decision, string) {
	switch {
	case p.Problem != "":
		return Leave, p.Problem
	case pinrule.ValidPath(p.At) != nil:
		return Leave, fmt.Sprintf("the image path %s has a key chartpin.yaml cannot name (a dot or bracket inside a key)", p.At)
	case p.Tag == "latest":
		return Hold, "the tag is latest, which names no release; set a versioned tag, then drop this hold"
	case p.Digest == "" && isReleaseKey(p):
		return Pin, ""
	case p.Digest == "":
		return Leave, "the chart leaves this pin empty; uncomment the entry to have chartpin pin it"
	case err != nil:
		return Hold, fmt.Sprintf("the tag %s does not resolve today (%v); the pin stays until it does", p.Tag, err)
	case now.Digest == p.Digest:
		return Pin, ""
	case semverTag.MatchString(p.Tag):
		return Hold, fmt.Sprintf("the release tag %s now names %s, not the pinned %s: a re-published tag or a deliberate freeze; drop the hold to move it", p.Tag, now.Digest, p.Digest)
	}
	return Hold, fmt.Sprintf("the tag %s now names %s, not the pinned %s; drop the hold to move the pin with its float", p.Tag, now.Digest, p.Digest)
}

// isReleaseKey reports whether an empty pin key is one a release job fills:
// a variant key such as prodDigest whose float is the variant's own tag
// (channelTags.prod), as opposed to a digest: "" a chart ships empty.
func isReleaseKey(p discover.Pin) bool {
	return p.Key != "" && p.Key != "digest" && p.Key != "sha" && relTag(p) != ""
}

func found(p discover.Pin, platforms string) string {
	var parts []string
	if p.Repository != "" && p.Tag != "" {
		parts = append(parts, "floats on "+p.Ref())
	}
	if p.Digest != "" {
		s := "pinned " + short(p.Digest)
		if platforms != "" {
			s += " (" + platforms + ")"
		}
		parts = append(parts, s)
	} else if p.Problem == "" {
		parts = append(parts, "not pinned")
	}
	if len(parts) == 0 {
		return fmt.Sprintf("values.yaml:%d %s", p.Line, p.Path)
	}
	return fmt.Sprintf("values.yaml:%d %s: %s", p.Line, p.Path, strings.Join(parts, "; "))
}

func short(d string) string {
	if len(d) > 19 {
		return d[:19] + "…"
	}
	return d
}

// render writes the config: one chart entry per chart, one image entry per
// pin (held ones with hold:, left ones commented out), each under a
// comment saying what was found.
func render(res *Result) []byte {
	var b strings.Builder
	b.WriteString("# Written by `chartpin init` from what it found in each chart. `chartpin pin`\n" +
		"# moves only the entries below that are neither held nor commented out;\n" +
		"# docs/config.md describes every key.\n")
	b.WriteString("charts:\n")
	for _, c := range res.Charts {
		dir, err := filepath.Rel(filepath.Dir(res.Path), c.Dir)
		if err != nil {
			dir = c.Dir
		}
		fmt.Fprintf(&b, "  - dir: %s\n", yamlString(filepath.ToSlash(dir)))
		b.WriteString("    images:\n")
		entries := append([]Entry(nil), c.Entries...)
		sort.SliceStable(entries, func(i, j int) bool { return entries[i].Pin.Line < entries[j].Pin.Line })
		for _, e := range entries {
			writeEntry(&b, e)
		}
	}
	return []byte(b.String())
}

func writeEntry(b *strings.Builder, e Entry) {
	p := e.Pin
	fmt.Fprintf(b, "      # %s\n", oneLine(e.Found))
	prefix := "      "
	if e.Decision == Leave {
		fmt.Fprintf(b, "      # left as it is: %s\n", oneLine(e.Reason))
		prefix = "      # "
	}
	fmt.Fprintf(b, "%s- at: %s\n", prefix, p.At)
	if p.Key != "" {
		fmt.Fprintf(b, "%s  pin: %s\n", prefix, p.Key)
		if tagFrom := relTag(p); tagFrom != "" {
			fmt.Fprintf(b, "%s  tagFrom: %s\n", prefix, tagFrom)
		}
	}
	if e.Decision == Hold {
		fmt.Fprintf(b, "%s  hold: %s\n", prefix, yamlString(oneLine(e.Reason)))
	}
}

// relTag is the tagFrom: an entry needs: the tag's path inside the block,
// when it is neither tag nor the pin key itself (tag@digest).
func relTag(p discover.Pin) string {
	if p.TagPath == "" || p.TagPath == p.Path {
		return ""
	}
	rel := strings.TrimPrefix(p.TagPath, p.At+".")
	if rel == "tag" {
		return ""
	}
	return rel
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}

// yamlString quotes s as a YAML double-quoted scalar when it needs quoting.
var plainRe = regexp.MustCompile(`^[A-Za-z0-9_./-]+$`)

func yamlString(s string) string {
	if s != "" && plainRe.MatchString(s) {
		return s
	}
	return strconv.Quote(s)
}
