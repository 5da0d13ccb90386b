package guard

import (
	"fmt"

	"github.com/Masterminds/semver/v3"
	"github.com/go-git/go-git/v5/plumbing/object"
	"gopkg.in/yaml.v3"

	"github.com/chartpin/chartpin/chartbump"
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
