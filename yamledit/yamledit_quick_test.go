package yamledit

import "testing"

func TestQuick(t *testing.T) {
	in := "a: 1\nimages:\n  x:\n    digest: \"\" # pin\n    sha:\n    tag: 'v1'\n    d2: ~\n    e: # c\n    f: {repository: x, tag: y}\n    g: [a, b]\n    h: &anc héllo\n    i: *anc\n"
	f, err := Parse("v.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"images.x.digest", "images.x.sha", "images.x.tag", "images.x.d2", "images.x.e", "images.x.f.tag", "images.x.g[1]", "images.x.h"} {
		s, err := f.Get(p)
		if err != nil {
			t.Fatal(err)
		}
		out, err := f.Apply(Edit{s.Node, "sha256:abc"})
		if err != nil {
			t.Fatal(p, err)
		}
		t.Logf("%s %+v\n%s", p, s, out)
	}
	s, err := f.Get("images.x.i")
	t.Log(s, err)
}
