package signature

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/tlog"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
)

// The annotations `cosign sign` (keyless, v2) puts beside the signature.
const (
	// CertificateAnnotation holds the Fulcio signing certificate (PEM).
	CertificateAnnotation = "dev.sigstore.cosign/certificate"
	// ChainAnnotation holds the certificate's chain (PEM).
	ChainAnnotation = "dev.sigstore.cosign/chain"
	// BundleAnnotation holds the Rekor entry with its signed entry timestamp.
	BundleAnnotation = "dev.sigstore.cosign/bundle"
)

// keyless is a policy of exact certificate identity and issuer under a
// trusted root read from a file, so that it verifies without TUF or network.
type keyless struct {
	identity, issuer, rootPath string
	// rootID is the root's SHA-256: two targets quoting one root share lookups.
	rootID  string
	trusted root.TrustedMaterial
	certID  verify.CertificateIdentity
	// requireSCT: a root that lists CT logs expects certificates to carry
	// a signed certificate timestamp, as `cosign verify` does.
	requireSCT bool
}

func (k *keyless) String() string {
	return fmt.Sprintf("identity %s (issuer %s, trusted root %s)", k.identity, k.issuer, k.rootPath)
}

// LoadKeyless reads a trusted root (trusted_root.json, as sigstore's TUF
// repository serves it) into a Policy: a signature verifies when its Fulcio
// certificate chains to that root, names exactly identity (the
// certificate's subject alternative name) and issuer (its OIDC issuer),
// and its Rekor entry is signed by a log of that root.
func LoadKeyless(identity, issuer, rootPath string) (*Policy, error) {
	if identity == "" || issuer == "" {
		return nil, errors.New("keyless verification needs both an identity and an issuer")
	}
	data, err := os.ReadFile(rootPath)
	if err != nil {
		return nil, fmt.Errorf("reading trusted root %s: %w", rootPath, err)
	}
	return ParseKeyless(rootPath, identity, issuer, data)
}

// ParseKeyless is LoadKeyless on the trusted root's JSON itself (the
// reconcile's pod has no file of it); name says where it came from.
func ParseKeyless(name, identity, issuer string, rootJSON []byte) (*Policy, error) {
	if identity == "" || issuer == "" {
		return nil, fmt.Errorf("%s: keyless verification needs both an identity and an issuer", name)
	}
	tr, err := root.NewTrustedRootFromJSON(rootJSON)
	if err != nil {
		return nil, fmt.Errorf("reading trusted root %s: %w", name, err)
	}
	if len(tr.FulcioCertificateAuthorities()) == 0 || len(tr.RekorLogs()) == 0 {
		return nil, fmt.Errorf("trusted root %s: lists no certificate authority or no transparency log; keyless signatures need both", name)
	}
	id, err := verify.NewShortCertificateIdentity(issuer, "", identity, "")
	if err != nil {
		return nil, fmt.Errorf("verify identity %q, issuer %q: %w", identity, issuer, err)
	}
	return &Policy{keyless: &keyless{
		identity: identity, issuer: issuer, rootPath: name, rootID: sha256Hex(rootJSON),
		trusted: tr, certID: id, requireSCT: len(tr.CTLogs()) > 0,
	}}, nil
}

// rekorBundle is cosign's dev.sigstore.cosign/bundle annotation: the Rekor
// entry and the log's signed promise to include it.
type rekorBundle struct {
	SignedEntryTimestamp []byte `json:"SignedEntryTimestamp"`
	Payload              struct {
		Body           string `json:"body"`
		IntegratedTime int64  `json:"integratedTime"`
		LogIndex       int64  `json:"logIndex"`
		LogID          string `json:"logID"`
	} `json:"Payload"`
}

// verify checks sig over data as sigstore-go checks a keyless bundle: the
// certificate chains to the root at the log's integrated time, matches the
// identity, and the log entry records this very signature and certificate.
func (k *keyless) verify(data, sig []byte, annotations map[string]string) error {
	certPEM := annotations[CertificateAnnotation]
	if certPEM == "" {
		return errors.New("no " + CertificateAnnotation + " annotation (a key-signed signature, not keyless)")
	}
	certs, err := cryptoutils.UnmarshalCertificatesFromPEM([]byte(certPEM))
	if err != nil || len(certs) == 0 {
		return fmt.Errorf("%s: not a PEM certificate", CertificateAnnotation)
	}
	raw := annotations[BundleAnnotation]
	if raw == "" {
		return errors.New("no " + BundleAnnotation + " annotation (no Rekor entry, so no trusted signing time)")
	}
	var rb rekorBundle
	if err := json.Unmarshal([]byte(raw), &rb); err != nil {
		return fmt.Errorf("%s: %w", BundleAnnotation, err)
	}
	body, err := base64.StdEncoding.DecodeString(rb.Payload.Body)
	if err != nil {
		return fmt.Errorf("%s: body: %w", BundleAnnotation, err)
	}
	logID, err := hex.DecodeString(rb.Payload.LogID)
	if err != nil {
		return fmt.Errorf("%s: logID: %w", BundleAnnotation, err)
	}
	entry, err := tlog.NewEntry(body, rb.Payload.IntegratedTime, rb.Payload.LogIndex, logID, rb.SignedEntryTimestamp, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", BundleAnnotation, err)
	}
	v, err := verify.NewVerifier(k.trusted, k.verifierOptions()...)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	entity := &certSigned{
		msg:   bundle.NewMessageSignature(sum[:], "SHA2_256", sig),
		cert:  certs[0],
		entry: entry,
	}
	_, err = v.Verify(entity, verify.NewPolicy(verify.WithArtifact(bytes.NewReader(data)), verify.WithCertificateIdentity(k.certID)))
	return err
}

// certSigned is a keyless cosign signature as sigstore-go sees it: a
// message signature by a certificate's key, with its Rekor entry.
type certSigned struct {
	verify.BaseSignedEntity
	msg   *bundle.MessageSignature
	cert  *x509.Certificate
	entry *tlog.Entry
}

func (c *certSigned) SignatureContent() (verify.SignatureContent, error) { return c.msg, nil }
func (c *certSigned) VerificationContent() (verify.VerificationContent, error) {
	return bundle.NewCertificate(c.cert), nil
}
func (c *certSigned) HasInclusionPromise() bool           { return c.entry.HasInclusionPromise() }
func (c *certSigned) TlogEntries() ([]*tlog.Entry, error) { return []*tlog.Entry{c.entry}, nil }
func (c *certSigned) Timestamps() ([][]byte, error)       { return nil, nil }
func (c *certSigned) Version() (string, error)            { return "cosign-simple-signing", nil }

// The sigstore bundle `cosign sign --new-bundle-format` attaches as an OCI
// referrer: a DSSE envelope of an in-toto statement naming the digest.
const (
	// SigstoreBundleArtifactType is the referrer's artifact type and its layer's media type.
	SigstoreBundleArtifactType = "application/vnd.dev.sigstore.bundle.v0.3+json"
	// SignPredicateType is the statement's predicate type for a signature
	// (other predicates are attestations, not signatures).
	SignPredicateType = "https://sigstore.dev/cosign/sign/v1"
)

// verifyBundle checks a sigstore bundle under a keyless policy: certificate,
// identity and log entry as for a cosign signature, the statement's subject
// is digest, and it is a signature, not another attestation.
func verifyBundle(p *Policy, digest string, data []byte) string {
	k := p.keyless
	if k == nil {
		return "a sigstore bundle: only a keyless verify: policy reads them"
	}
	var b bundle.Bundle
	if err := b.UnmarshalJSON(data); err != nil {
		return fmt.Sprintf("not a sigstore bundle: %v", err)
	}
	sum, err := hex.DecodeString(strings.TrimPrefix(digest, "sha256:"))
	if err != nil {
		return "not a sha256 digest"
	}
	v, err := verify.NewVerifier(k.trusted, k.verifierOptions()...)
	if err != nil {
		return err.Error()
	}
	res, err := v.Verify(&b, verify.NewPolicy(verify.WithArtifactDigest("sha256", sum), verify.WithCertificateIdentity(k.certID)))
	if err != nil {
		return fmt.Sprintf("bundle does not verify: %v", err)
	}
	if res.Statement == nil || res.Statement.PredicateType != SignPredicateType {
		pt := ""
		if res.Statement != nil {
			pt = res.Statement.PredicateType
		}
		return fmt.Sprintf("bundle is an attestation (predicate %q), not a signature (%s)", pt, SignPredicateType)
	}
	return ""
}

func (k *keyless) verifierOptions() []verify.VerifierOption {
	opts := []verify.VerifierOption{verify.WithTransparencyLog(1), verify.WithIntegratedTimestamps(1)}
	if k.requireSCT {
		opts = append(opts, verify.WithSignedCertificateTimestamps(1))
	}
	return opts
}
