// Package resolver turns image references into immutable digests. It is the
// only place in chartpin that asks a registry which bytes a tag names: the
// release-time pin and the in-cluster reconcile both go through it.
package resolver

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/chartpin/chartpin/internal/fanout"
)

// Sentinel errors; match them with errors.Is.
var (
	// ErrNotFound: the registry has no such repository or tag.
	ErrNotFound = errors.New("image not found")
	// ErrUnauthorized: the registry refused the credentials (or their absence).
	ErrUnauthorized = errors.New("registry refused credentials")
	// ErrRateLimited: the registry kept answering 429 past the retry cap.
	ErrRateLimited = errors.New("registry rate limit")
	// ErrPlatforms: a required platform is missing, or the image is single-arch.
	ErrPlatforms = errors.New("required platforms missing")
	// ErrNotInLock: offline mode, and the digest lock file has no entry for the ref.
	ErrNotInLock = errors.New("not in digest lock file")
	// ErrUnsupported: the operation cannot run in this mode (listing tags offline).
	ErrUnsupported = errors.New("not supported")
)

// Image is what a reference resolved to.
type Image struct {
	// Ref is the reference as asked for, normalized: registry/repository:tag.
	Ref string `json:"ref"`
	// Source is the reference actually queried: Ref after --registry-mirror.
	// A digest is only ever reported for the registry it came from.
	Source string `json:"source"`
	// Digest is sha256:…; for a multi-arch image, the index digest.
	Digest string `json:"digest"`
	// MediaType of the manifest the digest names.
	MediaType string `json:"media_type,omitempty"`
	// Platforms as os/arch[/variant]; empty until read (see Interface.Platforms).
	Platforms []string `json:"platforms,omitempty"`
}

// IsIndex reports whether the digest names a multi-arch index.
func (i Image) IsIndex() bool {
	return strings.Contains(i.MediaType, "index") || strings.Contains(i.MediaType, "manifest.list")
}

// Interface is the one way chartpin turns a tag into a digest. Implementations
// are safe for concurrent use and deduplicate: asking twice costs one request.
type Interface interface {
	// Resolve returns the digest ref's tag names (one HEAD per unique ref per run).
	Resolve(ctx context.Context, ref string) (Image, error)
	// Platforms lists the platforms of img.Digest (at most one GET per digest per run).
	Platforms(ctx context.Context, img Image) ([]string, error)
	// Manifest reads and checks what repository@digest names (see
	// Remote.Manifest); offline, the lock file's record of it.
	Manifest(ctx context.Context, ref string) (Manifest, error)
	// Tags lists the tags of a repository (registry/repository), once per run.
	Tags(ctx context.Context, repository string) ([]string, error)
}

// RequirePlatforms returns an error wrapping ErrPlatforms unless every platform
// in want is in have. A single-arch image (no platforms listed) never passes.
func RequirePlatforms(ref string, have, want []string) error {
	if len(want) == 0 {
		return nil
	}
	if len(have) == 0 {
		return fmt.Errorf("%s: %w: single-arch image, need %s; push a multi-arch index or drop the platforms requirement",
			ref, ErrPlatforms, strings.Join(want, ", "))
	}
	set := map[string]bool{}
	for _, p := range have {
		set[normalizePlatform(p)] = true
	}
	var missing []string
	for _, p := range want {
		if !set[normalizePlatform(p)] {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s: %w: %s (index has %s)", ref, ErrPlatforms,
			strings.Join(missing, ", "), strings.Join(have, ", "))
	}
	return nil
}

// ResolveAll resolves refs concurrently through r (which bounds concurrency
// itself) and returns the images by ref. All errors are returned, joined.
func ResolveAll(ctx context.Context, r Interface, refs []string) (map[string]Image, error) {
	out, byRef := fanout.Map(refs, func(ref string) (Image, error) { return r.Resolve(ctx, ref) })
	errs := make([]error, 0, len(byRef))
	for _, err := range byRef {
		errs = append(errs, err)
	}
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return out, errors.Join(errs...)
}

// normalizePlatform treats linux/arm64/v8 and linux/arm64 as one platform, as
// the OCI image spec does.
func normalizePlatform(p string) string {
	if strings.HasSuffix(p, "/arm64/v8") {
		return strings.TrimSuffix(p, "/v8")
	}
	return p
}

// ResolveOrdered resolves refs (concurrently, one HEAD per unique ref) and
// returns every image that resolved, in the order asked, with the errors of
// the others joined. It reads no manifest, as crane digest does not.
func ResolveOrdered(ctx context.Context, r Interface, refs []string) ([]Image, error) {
	byRef, err := ResolveAll(ctx, r, refs)
	var out []Image
	for _, ref := range refs {
		if img, ok := byRef[ref]; ok {
			out = append(out, img)
		}
	}
	return out, err
}

// ResolveEach is ResolveOrdered plus each digest's manifest, read and
// checked (see Remote.Manifest), and the required platforms checked.
func ResolveEach(ctx context.Context, r Interface, refs []string, required []string) ([]Image, error) {
	resolved, resolveErr := ResolveOrdered(ctx, r, refs)
	keys := make([]string, len(resolved))
	for i, img := range resolved {
		keys[i] = DigestRef(img.Ref, img.Digest)
	}
	manifests, manifestErrs := fanout.Map(keys, func(k string) (Manifest, error) { return r.Manifest(ctx, k) })
	var out []Image
	errs := []error{resolveErr}
	for i, img := range resolved {
		m, err := manifests[keys[i]], manifestErrs[keys[i]]
		if err == nil {
			img.MediaType, img.Platforms = m.MediaType, m.Platforms
			err = m.Require(img.Ref, required)
		}
		out = append(out, img)
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}
