// Package drift answers, read-only, for every pin a chart declares: does its
// float still resolve to the digest we decided to trust? Every pin found is
// either watched or reported; a registry error is a finding, never a pass;
// known drift can be acknowledged until a date (docs/design.md#drift-watching).
package drift

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"

	"github.com/chartpin/chartpin/config"
	"github.com/chartpin/chartpin/deprecation"
	"github.com/chartpin/chartpin/discover"
	"github.com/chartpin/chartpin/internal/chartfile"
	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/internal/fanout"
	"github.com/chartpin/chartpin/pinrule"
	"github.com/chartpin/chartpin/resolver"
	"github.com/chartpin/chartpin/signature"
)

// Status classifies one pin.
type Status string

// Statuses. OK, Acknowledged, Held and NotPinned are not findings.
const (
	OK           Status = "ok"
	Drift        Status = "DRIFT"
	Unresolved   Status = "UNRESOLVED"
	Unwatchable  Status = "UNWATCHABLE"
	Acknowledged Status = "ACKNOWLEDGED"
	Held         Status = "HELD"
	NotPinned    Status = "not pinned"
	// Unsigned: an image with verify: whose digest has no valid signature.
	Unsigned Status = "UNSIGNED"
)

// Statuses are every status in the order the summary counts them; the
// command's help lists them from here, so the two cannot disagree.
// UNSIGNED, which only verify: produces, is counted only when seen.
var Statuses = []Status{OK, Drift, Unresolved, Unwatchable, Acknowledged, Held, NotPinned, Unsigned}

// Finding reports whether the status fails the check.
func (s Status) Finding() bool {
	return s == Drift || s == Unresolved || s == Unwatchable || s == Unsigned
}

// Target is one chart to watch, as config.Select chooses it.
type Target = config.Target

// Item is the verdict on one pin.
type Item struct {
	Chart  string       `json:"chart"`
	Pin    discover.Pin `json:"pin"`
	Status Status       `json:"status"`
	// Float is the ref resolved (repository:tag); Source where it was asked (mirror).
	Float  string `json:"float,omitempty"`
	Source string `json:"source,omitempty"`
	// Pinned is the digest in values.yaml; Current what the float resolves to now.
	Pinned  string `json:"pinned,omitempty"`
	Current string `json:"current,omitempty"`
	Message string `json:"message,omitempty"`
	// Note is what an acknowledge entry changed or failed to change.
	Note string `json:"note,omitempty"`
	// Ack is the acknowledge entry that applied (even when expired or stale).
	Ack *config.Ack `json:"acknowledge,omitempty"`
	// repo is the repository the float resolved in, where signatures live.
	repo string
}

// Shared lists the tags of one repository that name a drifted-to digest.
type Shared struct {
	Repository string   `json:"repository"`
	Digest     string   `json:"digest"`
	Tags       []string `json:"tags"`
	// Checked of Total tags were resolved (the newest first); Error when listing failed.
	Checked int    `json:"checked"`
	Total   int    `json:"total"`
	Error   string `json:"error,omitempty"`
}

// Report is the outcome of one drift run.
type Report struct {
	Items []Item `json:"items"`
	// Shared is filled with --show-tags: once per repository and new digest.
	Shared  []Shared `json:"shared_tags,omitempty"`
	Offline bool     `json:"offline,omitempty"`
	// Notes are problems that did not stop the run.
	Notes   []string  `json:"notes,omitempty"`
	Checked time.Time `json:"checked"`
	// Deprecated lists the recalled chart versions the charts' Chart.yaml
	// still name (with WithRepository): each is a finding.
	Deprecated []deprecation.Reference `json:"deprecated,omitempty"`
	// Requests are the registry requests sent (filled by the caller).
	Requests *resolver.Stats `json:"requests,omitempty"`
}

// Count is the number of items with status s.
func (r *Report) Count(s Status) int {
	n := 0
	for _, it := range r.Items {
		if it.Status == s {
			n++
		}
	}
	return n
}

// Findings is the number of items that fail the check.
func (r *Report) Findings() int {
	n := len(r.Deprecated)
	for _, it := range r.Items {
		if it.Status.Finding() {
			n++
		}
	}
	return n
}

// Err is nil when every pin is ok, acknowledged or not pinned; otherwise an
// error wrapping failure.ErrFindings.
func (r *Report) Err() error {
	if n := r.Findings() - len(r.Deprecated); n > 0 {
		unsigned := ""
		if u := r.Count(Unsigned); u > 0 {
			unsigned = fmt.Sprintf(", %d UNSIGNED", u)
		}
		return fmt.Errorf("drift: %w: %d of %d pins (%d DRIFT, %d UNRESOLVED, %d UNWATCHABLE%s)",
			failure.ErrFindings, n, len(r.Items), r.Count(Drift), r.Count(Unresolved), r.Count(Unwatchable), unsigned)
	}
	if n := len(r.Deprecated); n > 0 {
		return fmt.Errorf("drift: %w: %d deprecated chart version(s) still named", failure.ErrFindings, n)
	}
	return nil
}

// Options configure Check; the zero value checks online pins only.
type Options struct {
	// Now is the clock acknowledgements expire by (default time.Now).
	Now func() time.Time
	// ShowTags lists, for each drifted repository, the tags that share the
	// new digest: one tag listing per repository plus a HEAD per tag checked
	// (at most maxSharedTags, newest first).
	ShowTags bool
	// Offline marks the report as answered from a digest lock file.
	Offline bool
	// Repository, when set, reports the versions each chart's Chart.yaml
	// names (its own, and exact dependencies from that repository) that it
	// marks deprecated.
	Repository *deprecation.Repository
	// Signatures checks, for every image with verify:, that the pinned
	// digest (and the digest a drifted float now names) carries a signature
	// under the image's policy; one lookup per repository, digest and key.
	// Offline, a checker of the lock's recorded signatures verifies them the
	// same way; without any checker such pins are listed in a note.
	Signatures *signature.Checker
	// Logger logs each decision (silent by default).
	Logger *slog.Logger
}

// Validate checks the options by themselves, before anything is read: a
// Repository must be fetchable as written.
func (o Options) Validate() error {
	if o.Repository != nil {
		return o.Repository.Validate()
	}
	return nil
}

// Check discovers the pins of every target and classifies each against r.
// A values.yaml that cannot be read or parsed, or that holds no pin at all,
// is an input error (exit 2).
func Check(ctx context.Context, r resolver.Interface, targets []Target, o Options) (*Report, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if len(targets) == 0 {
		return nil, failure.Input(errors.New("drift: no chart to check; name a chart directory or configure charts in chartpin.yaml"))
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	rep := &Report{Offline: o.Offline, Checked: o.Now()}
	for _, t := range targets {
		pins, notes, err := Pins(t)
		if err != nil {
			return nil, err
		}
		for _, n := range notes {
			rep.Notes = append(rep.Notes, t.Dir+": "+n)
		}
		for _, p := range pins {
			rep.Items = append(rep.Items, Item{Chart: t.Dir, Pin: p, Pinned: p.Digest})
		}
	}
	c := checker{o: o, r: r, rep: rep, configs: map[string]*config.Chart{}}
	for _, t := range targets {
		c.configs[t.Dir] = t.Config
	}
	c.classify(ctx)
	c.checkSignatures(ctx)
	if o.ShowTags {
		c.sharedTags(ctx)
	}
	if o.Repository != nil {
		for _, t := range targets {
			file, data, err := chartfile.ReadChart(t.Dir)
			if err != nil {
				return nil, err
			}
			refs, err := o.Repository.Referenced(ctx, file, data)
			if err != nil {
				return nil, err
			}
			rep.Deprecated = append(rep.Deprecated, refs...)
		}
	}
	return rep, nil
}

// maxSharedTags bounds the tags resolved per repository for WithShowTags.
const maxSharedTags = 50

// Pins is every pin of a target: the configured images first, then every
// other pin discovery finds, so a pin the config forgot is still watched.
// Discovery never stops at one bad block: a block it cannot pin
// unambiguously is a Problem pin (UNWATCHABLE, a finding) unless the config
// names that block, whose configured pins then stand for it (a note says so).
func Pins(t Target) (pins []discover.Pin, notes []string, err error) {
	found, err := discover.Survey(t.Dir)
	if err != nil {
		return nil, nil, err
	}
	configuredAt := map[string]int{}
	if t.Config != nil {
		if pins, err = discover.Chart(t.Dir, t.Config); err != nil {
			return nil, nil, err
		}
		for _, im := range t.Config.Images {
			configuredAt[im.At] = im.Line
		}
	}
	seen := map[string]bool{}
	for _, p := range pins {
		seen[p.Path] = true
	}
	for _, p := range found {
		if line, ok := configuredAt[p.At]; ok && p.Problem != "" && p.Path == p.At {
			notes = append(notes, fmt.Sprintf("%s:%d: %s; settled by %s (image %s), so in that block only the configured pins are watched",
				p.File, p.Line, p.Problem, t.Config.At(line), p.At))
			continue
		}
		if !seen[p.Path] {
			pins = append(pins, p)
		}
	}
	sort.SliceStable(pins, func(i, j int) bool {
		if pins[i].Line != pins[j].Line {
			return pins[i].Line < pins[j].Line
		}
		return pins[i].Column < pins[j].Column
	})
	if len(pins) == 0 {
		return nil, nil, failure.Input(fmt.Errorf("%s/%s holds no image pins (no digest, sha, *Digest key or repo@sha256 value); nothing to watch, so this is not a pass",
			strings.TrimSuffix(t.Dir, "/"), chartfile.ValuesFile))
	}
	return pins, notes, nil
}

type checker struct {
	o       Options
	r       resolver.Interface
	rep     *Report
	configs map[string]*config.Chart
}

// float works out the key an item's float is resolved under (repo:tag, or
// repo plus a versions range), or says why there is none. Followers take the
// float of the image they follow.
func (c *checker) float(it *Item) (string, bool) {
	p := it.Pin
	if p.Follows != "" {
		lead, err := c.leader(*it)
		if err != nil {
			it.Message = err.Error()
			return "", false
		}
		p = lead.Pin
		if p.Problem != "" {
			it.Message = fmt.Sprintf("follows %s, which is unwatchable: %s", it.Pin.Follows, p.Problem)
			return "", false
		}
	}
	if p.Repository == "" {
		it.Message = "no repository: the image cannot be determined"
		return "", false
	}
	if p.Versions != "" {
		return p.Repository + " " + p.Versions, true
	}
	if p.Tag == "" {
		it.Message = "no tag: the float to watch is unknown"
		return "", false
	}
	return p.Ref(), true
}

// leader is the item a follower takes its digest from, chosen among the
// chart's configured pins by pinrule.FollowRoot, the rule pin follows by.
func (c *checker) leader(it Item) (*Item, error) {
	var cands []*Item
	for i := range c.rep.Items {
		o := &c.rep.Items[i]
		if o.Chart == it.Chart && o.Pin.ConfigLine != 0 {
			cands = append(cands, o)
		}
	}
	link := func(o *Item) pinrule.Link { return pinrule.Link{At: o.Pin.At, Pin: o.Pin.Key, Follows: o.Pin.Follows} }
	lead, err := pinrule.FollowRoot(cands, link, &it)
	if err != nil {
		return nil, err
	}
	return lead, nil
}

func (c *checker) classify(ctx context.Context) {
	items := c.rep.Items
	refs := map[string]*Item{} // first item per float, for versions lookups
	var order []string
	for i := range items {
		it := &items[i]
		if it.Pin.Hold != "" {
			// The config froze this pin on purpose: reported with the
			// reason, never resolved, never a finding.
			it.Status, it.Message = Held, "held: "+it.Pin.Hold
			continue
		}
		if it.Pin.Problem != "" && it.Pin.Key == "" {
			// A whole block discovery refused (two pins of one image): no
			// pin key to call "not pinned", so it is a finding.
			it.Status, it.Message = Unwatchable, it.Pin.Problem
			continue
		}
		if notPinned(it.Pin) {
			it.Status = NotPinned
			if it.Pin.Repository != "" && it.Pin.Tag != "" {
				it.Float = it.Pin.Ref()
			}
			it.Message = "not pinned (empty pin key): listed, not watched"
			if it.Pin.Problem != "" {
				it.Message += "; " + it.Pin.Problem
			}
			continue
		}
		if it.Pin.Problem != "" {
			it.Status, it.Message = Unwatchable, it.Pin.Problem
			continue
		}
		ref, ok := c.float(it)
		if !ok {
			it.Status = Unwatchable
			continue
		}
		it.Float = ref
		if _, dup := refs[ref]; !dup {
			refs[ref] = it
			order = append(order, ref)
		}
	}
	images, errs := fanout.Map(order, func(ref string) (resolver.Image, error) { return c.resolve(ctx, *refs[ref], ref) })
	now := c.o.Now()
	for i := range items {
		it := &items[i]
		if it.Status != "" {
			continue
		}
		img := images[it.Float]
		if err := errs[it.Float]; err != nil {
			it.Status = Unresolved
			// The resolver's errors name the reference already; say it once.
			it.Message = err.Error()
			if !strings.Contains(it.Message, it.Float) {
				it.Message = fmt.Sprintf("resolving %s: %v", it.Float, err)
			}
			continue
		}
		it.Current, it.Source, it.repo = img.Digest, img.Source, resolver.RepositoryOf(img.Ref)
		if strings.Contains(it.Float, " ") {
			// A versions range: show the tag it picked.
			it.Float = img.Ref + " (highest in " + strings.SplitN(it.Float, " ", 2)[1] + ")"
		}
		if it.Current == it.Pinned {
			it.Status = OK
			continue
		}
		it.Status = Drift
		it.Message = fmt.Sprintf("%s now resolves to %s; pinned %s", it.Float, it.Current, it.Pinned)
		if it.Pin.Follows != "" {
			it.Message = fmt.Sprintf("follows %s: %s", it.Pin.Follows, it.Message)
		}
		c.acknowledge(it, now)
		it.Message += it.Note
	}
	for _, it := range items {
		c.o.Logger.Debug("drift", "pin", it.Pin.Where(), "status", it.Status, "float", it.Float)
	}
}

// resolve asks for the float's digest; a versions range resolves the highest
// tag in range (which needs the repository's tag list).
func (c *checker) resolve(ctx context.Context, it Item, ref string) (resolver.Image, error) {
	p := it.Pin
	if p.Follows != "" {
		lead, err := c.leader(it)
		if err != nil {
			return resolver.Image{}, err
		}
		p = lead.Pin
	}
	if p.Versions == "" {
		return c.r.Resolve(ctx, ref)
	}
	tags, err := c.r.Tags(ctx, p.Repository)
	if err != nil {
		return resolver.Image{}, fmt.Errorf("listing tags for versions %q: %w", p.Versions, err)
	}
	tag, err := pinrule.HighestInRange(p.Versions, tags)
	if err != nil {
		return resolver.Image{}, fmt.Errorf("%s: %w", p.Repository, err)
	}
	return c.r.Resolve(ctx, p.Repository+":"+tag)
}

// notPinned: the pin key is empty (or a single-string image without a digest).
func notPinned(p discover.Pin) bool {
	if p.Digest != "" {
		return false
	}
	if p.Node == nil || p.Node.ShortTag() == "!!null" || p.Node.Value == "" {
		return true
	}
	// A non-empty value that is no digest is a problem, unless it is a plain repo:tag string.
	return p.Problem == ""
}

// acknowledge turns DRIFT into ACKNOWLEDGED when an unexpired acknowledge
// entry for the image names the new digest or the pin being kept. An entry's
// until date is its last day (UTC).
func (c *checker) acknowledge(it *Item, now time.Time) {
	cfg := c.configs[it.Chart]
	if cfg == nil {
		return
	}
	for i := range cfg.Acknowledge {
		a := cfg.Acknowledge[i]
		if a.At != it.Pin.At && a.At != it.Pin.Path {
			continue
		}
		if a.Digest != it.Current && a.Digest != it.Pinned {
			it.Ack = &a
			it.Note += fmt.Sprintf("; the acknowledgement (%s) is for %s, not this drift", cfg.At(a.Line), a.Digest)
			continue
		}
		it.Ack = &a
		end := a.Until.AddDate(0, 0, 1)
		if !now.Before(end) {
			it.Note += fmt.Sprintf("; acknowledgement expired on %s (%s, %q): DRIFT again; re-pin or extend until:",
				a.Until.Format("2006-01-02"), cfg.At(a.Line), a.Reason)
			return
		}
		it.Status = Acknowledged
		it.Note += fmt.Sprintf("; acknowledged until %s (%s): %s", a.Until.Format("2006-01-02"), cfg.At(a.Line), a.Reason)
		return
	}
}

// sharedTags lists, once per repository and new digest, the other tags that
// name the digest a pin drifted to: one tag listing per repository, then a
// HEAD per tag (newest first, at most maxSharedTags), deduplicated by the resolver.
func (c *checker) sharedTags(ctx context.Context) {
	type key struct{ repo, digest string }
	var keys []key
	seen := map[key]bool{}
	for _, it := range c.rep.Items {
		if it.Status != Drift && it.Status != Acknowledged && (it.Status != Unsigned || it.Current == it.Pinned) {
			continue
		}
		p := it.Pin
		if p.Follows != "" {
			if l, err := c.leader(it); err == nil {
				p = l.Pin
			}
		}
		k := key{p.Repository, it.Current}
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		sh := Shared{Repository: k.repo, Digest: k.digest}
		tags, err := c.r.Tags(ctx, k.repo)
		if err != nil {
			sh.Error = fmt.Sprintf("listing tags: %v", err)
			c.rep.Shared = append(c.rep.Shared, sh)
			continue
		}
		sh.Total = len(tags)
		tags = newestFirst(tags)
		if len(tags) > maxSharedTags {
			tags = tags[:maxSharedTags]
		}
		sh.Checked = len(tags)
		digests, _ := fanout.Map(tags, func(t string) (string, error) {
			img, err := c.r.Resolve(ctx, k.repo+":"+t)
			return img.Digest, err
		})
		for _, t := range tags {
			if digests[t] == k.digest {
				sh.Tags = append(sh.Tags, t)
			}
		}
		sort.Strings(sh.Tags)
		c.rep.Shared = append(c.rep.Shared, sh)
	}
}

// newestFirst orders tags by semver, newest first, then the rest by name.
func newestFirst(tags []string) []string {
	out := append([]string(nil), tags...)
	ver := func(t string) *semver.Version {
		v, err := semver.NewVersion(t)
		if err != nil {
			return nil
		}
		return v
	}
	sort.SliceStable(out, func(i, j int) bool {
		vi, vj := ver(out[i]), ver(out[j])
		switch {
		case vi != nil && vj != nil:
			if !vi.Equal(vj) {
				return vi.GreaterThan(vj)
			}
			return out[i] < out[j]
		case vi != nil:
			return true
		case vj != nil:
			return false
		}
		return out[i] < out[j]
	})
	return out
}
