// Package pinrule decides what a pin takes now: the tag a versions range
// picks, the pin a follower takes its digest from, and whether a when:
// condition lets it move. pin and drift both decide through it, so they
// agree; config checks chartpin.yaml with the same grammar.
package pinrule

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/Masterminds/semver/v3"
)

var pathRe = regexp.MustCompile(`^[A-Za-z0-9_-]+(\[[0-9]+\])*(\.[A-Za-z0-9_-]+(\[[0-9]+\])*)*$`)

// ValidPath checks a dotted values path as chartpin.yaml writes it (at:,
// follows:, the paths of a when: condition).
func ValidPath(s string) error {
	if !pathRe.MatchString(s) {
		return fmt.Errorf("%q is not a dotted values path like images.ingestor", s)
	}
	return nil
}

// Link is what following needs to know of a pin: its image path, its pin
// key and the path it follows.
type Link struct{ At, Pin, Follows string }

// FollowStep returns the entry from follows: the only entry at from.Follows,
// else the one there with from's pin key.
func FollowStep[T any](entries []T, link func(T) Link, from Link) (T, error) {
	var zero T
	var cands []T
	for _, o := range entries {
		if link(o).At == from.Follows {
			cands = append(cands, o)
		}
	}
	switch len(cands) {
	case 0:
		return zero, fmt.Errorf("follows %s: no image is configured at that path", from.Follows)
	case 1:
		return cands[0], nil
	}
	for _, o := range cands {
		if link(o).Pin == from.Pin {
			return o, nil
		}
	}
	return zero, fmt.Errorf("follows %s: %d entries configure that path with different pin keys and none uses %q; follow a path with one entry",
		from.Follows, len(cands), from.Pin)
}

// FollowRoot follows start's chain to the entry that follows nothing: the
// one whose digest start takes. A loop is an error.
func FollowRoot[T any](entries []T, link func(T) Link, start T) (T, error) {
	cur := start
	for range len(entries) + 1 {
		l := link(cur)
		if l.Follows == "" {
			return cur, nil
		}
		next, err := FollowStep(entries, link, l)
		if err != nil {
			return cur, err
		}
		cur = next
	}
	var zero T
	return zero, fmt.Errorf("follows %s: the chain loops", link(start).Follows)
}

// HighestInRange returns the highest tag in the semver range versions.
// Only strict semver tags count (an optional leading v): a float like 0.8
// is never picked, since the ceiling exists to avoid it. A
// prerelease counts only when the range names one, and ranks below its
// release.
func HighestInRange(versions string, tags []string) (string, error) {
	c, err := semver.NewConstraint(versions)
	if err != nil {
		return "", fmt.Errorf("versions %q: %w", versions, err)
	}
	var best *semver.Version
	bestTag := ""
	for _, t := range tags {
		v, err := semver.StrictNewVersion(strings.TrimPrefix(t, "v"))
		if err != nil || !c.Check(v) {
			continue
		}
		if best == nil || v.GreaterThan(best) || (v.Equal(best) && t > bestTag) {
			best, bestTag = v, t
		}
	}
	if best == nil {
		return "", fmt.Errorf("no tag in versions range %q among %d tags; widen the range or push a matching tag", versions, len(tags))
	}
	return bestTag, nil
}
