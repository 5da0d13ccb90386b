package pin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/chartpin/chartpin/config"
	"github.com/chartpin/chartpin/discover"
	"github.com/chartpin/chartpin/resolver"
)

// resolve picks each pin's tag (versions: the highest in range, one tag
// list per repository), resolves every unique ref once, copies digests to
// followers without a request, and checks platforms of new digests.
func resolve(ctx context.Context, charts []*chart, r resolver.Interface, log *slog.Logger) error {
	var active []*state
	for _, c := range charts {
		for _, s := range c.pins {
			if s.Problem == "" {
				active = append(active, s)
			}
		}
	}
	var errs []error

	// versions: list tags once per repository.
	var repos []string
	for _, s := range active {
		if s.Versions != "" && s.Follows == "" {
			repos = append(repos, s.Repository)
		}
	}
	tags, tagErrs := parallel(uniq(repos), func(repo string) ([]string, error) { return r.Tags(ctx, repo) })
	for _, s := range active {
		if s.Follows != "" {
			continue
		}
		s.useTag = s.Tag
		if s.Versions != "" {
			if err := tagErrs[s.Repository]; err != nil {
				errs = append(errs, fmt.Errorf("%s: image %s: listing tags for versions %q: %w", s.Where(), s.Repository, s.Versions, err))
				continue
			}
			t, err := highest(tags[s.Repository], s.Versions)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: image %s: %w", s.Where(), s.Repository, err))
				continue
			}
			log.Debug("versions range picked a tag", "pin", s.Path, "range", s.Versions, "tag", t, "float", s.Tag)
			s.useTag = t
		}
		s.ref = s.Repository + ":" + s.useTag
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}

	// one Resolve per unique ref (the resolver also deduplicates).
	var refs []string
	for _, s := range active {
		if s.Follows == "" {
			refs = append(refs, s.ref)
		}
	}
	images, resErrs := parallel(uniq(refs), func(ref string) (resolver.Image, error) { return r.Resolve(ctx, ref) })
	for _, s := range active {
		if s.Follows != "" {
			continue
		}
		if err := resErrs[s.ref]; err != nil {
			errs = append(errs, fmt.Errorf("%s: image %s: %w", s.Where(), s.ref, err))
			continue
		}
		s.img = images[s.ref]
		s.newDigest = s.img.Digest
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}

	// Every digest about to be written is read and checked first: one GET
	// per new digest (resolver.Interface.Manifest), never for a pin that
	// stays (a re-run costs HEADs only; a digest was checked when it was
	// written). The HEAD's digest and media type are only the registry's
	// word; the verified manifest decides whether it is an index and which
	// platforms it has.
	var keys []string
	byKey := map[string]bool{}
	for _, s := range active {
		if s.Follows != "" || s.newDigest == s.Digest {
			continue
		}
		if k := resolver.DigestRef(s.img.Ref, s.newDigest); !byKey[k] {
			byKey[k] = true
			keys = append(keys, k)
		}
	}
	manifests, manErrs := parallel(keys, func(k string) (resolver.Manifest, error) { return r.Manifest(ctx, k) })
	for _, s := range active {
		if s.Follows != "" || s.newDigest == s.Digest {
			continue
		}
		k := resolver.DigestRef(s.img.Ref, s.newDigest)
		if err := manErrs[k]; err != nil {
			errs = append(errs, fmt.Errorf("%s: image %s: refusing to pin %s: %w", s.Where(), s.ref, s.newDigest, err))
			continue
		}
		m := manifests[k]
		s.img.MediaType, s.img.Platforms = m.MediaType, m.Platforms
		if len(s.Platforms) > 0 {
			if err := m.Require(s.ref, s.Platforms); err != nil {
				errs = append(errs, fmt.Errorf("%s: image %s: refusing to pin %s: %w", s.Where(), s.ref, s.newDigest, err))
			}
			continue
		}
		// Without platforms:, a single-arch digest is refused all the same,
		// never pinned silently (see docs/design.md#index-digests-only). An
		// offline lock records no media type, so "" is unknown and not refused.
		if m.MediaType != "" && !m.IsIndex() {
			errs = append(errs, fmt.Errorf("%s: image %s: refusing to pin %s: it is a single-arch manifest (%s), not a multi-arch index: %w; "+
				"push a multi-arch index for the tag (chartpin pins indexes only), or move %s to a tag that names one",
				s.Where(), s.ref, s.newDigest, m.MediaType, resolver.ErrPlatforms, s.At))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}

	// follows: same digest as the followed pin, no request.
	for _, c := range charts {
		for _, s := range c.pins {
			if s.Follows == "" || s.Problem != "" {
				continue
			}
			t, err := c.followTarget(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: image %s: %w", s.Where(), s.At, err))
				continue
			}
			s.img, s.newDigest, s.ref, s.useTag = t.img, t.newDigest, t.ref, t.useTag
		}
	}
	return errors.Join(errs...)
}

// followTarget finds the pin s takes its digest from, by config.FollowRoot
// (the rule drift shares): the entry at s.Follows with the same pin key,
// else the only one there; chains are followed to their end.
func (c *chart) followTarget(s *state) (*state, error) {
	cur, err := config.FollowRoot(c.pins, stateLink, s)
	if err != nil {
		return nil, err
	}
	if cur.newDigest == "" {
		return nil, fmt.Errorf("follows %s: the followed image was not resolved", s.Follows)
	}
	return cur, nil
}

func stateLink(s *state) config.Link { return config.Link{At: s.At, Pin: s.Key, Follows: s.Follows} }

// highest is config.HighestInRange, the one range rule pin and drift share.
func highest(tags []string, rng string) (string, error) { return config.HighestInRange(rng, tags) }

// parallel runs fn once per key concurrently (the resolver bounds requests in flight).
func parallel[T any](keys []string, fn func(string) (T, error)) (map[string]T, map[string]error) {
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		out  = map[string]T{}
		errs = map[string]error{}
	)
	for _, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := fn(k)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs[k] = err
				return
			}
			out[k] = v
		}()
	}
	wg.Wait()
	return out, errs
}

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
		base, _, _ := strings.Cut(current, "@")
		if i := strings.LastIndex(base, ":"); i > strings.LastIndex(base, "/") {
			base = base[:i]
		}
		if base == "" {
			base = p.Repository
		}
		return base + ":" + tag + "@" + digest
	}
	return digest
}
