package upgrade

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
)

// Verdicts reported on each Candidate.
const (
	// VerdictTarget: the version this tick moves to.
	VerdictTarget = "target"
	// VerdictCurrent: the deployed version (when the repository lists it).
	VerdictCurrent = "current"
	// VerdictDeprecated: recalled by its publisher; never moved to.
	VerdictDeprecated = "deprecated"
	// VerdictTooYoung: published less than --min-age ago, or with no
	// recorded creation time while --min-age is set.
	VerdictTooYoung = "too-young"
)

// Candidate is one version the tick looked at, with the inputs of its verdict.
type Candidate struct {
	Version    string     `json:"version"`
	Created    *time.Time `json:"created,omitempty"` // nil: the repository records none
	Age        string     `json:"age,omitempty"`
	AgeSeconds int64      `json:"age_seconds,omitempty"`
	Deprecated bool       `json:"deprecated"`
	Verdict    string     `json:"verdict"`
	Wait       string     `json:"wait,omitempty"` // for too-young: how much longer it soaks
}

// plan is what the repository's versions say this release should do.
type plan struct {
	latest     *semver.Version
	target     *semver.Version // nil: stay
	recall     bool            // the deployed version is deprecated
	decision   string          // for a stay: up-to-date, ahead or waiting
	reason     string
	candidates []Candidate
}

// decide walks the repository's versions newest first. A healthy release
// moves to the newest version above it that is not deprecated and has soaked
// MinAge. A release running a deprecated version moves to the newest
// non-deprecated version that has soaked, even when that is lower (a recall);
// if none has soaked yet, to the newest non-deprecated one, since a known bad
// version is worse than a young one.
func decide(ctx context.Context, src chartSource, opts Options, now time.Time, current string, cur *semver.Version) (plan, error) {
	var p plan
	listed, err := src.versions(ctx, opts)
	if err != nil {
		return p, err
	}
	vs, err := ordered(listed, opts.AllowPrerelease)
	if err != nil {
		return p, fmt.Errorf("chart %q in %s: %w", opts.Chart, src, err)
	}
	p.latest = vs[0]
	look := func(v string) (Candidate, error) {
		pub, err := src.describe(ctx, opts, v)
		if err != nil {
			return Candidate{}, err
		}
		return judge(v, pub, now, opts.MinAge), nil
	}

	// The deployed version's own entry says whether it was recalled.
	for _, l := range listed {
		if l != current {
			continue
		}
		c, err := look(current)
		if err != nil {
			return p, err
		}
		p.recall = c.Deprecated
		if !c.Deprecated {
			c.Verdict = VerdictCurrent
		}
		p.candidates = append(p.candidates, c)
	}

	var waiting, deprecated []string
	var fallback *semver.Version // recall: the newest non-deprecated, soaked or not
	for _, v := range vs {
		if v.Original() == current || (!p.recall && !v.GreaterThan(cur)) {
			continue
		}
		c, err := look(v.Original())
		if err != nil {
			return p, err
		}
		switch c.Verdict {
		case VerdictDeprecated:
			deprecated = append(deprecated, c.Version)
		case VerdictTooYoung:
			waiting = append(waiting, c.Version+" waits "+c.Wait+" more")
			if fallback == nil {
				fallback = v
			}
		default:
			c.Verdict, p.target = VerdictTarget, v
		}
		p.candidates = append(p.candidates, c)
		if p.target != nil {
			break
		}
	}

	err = p.settle(opts, src, current, cur, fallback, waiting, deprecated)
	return p, err
}

// judge is v's candidate entry: deprecated, too young for minAge (or of
// unknown age while minAge is set), or eligible (no verdict yet).
func judge(v string, pub published, now time.Time, minAge time.Duration) Candidate {
	c := Candidate{Version: v, Deprecated: pub.Deprecated}
	age := time.Duration(-1)
	if !pub.Created.IsZero() {
		created := pub.Created.UTC()
		age = now.Sub(created)
		c.Created, c.Age, c.AgeSeconds = &created, human(age), int64(age/time.Second)
	}
	switch {
	case pub.Deprecated:
		c.Verdict = VerdictDeprecated
	case minAge > 0 && age < 0:
		c.Verdict, c.Wait = VerdictTooYoung, "unknown: no creation time recorded"
	case age < minAge:
		c.Verdict, c.Wait = VerdictTooYoung, human(minAge-age)
	}
	return c
}

// settle words the plan's reason once the versions are walked: a recall
// falls back to the newest non-deprecated version that has not soaked yet
// (fallback), and a stay says why (waiting, ahead or up to date).
func (p *plan) settle(opts Options, src chartSource, current string, cur, fallback *semver.Version, waiting, deprecated []string) error {
	soak := ""
	if len(waiting) > 0 {
		soak = fmt.Sprintf("; --min-age %s: %s", human(opts.MinAge), strings.Join(waiting, ", "))
	}
	skipped := ""
	if len(deprecated) > 0 {
		skipped = "; skipped deprecated " + strings.Join(deprecated, ", ")
	}
	switch {
	case p.recall && p.target == nil && fallback != nil:
		p.target = fallback
		for i := range p.candidates {
			if p.candidates[i].Version == fallback.Original() {
				p.candidates[i].Verdict = VerdictTarget
			}
		}
		p.reason = fmt.Sprintf("%s is deprecated; no other version has soaked --min-age %s, so it moves to the newest non-deprecated %s now%s",
			current, human(opts.MinAge), fallback.Original(), skipped)
	case p.recall && p.target == nil:
		return fmt.Errorf("chart %q %s in %s is deprecated and so is every other version: publish a fixed version (or chartpin publish --undeprecate one)", opts.Chart, current, src)
	case p.recall:
		p.reason = fmt.Sprintf("%s is deprecated: moving to the newest non-deprecated version %s%s%s", current, p.target.Original(), skipped, soak)
	case p.target != nil:
		soaked := ""
		if opts.MinAge > 0 {
			soaked = " and has soaked " + human(opts.MinAge)
		}
		p.reason = fmt.Sprintf("%s is the newest version above %s that is not deprecated%s%s%s", p.target.Original(), current, soaked, skipped, soak)
	case len(waiting) > 0:
		p.decision = DecisionWaiting
		p.reason = strings.Join(waiting, ", ") + skipped
	case p.latest.LessThan(cur):
		p.decision = DecisionAhead
		p.reason = fmt.Sprintf("the deployed %s is newer than anything in the repository", current)
	default:
		p.decision = DecisionUpToDate
		p.reason = fmt.Sprintf("no version above %s to move to%s", current, skipped)
	}
	return nil
}

// human prints a duration the way a person reads it: 17h, 2h30m, 45s.
func human(d time.Duration) string {
	if d < time.Minute {
		return d.Round(time.Second).String()
	}
	s := d.Round(time.Minute).String()
	s = strings.TrimSuffix(s, "0s")
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
