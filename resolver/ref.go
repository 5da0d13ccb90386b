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
	repo, _, _ := SplitRef(s)
	return repo
}

// SplitRef splits [host[:port]/]path[:tag][@digest] into its parts, spelled
// as given (not normalized): the one place a reference is taken apart by
// hand, for callers that must keep a chart's own spelling. A colon before the
// last slash is a port, not a tag.
func SplitRef(s string) (repository, tag, digest string) {
	base, digest, _ := strings.Cut(s, "@")
	if i := strings.LastIndex(base, ":"); i > strings.LastIndex(base, "/") {
		return base[:i], base[i+1:], digest
	}
	return base, "", digest
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

// RepositoryOf is registry/repository of ref, tag and digest dropped.
func RepositoryOf(ref string) string {
	repo, _, _ := SplitRef(ref)
	return repo
}
