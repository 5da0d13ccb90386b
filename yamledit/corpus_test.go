package yamledit

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// scalars lists every scalar node (keys and values) in document order,
// without following aliases.
func scalars(f *File) []*yaml.Node {
	var out []*yaml.Node
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.ScalarNode {
			out = append(out, n)
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	for _, d := range f.Docs {
		walk(d)
	}
	return out
}

func corpusFiles(t testing.TB) map[string][]byte {
	t.Helper()
	names, err := filepath.Glob("testdata/corpus/*.values.yaml")
	if err != nil || len(names) == 0 {
		t.Fatalf("no corpus in testdata/corpus: %v", err)
	}
	out := map[string][]byte{}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		out[n] = b
	}
	return out
}

// TestCorpusEditEverything rewrites every value scalar of every corpus file
// in one Apply and checks that each reads back and that the bytes between
// the values are the original bytes.
func TestCorpusEditEverything(t *testing.T) {
	for name, data := range corpusFiles(t) {
		t.Run(filepath.Base(name), func(t *testing.T) {
			f, err := Parse(name, data)
			if err != nil {
				t.Fatal(err)
			}
			var edits []Edit
			var spans []Scalar
			unsupported := 0
			keys := map[*yaml.Node]bool{}
			_ = f.Walk(func(_ string, k, _ *yaml.Node) error {
				keys[k] = true
				return nil
			})
			for i, n := range scalars(f) {
				if keys[n] {
					continue
				}
				s, err := f.Scalar(n)
				if errors.Is(err, ErrUnsupported) {
					unsupported++
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if s.Start != s.End && n.Style == 0 && string(data[s.Start:s.End]) != n.Value {
					t.Fatalf("%s: span %q != value %q", f.Pos(n), data[s.Start:s.End], n.Value)
				}
				edits = append(edits, Edit{n, fmt.Sprintf("sha256:%064d", i)})
				spans = append(spans, s)
			}
			if len(edits) == 0 {
				t.Fatal("nothing to edit")
			}
			out, err := f.Apply(edits...)
			if err != nil {
				t.Fatal(err)
			}
			// Strip each written value from out and each old span from data:
			// what remains must be identical.
			var rest, orig bytes.Buffer
			last, pos := 0, 0
			for i, s := range spans {
				orig.Write(data[last:s.Start])
				last = s.End
				idx := bytes.Index(out[pos:], []byte(edits[i].Value))
				if idx < 0 {
					t.Fatalf("%s: written value missing", f.Pos(s.Node))
				}
				rest.Write(out[pos : pos+idx])
				pos += idx + len(edits[i].Value)
			}
			orig.Write(data[last:])
			rest.Write(out[pos:])
			clean := func(b []byte) string {
				// quotes and padding around empty slots may differ
				return strings.NewReplacer(`"`, "", "'", "", " ", "").Replace(string(b))
			}
			if clean(rest.Bytes()) != clean(orig.Bytes()) {
				t.Fatal("bytes outside the values changed")
			}
			t.Logf("%d values edited, %d unsupported (block or multi-line)", len(edits), unsupported)
		})
	}
}
