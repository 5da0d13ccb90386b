// Package pin is the release-time job: resolve every image a chart declares
// to its index digest, write the pins into the chart's default values.yaml
// byte-exactly, deal with every other copy of an old digest, and bump
// Chart.yaml version and appVersion in lockstep when anything moved.
//
// Plan computes everything and writes nothing; Result.Apply writes all files
// of the run or none. Every refusal names file, line and image.
package pin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/chartpin/chartpin/chartbump"
	"github.com/chartpin/chartpin/config"
	"github.com/chartpin/chartpin/discover"
	"github.com/chartpin/chartpin/internal/chartfile"
	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/resolver"
	"github.com/chartpin/chartpin/signature"
	"github.com/chartpin/chartpin/yamledit"
)

// Options says which charts to pin and how.
type Options struct {
	// ConfigPath is chartpin.yaml; "" means discovery in ChartDirs.
	ConfigPath string
	// ChartDirs selects charts by config.Select: with a config, configured
	// ones (every one when empty); without, the current directory when empty.
	ChartDirs []string
	// Resolver turns tags into digests (online, offline, recording).
	Resolver resolver.Interface
	// SetTags moves image tags first: image path (at) → tag.
	SetTags map[string]string
	// RewriteCopies rewrites other occurrences of an old digest in the chart;
	// without it they are listed and the run fails.
	RewriteCopies bool
	// Bump is patch | minor | major | none ("" = the config's, else patch).
	Bump string
	// Version and AppVersion set explicit values (still lockstep-checked).
	Version, AppVersion string
	// Platforms every new pin must cover, on top of the configured ones and
	// those of the pin it replaces (--platforms).
	Platforms []string
	// DryRun marks the result as a plan that is not written (the views say so).
	DryRun bool
	// Signatures checks the verify: policies of the config; nil (offline)
	// refuses every new digest of an image with verify:.
	Signatures *signature.Checker
	Logger     *slog.Logger
}

// Result is the change set of one run. The text, JSON, Markdown, diff and
// commit-subject outputs are all views of it.
type Result struct {
	Charts []ChartResult `json:"charts"`
	DryRun bool          `json:"-"`
	files  []FileChange
}

// ChartResult is what happened to one chart.
type ChartResult struct {
	Dir           string       `json:"dir"`
	Name          string       `json:"name"`
	OldVersion    string       `json:"old_version"`
	NewVersion    string       `json:"new_version"`
	OldAppVersion string       `json:"old_app_version"`
	NewAppVersion string       `json:"new_app_version"`
	Pins          []Change     `json:"pins"`
	Copies        []CopyChange `json:"copies,omitempty"`
	// Skipped are pins discovery found but cannot pin (image unknown); they
	// are listed, never dropped silently.
	Skipped []Skip `json:"skipped,omitempty"`
	// Refused are the moves this run refuses; any refusal means nothing is written.
	Refused []Refusal `json:"refusals,omitempty"`
}

// Refusal is one move the run refuses, and why.
type Refusal struct {
	File   string `json:"file"`
	Line   int    `json:"line"`
	Path   string `json:"path,omitempty"`
	Image  string `json:"image,omitempty"`
	Reason string `json:"reason"`
	err    error
}

// Change is one pin, moved or not.
type Change struct {
	File   string `json:"file"`
	Line   int    `json:"line"`
	Path   string `json:"path"`
	Image  string `json:"image"`
	Tag    string `json:"tag"`
	OldTag string `json:"old_tag,omitempty"`
	// TagLine is the line of the tag moved by --set-tag (0 when it did not move).
	TagLine   int      `json:"tag_line,omitempty"`
	OldDigest string   `json:"old_digest"`
	NewDigest string   `json:"new_digest"`
	Platforms []string `json:"platforms,omitempty"`
	Follows   string   `json:"follows,omitempty"`
	// Changed is true when the pin's value (or its tag) is rewritten.
	Changed bool `json:"changed"`
	// Held says why the pin stays although it could move: a hold: in the
	// config, or a when: condition that is false. "" means not held.
	Held string `json:"held,omitempty"`
	// Signature is the digest of the signature manifest that verified the
	// new digest under the image's verify: key (empty without verify:, or
	// when the pin stays).
	Signature string `json:"signature,omitempty"`
}

// CopyChange is another occurrence of an old digest in the chart directory.
type CopyChange struct {
	File string `json:"file"`
	Line int    `json:"line"`
	// Pin is the path of the pin whose old digest this is.
	Pin string `json:"pin"`
	Old string `json:"old"`
	New string `json:"new"`
}

// Skip is a discovered pin whose image cannot be determined.
type Skip struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Path    string `json:"path"`
	At      string `json:"at"`
	Problem string `json:"problem"`
}

// FileChange is one file of the run, before and after.
type FileChange struct {
	// Path is absolute.
	Path   string
	Before []byte
	After  []byte
	dir    string // the chart's
}

// Changed reports whether Apply writes any file: a refused plan shows its
// edits but writes none.
func (r *Result) Changed() bool { return len(r.files) > 0 && !r.Refused() }

// Files returns every file the run writes, in a stable order.
func (r *Result) Files() []FileChange { return append([]FileChange(nil), r.files...) }

// chart is one chart's work in progress. Between its load and its edits a
// chart keeps the bytes of its files, not their parse trees: a run over many
// large charts holds one chart's trees at a time.
type chart struct {
	dir   string
	files *chartfile.Loaded // Chart.yaml and values.yaml as read
	cfg   *config.Chart
	// values and root are values.yaml parsed, set only while the chart is
	// loaded or edited (parse, drop).
	values *yamledit.File
	root   *yaml.Node
	pins   []*state
	skips  []Skip
	res    ChartResult
}

// state is one pin's resolution.
type state struct {
	discover.Pin
	cfg       *config.Chart // the configuration it came from (nil: discovered)
	oldTag    string        // the tag before --set-tag
	hasTag    bool          // the pin has a tag scalar (TagNode, which drop clears)
	tagMoved  bool
	useTag    string // tag whose digest is pinned (versions: the highest in range)
	ref       string // repository:useTag
	img       resolver.Image
	newDigest string
	newValue  string // the pin scalar's new text value
	changed   bool
	held      string // why the pin stays (see Change.Held)
	signature string // digest of the verified signature manifest (verify:)
	refused   *Refusal
}

// refuse records why this pin cannot move; the first reason counts.
func (s *state) refuse(image string, cause error) {
	if s.refused == nil {
		s.refused = &Refusal{File: s.File, Line: s.Line, Path: s.Path, Image: image, Reason: cause.Error(),
			err: fmt.Errorf("%s: image %s: %w", s.Where(), image, cause)}
	}
}

// Validate checks the options by themselves, before anything is read;
// errors name option fields.
func (opts Options) Validate() error {
	if opts.Bump != "" && !chartbump.ValidBump(opts.Bump) {
		return failure.Input(failure.Optionf("{{Bump}} %q: want one of %s", opts.Bump, strings.Join(chartbump.BumpKinds, ", ")))
	}
	for _, p := range opts.Platforms {
		if err := config.ValidPlatform(p); err != nil {
			return failure.Input(failure.Optionf("{{Platforms}}: %w", err))
		}
	}
	return nil
}

// Plan resolves every pin and computes every edit; it writes nothing.
func Plan(ctx context.Context, opts Options) (*Result, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Resolver == nil {
		return nil, errors.New("pin: no resolver")
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	charts, err := load(opts)
	if err != nil {
		return nil, err
	}
	if err := setTags(charts, opts.SetTags); err != nil {
		return nil, err
	}
	var problems []error
	for _, c := range charts {
		problems = append(problems, c.problems()...)
	}
	if err := errors.Join(problems...); err != nil {
		return nil, err
	}
	resolve(ctx, charts, opts.Resolver, opts.Platforms, log)
	checkSignatures(ctx, charts, opts.Signatures)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res := &Result{DryRun: opts.DryRun}
	var refused []error
	for _, c := range charts {
		files, err := c.edits(opts, log)
		if err != nil {
			return nil, err
		}
		for _, r := range c.res.Refused {
			refused = append(refused, r.err)
		}
		res.Charts = append(res.Charts, c.res)
		for _, f := range files {
			f.dir = c.dir
			res.files = append(res.files, f)
		}
	}
	// A refusal anywhere writes nothing anywhere: the plan is returned so
	// it can be shown, with the refusals as the error.
	return res, errors.Join(refused...)
}

// Refused reports whether the run refused any move (then Apply writes nothing).
func (r *Result) Refused() bool {
	for _, c := range r.Charts {
		if len(c.Refused) > 0 {
			return true
		}
	}
	return false
}

// load reads the config (if any), selects charts, parses values and discovers pins.
func load(opts Options) ([]*chart, error) {
	charts, err := selectCharts(opts)
	if err != nil {
		return nil, err
	}
	for _, c := range charts {
		if err := c.load(); err != nil {
			return nil, err
		}
		if err := c.checkBump(opts); err != nil {
			return nil, err
		}
	}
	return charts, nil
}

// selectCharts reads the config (if any) and lists the charts of the run
// (config.Select, the rule every command selects charts by).
func selectCharts(opts Options) ([]*chart, error) {
	var cf *config.File
	if opts.ConfigPath != "" {
		var err error
		if cf, err = config.Load(opts.ConfigPath); err != nil {
			return nil, err
		}
	}
	targets, err := config.Select(cf, opts.ChartDirs)
	if err != nil {
		return nil, err
	}
	charts := make([]*chart, 0, len(targets))
	for _, t := range targets {
		abs, err := filepath.Abs(t.Dir)
		if err != nil {
			return nil, failure.Input(fmt.Errorf("chart dir %s: %w", t.Dir, err))
		}
		charts = append(charts, &chart{dir: abs, cfg: t.Config})
	}
	return charts, nil
}

// Lock takes the lock of every chart the run selects, so that one run at a
// time plans and writes a chart, and completes the writes of a run killed
// midway (a dry run reports them instead: it writes nothing). notes say what
// was completed; unlock releases the locks (so does the process's end).
func Lock(ctx context.Context, opts Options) (unlock func(), notes []string, err error) {
	charts, err := selectCharts(opts)
	if err != nil {
		return nil, nil, err
	}
	var held []*chartfile.Held
	unlock = func() {
		for _, h := range held {
			h.Unlock()
		}
	}
	dirs := make([]string, 0, len(charts))
	for _, c := range charts {
		dirs = append(dirs, c.dir)
	}
	sort.Strings(dirs) // one order for every run
	for _, d := range dirs {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			continue // load names it
		}
		h, note, err := chartfile.Lock(ctx, d, !opts.DryRun)
		if err != nil {
			unlock()
			return nil, nil, err
		}
		held = append(held, h)
		if note != "" {
			notes = append(notes, note)
		}
	}
	return unlock, notes, nil
}

// load reads the chart's files, checks Chart.yaml and finds the pins; the
// parse trees are dropped again (drop).
func (c *chart) load() error {
	files, err := chartfile.Load(c.dir)
	if err != nil {
		return err
	}
	c.files = files
	meta, err := chartbump.Parse(files.ChartPath, files.Chart)
	if err != nil {
		return err
	}
	c.res = ChartResult{Dir: c.dir, Name: meta.Name, OldVersion: meta.Version.Value, NewVersion: meta.Version.Value}
	if meta.AppVersion != nil {
		c.res.OldAppVersion, c.res.NewAppVersion = meta.AppVersion.Value, meta.AppVersion.Value
	}
	pins, err := c.parse()
	if err != nil {
		return err
	}
	defer c.drop()
	for _, p := range pins {
		s := &state{Pin: p, oldTag: p.Tag, hasTag: p.TagNode != nil, cfg: c.cfg}
		if p.Hold != "" {
			// Held: no request, no move; followers take the digest it keeps.
			s.held, s.newDigest, s.img = "hold: "+p.Hold, p.Digest, resolver.Image{Digest: p.Digest}
			s.useTag, s.ref = p.Tag, p.Ref()
		}
		c.pins = append(c.pins, s)
	}
	return nil
}

// parse parses values.yaml and finds its pins (in the new trees).
func (c *chart) parse() ([]discover.Pin, error) {
	f, err := yamledit.Parse(c.files.ValuesPath, c.files.Values)
	if err != nil {
		return nil, err
	}
	root, err := discover.Values(f)
	if err != nil {
		return nil, err
	}
	pins, err := discover.Find(f.Name, root, c.cfg)
	if err != nil {
		return nil, err
	}
	c.values, c.root = f, root
	return pins, nil
}

// reparse parses values.yaml again for the edits and gives every pin its
// nodes in the new trees; the same bytes find the same pins.
func (c *chart) reparse() error {
	pins, err := c.parse()
	if err != nil {
		return err
	}
	if len(pins) != len(c.pins) {
		return fmt.Errorf("%s: found %d pins, then %d in the same bytes", c.files.ValuesPath, len(c.pins), len(pins))
	}
	for i, p := range pins {
		s := c.pins[i]
		if p.Path != s.Path {
			return fmt.Errorf("%s: found pin %s, then %s in the same bytes", c.files.ValuesPath, s.Path, p.Path)
		}
		s.Node, s.TagNode, s.Via = p.Node, p.TagNode, p.Via
	}
	return nil
}

// drop lets go of the parse trees, the pins' nodes included.
func (c *chart) drop() {
	c.values, c.root = nil, nil
	for _, s := range c.pins {
		s.Node, s.TagNode, s.Via = nil, nil, nil
	}
}

var tagRe = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

// setTags moves tags for --set-tag PATH=TAG before anything resolves.
func setTags(charts []*chart, tags map[string]string) error {
	paths := make([]string, 0, len(tags))
	for p := range tags {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, path := range paths {
		tag := tags[path]
		if !tagRe.MatchString(tag) {
			return failure.Input(failure.Optionf("{{SetTags}} %s=%s: %q is not an image tag", path, tag, tag))
		}
		found := false
		for _, c := range charts {
			for _, s := range c.pins {
				if s.At != path || s.Follows != "" {
					continue
				}
				if !s.hasTag {
					return failure.Input(failure.Optionf("{{SetTags}} %s=%s: %s has no tag key to move (%s)", path, tag, s.Where(), s.Problem))
				}
				if s.Hold != "" {
					return failure.Input(failure.Optionf("{{SetTags}} %s=%s: %s is held (%s: %q); drop the hold: to move it", path, tag, s.Where(), s.cfg.At(s.ConfigLine), s.Hold))
				}
				found = true
				s.Tag, s.tagMoved = tag, tag != s.oldTag
				if s.Problem != "" && s.Repository != "" {
					s.Problem = "" // the tag was the missing piece
				}
			}
		}
		if !found {
			var known []string
			for _, c := range charts {
				for _, s := range c.pins {
					if s.Follows == "" && s.hasTag {
						known = append(known, s.At)
					}
				}
			}
			return failure.Input(failure.Optionf("{{SetTags}} %s=%s: no image at %s (images with a tag: %s)", path, tag, path, strings.Join(uniq(known), ", ")))
		}
	}
	return nil
}

func uniq(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// problems turns unresolvable pins into refusals or listed skips. With a
// config every configured pin must be pinnable; in discovery a pin whose
// image is unknown is listed, unless it holds a digest and its block moves
// (leaving it would ship a stale digest beside a new one, as ingress-nginx's
// digestChroot would). An empty pin stays "not pinned".
func (c *chart) problems() []error {
	var errs []error
	moving := map[string]bool{}
	for _, s := range c.pins {
		if s.tagMoved {
			moving[s.At] = true
		}
	}
	for _, s := range c.pins {
		if s.Problem == "" || s.held != "" {
			continue
		}
		switch {
		case c.cfg != nil:
			errs = append(errs, failure.Input(fmt.Errorf("%s: image %s: %s", s.Where(), s.At, s.Problem)))
		case moving[s.At] && s.Digest != "":
			s.refuse(s.At, fmt.Errorf("its tag moves but this pin cannot follow: %s", s.Problem))
		default:
			c.skips = append(c.skips, Skip{File: s.File, Line: s.Line, Path: s.Path, At: s.At, Problem: s.Problem})
		}
	}
	return errs
}
