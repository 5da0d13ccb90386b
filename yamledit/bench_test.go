package yamledit

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// BenchmarkApply20 is a pin write of the largest corpus values.yaml
// (kube-prometheus-stack, ~200 KB): parse, find 20 `tag`/`sha` values by
// path, splice new values in and verify by re-parsing.
func BenchmarkApply20(b *testing.B) {
	data, err := os.ReadFile("testdata/corpus/prometheus-community-kube-prometheus-stack.values.yaml")
	if err != nil {
		b.Fatal(err)
	}
	f, err := Parse("values.yaml", data)
	if err != nil {
		b.Fatal(err)
	}
	var paths []string
	_ = f.Walk(func(path string, key, value *yaml.Node) error {
		if key != nil && value.Kind == yaml.ScalarNode && (key.Value == "tag" || key.Value == "sha") && len(paths) < 20 {
			if _, err := f.Scalar(value); err == nil {
				paths = append(paths, path)
			}
		}
		return nil
	})
	if len(paths) != 20 {
		b.Fatalf("found %d tag/sha values, want 20", len(paths))
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f, err := Parse("values.yaml", data)
		if err != nil {
			b.Fatal(err)
		}
		edits := make([]Edit, 0, len(paths))
		for j, p := range paths {
			s, err := f.Get(p)
			if err != nil {
				b.Fatal(err)
			}
			edits = append(edits, Edit{s.Node, fmt.Sprintf("sha256:%064x", j)})
		}
		out, err := f.Apply(edits...)
		if err != nil {
			b.Fatal(err)
		}
		if !strings.Contains(string(out), "sha256:0000000000000000000000000000000000000000000000000000000000000013") {
			b.Fatal("edit missing")
		}
	}
}
