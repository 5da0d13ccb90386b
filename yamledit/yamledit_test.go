package yamledit

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/chartpin/chartpin/internal/failure"
)

func TestParseErrors(t *testing.T) {
	cases := []struct{ name, in, msg string }{
		{"duplicate key", "a: 1\nb:\n  c: 1\n  c: 2\n", "values.yaml:4: mapping key \"c\" already defined at line 3"},
		{"duplicate key in a later document", "a: 1\n---\nb: 1\nb: 2\n", "values.yaml:4: mapping key \"b\" already defined at line 3"},
		{"duplicate key in a flow mapping", "x: {a: 1, a: 2}\n", "values.yaml:1: mapping key \"a\""},
		{"syntax", "a: 1\nb: [1, 2\nc: 3\n", "values.yaml:"},
		{"bad indentation", "a:\n  b: 1\n c: 2\n", "values.yaml:2: parsing yaml: did not find expected key; fix"},
		{"tab indentation", "a:\n\tb: 1\n", "values.yaml:2: parsing yaml"},
		{"not utf-8", "a: 1\nb: \xff\n", "values.yaml:2: not valid UTF-8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("values.yaml", []byte(c.in))
			if err == nil || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("err = %v, want %q", err, c.msg)
			}
			if !failure.IsInput(err) {
				t.Fatalf("%v: not an input error", err)
			}
		})
	}
}

func TestGet(t *testing.T) {
	in := `images:
  ingestor:
    repository: ghcr.io/x/ingestor
    channelTags: {prod: "0.8"}
    prodDigest: ""
  list:
    - name: a
      digest: sha256:1
    - name: b
"a.b":
  c: 1
---
other:
  x: 1
images:
  ingestor:
    prodDigest: ""
`
	f, err := Parse("values.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	s, err := f.Get("images.list[0].digest")
	if err != nil || s.Value != "sha256:1" || s.Line != 8 || s.Path != "images.list[0].digest" {
		t.Fatalf("got %+v, %v", s, err)
	}
	if got := string(f.Data[s.Start:s.End]); got != "sha256:1" {
		t.Fatalf("span %q", got)
	}
	s, err = f.Get(`"a.b".c`)
	if err != nil || s.Value != "1" {
		t.Fatalf("quoted key: %+v, %v", s, err)
	}
	s, err = f.Get("images.ingestor.channelTags.prod")
	if err != nil || s.Value != "0.8" || !s.Flow || string(f.Data[s.Start:s.End]) != `"0.8"` {
		t.Fatalf("flow: %+v, %v", s, err)
	}
	if s, err = f.Get("other.x"); err != nil || s.Line != 14 {
		t.Fatalf("second document: %+v, %v", s, err)
	}

	errs := []struct {
		path string
		want error
		msg  string
	}{
		{"images.ingestor.prodDigest", ErrAmbiguous, "2 candidates at values.yaml:5, values.yaml:17"},
		{"images.ingestor.digest", ErrNotFound, "values.yaml: images.ingestor.digest: not found (values.yaml has images.ingestor at line 3, without digest)"},
		{"images.list[5]", ErrNotFound, "not found"},
		{"images.list", ErrNotScalar, "not a scalar (a sequence at line 7)"},
		{"images..x", nil, "empty key"},
		{"images[", nil, "unclosed"},
	}
	for _, e := range errs {
		_, err := f.Get(e.path)
		if err == nil || (e.want != nil && !errors.Is(err, e.want)) || !strings.Contains(err.Error(), e.msg) || !failure.IsInput(err) {
			t.Errorf("Get(%q) = %v, want %v containing %q", e.path, err, e.want, e.msg)
		}
	}
}

func TestWalk(t *testing.T) {
	in := "a:\n  b: 1\n  \"c.d\": [x, {e: y}]\nbase: &b {t: 1}\nm:\n  <<: *b\n---\nz: 2\n"
	f, err := Parse("values.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	err = f.Walk(func(path string, key, value *yaml.Node) error {
		k := "-"
		if key != nil {
			k = key.Value
		}
		got = append(got, fmt.Sprintf("%s(%s)@%d", path, k, value.Line))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `a(a)@2 a.b(b)@2 a."c.d"(c.d)@3 a."c.d"[0](-)@3 a."c.d"[1](-)@3 a."c.d"[1].e(e)@3 base(base)@4 base.t(t)@4 m(m)@6 m.<<(<<)@6 z(z)@8`
	if strings.Join(got, " ") != want {
		t.Fatalf("got  %s\nwant %s", strings.Join(got, " "), want)
	}
	// SkipChildren prunes; another error stops and is returned.
	got = nil
	stop := errors.New("stop")
	err = f.Walk(func(path string, key, value *yaml.Node) error {
		got = append(got, path)
		if path == "a" {
			return SkipChildren
		}
		if path == "m" {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || strings.Join(got, " ") != "a base base.t m" {
		t.Fatalf("got %v, %v", got, err)
	}
	// Every path Walk reports leads back to its node.
	_ = f.Walk(func(path string, key, value *yaml.Node) error {
		nodes, err := f.Lookup(path)
		if err != nil || len(nodes) != 1 || nodes[0] != value {
			t.Errorf("Lookup(%q) = %v, %v", path, nodes, err)
		}
		return nil
	})
}

func TestLookupNode(t *testing.T) {
	in := `base: &base
  repository: a/b
  tag: "1"
img:
  <<: *base
  tag: "2"
ref: *base
"a.b":
  list: [x, &y y]
last: *y
scalar: 3
`
	f, err := Parse("values.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	root := f.Docs[0].Content[0]
	for path, want := range map[string]string{
		"base.tag":        "1",
		"img.tag":         "2", // the mapping's own key wins over the merged one
		"img.repository":  "a/b",
		"ref.tag":         "1",
		`"a.b".list[1]`:   "y",
		"last":            "y", // the last alias is followed too
		`"a.b".list[0]`:   "x",
		"scalar":          "3",
		"ref.repository":  "a/b",
		"base.repository": "a/b",
	} {
		n, err := LookupNode(root, path)
		if err != nil || n.Kind != yaml.ScalarNode || n.Value != want {
			t.Errorf("LookupNode(%s) = %v, %v; want %q", path, n, err, want)
		}
	}
	if n, err := LookupNode(root, "img.repository"); err == nil && n.Line != 2 {
		t.Errorf("merged value at line %d, want the anchored node at line 2", n.Line)
	}
	misses := map[string]string{
		"nope":             `no key "nope" under the top level (line 1)`,
		"img.digest":       `no key "digest" under img (line 5)`,
		"scalar.x":         `scalar is not a mapping (line 11), so it has no key "x"`,
		`"a.b".list[2]`:    `"a.b".list (line 9) has 2 list items, so no item 2`,
		"img[0]":           `img is a mapping (line 5), not a list, so it has no item 0`,
		"ref.tag.x":        `ref.tag is not a mapping (line 3), so it has no key "x"`,
		`"a.b".list[0].z`:  `"a.b".list[0] is not a mapping (line 9), so it has no key "z"`,
		"last.more.deeper": `last is not a mapping (line 9), so it has no key "more"`,
	}
	for path, want := range misses {
		n, err := LookupNode(root, path)
		if err == nil || err.Error() != want {
			t.Errorf("LookupNode(%s) = %v, %v; want error %q", path, n, err, want)
		}
		if !errors.Is(err, ErrNotFound) || failure.IsInput(err) {
			t.Errorf("LookupNode(%s): %v should wrap ErrNotFound and not be an input error", path, err)
		}
	}
	// A hand-built tree can hold an alias of nothing; yaml.v3 never makes one.
	broken := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{{Kind: yaml.ScalarNode, Value: "a"}, {Kind: yaml.AliasNode}}}
	for path, want := range map[string]string{"a": "a is an alias of nothing", "a.b": "a is an alias of nothing"} {
		if _, err := LookupNode(broken, path); err == nil || err.Error() != want || !errors.Is(err, ErrNotFound) {
			t.Errorf("LookupNode(%s) on an alias of nothing = %v, want %q", path, err, want)
		}
	}
	for _, bad := range []string{"", "a.", "a[x]", `"a`} {
		if _, err := LookupNode(root, bad); err == nil || !failure.IsInput(err) || errors.Is(err, ErrNotFound) {
			t.Errorf("LookupNode(%q) = %v, want an input error about the path", bad, err)
		}
	}
}

func TestJoin(t *testing.T) {
	in := "top:\n  plain: 1\n  \"app.kubernetes.io\": 2\n  \"x[0]\": 3\n  'say \"hi\"': 4\n  'back\\slash': 5\n  \"\": 6\n  with space: 7\n"
	f, err := Parse("values.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	root := f.Docs[0].Content[0]
	for key, want := range map[string]string{
		"plain":             "top.plain",
		"app.kubernetes.io": `top."app.kubernetes.io"`,
		"x[0]":              `top."x[0]"`,
		`say "hi"`:          `top."say \"hi\""`,
		`back\slash`:        `top."back\\slash"`,
		"":                  `top.""`,
		"with space":        "top.with space",
	} {
		p := Join("top", key)
		if p != want {
			t.Errorf("Join(top, %q) = %s, want %s", key, p, want)
		}
		n, err := LookupNode(root, p)
		if err != nil {
			t.Errorf("LookupNode(%s): %v", p, err)
			continue
		}
		if k := f.Path(n); k != p {
			t.Errorf("LookupNode(%s) found the value at %s", p, k)
		}
	}
	if got := Join("", "a.b"); got != `"a.b"` {
		t.Errorf(`Join("", a.b) = %s`, got)
	}
}
