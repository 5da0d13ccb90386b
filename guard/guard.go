// Package guard refuses chart changes without a version bump (a
// template change shipped under an old version reached nobody). For every
// chart whose packaged content differs between a base revision and the
// working tree, Chart.yaml's version must have increased by semver, appVersion
// must have moved in lockstep where the chart is configured so,
// and, when a repository is named, the new version must not be published yet.
// It reads git with go-git and never writes. Any error reading git or a file
// fails the check; nothing is ever read as "unchanged" by default.
package guard

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/chartpin/chartpin/config"
	"github.com/chartpin/chartpin/deprecation"
	"github.com/chartpin/chartpin/internal/chartfile"
	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/resolver"
)

// State says what happened to a chart between base and the working tree.
type State string

// Chart states.
const (
	Unchanged State = "unchanged"
	Changed   State = "changed"
	Added     State = "added"
	Removed   State = "removed"
)

// Result is the outcome of one guard run.
type Result struct {
	// Base is the revision as given; BaseCommit the commit it named.
	Base       string `json:"base"`
	BaseCommit string `json:"base_commit"`
	// Head is the commit checked out; Uncommitted lists the charts whose
	// working-tree content differs from it (those changes were compared too).
	Head        string   `json:"head"`
	Uncommitted []string `json:"uncommitted,omitempty"`
	// Compared says in one line what was compared with what.
	Compared string  `json:"compared"`
	Charts   []Chart `json:"charts"`
}

// compared says in one line what was compared with what.
func (r *Result) compared() string {
	s := fmt.Sprintf("compared %s (%s) with the working tree at HEAD %s", r.Base, short(r.BaseCommit), short(r.Head))
	if len(r.Uncommitted) > 0 {
		return s + ", uncommitted changes included (" + strings.Join(r.Uncommitted, ", ") + ")"
	}
	return s + ", no uncommitted changes in the charts checked"
}

// Findings returns every finding of every chart.
func (r *Result) Findings() []Finding {
	var out []Finding
	for _, c := range r.Charts {
		out = append(out, c.Findings...)
	}
	return out
}

// Deprecated returns the recalled versions unchanged charts still name.
func (r *Result) Deprecated() []deprecation.Reference {
	var out []deprecation.Reference
	for _, c := range r.Charts {
		out = append(out, c.Deprecated...)
	}
	return out
}

// Err is nil without findings, else an error wrapping failure.ErrFindings.
func (r *Result) Err() error {
	f := r.Findings()
	if len(f) == 0 {
		return nil
	}
	var names []string
	for _, c := range r.Charts {
		if len(c.Findings) > 0 {
			names = append(names, quote(c.Dir))
		}
	}
	return fmt.Errorf("guard: %w: %d in %s", failure.ErrFindings, len(f), strings.Join(names, ", "))
}

// Chart is the verdict on one chart.
type Chart struct {
	// Dir is the chart directory relative to the repository root ("." for the root).
	Dir   string `json:"dir"`
	Name  string `json:"name,omitempty"`
	State State  `json:"state"`
	// Files are the packaged files that differ, relative to Dir.
	Files         []string  `json:"files,omitempty"`
	OldVersion    string    `json:"old_version,omitempty"`
	NewVersion    string    `json:"new_version,omitempty"`
	OldAppVersion string    `json:"old_app_version,omitempty"`
	NewAppVersion string    `json:"new_app_version,omitempty"`
	Lockstep      bool      `json:"lockstep,omitempty"`
	Findings      []Finding `json:"findings,omitempty"`
	// Deprecated lists recalled versions an unchanged chart still names:
	// reported, not refused, since this change did not bring them.
	Deprecated []deprecation.Reference `json:"deprecated,omitempty"`
}

// Finding is one reason to refuse the change.
type Finding struct {
	// File is relative to the repository root; Line 1-based (0 when unknown).
	File    string `json:"file"`
	Line    int    `json:"line,omitempty"`
	Chart   string `json:"chart"`
	Message string `json:"message"`
}

// Options says what Check compares and where published versions are read.
type Options struct {
	// Base is the revision the working tree is compared with (origin/main).
	Base string
	// Dirs, when set, are the chart directories to check (relative to the
	// working directory or absolute) instead of every Chart.yaml in the
	// repository; with a Config each must be configured (config.Select).
	Dirs []string
	// Config adds the configured charts to those found by walking, with their appVersion policy.
	Config *config.File
	// Index refuses a version already in this index.yaml (http(s) URL or file).
	Index string
	// OCI refuses a version already pushed under this oci://HOST/PATH; tags
	// are listed through Resolver, deprecation markers read through
	// Artifacts (nil offline).
	OCI       string
	Resolver  resolver.Interface
	Artifacts resolver.Artifacts
	// HTTPClient fetches an Index URL (default http.DefaultClient).
	HTTPClient *http.Client
	// Timeout bounds each network step (default 30s).
	Timeout time.Duration
	// Logger logs decisions (silent by default).
	Logger *slog.Logger
}

// Validate checks the options by themselves, before git or the network is
// touched: a base revision, and an index that can be fetched as written.
func (o Options) Validate() error {
	if o.Base == "" {
		return failure.Input(failure.Optionf("guard: no base revision; pass {{Base}} REF, e.g. {{Base}} origin/main"))
	}
	return o.published().Validate()
}

// published is the chart repository named by Index or OCI.
func (o Options) published() *deprecation.Repository {
	return &deprecation.Repository{
		Index: o.Index, OCI: o.OCI, Client: o.HTTPClient, Resolver: o.Resolver, Artifacts: o.Artifacts, Timeout: o.Timeout,
	}
}

// Check compares every chart in the repository containing dir (or those
// selected by options) between o.Base and the working tree. Findings are in
// the Result (see Result.Err); a returned error means the check could not run.
func Check(ctx context.Context, dir string, o Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o.HTTPClient = cmp.Or(o.HTTPClient, http.DefaultClient)
	o.Timeout = cmp.Or(o.Timeout, 30*time.Second)
	o.Logger = cmp.Or(o.Logger, slog.New(slog.DiscardHandler))
	base := o.Base
	repo, err := git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
	if err != nil {
		return nil, failure.Input(fmt.Errorf("opening the git repository at %s: %w; run guard inside a checkout", dir, err))
	}
	wt, err := repo.Worktree()
	if err != nil {
		return nil, failure.Input(fmt.Errorf("opening the work tree at %s: %w; guard needs a non-bare checkout", dir, err))
	}
	g := &guard{o: o, base: base, repo: repo, root: wt.Filesystem.Root(), published: o.published()}
	res := &Result{Base: base}

	baseHash, err := repo.ResolveRevision(plumbing.Revision(base))
	if err != nil {
		return nil, failure.Input(failure.Optionf("resolving {{Base}} %s: %w; fetch it first (git fetch origin main, or actions/checkout with fetch-depth: 0)", base, err))
	}
	baseTree, err := g.commitTree(*baseHash, "{{Base}} %s", base)
	if err != nil {
		return nil, err
	}
	res.BaseCommit = baseHash.String()
	head, err := repo.Head()
	if err != nil {
		return nil, fmt.Errorf("reading HEAD: %w; guard needs at least one commit", err)
	}
	headTree, err := g.commitTree(head.Hash(), "HEAD")
	if err != nil {
		return nil, err
	}
	res.Head = head.Hash().String()

	dirs, err := g.chartDirs(baseTree)
	if err != nil {
		return nil, err
	}
	for _, d := range dirs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c, dirty, err := g.chart(ctx, d, baseTree, headTree)
		if err != nil {
			return nil, err
		}
		if dirty {
			res.Uncommitted = append(res.Uncommitted, d)
		}
		g.o.Logger.Debug("guard", "chart", d, "state", c.State, "files", len(c.Files), "findings", len(c.Findings), "uncommitted", dirty)
		res.Charts = append(res.Charts, c)
	}
	res.Compared = res.compared()
	return res, nil
}

type guard struct {
	o    Options
	base string
	repo *git.Repository
	root string
	// published is the chart repository named by --index or --oci.
	published *deprecation.Repository
}

func (g *guard) commitTree(h plumbing.Hash, what string, args ...any) (*object.Tree, error) {
	// what is a format, so that an option it names stays an option field.
	errorf := func(format string, err error) error {
		return failure.Optionf(format, append(append([]any{short(h.String())}, args...), err)...)
	}
	c, err := g.repo.CommitObject(h)
	if err != nil {
		return nil, errorf("reading commit %s ("+what+"): %w; a shallow clone may lack it, fetch with more depth", err)
	}
	t, err := c.Tree()
	if err != nil {
		return nil, errorf("reading the tree of %s ("+what+"): %w", err)
	}
	return t, nil
}

// chart compares one chart directory (repository-relative) and judges it.
func (g *guard) chart(ctx context.Context, dir string, baseTree, headTree *object.Tree) (Chart, bool, error) {
	c := Chart{Dir: dir}
	before, err := g.treeFiles(baseTree, dir)
	if err != nil {
		return c, false, failure.Optionf("reading %s at {{Base}}: %w", dir, err)
	}
	atHead, err := g.treeFiles(headTree, dir)
	if err != nil {
		return c, false, fmt.Errorf("reading %s at HEAD: %w", dir, err)
	}
	now, err := diskFiles(filepath.Join(g.root, filepath.FromSlash(dir)))
	if err != nil {
		return c, false, fmt.Errorf("reading %s in the working tree: %w", dir, err)
	}
	dirty := len(diff(atHead, now)) > 0
	chartFile := path.Join(dir, "Chart.yaml")
	switch {
	case before == nil && now == nil:
		return c, false, failure.Input(failure.Optionf("%s: no Chart.yaml at {{Base}} or in the working tree; is it a chart directory?", dir))
	case now == nil:
		c.State = Removed
		meta, err := g.treeMeta(baseTree, chartFile)
		if err != nil {
			return c, dirty, err
		}
		c.Name, c.OldVersion, c.OldAppVersion = meta.name, meta.version.value, meta.appVersion.value
		return c, dirty, nil
	}
	_, data, err := chartfile.ReadChart(filepath.Join(g.root, filepath.FromSlash(dir)))
	if err != nil {
		return c, dirty, err
	}
	meta, err := parseMeta(chartFile, data)
	if err != nil {
		return c, dirty, err
	}
	c.Name, c.NewVersion, c.NewAppVersion = meta.name, meta.version.value, meta.appVersion.value
	add := func(line int, format string, args ...any) {
		c.Findings = append(c.Findings, Finding{File: chartFile, Line: line, Chart: dir, Message: fmt.Sprintf(format, args...)})
	}
	_, verr := parseVersion(meta.version.value)
	if meta.version.value == "" {
		add(1, "%s has no version; set one, e.g. version: 0.1.0", chartFile)
	} else if verr != nil {
		add(meta.version.line, "version %q is not a semantic version: %v; Helm requires one", meta.version.value, verr)
	}
	mode := g.appVersionMode(dir)

	if before == nil {
		c.State = Added
		if mode == "lockstep" && !sameVersion(meta.appVersion.value, meta.version.value) {
			add(meta.appVersion.lineOr(meta.version.line), "appVersion %q is not version %q, and %s is configured appVersion: lockstep; set both to the same value",
				meta.appVersion.value, meta.version.value, dir)
		}
		c.Lockstep = mode == "lockstep"
	} else {
		c.Files = diff(before, now)
		old, err := g.treeMeta(baseTree, chartFile)
		if err != nil {
			return c, dirty, err
		}
		c.OldVersion, c.OldAppVersion = old.version.value, old.appVersion.value
		if len(c.Files) == 0 {
			c.State = Unchanged
			return c, dirty, g.deprecated(ctx, &c, chartFile, data)
		}
		c.State = Changed
		g.changed(&c, meta, old, mode, add)
	}
	if verr == nil && meta.version.value != "" {
		v, err := g.published.Lookup(ctx, meta.name, meta.version.value)
		if err != nil {
			return c, dirty, fmt.Errorf("%s: checking whether %s %s is published: %w", dir, meta.name, meta.version.value, err)
		}
		if v.Published {
			add(meta.version.line, "%s version %s is already published in %s; published versions are never overwritten, bump to a new version", meta.name, meta.version.value, v.Where)
		}
	}
	return c, dirty, g.deprecated(ctx, &c, chartFile, data)
}

// changed adds the findings of a chart whose packaged files differ from
// base: its version must go up (a version that is missing or not SemVer is
// reported already), and appVersion must move with it in lockstep.
func (g *guard) changed(c *Chart, cur, old meta, mode string, add func(line int, format string, args ...any)) {
	newV, verr := parseVersion(cur.version.value)
	oldV, oerr := parseVersion(old.version.value)
	switch {
	case verr != nil || cur.version.value == "":
		// already reported
	case oerr != nil:
		// Base had no usable version: any valid version is an increase.
	case !newV.GreaterThan(oldV):
		verb := "was not increased"
		if newV.LessThan(oldV) {
			verb = "went down"
		}
		add(cur.version.line, "%s changed (%s) but version %s %s (base %s has %s); bump it, e.g. chartpin bump %s patch",
			c.Dir, fileList(c.Files), cur.version.value, verb, g.base, old.version.value, c.Dir)
	}
	lockstep := mode == "lockstep" || (mode == "auto" && old.version.value != "" && sameVersion(old.version.value, old.appVersion.value))
	c.Lockstep = lockstep
	if lockstep && !sameVersion(cur.appVersion.value, cur.version.value) {
		why := "configured appVersion: lockstep"
		if mode == "auto" {
			why = fmt.Sprintf("version and appVersion were equal at base (%s), so appVersion: auto keeps them in lockstep", old.version.value)
		}
		add(cur.appVersion.lineOr(cur.version.line), "appVersion %q did not move with version %q (%s); set appVersion: %q or configure appVersion: keep in chartpin.yaml",
			cur.appVersion.value, cur.version.value, why, cur.version.value)
	}
}

// deprecated reports the recalled versions the chart's Chart.yaml still
// names. A change that ships a recalled dependency is refused; in an
// unchanged chart they are listed, since this change did not bring them.
// The chart's own published version is refused above already.
func (g *guard) deprecated(ctx context.Context, c *Chart, chartFile string, data []byte) error {
	if g.o.Index == "" && g.o.OCI == "" {
		return nil
	}
	refs, err := g.published.Referenced(ctx, chartFile, data)
	if err != nil {
		return fmt.Errorf("%s: looking for deprecated versions: %w", c.Dir, err)
	}
	for _, ref := range refs {
		switch {
		case c.State == Unchanged:
			c.Deprecated = append(c.Deprecated, ref)
		case ref.Dependency:
			c.Findings = append(c.Findings, Finding{File: chartFile, Line: ref.Line, Chart: c.Dir,
				Message: fmt.Sprintf("%s %s depends on %s %s, which is deprecated in %s: depend on a version that is not deprecated", c.Name, c.NewVersion, ref.Chart, ref.Version, ref.Repository)})
		}
	}
	return nil
}

// appVersionMode is the configured appVersion policy of dir ("auto" by default).
func (g *guard) appVersionMode(dir string) string {
	if g.o.Config != nil {
		for _, c := range g.o.Config.Charts {
			if rel, err := g.rel(c.Dir); err == nil && rel == dir && c.AppVersion != "" {
				return c.AppVersion
			}
		}
	}
	return "auto"
}

func fileList(files []string) string {
	const show = 5
	if len(files) <= show {
		return strings.Join(files, ", ")
	}
	return strings.Join(files[:show], ", ") + fmt.Sprintf(" and %d more", len(files)-show)
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// chartDirs lists the charts to check, repository-relative and sorted.
func (g *guard) chartDirs(baseTree *object.Tree) ([]string, error) {
	var dirs []string
	switch {
	case len(g.o.Dirs) > 0:
		// Named charts are selected as every command selects them.
		sel, err := config.Select(g.o.Config, g.o.Dirs)
		if err != nil {
			return nil, err
		}
		for _, t := range sel {
			rel, err := g.rel(t.Dir)
			if err != nil {
				return nil, err
			}
			dirs = append(dirs, rel)
		}
	default:
		// Walk now and at base, so added and removed charts are seen; a
		// configured chart is checked even where the walk would skip it.
		seen := map[string]bool{}
		now, err := walkDisk(g.root)
		if err != nil {
			return nil, err
		}
		then, err := walkTree(g.repo, baseTree)
		if err != nil {
			return nil, err
		}
		if g.o.Config != nil {
			for _, c := range g.o.Config.Charts {
				rel, err := g.rel(c.Dir)
				if err != nil {
					return nil, err
				}
				now = append(now, rel)
			}
		}
		for _, d := range append(now, then...) {
			if !seen[d] {
				seen[d] = true
				dirs = append(dirs, d)
			}
		}
		if len(dirs) == 0 {
			return nil, failure.Input(fmt.Errorf("no Chart.yaml anywhere in %s, now or at base; name the chart directories", g.root))
		}
	}
	sort.Strings(dirs)
	return dirs, nil
}

// rel makes a chart directory repository-relative (slash-separated, "." for the root).
func (g *guard) rel(d string) (string, error) {
	abs, err := filepath.Abs(d)
	if err != nil {
		return "", failure.Input(fmt.Errorf("chart dir %s: %w", d, err))
	}
	root, err := filepath.EvalSymlinks(g.root)
	if err != nil {
		return "", fmt.Errorf("reading the repository root %s: %w", g.root, err)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	rel, err := filepath.Rel(root, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", failure.Input(fmt.Errorf("chart dir %s is outside the repository %s", d, g.root))
	}
	return filepath.ToSlash(rel), nil
}
