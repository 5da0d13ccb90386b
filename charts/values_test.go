package charts_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/chartpin/chartpin/discover"
)

// TestValuesDocumented: every key of the example's values.yaml carries a
// comment (the members of a channelTags block are documented by its own),
// and every leaf is declared, with a description, in values.schema.json.
func TestValuesDocumented(t *testing.T) {
	var doc yaml.Node
	if err := yaml.Unmarshal(mustRead(t, "example/values.yaml"), &doc); err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(mustRead(t, "example/values.schema.json"), &schema); err != nil {
		t.Fatal(err)
	}
	defs, _ := schema["definitions"].(map[string]any)
	leaves := 0
	var walk func(n *yaml.Node, path []string, sch map[string]any, parentDocumented bool)
	walk = func(n *yaml.Node, path []string, sch map[string]any, parentDocumented bool) {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := append(slices.Clone(path), k.Value)
			name := strings.Join(p, ".")
			documented := k.HeadComment != "" || k.LineComment != ""
			if !documented && !(len(path) > 0 && path[len(path)-1] == "channelTags" && parentDocumented) {
				t.Errorf("values.yaml:%d: %s has no comment", k.Line, name)
			}
			prop := schemaProperty(sch, k.Value, defs)
			if prop == nil {
				t.Errorf("values.yaml:%d: %s is not in values.schema.json", k.Line, name)
				continue
			}
			if v.Kind == yaml.MappingNode {
				walk(v, p, prop, documented)
				continue
			}
			leaves++
			if !describedSomewhere(prop, defs) && !(len(path) > 0 && path[len(path)-1] == "channelTags") {
				t.Errorf("values.schema.json: %s has no description", name)
			}
		}
	}
	walk(doc.Content[0], nil, schema, false)
	if leaves < 40 {
		t.Errorf("walked %d leaves of values.yaml; the walk is broken", leaves)
	}
}

// deref follows a $ref (and a one-element allOf) into the definitions.
func deref(s map[string]any, defs map[string]any) map[string]any {
	for s != nil {
		if ref, ok := s["$ref"].(string); ok {
			s, _ = defs[strings.TrimPrefix(ref, "#/definitions/")].(map[string]any)
			continue
		}
		if all, ok := s["allOf"].([]any); ok && s["type"] == nil {
			first, _ := all[0].(map[string]any)
			if first["$ref"] != nil {
				s = first
				continue
			}
		}
		return s
	}
	return nil
}

func schemaProperty(s map[string]any, key string, defs map[string]any) map[string]any {
	props, _ := deref(s, defs)["properties"].(map[string]any)
	p, _ := props[key].(map[string]any)
	return p
}

func describedSomewhere(p map[string]any, defs map[string]any) bool {
	if p["description"] != nil {
		return true
	}
	d := deref(p, defs)
	return d != nil && d["description"] != nil
}

// TestDiscoveryFindsEveryPin: without chartpin.yaml, chartpin's discovery
// finds every pin key of the example's six image blocks, none skipped.
func TestDiscoveryFindsEveryPin(t *testing.T) {
	pins, err := discover.Chart(filepath.Join(mustAbs(t, "example")), nil)
	if err != nil {
		t.Fatalf("discover: %v", err)
	}
	got := map[string]string{}
	for _, p := range pins {
		// An explicit digest of a channelTags image has no one float to
		// follow (it depends on env): discovery must list it as a problem,
		// which is why chartpin.yaml configures the example.
		envDependent := strings.HasPrefix(p.Path, "images.") && strings.HasSuffix(p.Path, ".digest")
		if (p.Problem != "") != envDependent {
			t.Errorf("discovery: %s problem %q", p.Path, p.Problem)
		}
		got[p.Path] = p.Repository
	}
	want := map[string]string{}
	for block, repo := range map[string]string{
		"images.jobsManager": jm, "images.podsMonitor": pm, "images.requestsProxy": jm, "images.resourceMonitor": rm,
	} {
		want[block+".digest"], want[block+".prodDigest"] = repo, repo
	}
	want["reconcile.image.digest"] = "ghcr.io/chartpin/chartpin"
	want["autoUpgrade.image.digest"] = "ghcr.io/chartpin/chartpin"
	for path, repo := range want {
		if got[path] != repo {
			t.Errorf("discovery: %s -> %q, want %q", path, got[path], repo)
		}
	}
	for path := range got {
		if _, ok := want[path]; !ok {
			t.Errorf("discovery found an unexpected pin %s", path)
		}
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(a); err != nil {
		t.Fatal(err)
	}
	return a
}
