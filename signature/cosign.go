package signature

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/tlog"
	"github.com/sigstore/sigstore-go/pkg/verify"

	"github.com/chartpin/chartpin/resolver"
)

// The formats cosign writes (its "simple signing" signatures).
const (
	// SimpleSigningMediaType is the media type of a signed payload layer.
	SimpleSigningMediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	// SignatureAnnotation holds the base64 signature over the payload.
	SignatureAnnotation = "dev.cosignproject.cosign/signature"
	// SignatureArtifactType marks a signature stored as an OCI referrer.
	SignatureArtifactType = "application/vnd.dev.cosign.artifact.sig.v1+json"
)

var zeroTime time.Time

// isSignatureArtifact: a cosign signature referrer, or a sigstore bundle
// (read under a keyless policy only).
func isSignatureArtifact(t string, p *Policy) bool {
	return t == SignatureArtifactType || (t == SigstoreBundleArtifactType && p.keyless != nil)
}

// payload is the part of a simple-signing payload the check needs.
type payload struct {
	Critical struct {
		Image struct {
			Digest string `json:"docker-manifest-digest"`
		} `json:"image"`
		Type string `json:"type"`
	} `json:"critical"`
}

// verifyManifest tries every signature layer of a signature manifest and
// returns what verified first (as a lock file records it), or why none did.
func (c *Checker) verifyManifest(ctx context.Context, p *Policy, repository, digest string, m resolver.Manifest) (resolver.LockSignature, string) {
	var man v1.Manifest
	if err := json.Unmarshal(m.Raw, &man); err != nil {
		return resolver.LockSignature{}, fmt.Sprintf("not an image manifest: %v", err)
	}
	var whys []string
	for _, l := range man.Layers {
		if string(l.MediaType) == SigstoreBundleArtifactType && p.keyless != nil {
			data, err := c.src.Blob(ctx, repository, l.Digest.String())
			if err != nil {
				whys = append(whys, fmt.Sprintf("reading bundle: %v", err))
				continue
			}
			why := verifyBundle(p, digest, data)
			if why == "" {
				return resolver.LockSignature{Manifest: m.Digest, SigstoreBundle: base64.StdEncoding.EncodeToString(data)}, ""
			}
			whys = append(whys, why)
			continue
		}
		if string(l.MediaType) != SimpleSigningMediaType {
			continue
		}
		data, why := c.verifyLayer(ctx, p, repository, digest, l)
		if why == "" {
			return resolver.LockSignature{
				Manifest:    m.Digest,
				Payload:     base64.StdEncoding.EncodeToString(data),
				Signature:   l.Annotations[SignatureAnnotation],
				Certificate: encodeIfSet(l.Annotations[CertificateAnnotation]),
				Bundle:      encodeIfSet(l.Annotations[BundleAnnotation]),
			}, ""
		}
		whys = append(whys, why)
	}
	if len(whys) == 0 {
		return resolver.LockSignature{}, "no simple-signing layer or sigstore bundle"
	}
	return resolver.LockSignature{}, strings.Join(whys, "; ")
}

func encodeIfSet(s string) string {
	if s == "" {
		return ""
	}
	return base64.StdEncoding.EncodeToString([]byte(s))
}

// verifyRecorded checks a signature a lock file recorded as if the
// registry had served it.
func verifyRecorded(p *Policy, digest string, rec resolver.LockSignature) string {
	if rec.SigstoreBundle != "" {
		data, err := base64.StdEncoding.DecodeString(rec.SigstoreBundle)
		if err != nil {
			return "sigstore bundle is not base64"
		}
		return verifyBundle(p, digest, data)
	}
	data, err := base64.StdEncoding.DecodeString(rec.Payload)
	if err != nil {
		return "payload is not base64"
	}
	annotations := map[string]string{SignatureAnnotation: rec.Signature}
	for k, v := range map[string]string{CertificateAnnotation: rec.Certificate, BundleAnnotation: rec.Bundle} {
		if v == "" {
			continue
		}
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return k + " is not base64"
		}
		annotations[k] = string(b)
	}
	return verifyPayload(p, digest, data, annotations)
}

// verifyLayer reads a layer's payload and verifies it; it returns the payload.
func (c *Checker) verifyLayer(ctx context.Context, p *Policy, repository, digest string, l v1.Descriptor) ([]byte, string) {
	if l.Annotations[SignatureAnnotation] == "" {
		return nil, "layer " + l.Digest.String() + " has no " + SignatureAnnotation + " annotation"
	}
	data, err := c.src.Blob(ctx, repository, l.Digest.String())
	if err != nil {
		return nil, fmt.Sprintf("reading payload: %v", err)
	}
	return data, verifyPayload(p, digest, data, l.Annotations)
}

// verifyPayload checks one signed payload and the annotations of its layer
// under p, and that the payload claims digest; "" when it verifies.
func verifyPayload(p *Policy, digest string, data []byte, annotations map[string]string) string {
	sig, err := base64.StdEncoding.DecodeString(annotations[SignatureAnnotation])
	if err != nil || len(sig) == 0 {
		return "no " + SignatureAnnotation + " annotation"
	}
	if p.keyless != nil {
		err = p.keyless.verify(data, sig, annotations)
	} else {
		err = verifyBlob(p, data, sig)
	}
	if err != nil {
		return fmt.Sprintf("signature does not verify: %v", err)
	}
	// Only now, with the payload authenticated, is its claim worth reading.
	var pl payload
	if err := json.Unmarshal(data, &pl); err != nil {
		return fmt.Sprintf("signed payload is not JSON: %v", err)
	}
	if pl.Critical.Image.Digest != digest {
		return fmt.Sprintf("signed payload names %s, not this digest", pl.Critical.Image.Digest)
	}
	return ""
}

// verifyBlob checks sig over data with sigstore-go's verifier: a
// key-signed message, no transparency log, no timestamps (the key alone
// is the trust, as with `cosign verify --key --insecure-ignore-tlog`).
func verifyBlob(p *Policy, data, sig []byte) error {
	v, err := verify.NewVerifier(p.trustedMaterial(), verify.WithNoObserverTimestamps())
	if err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	entity := &keySigned{
		msg:  bundle.NewMessageSignature(sum[:], "SHA2_256", sig),
		hint: p.KeyID,
	}
	_, err = v.Verify(entity, verify.NewPolicy(verify.WithArtifact(bytes.NewReader(data)), verify.WithKey()))
	return err
}

// keySigned is a cosign signature as sigstore-go sees it: a message
// signature made by a known key, with no log entry and no timestamp.
type keySigned struct {
	verify.BaseSignedEntity
	msg  *bundle.MessageSignature
	hint string
}

func (k *keySigned) SignatureContent() (verify.SignatureContent, error) { return k.msg, nil }
func (k *keySigned) VerificationContent() (verify.VerificationContent, error) {
	return keyContent{k.hint}, nil
}
func (k *keySigned) Timestamps() ([][]byte, error)       { return nil, nil }
func (k *keySigned) TlogEntries() ([]*tlog.Entry, error) { return nil, nil }
func (k *keySigned) Version() (string, error)            { return "cosign-simple-signing", nil }

// keyContent names the policy's key by its ID.
type keyContent struct{ hint string }

func (k keyContent) Hint() string { return k.hint }
func (k keyContent) CompareKey(key any, tm root.TrustedMaterial) bool {
	v, err := tm.PublicKeyVerifier(k.hint)
	if err != nil {
		return false
	}
	pub, err := v.PublicKey()
	if err != nil {
		return false
	}
	eq, ok := key.(interface{ Equal(any) bool })
	return ok && eq.Equal(pub)
}
func (k keyContent) ValidAtTime(t time.Time, tm root.TrustedMaterial) bool {
	v, err := tm.PublicKeyVerifier(k.hint)
	return err == nil && v.ValidAtTime(t)
}
func (k keyContent) Certificate() *x509.Certificate      { return nil }
func (k keyContent) Intermediates() []*x509.Certificate  { return nil }
func (k keyContent) PublicKey() verify.PublicKeyProvider { return k }

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
