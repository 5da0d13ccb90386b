package pin

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/chartpin/chartpin/chartbump"
)

// bumpOptions are the chartbump options of a chart; from is the tag an
// appVersion from:<image path> policy takes (ignored otherwise).
func (c *chart) bumpOptions(opts Options, from string) chartbump.Options {
	o := chartbump.Options{Bump: opts.Bump, Version: opts.Version, AppVersion: opts.AppVersion}
	if o.Bump == "" && c.cfg != nil {
		o.Bump = c.cfg.Bump
	}
	if o.Bump == "" {
		o.Bump = chartbump.BumpPatch
	}
	if c.cfg != nil {
		o.AppVersionPolicy = c.cfg.AppVersion
	}
	if strings.HasPrefix(o.AppVersionPolicy, chartbump.PolicyFrom) {
		o.AppVersionPolicy = chartbump.PolicyFrom + from
	}
	return o
}

// checkBump runs the bump on today's Chart.yaml before any registry request,
// so a non-semver version or a lockstep mismatch fails fast with nothing written.
func (c *chart) checkBump(opts Options) error {
	o := c.bumpOptions(opts, "")
	if strings.HasPrefix(o.AppVersionPolicy, chartbump.PolicyFrom) {
		o.AppVersionPolicy = chartbump.PolicyKeep
	}
	meta, err := chartbump.Parse(c.files.ChartPath, c.files.Chart)
	if err != nil {
		return err
	}
	_, err = chartbump.Plan(meta, o)
	return err
}

// appVersionFrom is the tag of the image a from:<image path> policy names.
func (c *chart) appVersionFrom() (string, error) {
	if c.cfg == nil {
		return "", nil
	}
	path, ok := strings.CutPrefix(c.cfg.AppVersion, chartbump.PolicyFrom)
	if !ok {
		return "", nil
	}
	for _, s := range c.pins {
		if s.At == path && s.Follows == "" && s.useTag != "" {
			return s.useTag, nil
		}
	}
	return "", fmt.Errorf("%s: appVersion: from:%s: no resolved image with a tag at that path", c.cfg.Dir, path)
}

// bump moves version and appVersion in Chart.yaml because files changed.
// Chart.yaml may already carry rewritten copies; the bump edits those bytes.
func (c *chart) bump(opts Options, files []FileChange) ([]FileChange, error) {
	from, err := c.appVersionFrom()
	if err != nil {
		return nil, err
	}
	idx := -1
	current := c.files.Chart
	for i, f := range files {
		if f.Path == c.files.ChartPath {
			idx, current = i, f.After
		}
	}
	meta, err := chartbump.Parse(c.files.ChartPath, current)
	if err != nil {
		return nil, err
	}
	ch, err := chartbump.Plan(meta, c.bumpOptions(opts, from))
	if err != nil {
		return nil, err
	}
	c.res.NewVersion, c.res.NewAppVersion = ch.NewVersion, ch.NewAppVersion
	if bytes.Equal(ch.After, c.files.Chart) {
		return files, nil
	}
	if idx >= 0 {
		files[idx].After = ch.After
		return files, nil
	}
	return append(files, FileChange{Path: c.files.ChartPath, Before: c.files.Chart, After: ch.After}), nil
}
