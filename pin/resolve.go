package pin

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/chartpin/chartpin/config"
	"github.com/chartpin/chartpin/discover"
	"github.com/chartpin/chartpin/internal/fanout"
	"github.com/chartpin/chartpin/pinrule"
	"github.com/chartpin/chartpin/resolver"
)

// resolve picks each pin's tag (versions: the highest in range, one tag
// list per repository), resolves every unique ref once, copies digests to
// followers without a request, and checks the platforms of every digest
// about to be written. A pin that fails any step is refused (with its
// reason) and the others go on, so the plan shows every refusal at once.
func resolve(ctx context.Context, charts []*chart, r resolver.Interface, platforms []string, log *slog.Logger) {
	var active []*state
	for _, c := range charts {
		for _, s := range c.pins {
			if s.Problem == "" && s.held == "" {
				active = append(active, s)
			}
		}
	}
	pickTags(ctx, active, r, log)
	resolveRefs(ctx, active, r)
	for _, c := range charts {
		c.follow()
	}
	checkPlatforms(ctx, active, r, platforms)
}

// pickTags sets each pin's tag: the float, or the highest tag in its
// versions range (one tag listing per repository).
func pickTags(ctx context.Context, active []*state, r resolver.Interface, log *slog.Logger) {
	var repos []string
	for _, s := range active {
		if s.Versions != "" && s.Follows == "" {
			repos = append(repos, s.Repository)
		}
	}
	tags, tagErrs := fanout.Map(repos, func(repo string) ([]string, error) { return r.Tags(ctx, repo) })
	for _, s := range active {
		if s.Follows != "" {
			continue
		}
		s.useTag = s.Tag
		if s.Versions != "" {
			if err := tagErrs[s.Repository]; err != nil {
				s.refuse(s.Repository, fmt.Errorf("listing tags for versions %q: %w", s.Versions, err))
				continue
			}
			t, err := pinrule.HighestInRange(s.Versions, tags[s.Repository])
			if err != nil {
				s.refuse(s.Repository, err)
				continue
			}
			log.Debug("versions range picked a tag", "pin", s.Path, "range", s.Versions, "tag", t, "float", s.Tag)
			s.useTag = t
		}
		s.ref = s.Repository + ":" + s.useTag
	}
}

// resolveRefs resolves every unique ref once (the resolver also deduplicates).
func resolveRefs(ctx context.Context, active []*state, r resolver.Interface) {
	var refs []string
	for _, s := range active {
		if s.Follows == "" && s.refused == nil {
			refs = append(refs, s.ref)
		}
	}
	images, resErrs := fanout.Map(refs, func(ref string) (resolver.Image, error) { return r.Resolve(ctx, ref) })
	for _, s := range active {
		if s.Follows != "" || s.refused != nil {
			continue
		}
		if err := resErrs[s.ref]; err != nil {
			s.refuse(s.ref, err)
			continue
		}
		s.img = images[s.ref]
		s.newDigest = s.img.Digest
	}
}

// follow gives followers the digest of the pin they follow, with no request.
func (c *chart) follow() {
	for _, s := range c.pins {
		if s.Follows == "" || s.Problem != "" || s.held != "" {
			continue
		}
		t, err := c.followTarget(s)
		if err != nil {
			s.refuse(s.At, err)
			continue
		}
		s.img, s.newDigest, s.ref, s.useTag = t.img, t.newDigest, t.ref, t.useTag
	}
}

// checkPlatforms reads and checks every digest about to be written and the
// pin it replaces (resolver.Interface.Manifest: one GET per digest, never
// for a pin that stays, so a re-run costs HEADs only; the HEAD's word is
// not trusted), and refuses a new digest unless it is a multi-arch index
// covering every platform of the pin it replaces, the configured ones and
// those of --platforms: a pin never loses a platform, online or offline.
func checkPlatforms(ctx context.Context, active []*state, r resolver.Interface, platforms []string) {
	var moving []*state
	var keys []string
	for _, s := range active {
		if s.Follows != "" || s.refused != nil || s.newDigest == s.Digest {
			continue
		}
		moving = append(moving, s)
		keys = append(keys, resolver.DigestRef(s.img.Ref, s.newDigest))
		if s.Digest != "" {
			// The current pin lives in the same repository as its float.
			keys = append(keys, resolver.DigestRef(s.img.Ref, s.Digest))
		}
	}
	manifests, errs := fanout.Map(keys, func(k string) (resolver.Manifest, error) { return r.Manifest(ctx, k) })
	for _, s := range moving {
		k := resolver.DigestRef(s.img.Ref, s.newDigest)
		if err := errs[k]; err != nil {
			s.refuse(s.ref, fmt.Errorf("refusing to pin %s: %w", s.newDigest, err))
			continue
		}
		m := manifests[k]
		s.img.MediaType, s.img.Platforms = m.MediaType, m.Platforms
		want := append(append([]string(nil), s.Platforms...), platforms...)
		if s.Digest != "" {
			old, err := manifests[resolver.DigestRef(s.img.Ref, s.Digest)], errs[resolver.DigestRef(s.img.Ref, s.Digest)]
			if err == nil && old.MediaType == "" && len(old.Platforms) == 0 {
				err = fmt.Errorf("%w: the lock file records no platforms of it; record the lock online", resolver.ErrNotInLock)
			}
			if err != nil {
				s.refuse(s.ref, fmt.Errorf("refusing to pin %s: reading the platforms of the pin it replaces (%s), which it must keep: %w", s.newDigest, s.Digest, err))
				continue
			}
			want = append(want, old.Platforms...)
		}
		if len(want) > 0 {
			if err := m.Require(s.ref, uniq(want)); err != nil {
				s.refuse(s.ref, fmt.Errorf("refusing to pin %s: %w", s.newDigest, err))
			}
			continue
		}
		// Nothing to keep and nothing required: a single-arch digest is
		// refused all the same, never pinned silently (see
		// docs/design.md#index-digests-only), unless the config says the
		// image is built for one platform. An offline lock entry that
		// records no media type is unknown here, and not refused.
		if m.MediaType != "" && !m.IsIndex() && !s.SingleArch {
			s.refuse(s.ref, fmt.Errorf("refusing to pin %s: it is a single-arch manifest (%s), not a multi-arch index: %w; "+
				"push a multi-arch index for the tag (chartpin pins indexes only), or move %s to a tag that names one",
				s.newDigest, m.MediaType, resolver.ErrPlatforms, s.At))
		}
	}
}

// followTarget finds the pin s takes its digest from, by pinrule.FollowRoot
// (the rule drift shares): the entry at s.Follows with the same pin key,
// else the only one there; chains are followed to their end.
func (c *chart) followTarget(s *state) (*state, error) {
	cur, err := pinrule.FollowRoot(c.pins, stateLink, s)
	if err != nil {
		return nil, err
	}
	if cur.newDigest == "" {
		return nil, fmt.Errorf("follows %s: the followed image was not resolved", s.Follows)
	}
	return cur, nil
}

func stateLink(s *state) pinrule.Link { return pinrule.Link{At: s.At, Pin: s.Key, Follows: s.Follows} }

// render writes a digest in a pin's format; tag is the tag written with it
// (tag@digest, ref@digest) and current the scalar's value today.
func render(p discover.Pin, digest, tag, current string) string {
	switch p.Format {
	case config.FormatHex:
		return strings.TrimPrefix(digest, "sha256:")
	case config.FormatTagDigest:
		return tag + "@" + digest
	case config.FormatRefDigest:
		// keep the repository as the chart spells it
		base := resolver.RepositoryOf(current)
		if base == "" {
			base = p.Repository
		}
		return base + ":" + tag + "@" + digest
	}
	return digest
}
