package guard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/Masterminds/semver/v3"
	"github.com/go-git/go-git/v5/plumbing/object"
	"gopkg.in/yaml.v3"

	"github.com/chartpin/chartpin/chartbump"
	"github.com/chartpin/chartpin/internal/redact"
	"github.com/chartpin/chartpin/resolver"
)

// field is a Chart.yaml scalar and where it is.
type field struct {
	value string
	line  int
}

func (f field) lineOr(l int) int {
	if f.line > 0 {
		return f.line
	}
	return l
}

// meta is what guard reads from Chart.yaml.
type meta struct {
	name                string
	version, appVersion field
}

func parseMeta(name string, data []byte) (meta, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return meta{}, fmt.Errorf("%s: malformed YAML: %w", name, err)
	}
	var m meta
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return m, fmt.Errorf("%s: not a mapping; is it a Chart.yaml?", name)
	}
	root := doc.Content[0]
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if v.Kind != yaml.ScalarNode {
			continue
		}
		switch k.Value {
		case "name":
			m.name = v.Value
		case "version":
			m.version = field{v.Value, v.Line}
		case "appVersion":
			m.appVersion = field{v.Value, v.Line}
		}
	}
	return m, nil
}

func diskMeta(root, chartFile string) (meta, error) {
	p := filepath.Join(root, filepath.FromSlash(chartFile))
	data, err := os.ReadFile(p)
	if err != nil {
		return meta{}, fmt.Errorf("reading %s: %w", chartFile, err)
	}
	return parseMeta(chartFile, data)
}

func (g *guard) treeMeta(tree *object.Tree, chartFile string) (meta, error) {
	f, err := tree.File(chartFile)
	if err != nil {
		return meta{}, fmt.Errorf("reading %s at base: %w", chartFile, err)
	}
	s, err := f.Contents()
	if err != nil {
		return meta{}, fmt.Errorf("reading %s at base: %w", chartFile, err)
	}
	return parseMeta(chartFile+" (base)", []byte(s))
}

// parseVersion is chartbump's rule, the one bump and publish apply too:
// strict SemVer 2 with an optional leading v; 1.9.63-rc.1 orders below
// 1.9.63.
func parseVersion(s string) (*semver.Version, error) {
	return chartbump.ParseVersion(s)
}

// sameVersion compares version strings, tolerating a leading v.
func sameVersion(a, b string) bool {
	if a == b {
		return true
	}
	va, err1 := parseVersion(a)
	vb, err2 := parseVersion(b)
	return err1 == nil && err2 == nil && va.Equal(vb) && va.Metadata() == vb.Metadata()
}

// published reports whether name@version is in the index or OCI repository.
func (g *guard) published(ctx context.Context, name, version string) (bool, string, error) {
	if g.o.index != "" {
		ok, err := g.inIndex(ctx, name, version)
		if err != nil || ok {
			return ok, redact.URL(g.o.index), err
		}
	}
	if g.o.oci != "" {
		if g.o.resolver == nil {
			return false, "", fmt.Errorf("--oci %s: no resolver to list tags with", g.o.oci)
		}
		repo := strings.TrimSuffix(strings.TrimPrefix(g.o.oci, "oci://"), "/") + "/" + name
		tctx, cancel := context.WithTimeout(ctx, g.o.timeout)
		defer cancel()
		tags, err := g.o.resolver.Tags(tctx, repo)
		if errors.Is(err, resolver.ErrNotFound) {
			// No such repository yet: a first release.
			return false, "", nil
		}
		if err != nil {
			return false, "", fmt.Errorf("listing tags of oci://%s: %w", repo, err)
		}
		// Helm stores + as _ in OCI tags.
		want := strings.ReplaceAll(version, "+", "_")
		for _, t := range tags {
			if t == want || sameVersion(strings.ReplaceAll(t, "_", "+"), version) {
				return true, "oci://" + repo, nil
			}
		}
	}
	return false, "", nil
}

// index is the part of a Helm repository index.yaml guard reads.
type index struct {
	APIVersion string `yaml:"apiVersion"`
	Entries    map[string][]struct {
		Version string `yaml:"version"`
	} `yaml:"entries"`
}

func (g *guard) inIndex(ctx context.Context, name, version string) (bool, error) {
	var data []byte
	if strings.HasPrefix(g.o.index, "http://") || strings.HasPrefix(g.o.index, "https://") {
		tctx, cancel := context.WithTimeout(ctx, g.o.timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(tctx, http.MethodGet, g.o.index, nil)
		if err != nil {
			return false, redact.Err(err)
		}
		resp, err := g.o.client.Do(req)
		if err != nil {
			return false, fmt.Errorf("fetching the index: %w", redact.Err(err))
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false, fmt.Errorf("fetching the index %s: %s", redact.URL(g.o.index), resp.Status)
		}
		if data, err = io.ReadAll(resp.Body); err != nil {
			return false, fmt.Errorf("fetching the index: %w", err)
		}
	} else {
		var err error
		if data, err = os.ReadFile(g.o.index); err != nil {
			return false, fmt.Errorf("reading the index: %w", redact.Err(err))
		}
	}
	var idx index
	if err := yaml.Unmarshal(data, &idx); err != nil {
		return false, fmt.Errorf("%s: not a Helm index: %w", redact.URL(g.o.index), err)
	}
	if idx.APIVersion == "" {
		return false, fmt.Errorf("%s: no apiVersion; not a Helm repository index.yaml", redact.URL(g.o.index))
	}
	for _, e := range idx.Entries[name] {
		if e.Version == version || sameVersion(e.Version, version) {
			return true, nil
		}
	}
	return false, nil
}
