package deprecation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/chartpin/chartpin/chartbump"
	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/internal/redact"
	"github.com/chartpin/chartpin/resolver"
)

// maxIndexBytes bounds an index.yaml read into memory.
const maxIndexBytes = 64 << 20

// Repository reads what a published chart repository records about chart
// versions: whether one is published, and whether it is deprecated. Index
// and OCI may both be set; the index is asked first.
type Repository struct {
	// Index is an index.yaml: an http(s) URL or a file.
	Index string
	// OCI is oci://HOST/PATH; chart NAME lives at HOST/PATH/NAME.
	OCI string
	// Client fetches an Index URL (http.DefaultClient when nil).
	Client *http.Client
	// Resolver lists OCI tags and resolves a version's tag to its manifest;
	// Artifacts lists the markers that refer to that manifest.
	Resolver  resolver.Interface
	Artifacts resolver.Artifacts
	// Timeout bounds each network step (30s when zero).
	Timeout time.Duration

	index *indexFile // read once per Repository
}

// Version is what the repository records about one chart version.
type Version struct {
	Published  bool
	Deprecated bool
	// Where is the repository that holds it, credentials masked.
	Where string
}

// indexFile is the part of a Helm repository index.yaml read here.
type indexFile struct {
	APIVersion string `yaml:"apiVersion"`
	Entries    map[string][]struct {
		Version    string `yaml:"version"`
		Deprecated bool   `yaml:"deprecated"`
	} `yaml:"entries"`
}

// Validate refuses an Index URL that cannot be fetched as written (not
// parseable, no host, a port that is no port): an input error, found before
// any request. Credentials in it are allowed (they fetch the index) and
// never printed.
func (r *Repository) Validate() error {
	if !strings.HasPrefix(r.Index, "http://") && !strings.HasPrefix(r.Index, "https://") {
		return nil
	}
	u, err := url.Parse(r.Index)
	if err != nil {
		return failure.Input(failure.Optionf("{{Index}}: not a URL: %w", redact.Err(err)))
	}
	if u.Hostname() == "" {
		return failure.Input(failure.Optionf("{{Index}} %s: no host", redact.URL(r.Index)))
	}
	if p := u.Port(); p != "" || strings.HasSuffix(u.Host, ":") {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return failure.Input(failure.Optionf("{{Index}} %s: port %q is not a number from 1 to 65535", redact.URL(r.Index), p))
		}
	}
	return nil
}

// Lookup says whether chart version is published in the index or under the
// OCI path, and whether it is deprecated there. A repository that cannot be
// read is an error, never "not published".
func (r *Repository) Lookup(ctx context.Context, chart, version string) (Version, error) {
	if r.Index != "" {
		idx, err := r.readIndex(ctx)
		if err != nil {
			return Version{}, err
		}
		for _, e := range idx.Entries[chart] {
			if sameVersion(e.Version, version) {
				return Version{Published: true, Deprecated: e.Deprecated, Where: redact.URL(r.Index)}, nil
			}
		}
	}
	if r.OCI != "" {
		return r.lookupOCI(ctx, chart, version)
	}
	return Version{}, nil
}

func (r *Repository) timeout() time.Duration {
	if r.Timeout > 0 {
		return r.Timeout
	}
	return 30 * time.Second
}

func (r *Repository) readIndex(ctx context.Context) (*indexFile, error) {
	if r.index != nil {
		return r.index, nil
	}
	shown := redact.URL(r.Index)
	var data []byte
	if strings.HasPrefix(r.Index, "http://") || strings.HasPrefix(r.Index, "https://") {
		client := r.Client
		if client == nil {
			client = http.DefaultClient
		}
		tctx, cancel := context.WithTimeout(ctx, r.timeout())
		defer cancel()
		req, err := http.NewRequestWithContext(tctx, http.MethodGet, r.Index, nil)
		if err != nil {
			return nil, redact.Err(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, fmt.Errorf("fetching the index: %w", redact.Err(err))
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("fetching the index %s: %s", shown, resp.Status)
		}
		if data, err = readLimited(resp.Body, shown); err != nil {
			return nil, err
		}
	} else {
		f, err := os.Open(r.Index)
		if err != nil {
			return nil, fmt.Errorf("reading the index: %w", redact.Err(err))
		}
		defer f.Close()
		if data, err = readLimited(f, shown); err != nil {
			return nil, err
		}
	}
	var idx indexFile
	if err := yaml.Unmarshal(data, &idx); err != nil {
		return nil, fmt.Errorf("%s: not a Helm index: %w", shown, err)
	}
	if idx.APIVersion == "" {
		return nil, fmt.Errorf("%s: no apiVersion; not a Helm repository index.yaml", shown)
	}
	r.index = &idx
	return r.index, nil
}

func readLimited(rd io.Reader, shown string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(rd, maxIndexBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the index %s: %w", shown, err)
	}
	if len(data) > maxIndexBytes {
		return nil, fmt.Errorf("the index %s is larger than %d MiB; is it an index.yaml?", shown, maxIndexBytes>>20)
	}
	return data, nil
}

func (r *Repository) lookupOCI(ctx context.Context, chart, version string) (Version, error) {
	if r.Resolver == nil {
		return Version{}, fmt.Errorf("%s: no resolver to list tags with", redact.URL(r.OCI))
	}
	repo := strings.TrimSuffix(strings.TrimPrefix(r.OCI, "oci://"), "/") + "/" + chart
	where := redact.URL("oci://" + repo)
	tctx, cancel := context.WithTimeout(ctx, r.timeout())
	defer cancel()
	tags, err := r.Resolver.Tags(tctx, repo)
	if errors.Is(err, resolver.ErrNotFound) {
		return Version{}, nil // no such repository yet: a first release
	}
	if err != nil {
		return Version{}, fmt.Errorf("listing tags of %s: %w", where, err)
	}
	// Helm stores + as _ in OCI tags.
	tag := ""
	for _, t := range tags {
		if t == strings.ReplaceAll(version, "+", "_") || sameVersion(strings.ReplaceAll(t, "_", "+"), version) {
			tag = t
			break
		}
	}
	if tag == "" {
		return Version{}, nil
	}
	v := Version{Published: true, Where: where}
	if r.Artifacts == nil {
		return v, nil // offline: what refers to the manifest cannot be read
	}
	img, err := r.Resolver.Resolve(tctx, repo+":"+tag)
	if err != nil {
		return Version{}, fmt.Errorf("reading %s:%s: %w", where, tag, err)
	}
	descs, err := r.Artifacts.Referrers(tctx, repo, img.Digest)
	if err != nil {
		return Version{}, fmt.Errorf("reading the deprecation markers of %s:%s: %w", where, tag, err)
	}
	st, err := verdict(where+"@"+img.Digest, descs)
	if err != nil {
		return Version{}, err
	}
	v.Deprecated = st.Deprecated
	return v, nil
}

// sameVersion compares versions by chartbump's rule, tolerating a leading v.
func sameVersion(a, b string) bool {
	if a == b {
		return true
	}
	va, err1 := chartbump.ParseVersion(a)
	vb, err2 := chartbump.ParseVersion(b)
	return err1 == nil && err2 == nil && va.Equal(vb) && va.Metadata() == vb.Metadata()
}

// Reference is a chart version that a Chart.yaml names and its repository
// marks deprecated: the chart's own version, or an exact dependency version
// fetched from that same repository.
type Reference struct {
	// File is the Chart.yaml as given; Line is 1-based.
	File       string `json:"file"`
	Line       int    `json:"line"`
	Chart      string `json:"chart"`
	Version    string `json:"version"`
	Dependency bool   `json:"dependency,omitempty"`
	Repository string `json:"repository"`
}

func (ref Reference) String() string {
	what := "version"
	if ref.Dependency {
		what = "dependency"
	}
	return fmt.Sprintf("%s %s %s is deprecated in %s", what, ref.Chart, ref.Version, ref.Repository)
}

// Advice is the reference with what to do about it.
func (ref Reference) Advice() string {
	if ref.Dependency {
		return ref.String() + ": depend on a version that is not deprecated"
	}
	return ref.String() + ": edges are moved off it; ship the fix as a new version (chartpin bump CHART_DIR patch)"
}

// Referenced returns the versions that Chart.yaml (data, shown as file)
// names and r marks deprecated. Dependencies count when their repository is
// this one (the index's directory, or the OCI path) and their version is
// exact; a range is resolved by helm dependency update, not here.
func (r *Repository) Referenced(ctx context.Context, file string, data []byte) ([]Reference, error) {
	var meta struct {
		Name         yaml.Node `yaml:"name"`
		Version      yaml.Node `yaml:"version"`
		Dependencies []struct {
			Name       string    `yaml:"name"`
			Version    yaml.Node `yaml:"version"`
			Repository string    `yaml:"repository"`
		} `yaml:"dependencies"`
	}
	if err := yaml.Unmarshal(data, &meta); err != nil {
		return nil, fmt.Errorf("%s: malformed YAML: %w", file, err)
	}
	type named struct {
		chart   string
		version yaml.Node
		dep     bool
	}
	refs := []named{{meta.Name.Value, meta.Version, false}}
	for _, d := range meta.Dependencies {
		if r.holds(d.Repository) {
			refs = append(refs, named{d.Name, d.Version, true})
		}
	}
	var out []Reference
	for _, n := range refs {
		if n.chart == "" || n.version.Value == "" {
			continue
		}
		if _, err := chartbump.ParseVersion(n.version.Value); err != nil {
			continue // a range or no version: nothing exact to look up
		}
		v, err := r.Lookup(ctx, n.chart, n.version.Value)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %s %s: %w", file, n.version.Line, n.chart, n.version.Value, err)
		}
		if v.Deprecated {
			out = append(out, Reference{File: file, Line: n.version.Line, Chart: n.chart, Version: n.version.Value, Dependency: n.dep, Repository: v.Where})
		}
	}
	return out, nil
}

// holds reports whether a dependency's repository field names this repository.
func (r *Repository) holds(repository string) bool {
	repository = strings.TrimSuffix(repository, "/")
	if repository == "" {
		return false
	}
	if r.OCI != "" && repository == strings.TrimSuffix(r.OCI, "/") {
		return true
	}
	if strings.HasPrefix(r.Index, "http://") || strings.HasPrefix(r.Index, "https://") {
		return repository == strings.TrimSuffix(strings.TrimSuffix(r.Index, "/index.yaml"), "/")
	}
	return false
}
