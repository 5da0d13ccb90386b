package publish

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

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
	stable := !res.Prerelease
	stableDir := o.IndexDir
	if o.PagesBranch != "" {
		stableDir = "."
	}
	// Each index's URLs are its own base's; a prerelease index also maps the
	// stable base onto the stable root, so a URL that points there (as
	// chartpin wrote before it derived the prerelease base) is checked and
	// found missing rather than waved through as hosted elsewhere.
	dir, base := stableDir, o.BaseURL
	roots := []urlRoot{{base, dir}}
	if res.Prerelease {
		dir, base = o.PrereleaseIndex, o.PrereleaseBaseURL
		roots = []urlRoot{{base, dir}, {o.BaseURL, stableDir}}
	}
	st, gs, err := openStore(ctx, o)
	if err != nil {
		return nil, err
	}
	out := &IndexResult{Location: st.where(dir)}
	idxPath, tgzPath := st.join(dir, indexName), st.join(dir, res.Filename)

	idx := repo.NewIndexFile()
	existing, err := st.read(idxPath)
	switch {
	case err == nil:
		// Refuse to extend an index that is already wrong.
		if _, err := checkIndex(st, dir, stable, roots); err != nil {
			return nil, fmt.Errorf("refusing to add %s %s: %w", res.Name, res.Version, err)
		}
		if idx, err = loadIndex(existing); err != nil {
			return nil, fmt.Errorf("reading %s: %w", out.Location+"/"+indexName, err)
		}
	case errors.Is(err, fs.ErrNotExist):
		o.Logger.Debug("new index", "at", out.Location)
	default:
		return nil, fmt.Errorf("reading %s: %w", idxPath, err)
	}

	// Never overwrite: an entry with this version, or a tarball by this name.
	for _, cv := range idx.Entries[res.Name] {
		if cv.Version != res.Version {
			continue
		}
		if cv.Digest == res.Digest {
			out.Action = Unchanged
			out.Entries = countEntries(idx)
			return out, nil
		}
		return nil, fmt.Errorf("%w: %s %s is in %s with digest %s, this package is %s; publish never overwrites a version, so fleets never get two charts under one name: bump the chart version (chartpin bump) and publish again",
			ErrPublished, res.Name, res.Version, out.Location, short(cv.Digest), short(res.Digest))
	}
	if old, err := st.read(tgzPath); err == nil && !bytes.Equal(old, res.Package) {
		return nil, fmt.Errorf("%w: %s exists in %s with other bytes (sha256 %s) though the index lacks it; remove it by hand if it is debris, or bump the version",
			ErrPublished, res.Filename, out.Location, short(sha256hex(old)))
	}

	if err := st.write(tgzPath, res.Package); err != nil {
		return nil, err
	}
	// Re-read the tarball before the index points at it.
	if got, err := st.read(tgzPath); err != nil || sha256hex(got) != res.Digest {
		return nil, fmt.Errorf("%w: %s reads back with other bytes than were written (%v); the index was not updated: check the disk and re-run",
			failure.ErrFindings, tgzPath, err)
	}
	if res.Provenance != nil {
		if err := st.write(tgzPath+".prov", res.Provenance); err != nil {
			return nil, err
		}
	}
	if err := idx.MustAdd(md, res.Filename, base, res.Digest); err != nil {
		return nil, fmt.Errorf("adding %s %s to the index: %w", res.Name, res.Version, err)
	}
	now := o.Now().UTC()
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
	// Check the new index before it is live: a refused index is never
	// written (the tarball it would point at is, and is harmless alone).
	check, err := checkIndexData(st, dir, data, stable, roots)
	if err != nil {
		return nil, fmt.Errorf("refusing to add %s %s, the index was not written: %w", res.Name, res.Version, err)
	}
	if err := requireEntry(st.where(dir), data, res); err != nil {
		return nil, err
	}
	if err := st.write(idxPath, data); err != nil {
		return nil, err
	}
	out.Action = Added
	// Re-read what was written: the checked bytes must be what is served.
	if got, err := st.read(idxPath); err != nil || !bytes.Equal(got, data) {
		if _, cerr := checkIndex(st, dir, stable, roots); cerr != nil {
			err = cerr
		}
		return out, fmt.Errorf("%w: after adding %s %s, %s reads back with other bytes than were checked (%v); restore it from the previous release and re-run",
			failure.ErrFindings, res.Name, res.Version, idxPath, err)
	}
	out.Entries, out.Unverified = check.Entries, check.Unverified
	if gs == nil {
		return out, nil
	}

	c, err := gs.push(ctx, o.PagesBranch, fmt.Sprintf("publish %s %s\n\nsha256 %s", res.Name, res.Version, res.Digest))
	if err != nil {
		return out, err
	}
	out.Commit = c.Hash.String()
	// Re-read from the pushed commit, not from our staging area.
	pushed := &gitStore{repo: o.Repo, branch: gitops.Branch{Name: o.PagesBranch, Exists: true, Tip: c.Hash}, staged: map[string][]byte{}}
	if _, err := checkIndex(pushed, dir, stable, roots); err != nil {
		return out, fmt.Errorf("after pushing %s: %w", short(c.Hash.String()), err)
	}
	pushedIndex, err := pushed.read(idxPath)
	if err != nil {
		return out, fmt.Errorf("re-reading %s after pushing %s: %w", pushed.where(dir), short(c.Hash.String()), err)
	}
	return out, requireEntry(pushed.where(dir), pushedIndex, res)
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
			u := e.URLs[0]
			file, ok := st.join(dir, u), true
			if strings.Contains(u, "://") {
				file, ok = local(st, roots, u)
			}
			if !ok {
				rep.Unverified++
				continue
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
				add("%s %s: tarball %s is missing (url %s looked for %s)%s", name, e.Version, base, u, st.where(file), hint)
			case err != nil:
				add("%s %s: reading %s: %v", name, e.Version, file, err)
			case e.Digest == "":
				add("%s %s: no digest recorded", name, e.Version)
			case sha256hex(tgz) != strings.TrimPrefix(e.Digest, "sha256:"):
				add("%s %s: digest mismatch: index says %s, %s has %s", name, e.Version, short(e.Digest), st.where(file), short(sha256hex(tgz)))
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

func short(digest string) string {
	d := strings.TrimPrefix(digest, "sha256:")
	if len(d) > 12 {
		return d[:12]
	}
	return d
}
