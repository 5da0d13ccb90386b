// Package signature decides whether an image digest carries a valid
// signature under a policy, before chartpin pins or rolls out that digest.
//
// Signatures are found where cosign puts them: the sha256-<hex>.sig tag in
// the image's repository and the OCI referrers of the digest. Every request
// goes through the resolver (counted, mirrored, authenticated, bounded);
// the cryptography is sigstore-go's.
package signature

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	sigsig "github.com/sigstore/sigstore/pkg/signature"

	"github.com/chartpin/chartpin/resolver"
)

// ErrUnsigned: the digest has no signature that verifies under the policy.
var ErrUnsigned = errors.New("no valid signature")

// ErrNotRecorded is ErrUnsigned from a lock file that records no signature
// of the digest (its text is ErrUnsigned's): nothing was verified either way.
var ErrNotRecorded = fmt.Errorf("%w", ErrUnsigned)

// Policy says whose signature a digest needs: a public key (cosign.pub),
// or a keyless identity and issuer under a trusted root (LoadKeyless).
type Policy struct {
	// KeyPath is where the key was read from, for messages.
	KeyPath string
	// KeyID is the key's hex SHA-256 over its DER form, for messages and caching.
	KeyID    string
	verifier sigsig.Verifier

	keyless *keyless
}

// Spec is a verify: policy as chartpin.yaml writes it, paths absolute:
// Key, or Identity and Issuer under TrustedRoot.
type Spec struct {
	Key, Identity, Issuer, TrustedRoot string
}

// IsZero reports whether no signature is asked for.
func (s Spec) IsZero() bool { return s == Spec{} }

// Load reads the key or the trusted root the spec names.
func Load(s Spec) (*Policy, error) {
	if s.Key != "" {
		return LoadKey(s.Key)
	}
	return LoadKeyless(s.Identity, s.Issuer, s.TrustedRoot)
}

// LoadKey reads a PEM public key (as `cosign generate-key-pair` writes
// cosign.pub) into a Policy.
func LoadKey(path string) (*Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading verify key: %w", err)
	}
	return ParseKey(path, data)
}

// ParseKey parses PEM public key bytes; name is used in messages.
func ParseKey(name string, pem []byte) (*Policy, error) {
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(pem)
	if err != nil {
		return nil, fmt.Errorf("%s: not a PEM public key (want the cosign.pub of `cosign generate-key-pair`): %w", name, err)
	}
	// cosign signs with SHA-256 whatever the curve; so does the check.
	v, err := sigsig.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	der, err := cryptoutils.MarshalPublicKeyToDER(pub)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &Policy{KeyPath: name, KeyID: sha256Hex(der), verifier: v}, nil
}

// String names the policy in messages.
func (p *Policy) String() string {
	if p.keyless != nil {
		return p.keyless.String()
	}
	return "key " + p.KeyPath
}

// id tells policies apart in the per-run cache, by what they trust (the
// key, or the identity, issuer and root), not by where that was read from.
func (p *Policy) id() string {
	if p.keyless != nil {
		return "keyless\x00" + p.keyless.identity + "\x00" + p.keyless.issuer + "\x00" + p.keyless.rootID
	}
	return p.KeyID
}

// howToSign is the next step for an unsigned digest.
func (p *Policy) howToSign() string {
	if p.keyless != nil {
		return "sign it keyless as that identity (cosign sign, which also logs it in Rekor)"
	}
	return "sign it with the private half of " + p.String() + " (cosign sign --key)"
}

func (p *Policy) trustedMaterial() root.TrustedMaterial {
	return root.NewTrustedPublicKeyMaterialFromMapping(map[string]*root.ExpiringKey{
		p.KeyID: root.NewExpiringKey(p.verifier, zeroTime, zeroTime),
	})
}

// Verified is a digest whose signature verified.
type Verified struct {
	// Digest is the image digest.
	Digest string `json:"digest"`
	// Signature is the digest of the manifest that carried the signature.
	Signature string `json:"signature"`
}

// Checker checks digests against policies, each (repository, digest,
// policy) once per run, concurrently safe.
type Checker struct {
	src resolver.Artifacts
	// lock, when src is nil, is where signatures are read from (offline).
	lock *resolver.Lock
	// record, when set, receives every verified signature (--write-digests).
	record *resolver.Lock

	mu   sync.Mutex
	done map[string]*result
}

type result struct {
	ready chan struct{}
	v     Verified
	err   error
}

// NewChecker reads signatures through src (a *resolver.Remote).
func NewChecker(src resolver.Artifacts) *Checker {
	return &Checker{src: src, done: map[string]*result{}}
}

// NewLockChecker verifies the signatures a lock file recorded, offline:
// the same checks against the policy's key or trusted root, no request.
func NewLockChecker(lock *resolver.Lock) *Checker {
	return &Checker{lock: lock, done: map[string]*result{}}
}

// RecordInto makes c record every signature it verifies into lock, so that
// an offline run can verify the digest from it; it returns c.
func (c *Checker) RecordInto(lock *resolver.Lock) *Checker {
	c.record = lock
	return c
}

// Check returns the verified signature of repository@digest under p, or an
// error wrapping ErrUnsigned that says what was found and why it failed.
// repository is registry/repository as the chart names it.
func (c *Checker) Check(ctx context.Context, p *Policy, repository, digest string) (Verified, error) {
	key := repository + "@" + digest + " " + p.id()
	c.mu.Lock()
	if r, ok := c.done[key]; ok {
		c.mu.Unlock()
		select {
		case <-r.ready:
			return r.v, r.err
		case <-ctx.Done():
			return Verified{}, ctx.Err()
		}
	}
	r := &result{ready: make(chan struct{})}
	c.done[key] = r
	c.mu.Unlock()
	if c.src == nil {
		r.v, r.err = c.checkLock(p, repository, digest)
	} else {
		r.v, r.err = c.check(ctx, p, repository, digest)
	}
	if r.err != nil && ctx.Err() != nil {
		c.mu.Lock()
		delete(c.done, key) // cut short: the next caller asks again
		c.mu.Unlock()
	}
	close(r.ready)
	return r.v, r.err
}

// check looks at the cosign tag first (one manifest GET and one payload
// GET for a signed digest), then at the referrers.
func (c *Checker) check(ctx context.Context, p *Policy, repository, digest string) (Verified, error) {
	if !strings.HasPrefix(digest, "sha256:") {
		return Verified{}, fmt.Errorf("checking the signature of %s@%s: not a sha256 digest", repository, digest)
	}
	var reasons []string
	tag := repository + ":" + strings.Replace(digest, ":", "-", 1) + ".sig"
	m, err := c.src.Fetch(ctx, tag)
	switch {
	case errors.Is(err, resolver.ErrNotFound):
	case err != nil:
		return Verified{}, fmt.Errorf("reading signatures of %s@%s: %w", repository, digest, err)
	default:
		if ev, why := c.verifyManifest(ctx, p, repository, digest, m); why == "" {
			return c.verified(repository, digest, ev), nil
		} else {
			reasons = append(reasons, "tag "+tagOnly(tag)+": "+why)
		}
	}
	refs, err := c.src.Referrers(ctx, repository, digest)
	if err != nil {
		return Verified{}, fmt.Errorf("reading signatures of %s@%s: %w", repository, digest, err)
	}
	for _, d := range refs {
		if !isSignatureArtifact(d.ArtifactType, p) {
			continue
		}
		m, err := c.src.Fetch(ctx, repository+"@"+d.Digest.String())
		if err != nil {
			return Verified{}, fmt.Errorf("reading signature %s of %s@%s: %w", d.Digest, repository, digest, err)
		}
		ev, why := c.verifyManifest(ctx, p, repository, digest, m)
		if why == "" {
			return c.verified(repository, digest, ev), nil
		}
		reasons = append(reasons, "referrer "+d.Digest.String()+": "+why)
	}
	if len(reasons) == 0 {
		return Verified{}, fmt.Errorf("%w: %s@%s has no signature (no %s tag, no signature referrer); %s or point the tag at a signed digest",
			ErrUnsigned, repository, digest, tagOnly(tag), p.howToSign())
	}
	return Verified{}, fmt.Errorf("%w: %s@%s: no signature verifies with %s (%s)", ErrUnsigned, repository, digest, p, strings.Join(reasons, "; "))
}

// verified records ev when asked to and names the signature that verified.
func (c *Checker) verified(repository, digest string, ev resolver.LockSignature) Verified {
	if c.record != nil {
		c.record.SetSignature(repository, digest, ev)
	}
	return Verified{Digest: digest, Signature: ev.Manifest}
}

// checkLock verifies the signature the lock recorded for repository@digest.
func (c *Checker) checkLock(p *Policy, repository, digest string) (Verified, error) {
	rec, ok := c.lock.Signature(repository, digest)
	if !ok {
		return Verified{}, fmt.Errorf("%w: %s@%s: the digest lock file records no signature of it; write the lock online with --write-digests, or run online", ErrNotRecorded, repository, digest)
	}
	if why := verifyRecorded(p, digest, rec); why != "" {
		return Verified{}, fmt.Errorf("%w: %s@%s: the signature the digest lock file records (%s) does not verify with %s: %s", ErrUnsigned, repository, digest, rec.Manifest, p, why)
	}
	return c.verified(repository, digest, rec), nil
}

func tagOnly(ref string) string {
	_, tag, _ := resolver.SplitRef(ref)
	return tag
}
