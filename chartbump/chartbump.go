// Package chartbump moves a chart's Chart.yaml `version` and `appVersion`,
// byte-exactly through yamledit, keeping them in lockstep where the chart
// does (lockstep enforced by the tool, not by review) and ordering versions
// by semver, never by `sort -V` (docs/design.md#semantic-version-order).
//
// Bumping a prerelease finalises it: 1.2.3-rc.1 + patch is 1.2.3, 1.3.0-rc.1
// + minor is 1.3.0 and 2.0.0-rc.1 + major is 2.0.0 (as npm's semver does);
// otherwise the field is incremented and build metadata is dropped.
package chartbump

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"
	"gopkg.in/yaml.v3"

	"github.com/chartpin/chartpin/internal/chartfile"
	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/yamledit"
)

// Bump kinds for Options.Bump.
const (
	BumpNone  = "none"
	BumpPatch = "patch"
	BumpMinor = "minor"
	BumpMajor = "major"
)

// BumpKinds are the valid Options.Bump values, the one list that chartpin.yaml,
// the command line and the library accept.
var BumpKinds = []string{BumpPatch, BumpMinor, BumpMajor, BumpNone}

// ValidBump reports whether kind is one of BumpKinds.
func ValidBump(kind string) bool { return slices.Contains(BumpKinds, kind) }

// appVersion policies for Options.AppVersionPolicy.
const (
	PolicyAuto     = "auto"     // lockstep when version == appVersion today, else keep
	PolicyLockstep = "lockstep" // version and appVersion must be equal; refuse otherwise
	PolicyKeep     = "keep"     // appVersion is not touched
	PolicyFrom     = "from:"    // prefix: appVersion is set to the value after it
)

// Chart is a parsed Chart.yaml with the location of its version fields.
type Chart struct {
	Path       string // the Chart.yaml file
	Name       string
	Version    yamledit.Scalar
	AppVersion *yamledit.Scalar // nil when the chart has no appVersion
	file       *yamledit.File
}

// Options say what to change. Version and AppVersion, when set, win over
// Bump and AppVersionPolicy (but a lockstep chart still gets equal values).
type Options struct {
	Bump             string // patch | minor | major | none ("" is none)
	Version          string // explicit new version
	AppVersion       string // explicit new appVersion
	AppVersionPolicy string // auto | lockstep | keep | from:<value> ("" is auto)
}

// Change is the planned edit of one Chart.yaml.
type Change struct {
	Path                         string
	OldVersion, NewVersion       string
	OldAppVersion, NewAppVersion string // both "" when the chart has no appVersion
	Before, After                []byte
}

// Changed reports whether the change alters the file.
func (c Change) Changed() bool { return !bytes.Equal(c.Before, c.After) }

// Read parses dir/Chart.yaml.
func Read(dir string) (*Chart, error) {
	path, data, err := chartfile.ReadChart(dir)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// Parse parses the bytes of a Chart.yaml named path.
func Parse(path string, data []byte) (*Chart, error) {
	f, err := yamledit.Parse(path, data)
	if err != nil {
		return nil, err
	}
	if len(f.Docs) != 1 || len(f.Docs[0].Content) != 1 || f.Docs[0].Content[0].Kind != yaml.MappingNode {
		return nil, failure.Input(fmt.Errorf("%s: a Chart.yaml is one YAML mapping; found %d documents", path, len(f.Docs)))
	}
	c := &Chart{Path: path, file: f}
	// Only top-level keys: dependency `version:` keys are never read or touched.
	if c.Version, err = f.Get("version"); err != nil {
		return nil, fmt.Errorf("%s: chart version: %w", path, err)
	}
	if s, err := f.Get("appVersion"); err == nil {
		c.AppVersion = &s
	} else if !errors.Is(err, yamledit.ErrNotFound) {
		return nil, fmt.Errorf("%s: chart appVersion: %w", path, err)
	}
	if s, err := f.Get("name"); err == nil {
		c.Name = s.Value
	}
	return c, nil
}

// version is a parsed semver with the spelling of its `v` prefix.
type version struct {
	v      *semver.Version
	prefix string
}

func (v version) String() string { return v.prefix + v.v.String() }

// ParseVersion is chartpin's one chart-version rule, shared by bump, guard
// and publish: strict SemVer 2 (X.Y.Z, optional -prerelease and +build) with
// an optional leading v, as Helm accepts; "1.3" or "01.2.3" are refused.
// Errors are Masterminds/semver's: callers name the file and line.
func ParseVersion(s string) (*semver.Version, error) {
	return semver.StrictNewVersion(strings.TrimPrefix(s, "v"))
}

func parseVersion(s string) (version, error) {
	v, err := ParseVersion(s)
	if err != nil {
		return version{}, err
	}
	prefix := ""
	if strings.HasPrefix(s, "v") {
		prefix = "v"
	}
	return version{v: v, prefix: prefix}, nil
}

// field parses a located version field, naming file:line on error.
func (c *Chart) field(name string, s yamledit.Scalar) (version, error) {
	v, err := parseVersion(s.Value)
	if err != nil {
		return version{}, failure.Input(fmt.Errorf("%s:%d: %s %q is not a semantic version (X.Y.Z, optional v prefix): %w", c.Path, s.Line, name, s.Value, err))
	}
	return v, nil
}

func bump(v *semver.Version, kind string) (*semver.Version, error) {
	pre := v.Prerelease() != ""
	var s string
	switch kind {
	case BumpPatch:
		if pre {
			s = fmt.Sprintf("%d.%d.%d", v.Major(), v.Minor(), v.Patch())
		} else {
			s = fmt.Sprintf("%d.%d.%d", v.Major(), v.Minor(), v.Patch()+1)
		}
	case BumpMinor:
		if pre && v.Patch() == 0 {
			s = fmt.Sprintf("%d.%d.0", v.Major(), v.Minor())
		} else {
			s = fmt.Sprintf("%d.%d.0", v.Major(), v.Minor()+1)
		}
	case BumpMajor:
		if pre && v.Patch() == 0 && v.Minor() == 0 {
			s = fmt.Sprintf("%d.0.0", v.Major())
		} else {
			s = fmt.Sprintf("%d.0.0", v.Major()+1)
		}
	default:
		return nil, failure.Input(fmt.Errorf("unknown bump %q; want one of %s", kind, strings.Join(BumpKinds, ", ")))
	}
	return semver.StrictNewVersion(s)
}

// withPrefix spells v with the `v` prefix convention of like.
func withPrefix(v version, like string) string {
	if strings.HasPrefix(like, "v") {
		return "v" + v.v.String()
	}
	return v.v.String()
}

// Plan computes the new version and appVersion and the edited bytes; it
// writes nothing. Nothing changes unless a bump or an explicit value asks for
// it; an explicit value equal to the current one is a no-op.
func Plan(c *Chart, opts Options) (Change, error) {
	ch := Change{Path: c.Path, OldVersion: c.Version.Value, NewVersion: c.Version.Value, Before: c.file.Data, After: c.file.Data}
	if c.AppVersion != nil {
		ch.OldAppVersion, ch.NewAppVersion = c.AppVersion.Value, c.AppVersion.Value
	}
	cur, err := c.field("version", c.Version)
	if err != nil {
		return ch, err
	}
	policy, from, err := c.policy(opts)
	if err != nil {
		return ch, err
	}
	next, err := c.nextVersion(cur, policy, opts)
	if err != nil {
		return ch, err
	}
	if !next.v.Equal(cur.v) || next.prefix != cur.prefix {
		ch.NewVersion = next.String()
	}
	if c.AppVersion != nil {
		if ch.NewAppVersion, err = c.nextAppVersion(next, policy, from, opts); err != nil {
			return ch, err
		}
	}
	if ch.NewAppVersion != ch.OldAppVersion && ch.NewVersion == ch.OldVersion {
		return ch, failure.Input(failure.Optionf("%s:%d: appVersion moves from %s to %s but version stays %s; a changed chart needs a new version: pass a bump or {{Version}}", c.Path, c.AppVersion.Line, ch.OldAppVersion, ch.NewAppVersion, ch.OldVersion))
	}
	return c.edit(ch)
}

// policy is the appVersion policy opts ask for, with auto settled by the
// chart (lockstep when version equals appVersion today, else keep), and
// the value of a from: policy.
func (c *Chart) policy(opts Options) (policy, from string, err error) {
	policy = opts.AppVersionPolicy
	switch {
	case policy == "":
		policy = PolicyAuto
	case strings.HasPrefix(policy, PolicyFrom):
		from = strings.TrimPrefix(policy, PolicyFrom)
		policy = PolicyFrom
		if from == "" {
			return "", "", failure.Input(fmt.Errorf("%s: appVersion policy %q has no value after from:", c.Path, opts.AppVersionPolicy))
		}
	case policy == PolicyAuto || policy == PolicyLockstep || policy == PolicyKeep:
	default:
		return "", "", failure.Input(fmt.Errorf("%s: unknown appVersion policy %q; want auto, lockstep, keep or from:<value>", c.Path, policy))
	}
	if policy == PolicyAuto {
		policy = PolicyKeep
		if c.AppVersion != nil && strings.TrimPrefix(c.AppVersion.Value, "v") == strings.TrimPrefix(c.Version.Value, "v") {
			policy = PolicyLockstep
		}
	}
	if c.AppVersion == nil && (policy == PolicyLockstep || policy == PolicyFrom || opts.AppVersion != "") {
		return "", "", failure.Input(fmt.Errorf("%s: the chart has no appVersion to set (policy %s); add an appVersion line or use keep", c.Path, policy))
	}
	return policy, from, nil
}

// nextVersion is the new version: explicit, bumped, or (lockstep) taken
// from an explicit appVersion; never lower than cur.
func (c *Chart) nextVersion(cur version, policy string, opts Options) (version, error) {
	explicit := opts.Version
	if explicit == "" && policy == PolicyLockstep && opts.AppVersion != "" {
		explicit = opts.AppVersion
	}
	switch {
	case explicit != "":
		v, err := parseVersion(explicit)
		if err != nil {
			return cur, failure.Input(fmt.Errorf("%s: new version %q is not a semantic version (X.Y.Z, optional v prefix): %w", c.Path, explicit, err))
		}
		if v.v.LessThan(cur.v) {
			return cur, failure.Input(fmt.Errorf("%s:%d: new version %s is lower than the current %s; chart versions only move forward", c.Path, c.Version.Line, explicit, c.Version.Value))
		}
		if v.v.Equal(cur.v) {
			return cur, nil // same version: keep its spelling
		}
		return version{v: v.v, prefix: cur.prefix}, nil
	case opts.Bump != "" && opts.Bump != BumpNone:
		v, err := bump(cur.v, opts.Bump)
		if err != nil {
			return cur, fmt.Errorf("%s: %w", c.Path, err)
		}
		return version{v: v, prefix: cur.prefix}, nil
	}
	return cur, nil
}

// nextAppVersion is the new appVersion of a chart that has one, by policy:
// lockstep follows next, an explicit value wins otherwise, from: sets it.
func (c *Chart) nextAppVersion(next version, policy, from string, opts Options) (string, error) {
	old := c.AppVersion.Value
	switch {
	case policy == PolicyLockstep:
		if opts.AppVersion == "" && opts.Version == "" && strings.TrimPrefix(old, "v") != strings.TrimPrefix(c.Version.Value, "v") {
			return old, failure.Input(failure.Optionf("%s:%d: lockstep chart has version %s but appVersion %s; say which wins with {{Version}} or {{AppVersion}}", c.Path, c.AppVersion.Line, c.Version.Value, old))
		}
		if opts.AppVersion != "" {
			av, err := parseVersion(opts.AppVersion)
			if err != nil {
				return old, failure.Input(fmt.Errorf("%s: new appVersion %q of a lockstep chart is not a semantic version: %w", c.Path, opts.AppVersion, err))
			}
			if !av.v.Equal(next.v) {
				return old, failure.Input(fmt.Errorf("%s: lockstep chart: version %s and appVersion %s differ; give one of them, or the same value", c.Path, next, opts.AppVersion))
			}
		}
		if _, err := c.field("appVersion", *c.AppVersion); err != nil && opts.AppVersion == "" && opts.Version == "" {
			return old, err
		}
		switch {
		case opts.AppVersion != "":
			return opts.AppVersion, nil // spelled as given
		case strings.TrimPrefix(old, "v") != next.v.String():
			return withPrefix(next, old), nil
		}
	case opts.AppVersion != "":
		return opts.AppVersion, nil
	case policy == PolicyFrom:
		v := strings.TrimPrefix(from, "v")
		if v != strings.TrimPrefix(old, "v") {
			if strings.HasPrefix(old, "v") {
				v = "v" + v
			}
			return v, nil
		}
	}
	return old, nil
}

// edit splices the new version and appVersion into the bytes of Chart.yaml.
func (c *Chart) edit(ch Change) (Change, error) {
	var edits []yamledit.Edit
	if ch.NewVersion != ch.OldVersion {
		edits = append(edits, yamledit.Edit{Node: c.Version.Node, Value: ch.NewVersion})
	}
	if ch.NewAppVersion != ch.OldAppVersion {
		edits = append(edits, yamledit.Edit{Node: c.AppVersion.Node, Value: ch.NewAppVersion})
	}
	if len(edits) == 0 {
		return ch, nil
	}
	after, err := c.file.Apply(edits...)
	if err != nil {
		return ch, fmt.Errorf("%s: %w", c.Path, err)
	}
	ch.After = after
	return ch, nil
}

// Write writes a planned change atomically, keeping the file mode. It
// refuses if the file changed on disk since it was read; an unchanged plan
// writes nothing.
func Write(ch Change) error {
	if !ch.Changed() {
		return nil
	}
	return chartfile.Replace(ch.Path, ch.Before, ch.After)
}
