package resolver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// MaxBlobBytes is the largest blob Remote reads into memory (a signature
// payload is a few hundred bytes).
const MaxBlobBytes = 4 << 20

// Artifacts reads what sits beside an image in its repository (signatures,
// referrers) through the same counted, mirrored, authenticated and bounded
// transport as Resolve. *Remote implements it.
type Artifacts interface {
	// Fetch GETs the manifest repository:tag or repository@digest names,
	// checked as Manifest checks it; ErrNotFound when absent.
	Fetch(ctx context.Context, ref string) (Manifest, error)
	// Blob GETs a blob of repository (registry/repository) by digest.
	Blob(ctx context.Context, repository, digest string) ([]byte, error)
	// Referrers lists the manifests whose subject is repository@digest.
	Referrers(ctx context.Context, repository, digest string) ([]v1.Descriptor, error)
}

var _ Artifacts = (*Remote)(nil)

// Fetch implements Artifacts: Manifest, by tag too (a signature tag is read
// once, with no HEAD first). Its Raw bytes are the ones that were hashed.
func (r *Remote) Fetch(ctx context.Context, ref string) (Manifest, error) {
	norm, err := Normalize(ref)
	if err != nil {
		return Manifest{}, err
	}
	src, err := r.source(norm)
	if err != nil {
		return Manifest{}, err
	}
	m, err := r.manifests.do(ctx, src.String(), func() (Manifest, error) { return r.fetch(ctx, src) })
	m.Ref = norm
	return m, err
}

// Blob implements Artifacts; the bytes are checked against digest.
func (r *Remote) Blob(ctx context.Context, repository, digest string) ([]byte, error) {
	repo, err := r.repository(repository)
	if err != nil {
		return nil, err
	}
	where := displayName(repo.Digest(digest))
	if !digestRE.MatchString(digest) {
		return nil, fmt.Errorf("blob %s: %q is not a sha256 digest", where, digest)
	}
	resp, err := r.get(ctx, repo, "blobs/"+digest, "")
	if err != nil {
		return nil, classify(where, err)
	}
	defer resp.Body.Close()
	data, err := readLimited(resp.Body, MaxBlobBytes)
	if err != nil {
		return nil, fmt.Errorf("reading blob %s: %w", where, err)
	}
	if got := sha256Digest(data); got != digest {
		return nil, fmt.Errorf("blob %s: the registry sent bytes hashing to %s; refusing them", where, got)
	}
	return data, nil
}

// Referrers implements Artifacts with the OCI referrers API, falling back to
// the referrers tag (sha256-<hex>) when the registry has no such API. No
// referrers is an empty list, not an error.
func (r *Remote) Referrers(ctx context.Context, repository, digest string) ([]v1.Descriptor, error) {
	repo, err := r.repository(repository)
	if err != nil {
		return nil, err
	}
	if !digestRE.MatchString(digest) {
		return nil, fmt.Errorf("referrers of %s: %q is not a sha256 digest", repository, digest)
	}
	where := displayName(repo.Digest(digest))
	var data []byte
	resp, err := r.get(ctx, repo, "referrers/"+digest, "application/vnd.oci.image.index.v1+json")
	switch {
	case err == nil:
		defer resp.Body.Close()
		if data, err = readLimited(resp.Body, MaxManifestBytes); err != nil {
			return nil, fmt.Errorf("reading referrers of %s: %w", where, err)
		}
	case isStatus(err, http.StatusNotFound):
		// No referrers API: the index lives under the fallback tag, if anywhere.
		m, err := r.Fetch(ctx, displayName(repo.Tag(strings.Replace(digest, ":", "-", 1))))
		if errors.Is(err, ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		data = m.Raw
	default:
		return nil, classify(where, err)
	}
	idx, err := v1.ParseIndexManifest(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("referrers of %s: %w", where, err)
	}
	return idx.Manifests, nil
}

// repository parses registry/repository and applies --registry-mirror.
func (r *Remote) repository(repository string) (name.Repository, error) {
	ref, err := Normalize(repository + ":latest")
	if err != nil {
		return name.Repository{}, err
	}
	src, err := r.source(ref)
	if err != nil {
		return name.Repository{}, err
	}
	return src.Context(), nil
}

// get sends GET /v2/<repository>/<path> through the authenticated transport
// and returns the response when it is 200; any other status is a
// *transport.Error.
func (r *Remote) get(ctx context.Context, repo name.Repository, path, accept string) (*http.Response, error) {
	rt, err := r.repos.do(ctx, repo.String(), func() (http.RoundTripper, error) { return r.authenticate(ctx, repo) })
	if err != nil {
		return nil, err
	}
	u := repo.Registry.Scheme() + "://" + repo.RegistryStr() + "/v2/" + repo.RepositoryStr() + "/" + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	req.Header.Set("User-Agent", "chartpin")
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if err := transport.CheckError(resp, http.StatusOK); err != nil {
		resp.Body.Close()
		return nil, err
	}
	return resp, nil
}

func isStatus(err error, code int) bool {
	var te *transport.Error
	return errors.As(err, &te) && te.StatusCode == code
}

// readLimited reads at most limit bytes and fails beyond.
func readLimited(r io.Reader, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("larger than %d bytes; refusing to read it", limit)
	}
	return data, nil
}

func sha256Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
