package resolver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// MaxManifestBytes is the largest manifest or index read from a registry
// (the limit CNCF distribution applies when a manifest is pushed). A bigger
// body is refused before it is read.
const MaxManifestBytes = 4 << 20

// ErrBadManifest: a registry served a manifest that does not hash to its
// digest, is too big, or does not say what it claims to be.
var ErrBadManifest = errors.New("registry served a bad manifest")

// Manifest is what a digest names, read and checked by Remote.Manifest.
type Manifest struct {
	// Ref is the reference asked for, normalized: registry/repository@digest.
	Ref string `json:"ref"`
	// Source is the reference queried: Ref after --registry-mirror.
	Source string `json:"source"`
	// Digest is sha256:…, the hash of the manifest bytes served.
	Digest string `json:"digest"`
	// MediaType is one of the four image manifest and index types.
	MediaType string `json:"mediaType,omitempty"`
	// Platforms of an index as os/arch[/variant], validated; attestation
	// manifests (os "unknown") are left out. Empty for a single-arch image.
	Platforms []string `json:"platforms,omitempty"`
	// Children are the digests of every manifest an index lists
	// (attestations included), validated. Empty for a single-arch image.
	Children []string `json:"children,omitempty"`
	// Raw is the manifest as served (it hashes to Digest).
	Raw []byte `json:"-"`
}

// IsIndex reports whether the manifest is a multi-arch index.
func (m Manifest) IsIndex() bool { return types.MediaType(m.MediaType).IsIndex() }

// Require checks that m has every platform in want. A single-arch image
// never passes; a lock entry that recorded neither media type nor
// platforms cannot say, which is ErrNotInLock.
func (m Manifest) Require(ref string, want []string) error {
	if len(want) > 0 && m.MediaType == "" && len(m.Platforms) == 0 {
		return fmt.Errorf("%s: %w: the lock entry has no platforms; record them as {digest: …, platforms: [...]} to check platforms offline", ref, ErrNotInLock)
	}
	return RequirePlatforms(ref, m.Platforms, want)
}

// Manifest GETs the manifest ref names by digest (registry/repository@sha256:…,
// a tag before the digest is ignored), through the run's counted,
// authenticated, mirrored transport, and returns it only if it checks out:
// the body is at most MaxManifestBytes, hashes to the digest, is an image
// manifest or index whose declared media type matches its body, and an
// index lists at least one manifest with valid digests and platform strings.
// A failed check wraps ErrBadManifest. Each digest costs one GET per run.
//
// This is how chartpin trusts a digest before writing it anywhere: a HEAD's
// Docker-Content-Digest and Content-Type are only a registry's word.
func (r *Remote) Manifest(ctx context.Context, ref string) (Manifest, error) {
	norm, err := Normalize(ref)
	if err != nil {
		return Manifest{}, err
	}
	if !strings.Contains(norm, "@") {
		return Manifest{}, fmt.Errorf("manifest of %s: want a reference by digest (repository@sha256:…)", norm)
	}
	src, err := r.source(norm)
	if err != nil {
		return Manifest{}, err
	}
	m, err := r.manifests.do(ctx, src.String(), func() (Manifest, error) { return r.fetch(ctx, src) })
	if err != nil {
		if displayName(src) != norm {
			return Manifest{}, fmt.Errorf("%s via mirror %s: %w", norm, src.Context().RegistryStr(), err)
		}
		return Manifest{}, err
	}
	m.Ref = norm
	return m, nil
}

// fetch GETs src (by digest, or by tag when a HEAD gave no digest) and
// checks the body; by tag the digest is the body's hash, and must match
// the Docker-Content-Digest header when there is one.
func (r *Remote) fetch(ctx context.Context, src name.Reference) (Manifest, error) {
	source := displayName(src)
	rt, err := r.repos.do(ctx, src.Context().String(), func() (http.RoundTripper, error) { return r.authenticate(ctx, src.Context()) })
	if err != nil {
		return Manifest{}, classify(source, err)
	}
	u := "https://" + src.Context().RegistryStr() + "/v2/" + src.Context().RepositoryStr() + "/manifests/" + src.Identifier()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return Manifest{}, err
	}
	req.Header.Set("Accept", strings.Join(acceptedTypes, ","))
	req.Header.Set("User-Agent", "chartpin")
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return Manifest{}, classify(source, err)
	}
	defer resp.Body.Close()
	if err := transport.CheckError(resp, http.StatusOK); err != nil {
		return Manifest{}, classify(source, err)
	}
	if resp.ContentLength > MaxManifestBytes {
		return Manifest{}, fmt.Errorf("%s: %w: %d bytes, more than the %d a manifest may have; refusing to read it", source, ErrBadManifest, resp.ContentLength, MaxManifestBytes)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxManifestBytes+1))
	if err != nil {
		return Manifest{}, classify(source, err)
	}
	if len(body) > MaxManifestBytes {
		return Manifest{}, fmt.Errorf("%s: %w: more than the %d bytes a manifest may have; refusing to read it", source, ErrBadManifest, MaxManifestBytes)
	}
	sum := sha256.Sum256(body)
	got := "sha256:" + hex.EncodeToString(sum[:])
	want := src.Identifier()
	if _, byTag := src.(name.Tag); byTag {
		want = resp.Header.Get("Docker-Content-Digest")
	}
	if want != "" && want != got {
		return Manifest{}, fmt.Errorf("%s: %w: its bytes hash to %s, not %s; the registry or a proxy in front of it is broken or lying, nothing is pinned to it",
			source, ErrBadManifest, got, printable(want))
	}
	m, err := parseManifest(body, resp.Header.Get("Content-Type"))
	if err != nil {
		return Manifest{}, fmt.Errorf("%s: %w: %v", source, ErrBadManifest, err)
	}
	m.Source, m.Digest, m.Raw = source, got, body
	r.o.logger.Debug("manifest verified", "ref", source, "digest", got, "mediaType", m.MediaType, "bytes", len(body))
	return m, nil
}

var acceptedTypes = []string{
	string(types.OCIImageIndex), string(types.DockerManifestList),
	string(types.OCIManifestSchema1), string(types.DockerManifestSchema2),
}

var (
	platformPartRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	childDigestRE  = regexp.MustCompile(`^(sha256:[a-f0-9]{64}|sha512:[a-f0-9]{128})$`)
)

// parseManifest reads an image manifest or index. Its media type is the
// body's own mediaType field, else the Content-Type header; when both are
// there they must agree, and the body's shape must match the type.
func parseManifest(body []byte, contentType string) (Manifest, error) {
	var doc struct {
		MediaType string            `json:"mediaType"`
		Manifests []v1.Descriptor   `json:"manifests"`
		Config    *json.RawMessage  `json:"config"`
		Layers    []json.RawMessage `json:"layers"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return Manifest{}, fmt.Errorf("not a JSON manifest: %v", err)
	}
	header, _, _ := mime.ParseMediaType(contentType)
	mt := doc.MediaType
	switch {
	case mt == "":
		mt = header
	case header != "" && header != mt && known(header):
		return Manifest{}, fmt.Errorf("served as %s but the manifest says %s", header, printable(mt))
	}
	if !known(mt) {
		return Manifest{}, fmt.Errorf("media type %s is neither an image manifest nor an index", printable(mt))
	}
	m := Manifest{MediaType: mt}
	if !types.MediaType(mt).IsIndex() {
		if doc.Config == nil || doc.Manifests != nil {
			return Manifest{}, fmt.Errorf("media type %s, but the body is no image manifest (no config, or a manifests list)", mt)
		}
		return m, nil
	}
	if len(doc.Manifests) == 0 {
		return Manifest{}, fmt.Errorf("index (%s) lists no manifests", mt)
	}
	if doc.Config != nil {
		return Manifest{}, fmt.Errorf("media type %s, but the body is an image manifest (it has a config)", mt)
	}
	for _, d := range doc.Manifests {
		if !childDigestRE.MatchString(d.Digest.String()) {
			return Manifest{}, fmt.Errorf("index lists an invalid digest %s", printable(d.Digest.String()))
		}
		m.Children = append(m.Children, d.Digest.String())
		if d.Platform == nil {
			continue
		}
		for _, part := range []string{d.Platform.OS, d.Platform.Architecture, d.Platform.Variant} {
			if part != "" && !platformPartRE.MatchString(part) {
				return Manifest{}, fmt.Errorf("index lists an invalid platform part %s (want letters, digits, '.', '_' or '-')", printable(part))
			}
		}
		p := platformString(d.Platform)
		if p != "" && d.Platform.Architecture == "" {
			return Manifest{}, fmt.Errorf("index lists platform os %s without an architecture", printable(d.Platform.OS))
		}
		if p != "" {
			m.Platforms = append(m.Platforms, p)
		}
	}
	return m, nil
}

// validPlatform reports whether p is os/arch or os/arch/variant, each part
// as a registry may spell it.
func validPlatform(p string) bool {
	parts := strings.Split(p, "/")
	if len(parts) < 2 || len(parts) > 3 {
		return false
	}
	for _, part := range parts {
		if !platformPartRE.MatchString(part) {
			return false
		}
	}
	return true
}

func known(mt string) bool {
	for _, t := range acceptedTypes {
		if mt == t {
			return true
		}
	}
	return false
}

// printable quotes a registry-supplied string for a message, so that no
// control character, newline or workflow command gets through verbatim.
func printable(s string) string {
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return fmt.Sprintf("%q", s)
}
