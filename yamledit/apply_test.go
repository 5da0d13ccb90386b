package yamledit

import (
	"errors"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/chartpin/chartpin/internal/failure"
)

func TestApplyStyles(t *testing.T) {
	cases := []struct {
		name, in, path, value, want string
	}{
		{"plain stays plain", "tag: v1 # float\n", "tag", "v2", "tag: v2 # float\n"},
		{"plain string that would read as a number is quoted", "tag: v1\n", "tag", "123", "tag: \"123\"\n"},
		{"plain float stays plain float", "tag: 1.27\n", "tag", "1.28", "tag: 1.28\n"},
		{"plain with a colon-space is quoted", "a: x\n", "a", "b: c", "a: \"b: c\"\n"},
		{"plain to empty is quoted", "a: x\n", "a", "", "a: \"\"\n"},
		{"plain digest", "digest: sha256:aaa\n", "digest", "sha256:bbb", "digest: sha256:bbb\n"},
		{"double empty keeps quotes and comment", "digest: \"\" # pin\n", "digest", "sha256:abc", "digest: \"sha256:abc\" # pin\n"},
		{"double escapes", "a: \"x\"\n", "a", "q\"b\\\n", "a: \"q\\\"b\\\\\\n\"\n"},
		{"double with escapes in the old value", "a: \"x\\ty\" # c\nb: 1\n", "a", "z", "a: \"z\" # c\nb: 1\n"},
		{"single empty keeps quotes", "digest: ''\n", "digest", "sha256:abc", "digest: 'sha256:abc'\n"},
		{"single doubles quotes", "a: 'v1'\n", "a", "it's", "a: 'it''s'\n"},
		{"single with an old doubled quote", "a: 'it''s' # c\n", "a", "x", "a: 'x' # c\n"},
		{"single falls back to double for a newline", "a: 'v1'\n", "a", "x\ny", "a: \"x\\ny\"\n"},
		{"empty plain value", "digest:\ntag: v1\n", "digest", "sha256:abc", "digest: sha256:abc\ntag: v1\n"},
		{"empty plain value with a trailing space", "digest: \ntag: v1\n", "digest", "sha256:abc", "digest: sha256:abc\ntag: v1\n"},
		{"empty plain value before a comment", "digest: # pin\ntag: v1\n", "digest", "sha256:abc", "digest: sha256:abc # pin\ntag: v1\n"},
		{"empty plain value before a wide comment", "digest:   # pin\n", "digest", "x", "digest: x  # pin\n"},
		{"empty plain value at EOF", "a: 1\ndigest:", "digest", "sha256:abc", "a: 1\ndigest: sha256:abc"},
		{"empty plain value that needs quotes", "digest:\n", "digest", "true", "digest: \"true\"\n"},
		{"empty nested value", "images:\n  x:\n    digest:\n    tag: v1\n", "images.x.digest", "sha256:1", "images:\n  x:\n    digest: sha256:1\n    tag: v1\n"},
		{"tilde", "digest: ~ # none\n", "digest", "sha256:abc", "digest: sha256:abc # none\n"},
		{"null", "digest: null\n", "digest", "sha256:abc", "digest: sha256:abc\n"},
		{"empty sequence item", "l:\n  -\n  - b\n", "l[0]", "a", "l:\n  - a\n  - b\n"},
		{"flow mapping", "image: {repository: x, tag: y}\n", "image.tag", "v2", "image: {repository: x, tag: v2}\n"},
		{"flow mapping without spaces", "image: {repository: x,tag: y}\n", "image.repository", "z", "image: {repository: z,tag: y}\n"},
		{"flow mapping value needing quotes", "image: {repository: x, tag: y}\n", "image.tag", "a,b", "image: {repository: x, tag: \"a,b\"}\n"},
		{"flow mapping empty value", "image: {digest: , tag: y}\n", "image.digest", "sha256:1", "image: {digest: sha256:1, tag: y}\n"},
		{"flow mapping over lines", "image: {\n  repository: x, # r\n  tag: \"y\"\n}\n", "image.tag", "v2", "image: {\n  repository: x, # r\n  tag: \"v2\"\n}\n"},
		{"flow sequence", "args: [a, 'b', \"c\"]\n", "args[1]", "x", "args: [a, 'x', \"c\"]\n"},
		{"flow sequence plain", "args: [a, b]\n", "args[1]", "x", "args: [a, x]\n"},
		{"anchored value", "a: &v v1 # c\nb: *v\n", "a", "v2", "a: &v v2 # c\nb: *v\n"},
		{"anchored quoted value", "a: &v \"v1\"\nb: *v\n", "a", "v2", "a: &v \"v2\"\nb: *v\n"},
		{"anchor on its own line", "a: &v\n  v1\nb: *v\n", "a", "v2", "a: &v\n  v2\nb: *v\n"},
		{"anchored empty value", "a: &v\nb: *v\n", "a", "x", "a: &v x\nb: *v\n"},
		{"tagged", "a: !!str 1.0\n", "a", "2.0", "a: !!str 2.0\n"},
		{"crlf", "a: 1\r\nimages:\r\n  x:\r\n    digest: \"\"\r\n    tag: v1\r\n\r\n", "images.x.digest", "sha256:1", "a: 1\r\nimages:\r\n  x:\r\n    digest: \"sha256:1\"\r\n    tag: v1\r\n\r\n"},
		{"crlf empty value", "a: 1\r\ndigest:\r\nb: 2\r\n", "digest", "sha256:1", "a: 1\r\ndigest: sha256:1\r\nb: 2\r\n"},
		{"utf-8 before the value", "名前: {説明: 日本語, tag: v1} # ü\n", "名前.tag", "v2", "名前: {説明: 日本語, tag: v2} # ü\n"},
		{"utf-8 value", "ä: 'ö'\n", "ä", "ü", "ä: 'ü'\n"},
		{"tab before a comment", "a: v1\t# c\n", "a", "v2", "a: v2\t# c\n"},
		{"tab in an empty slot", "a:\t# c\n", "a", "v2", "a:\tv2 # c\n"},
		{"multi-document", "# head\na: 1\n---\nb: 2\n...\n---\nc: 3\n\n\n", "b", "4", "# head\na: 1\n---\nb: 4\n...\n---\nc: 3\n\n\n"},
		{"byte order mark", "\ufeffa: 1\nb: x\n", "b", "y", "\ufeffa: 1\nb: y\n"},
		{"byte order mark first line", "\ufeffa: x\n", "a", "y", "\ufeffa: y\n"},
		{"quoted key with dots", "annotations:\n  \"artifacthub.io/images\": x\n", `annotations."artifacthub.io/images"`, "y", "annotations:\n  \"artifacthub.io/images\": y\n"},
		{"merge key", "base: &b\n  tag: v1\nx:\n  <<: *b\n  repo: r\n", "x.tag", "v2", "base: &b\n  tag: v2\nx:\n  <<: *b\n  repo: r\n"},
		{"multi-line double-quoted", "a: \"x\n  y\" # c\nb: 1\n", "a", "z", "a: \"z\" # c\nb: 1\n"},
		{"non-specific tag", "a: ! x\nb: ! 'y'\n", "b", "z", "a: ! x\nb: ! 'z'\n"},
		{"anchor in a flow mapping", "a: {b: &x v, c: *x}\n", "a.b", "w", "a: {b: &x w, c: *x}\n"},
		{"tab separator before a quoted value", "a:\t\"x\"\n", "a", "y", "a:\t\"y\"\n"},
		{"old Mac line ends", "a: 1\rb: x\r", "b", "y", "a: 1\rb: y\r"},
		{"line separator characters", "a: 1\u2028b: x\u0085c: 'z'\n", "c", "y", "a: 1\u2028b: x\u0085c: 'y'\n"},
		{"no trailing newline", "a: x", "a", "y", "a: y"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := Parse("values.yaml", []byte(c.in))
			if err != nil {
				t.Fatal(err)
			}
			s, err := f.Get(c.path)
			if err != nil {
				t.Fatal(err)
			}
			out, err := f.Apply(Edit{Node: s.Node, Value: c.value})
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != c.want {
				t.Fatalf("got\n%q\nwant\n%q", out, c.want)
			}
			g, err := Parse("out.yaml", out)
			if err != nil {
				t.Fatal(err)
			}
			got, err := g.Get(c.path)
			if err != nil {
				t.Fatal(err)
			}
			if got.Value != c.value {
				t.Fatalf("read back %q, want %q", got.Value, c.value)
			}
			if string(c.in) != string(f.Data) {
				t.Fatal("Apply changed the input bytes")
			}
		})
	}
}

func TestApplyRefuses(t *testing.T) {
	cases := []struct {
		name, in, path string
		wantErr        error
		msg            string
	}{
		{"alias", "a: &v v1\nb: *v\n", "b", ErrUnsupported, "values.yaml:2: b is the alias *v: unsupported; its value is written once at the anchor &v at values.yaml:1"},
		{"literal block", "a: |\n  x\n", "a", ErrUnsupported, "values.yaml:1: a is a block scalar"},
		{"folded block", "a: >-\n  x\n", "a", ErrUnsupported, "block scalar"},
		{"multi-line plain", "a: x\n  y\n", "a", ErrUnsupported, "plain value spanning several lines"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := Parse("values.yaml", []byte(c.in))
			if err != nil {
				t.Fatal(err)
			}
			s, _ := f.Get(c.path)
			if s.Node == nil {
				t.Fatal("no node")
			}
			out, err := f.Apply(Edit{Node: s.Node, Value: "new"})
			if !errors.Is(err, c.wantErr) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("err = %v, want %v containing %q", err, c.wantErr, c.msg)
			}
			if out != nil {
				t.Fatal("bytes returned with an error")
			}
			if !failure.IsInput(err) {
				t.Fatalf("%v is not marked as input error", err)
			}
		})
	}
}

func TestApplyMany(t *testing.T) {
	in := "images:\n  a:\n    digest: \"\"\n    tag: v1\n  b:\n    digest:\n    tag: 'v1'\n  c: {tag: v1, digest: x}\n"
	f, err := Parse("values.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	var edits []Edit
	for _, p := range []string{"images.c.digest", "images.a.digest", "images.b.digest", "images.b.tag"} {
		s, err := f.Get(p)
		if err != nil {
			t.Fatal(err)
		}
		edits = append(edits, Edit{s.Node, p + "-new"})
	}
	// The same edit twice is harmless; a conflicting one is an error.
	edits = append(edits, edits[0])
	out, err := f.Apply(edits...)
	if err != nil {
		t.Fatal(err)
	}
	want := "images:\n  a:\n    digest: \"images.a.digest-new\"\n    tag: v1\n  b:\n    digest: images.b.digest-new\n    tag: 'images.b.tag-new'\n  c: {tag: v1, digest: images.c.digest-new}\n"
	if string(out) != want {
		t.Fatalf("got\n%s\nwant\n%s", out, want)
	}
	if _, err := f.Apply(edits[0], Edit{edits[0].Node, "other"}); err == nil || !failure.IsInput(err) {
		t.Fatalf("conflicting edits: err = %v", err)
	}
}

func TestApplyForeignNode(t *testing.T) {
	f, _ := Parse("a.yaml", []byte("a: 1\n"))
	g, _ := Parse("b.yaml", []byte("a: 1\n"))
	s, _ := g.Get("a")
	if _, err := f.Apply(Edit{s.Node, "2"}); err == nil || !strings.Contains(err.Error(), "not from this file") {
		t.Fatalf("err = %v", err)
	}
}

// A verification failure returns no bytes: a hand-made edit that breaks the
// document is caught by the re-parse.
func TestVerifyCatchesBrokenSplice(t *testing.T) {
	f, err := Parse("values.yaml", []byte("a: x\nb: y\n"))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := f.Get("a")
	// Pretend the value was "y"; verify must notice a mismatch.
	out := []byte("a: z\nb: y\n")
	if err := f.verify(out, map[*yaml.Node]string{s.Node: "q"}); !errors.Is(err, ErrVerify) {
		t.Fatalf("err = %v", err)
	}
	if err := f.verify([]byte("a: x\nb: z\n"), map[*yaml.Node]string{}); !errors.Is(err, ErrVerify) {
		t.Fatalf("unedited change: err = %v", err)
	}
	if err := f.verify([]byte("a: x\nb: [y\n"), map[*yaml.Node]string{}); !errors.Is(err, ErrVerify) {
		t.Fatalf("broken: err = %v", err)
	}
	if err := f.verify([]byte("a: x # new\nb: y\n"), map[*yaml.Node]string{}); !errors.Is(err, ErrVerify) {
		t.Fatalf("new comment: err = %v", err)
	}
}

// Apply itself re-parses and checks what it spliced: bytes that no longer
// match the parse (a splice computed from a wrong span would do the same)
// make Apply fail with ErrVerify and return nothing.
func TestApplyVerifiesItsOutput(t *testing.T) {
	f, err := Parse("values.yaml", []byte("a: x\nb: y\n"))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := f.Get("a")
	f.Data = []byte("a: x\nb: z\n") // the bytes drift from the tree Apply checks against
	out, err := f.Apply(Edit{s.Node, "q"})
	if !errors.Is(err, ErrVerify) || out != nil {
		t.Fatalf("Apply = %q, %v; want no bytes and ErrVerify", out, err)
	}
}
