// Package cosigned writes image signatures the way `cosign sign --key`
// does (simple-signing payload, ECDSA P-256 over SHA-256, pushed to the
// sha256-<hex>.sig tag or as an OCI referrer), so the demo and the tests
// can sign without the cosign binary. Verification never uses it.
package cosigned

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/chartpin/chartpin/signature"
)

// Key is a signing key pair.
type Key struct{ priv *ecdsa.PrivateKey }

// NewKey generates an ECDSA P-256 key, as `cosign generate-key-pair` does.
func NewKey() (*Key, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	return &Key{priv: priv}, nil
}

// PublicPEM is the public key as cosign.pub holds it.
func (k *Key) PublicPEM() []byte {
	der, err := x509.MarshalPKIXPublicKey(&k.priv.PublicKey)
	if err != nil {
		panic(err) // a P-256 key always marshals
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// Payload is cosign's simple-signing payload claiming repository@digest.
func Payload(repository, digest string) []byte {
	b, _ := json.Marshal(map[string]any{
		"critical": map[string]any{
			"identity": map[string]string{"docker-reference": repository},
			"image":    map[string]string{"docker-manifest-digest": digest},
			"type":     "cosign container image signature",
		},
		"optional": nil,
	})
	return b
}

// Sign signs payload: ASN.1 ECDSA over its SHA-256.
func (k *Key) Sign(payload []byte) ([]byte, error) {
	sum := sha256.Sum256(payload)
	return ecdsa.SignASN1(rand.Reader, k.priv, sum[:])
}

// Image is a signature manifest with one simple-signing layer carrying
// payload and sig.
func Image(payload, sig []byte) (v1.Image, error) {
	return AnnotatedImage(payload, map[string]string{signature.SignatureAnnotation: base64.StdEncoding.EncodeToString(sig)})
}

// AnnotatedImage is a signature manifest with one simple-signing layer
// carrying payload and the layer annotations cosign writes beside it (the
// signature, and for a keyless one its certificate, chain and Rekor bundle).
func AnnotatedImage(payload []byte, annotations map[string]string) (v1.Image, error) {
	return LayerImage(types.OCIConfigJSON, signature.SimpleSigningMediaType, payload, annotations)
}

// LayerImage is an OCI manifest with config media type configType and one
// layer of layerType holding content, with annotations on the layer.
func LayerImage(configType, layerType types.MediaType, content []byte, annotations map[string]string) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, configType)
	return mutate.Append(img, mutate.Addendum{
		Layer:       static.NewLayer(content, layerType),
		Annotations: annotations,
	})
}

// SignatureTag is where cosign stores the signatures of repository@digest.
func SignatureTag(repository, digest string, opts ...name.Option) (name.Tag, error) {
	return name.NewTag(repository+":"+strings.Replace(digest, ":", "-", 1)+".sig", opts...)
}

// Push signs repository@digest and pushes the signature to its .sig tag
// (replacing what was there); it returns the signature manifest's digest.
func (k *Key) Push(repository, digest string, nameOpts []name.Option, opts ...remote.Option) (string, error) {
	img, err := k.signed(repository, digest)
	if err != nil {
		return "", err
	}
	return PushTag(img, repository, digest, nameOpts, opts...)
}

// PushTag pushes a signature manifest to the .sig tag of repository@digest.
func PushTag(img v1.Image, repository, digest string, nameOpts []name.Option, opts ...remote.Option) (string, error) {
	tag, err := SignatureTag(repository, digest, nameOpts...)
	if err != nil {
		return "", err
	}
	if err := remote.Write(tag, img, opts...); err != nil {
		return "", fmt.Errorf("pushing signature %s: %w", tag, err)
	}
	d, err := img.Digest()
	return d.String(), err
}

// PushReferrer signs repository@digest and pushes the signature as an OCI
// referrer of it (cosign's --registry-referrers-mode=oci-1-1); it returns
// the signature manifest's digest.
func (k *Key) PushReferrer(repository, digest string, nameOpts []name.Option, opts ...remote.Option) (string, error) {
	img, err := k.signed(repository, digest)
	if err != nil {
		return "", err
	}
	return Attach(mutate.ConfigMediaType(img, signature.SignatureArtifactType), repository, digest, nameOpts, opts...)
}

// Attach pushes img as an OCI referrer of repository@digest (its subject
// set to that manifest, read from the registry), as cosign does with
// referrers; it returns the referrer's digest.
func Attach(img v1.Image, repository, digest string, nameOpts []name.Option, opts ...remote.Option) (string, error) {
	subjectRef, err := name.NewDigest(repository+"@"+digest, nameOpts...)
	if err != nil {
		return "", err
	}
	subject, err := remote.Head(subjectRef, opts...)
	if err != nil {
		return "", fmt.Errorf("reading subject %s: %w", subjectRef, err)
	}
	withSubject, ok := mutate.Subject(img, *subject).(v1.Image)
	if !ok {
		return "", fmt.Errorf("setting the subject of a referrer")
	}
	d, err := withSubject.Digest()
	if err != nil {
		return "", err
	}
	ref, err := name.NewDigest(repository+"@"+d.String(), nameOpts...)
	if err != nil {
		return "", err
	}
	if err := remote.Write(ref, withSubject, opts...); err != nil {
		return "", fmt.Errorf("pushing referrer %s: %w", ref, err)
	}
	return d.String(), nil
}

func (k *Key) signed(repository, digest string) (v1.Image, error) {
	p := Payload(repository, digest)
	sig, err := k.Sign(p)
	if err != nil {
		return nil, err
	}
	return Image(p, sig)
}

// Tamper is payload with a field added after signing: a signature over
// payload no longer covers it.
func Tamper(payload []byte) []byte {
	return []byte(strings.Replace(string(payload), `"optional":null`, `"optional":{"by":"ci"}`, 1))
}

// PushTampered signs repository@digest and pushes to its .sig tag the
// signature beside a tampered payload (Tamper); it returns the signature
// manifest's digest.
func (k *Key) PushTampered(repository, digest string, nameOpts []name.Option, opts ...remote.Option) (string, error) {
	p := Payload(repository, digest)
	sig, err := k.Sign(p)
	if err != nil {
		return "", err
	}
	img, err := Image(Tamper(p), sig)
	if err != nil {
		return "", err
	}
	return PushTag(img, repository, digest, nameOpts, opts...)
}

// Cases are the images a verify: test checks, each under the tag of its
// name in one repository: signed by Key, unsigned, signed by another key
// (otherkey) and signed by Key beside a tampered payload (tampered).
type Cases struct {
	Key                                  *Key
	Signed, Unsigned, OtherKey, Tampered string // image digests
	Signature                            string // Signed's signature manifest
}

// PushCases pushes the Cases to repository with a fresh Key; push(tag)
// pushes an image to repository:tag and returns its digest.
func PushCases(repository string, push func(tag string) string, nameOpts []name.Option, opts ...remote.Option) (Cases, error) {
	key, err := NewKey()
	if err != nil {
		return Cases{}, err
	}
	other, err := NewKey()
	if err != nil {
		return Cases{}, err
	}
	c := Cases{Key: key, Signed: push("signed"), Unsigned: push("unsigned"), OtherKey: push("otherkey"), Tampered: push("tampered")}
	if c.Signature, err = key.Push(repository, c.Signed, nameOpts, opts...); err != nil {
		return Cases{}, err
	}
	if _, err := other.Push(repository, c.OtherKey, nameOpts, opts...); err != nil {
		return Cases{}, err
	}
	if _, err := key.PushTampered(repository, c.Tampered, nameOpts, opts...); err != nil {
		return Cases{}, err
	}
	return c, nil
}
