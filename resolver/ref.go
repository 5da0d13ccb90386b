package resolver

import (
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// Normalize returns ref fully qualified: registry/repository:tag, or
// registry/repository@digest. A ref with both keeps the digest; one with
// neither gets :latest. Docker Hub is spelled docker.io.
func Normalize(ref string) (string, error) {
	base, digest, hasDigest := strings.Cut(strings.TrimSpace(ref), "@")
	if hasDigest {
		base = trimTag(base)
		d, err := name.NewDigest(base+"@"+digest, name.WeakValidation)
		if err != nil {
			return "", fmt.Errorf("parsing reference %q: %w", ref, err)
		}
		return displayName(d), nil
	}
	t, err := name.NewTag(base, name.WeakValidation)
	if err != nil {
		return "", fmt.Errorf("parsing reference %q: %w", ref, err)
	}
	return displayName(t), nil
}

// trimTag drops a :tag from registry/repository:tag (a port stays).
func trimTag(s string) string {
	i := strings.LastIndex(s, ":")
	if i > strings.LastIndex(s, "/") {
		return s[:i]
	}
	return s
}

func displayName(ref name.Reference) string {
	n := ref.Name()
	if strings.HasPrefix(n, name.DefaultRegistry+"/") {
		return "docker.io/" + strings.TrimPrefix(n, name.DefaultRegistry+"/")
	}
	return n
}

func canonicalHost(h string) string {
	if h == name.DefaultRegistry {
		return "docker.io"
	}
	return h
}

func hostOf(ref string) string {
	h, _, _ := strings.Cut(ref, "/")
	return canonicalHost(h)
}

// DigestRef is ref's repository at digest: registry/repository@digest (a
// tag or an old digest in ref is dropped).
func DigestRef(ref, digest string) string {
	return RepositoryOf(ref) + "@" + digest
}

// RepositoryOf is registry/repository of a normalized ref, tag and digest dropped.
func RepositoryOf(ref string) string {
	base, _, _ := strings.Cut(ref, "@")
	return trimTag(base)
}
