package resolver_test

import (
	"testing"

	"github.com/chartpin/chartpin/resolver"
)

func TestSplitRef(t *testing.T) {
	const d = "sha256:0a39c2e6e2f5e0f3e7a2f6b9a1b8f1d2c3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8"
	for _, c := range []struct{ in, repo, tag, digest string }{
		{"nginx", "nginx", "", ""},
		{"nginx:1.27", "nginx", "1.27", ""},
		{"localhost:5000/team/app", "localhost:5000/team/app", "", ""},
		{"localhost:5000/team/app:v1", "localhost:5000/team/app", "v1", ""},
		{"ghcr.io/org/app:v1@" + d, "ghcr.io/org/app", "v1", d},
		{"127.0.0.1:5000/app@" + d, "127.0.0.1:5000/app", "", d},
	} {
		repo, tag, digest := resolver.SplitRef(c.in)
		if repo != c.repo || tag != c.tag || digest != c.digest {
			t.Errorf("SplitRef(%q) = %q, %q, %q; want %q, %q, %q", c.in, repo, tag, digest, c.repo, c.tag, c.digest)
		}
		if got := resolver.RepositoryOf(c.in); got != c.repo {
			t.Errorf("RepositoryOf(%q) = %q, want %q", c.in, got, c.repo)
		}
	}
}
