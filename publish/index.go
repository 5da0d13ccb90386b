package publish

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/repo"
	"sigs.k8s.io/yaml"

	"github.com/chartpin/chartpin/gitops"
	"github.com/chartpin/chartpin/internal/atomicfile"
	"github.com/chartpin/chartpin/internal/failure"
)

// store is where a Helm repository lives: a directory, or a git branch.
type store interface {
	read(name string) ([]byte, error) // wraps fs.ErrNotExist when absent
	write(name string, data []byte) error
	join(elem ...string) string
	where(dir string) string
}

type dirStore struct{}

// newDirStore is a seam for tests that need a faulty disk.
var newDirStore = func() store { return dirStore{} }

func (dirStore) read(name string) ([]byte, error) { return os.ReadFile(name) }
func (dirStore) write(name string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(name), err)
	}
	return atomicfile.WriteFile(name, data, 0o644)
}
func (dirStore) join(elem ...string) string { return filepath.Join(elem...) }
func (dirStore) where(dir string) string    { return dir }

// gitStore reads a branch at tip and stages writes for one commit.
type gitStore struct {
	repo   *gitops.Repo
	branch gitops.Branch
	staged map[string][]byte
}

// openStore is where the index lives: the --pages-branch tip as fetched
// now (gs, to commit on), or the local directory.
func openStore(ctx context.Context, o Options) (st store, gs *gitStore, err error) {
	if o.PagesBranch == "" {
		return newDirStore(), nil, nil
	}
	b, err := o.Repo.Fetch(ctx, o.PagesBranch)
	if err != nil {
		return nil, nil, err
	}
	gs = &gitStore{repo: o.Repo, branch: b, staged: map[string][]byte{}}
	return gs, gs, nil
}

// push commits the staged files on top of the branch tip it read and
// pushes with a lease on that tip.
func (g *gitStore) push(ctx context.Context, branch, message string) (gitops.Commit, error) {
	c, err := g.repo.Commit(ctx, gitops.CommitRequest{Branch: branch, Parent: g.branch.Tip, Files: g.staged, Message: message})
	if err != nil {
		return c, err
	}
	beforePagesPush()
	return c, g.repo.Push(ctx, branch, c.Hash, g.branch)
}

func (g *gitStore) read(name string) ([]byte, error) {
	if b, ok := g.staged[name]; ok {
		return b, nil
	}
	if !g.branch.Exists {
		return nil, fmt.Errorf("%s on new branch %s: %w", name, g.branch.Name, fs.ErrNotExist)
	}
	return g.repo.ReadFile(g.branch.Tip, name)
}
func (g *gitStore) write(name string, data []byte) error { g.staged[name] = data; return nil }
func (g *gitStore) join(elem ...string) string {
	return strings.TrimPrefix(path.Clean(path.Join(elem...)), "./")
}
func (g *gitStore) where(dir string) string { return g.branch.Name + ":" + g.join(dir) }

const indexName = "index.yaml"

// pagesAttempts bounds re-merges when gh-pages moves under a publish: the
// per-chart concurrency groups do not serialise two charts sharing one
// gh-pages branch, and a re-fetched merge is as correct as the first.
const pagesAttempts = 3

// beforePagesPush is a seam for tests that move gh-pages under a publish.
var beforePagesPush = func() {}

// publishIndex adds the package to the stable or prerelease index.
func publishIndex(ctx context.Context, md *chart.Metadata, res *Result, o Options) (*IndexResult, error) {
	for attempt := 1; ; attempt++ {
		out, err := publishIndexOnce(ctx, md, res, o)
		if o.PagesBranch == "" || !errors.Is(err, gitops.ErrMoved) || attempt == pagesAttempts {
			return out, err
		}
		o.Logger.Info("gh-pages moved during the publish; merging again", "branch", o.PagesBranch, "attempt", attempt+1)
	}
}

func publishIndexOnce(ctx context.Context, md *chart.Metadata, res *Result, o Options) (*IndexResult, error) {
	st, gs, err := openStore(ctx, o)
	if err != nil {
		return nil, err
	}
	t := targetIndex(st, res, o)
	out := &IndexResult{Location: st.where(t.dir)}
	idx, err := t.load(res, o.Logger)
	if err != nil {
		return nil, err
	}
	// Never overwrite: an entry with this version, or a tarball by this name.
	if unchanged, err := t.published(idx, res); err != nil || unchanged {
		if err != nil {
			return nil, err
		}
		out.Action = Unchanged
		out.Entries = countEntries(idx)
		return out, nil
	}
	if err := t.writePackage(res); err != nil {
		return nil, err
	}
	data, err := withEntry(idx, md, res, t.base, o.Now().UTC())
	if err != nil {
		return nil, err
	}
	// Check the new index before it is live: a refused index is never
	// written (the tarball it would point at is, and is harmless alone).
	check, err := checkIndexData(st, t.dir, data, t.stable, t.roots)
	if err != nil {
		return nil, fmt.Errorf("refusing to add %s %s, the index was not written: %w", res.Name, res.Version, err)
	}
	if err := requireEntry(st.where(t.dir), data, res); err != nil {
		return nil, err
	}
	if err := st.write(t.idxPath, data); err != nil {
		return nil, err
	}
	out.Action = Added
	// Re-read what was written: the checked bytes must be what is served.
	if got, err := st.read(t.idxPath); err != nil || !bytes.Equal(got, data) {
		if _, cerr := t.check(st); cerr != nil {
			err = cerr
		}
		return out, fmt.Errorf("%w: after adding %s %s, %s reads back with other bytes than were checked (%v); restore it from the previous release and re-run",
			failure.ErrFindings, res.Name, res.Version, t.idxPath, err)
	}
	out.Entries, out.Unverified = check.Entries, check.Unverified
	if gs == nil {
		return out, nil
	}
	out.Commit, err = t.push(ctx, gs, o, res)
	return out, err
}

// indexTarget is the index a package is added to: where it lives, the base
// of its tarball URLs, and the URL roots its entries are checked against.
type indexTarget struct {
	st               store
	dir, base        string
	stable           bool
	roots            []urlRoot
	idxPath, tgzPath string
}

func targetIndex(st store, res *Result, o Options) indexTarget {
	stableDir := o.IndexDir
	if o.PagesBranch != "" {
		stableDir = "."
	}
	// Each index's URLs are its own base's; a prerelease index also maps the
	// stable base onto the stable root, so a URL that points there (as
	// chartpin wrote before it derived the prerelease base) is checked and
	// found missing rather than waved through as hosted elsewhere.
	t := indexTarget{st: st, dir: stableDir, base: o.BaseURL, stable: !res.Prerelease}
	t.roots = []urlRoot{{t.base, t.dir}}
	if res.Prerelease {
		t.dir, t.base = o.PrereleaseIndex, o.PrereleaseBaseURL
		t.roots = []urlRoot{{t.base, t.dir}, {o.BaseURL, stableDir}}
	}
	t.idxPath, t.tgzPath = st.join(t.dir, indexName), st.join(t.dir, res.Filename)
	return t
}

// check checks the index as st holds it.
func (t indexTarget) check(st store) (CheckReport, error) {
	return checkIndex(st, t.dir, t.stable, t.roots)
}

// load reads the index, or starts an empty one where there is none; an
// index that is already wrong is not extended.
func (t indexTarget) load(res *Result, log *slog.Logger) (*repo.IndexFile, error) {
	existing, err := t.st.read(t.idxPath)
	switch {
	case err == nil:
		if _, err := t.check(t.st); err != nil {
			return nil, fmt.Errorf("refusing to add %s %s: %w", res.Name, res.Version, err)
		}
		idx, err := loadIndex(existing)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", t.st.where(t.dir)+"/"+indexName, err)
		}
		return idx, nil
	case errors.Is(err, fs.ErrNotExist):
		log.Debug("new index", "at", t.st.where(t.dir))
		return repo.NewIndexFile(), nil
	default:
		return nil, fmt.Errorf("reading %s: %w", t.idxPath, err)
	}
}

// published reports a version already in the index with this digest; with
// another digest, or a tarball by this name with other bytes, it is ErrPublished.
func (t indexTarget) published(idx *repo.IndexFile, res *Result) (bool, error) {
	for _, cv := range idx.Entries[res.Name] {
		if cv.Version != res.Version {
			continue
		}
		if cv.Digest == res.Digest {
			return true, nil
		}
		return false, fmt.Errorf("%w: %s %s is in %s with digest %s, this package is %s; publish never overwrites a version, so fleets never get two charts under one name: bump the chart version (chartpin bump) and publish again",
			ErrPublished, res.Name, res.Version, t.st.where(t.dir), short(cv.Digest), short(res.Digest))
	}
	if old, err := t.st.read(t.tgzPath); err == nil && !bytes.Equal(old, res.Package) {
		return false, fmt.Errorf("%w: %s exists in %s with other bytes (sha256 %s) though the index lacks it; remove it by hand if it is debris, or bump the version",
			ErrPublished, res.Filename, t.st.where(t.dir), short(sha256hex(old)))
	}
	return false, nil
}

// writePackage writes the tarball (and its provenance), and reads the
// tarball back before the index points at it.
func (t indexTarget) writePackage(res *Result) error {
	if err := t.st.write(t.tgzPath, res.Package); err != nil {
		return err
	}
	if got, err := t.st.read(t.tgzPath); err != nil || sha256hex(got) != res.Digest {
		return fmt.Errorf("%w: %s reads back with other bytes than were written (%v); the index was not updated: check the disk and re-run",
			failure.ErrFindings, t.tgzPath, err)
	}
	if res.Provenance != nil {
		return t.st.write(t.tgzPath+".prov", res.Provenance)
	}
	return nil
}

// withEntry is idx with res added, created and generated at now, encoded.
func withEntry(idx *repo.IndexFile, md *chart.Metadata, res *Result, base string, now time.Time) ([]byte, error) {
	if err := idx.MustAdd(md, res.Filename, base, res.Digest); err != nil {
		return nil, fmt.Errorf("adding %s %s to the index: %w", res.Name, res.Version, err)
	}
	for _, cv := range idx.Entries[res.Name] {
		if cv.Version == res.Version {
			cv.Created = now
		}
	}
	idx.Generated = now
	idx.SortEntries()
	data, err := yaml.Marshal(idx)
	if err != nil {
		return nil, fmt.Errorf("encoding index: %w", err)
	}
	return data, nil
}

// push commits the staged index and package to the pages branch and checks
// the index again as the pushed commit holds it, not the staging area.
func (t indexTarget) push(ctx context.Context, gs *gitStore, o Options, res *Result) (commit string, err error) {
	c, err := gs.push(ctx, o.PagesBranch, fmt.Sprintf("publish %s %s\n\nsha256 %s", res.Name, res.Version, res.Digest))
	if err != nil {
		return "", err
	}
	commit = c.Hash.String()
	pushed := &gitStore{repo: o.Repo, branch: gitops.Branch{Name: o.PagesBranch, Exists: true, Tip: c.Hash}, staged: map[string][]byte{}}
	if _, err := t.check(pushed); err != nil {
		return commit, fmt.Errorf("after pushing %s: %w", short(commit), err)
	}
	pushedIndex, err := pushed.read(t.idxPath)
	if err != nil {
		return commit, fmt.Errorf("re-reading %s after pushing %s: %w", pushed.where(t.dir), short(commit), err)
	}
	return commit, requireEntry(pushed.where(t.dir), pushedIndex, res)
}

// requireEntry checks the index bytes list res with its digest exactly once.
func requireEntry(where string, data []byte, res *Result) error {
	var raw rawIndex
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return err
	}
	n := 0
	for _, e := range raw.Entries[res.Name] {
		if e != nil && e.Version == res.Version && e.Digest == res.Digest {
			n++
		}
	}
	if n != 1 {
		return fmt.Errorf("%w: %s lists %s %s with digest %s %d times, want once",
			failure.ErrFindings, where, res.Name, res.Version, short(res.Digest), n)
	}
	return nil
}

// loadIndex parses index bytes with Helm's loader (which wants a file).
func loadIndex(data []byte) (*repo.IndexFile, error) {
	f, err := os.CreateTemp("", "chartpin-index-*.yaml")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	return repo.LoadIndexFile(f.Name())
}

func countEntries(idx *repo.IndexFile) int {
	n := 0
	for _, cvs := range idx.Entries {
		n += len(cvs)
	}
	return n
}

type rawIndex struct {
	APIVersion string                 `json:"apiVersion"`
	Entries    map[string][]*rawEntry `json:"entries"`
}

type rawEntry struct {
	Name    string   `json:"name"`
	Version string   `json:"version"`
	Digest  string   `json:"digest"`
	URLs    []string `json:"urls"`
}

// CheckReport summarises a good index.
type CheckReport struct {
	// Entries counts chart versions; Unverified those whose tarball is
	// hosted elsewhere (their digest cannot be checked here).
	Entries, Unverified int
}

// CheckIndex re-reads dir/index.yaml and checks it: no prerelease in a
// stable index, no duplicate versions, every entry Helm can read, and every
// local tarball matching its recorded digest. Problems come back as one error
// wrapping failure.ErrFindings.
func CheckIndex(dir string, stable bool, baseURL string) (CheckReport, error) {
	return checkIndex(dirStore{}, dir, stable, []urlRoot{{baseURL, dir}})
}

// urlRoot says that tarball URLs under base are files under dir.
type urlRoot struct{ base, dir string }

// local maps an absolute URL onto the store by the longest matching base.
func local(st store, roots []urlRoot, u string) (string, bool) {
	dir, rest, n := "", "", 0
	for _, r := range roots {
		b := strings.TrimRight(r.base, "/") + "/"
		if r.base != "" && len(b) > n && strings.HasPrefix(u, b) {
			dir, rest, n = r.dir, strings.TrimPrefix(u, b), len(b)
		}
	}
	if n == 0 {
		return "", false
	}
	if p, err := url.PathUnescape(rest); err == nil {
		rest = p
	}
	return st.join(dir, rest), true
}

func checkIndex(st store, dir string, stable bool, roots []urlRoot) (CheckReport, error) {
	data, err := st.read(st.join(dir, indexName))
	if err != nil {
		return CheckReport{}, fmt.Errorf("re-reading %s/%s: %w", st.where(dir), indexName, err)
	}
	return checkIndexData(st, dir, data, stable, roots)
}

// checkIndexData checks index bytes meant for dir/index.yaml; absolute
// tarball URLs resolve through roots, relative ones against dir.
func checkIndexData(st store, dir string, data []byte, stable bool, roots []urlRoot) (CheckReport, error) {
	var rep CheckReport
	where := st.where(dir)
	var raw rawIndex
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return rep, fmt.Errorf("%w: %s/%s does not parse: %v", failure.ErrFindings, where, indexName, err)
	}
	var findings []string
	add := func(format string, args ...any) { findings = append(findings, fmt.Sprintf(format, args...)) }
	if raw.APIVersion == "" {
		add("no apiVersion")
	}
	names := make([]string, 0, len(raw.Entries))
	for name := range raw.Entries {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		seen := map[string]string{}
		for i, e := range raw.Entries[name] {
			if e == nil {
				add("%s[%d]: empty entry", name, i)
				continue
			}
			rep.Entries++
			if e.Name != name {
				add("%s %s: entry is named %q", name, e.Version, e.Name)
			}
			v, err := semver.NewVersion(e.Version)
			if err != nil {
				add("%s %q: not a semantic version", name, e.Version)
				continue
			}
			if prev, dup := seen[v.String()]; dup {
				add("%s %s: duplicate version (also %s)", name, e.Version, prev)
			}
			seen[v.String()] = e.Version
			if stable && v.Prerelease() != "" {
				add("%s %s: prerelease in the stable index, where every consumer would take it as a release; move it to the prerelease index", name, e.Version)
			}
			if len(e.URLs) == 0 {
				add("%s %s: no urls", name, e.Version)
				continue
			}
			finding, verified := checkTarball(st, dir, roots, name, e)
			if !verified {
				rep.Unverified++
			} else if finding != "" {
				findings = append(findings, finding)
			}
		}
	}
	// Entries Helm's loader would silently drop are findings too: they are
	// published versions a consumer cannot see.
	if idx, err := loadIndex(data); err != nil {
		add("Helm cannot load the index: %v", err)
	} else if n := countEntries(idx); n < rep.Entries {
		add("Helm can read only %d of %d entries; fix the invalid ones", n, rep.Entries)
	}
	if len(findings) > 0 {
		return rep, fmt.Errorf("%w: %s/%s has %d problem(s):\n  - %s", failure.ErrFindings, where, indexName, len(findings), strings.Join(findings, "\n  - "))
	}
	return rep, nil
}

// checkTarball checks the tarball e's first URL names, when it lies in st:
// it must exist and hold e's digest. verified is false for a URL served
// elsewhere; finding is "" when the tarball is right.
func checkTarball(st store, dir string, roots []urlRoot, name string, e *rawEntry) (finding string, verified bool) {
	u := e.URLs[0]
	file, ok := st.join(dir, u), true
	if strings.Contains(u, "://") {
		file, ok = local(st, roots, u)
	}
	if !ok {
		return "", false
	}
	tgz, err := st.read(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		base := path.Base(filepath.ToSlash(file))
		hint := ""
		if own, err := st.read(st.join(dir, base)); err == nil && sha256hex(own) == strings.TrimPrefix(e.Digest, "sha256:") {
			// The tarball is beside this index; the URL points elsewhere.
			hint = fmt.Sprintf("; it is in %s: point the url there", st.where(dir))
		}
		return fmt.Sprintf("%s %s: tarball %s is missing (url %s looked for %s)%s", name, e.Version, base, u, st.where(file), hint), true
	case err != nil:
		return fmt.Sprintf("%s %s: reading %s: %v", name, e.Version, file, err), true
	case e.Digest == "":
		return fmt.Sprintf("%s %s: no digest recorded", name, e.Version), true
	case sha256hex(tgz) != strings.TrimPrefix(e.Digest, "sha256:"):
		return fmt.Sprintf("%s %s: digest mismatch: index says %s, %s has %s", name, e.Version, short(e.Digest), st.where(file), short(sha256hex(tgz))), true
	}
	return "", true
}

func short(digest string) string {
	d := strings.TrimPrefix(digest, "sha256:")
	if len(d) > 12 {
		return d[:12]
	}
	return d
}
