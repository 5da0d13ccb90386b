package pin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"

	"github.com/Masterminds/semver/v3"

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
	if err := errors.Join(errs...); err != nil {
		return err
	}

	// platforms: a GET only for a digest that is about to be written.
	var check []*state
	seen := map[string]bool{}
	for _, s := range active {
		if len(s.Platforms) > 0 && s.newDigest != s.Digest && s.Follows == "" && !seen[s.newDigest] {
			check = append(check, s)
			seen[s.newDigest] = true
		}
	}
	var keys []string
	byDigest := map[string]*state{}
	for _, s := range check {
		keys = append(keys, s.newDigest)
		byDigest[s.newDigest] = s
	}
	plats, platErrs := parallel(keys, func(d string) ([]string, error) { return r.Platforms(ctx, byDigest[d].img) })
	for _, s := range active {
		if len(s.Platforms) == 0 || s.newDigest == s.Digest || s.Follows != "" {
			continue
		}
		if err := platErrs[s.newDigest]; err != nil {
			errs = append(errs, fmt.Errorf("%s: image %s: reading platforms of %s: %w", s.Where(), s.ref, s.newDigest, err))
			continue
		}
		if err := resolver.RequirePlatforms(s.ref, plats[s.newDigest], s.Platforms); err != nil {
			errs = append(errs, fmt.Errorf("%s: image %s: refusing to pin %s: %w", s.Where(), s.ref, s.newDigest, err))
		}
	}
	return errors.Join(errs...)
}

// followTarget finds the pin s follows: the one at s.Follows with the same
// pin key, else the only one there; it may itself follow (chains end).
func (c *chart) followTarget(s *state) (*state, error) {
	cur := s
	for i := 0; cur.Follows != "" && i < 32; i++ {
		var cands []*state
		for _, o := range c.pins {
			if o.At == cur.Follows {
				cands = append(cands, o)
			}
		}
		var next *state
		switch {
		case len(cands) == 1:
			next = cands[0]
		case len(cands) > 1:
			for _, o := range cands {
				if o.Key == cur.Key {
					next = o
				}
			}
		}
		if next == nil {
			return nil, fmt.Errorf("follows %s: no single pin there to follow", cur.Follows)
		}
		cur = next
	}
	if cur.Follows != "" || cur.newDigest == "" {
		return nil, fmt.Errorf("follows %s: the followed image was not resolved", s.Follows)
	}
	return cur, nil
}

// highest returns the highest full-semver tag (v prefix allowed) in the range.
// Semantic ordering: 1.9.63-rc.1 ranks below 1.9.63 (lesson 14).
func highest(tags []string, rng string) (string, error) {
	c, err := semver.NewConstraint(rng)
	if err != nil {
		return "", fmt.Errorf("versions %q: %w", rng, err)
	}
	type cand struct {
		tag string
		v   *semver.Version
	}
	var cands []cand
	for _, t := range tags {
		v, err := semver.StrictNewVersion(strings.TrimPrefix(t, "v"))
		if err != nil || !c.Check(v) {
			continue
		}
		cands = append(cands, cand{t, v})
	}
	if len(cands) == 0 {
		return "", fmt.Errorf("no tag in versions range %q among %d tags; widen the range or push a matching tag", rng, len(tags))
	}
	sort.Slice(cands, func(i, j int) bool {
		if !cands[i].v.Equal(cands[j].v) {
			return cands[i].v.LessThan(cands[j].v)
		}
		return cands[i].tag < cands[j].tag
	})
	return cands[len(cands)-1].tag, nil
}

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
