// Package keyless signs images the way keyless `cosign sign` (v2) does,
// against sigstore-go's in-process virtual Sigstore (a Fulcio CA issuing
// certificates for an identity and issuer, a Rekor log signing entries),
// and writes that Sigstore's trusted_root.json. For tests only.
package keyless

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	protodsse "github.com/sigstore/protobuf-specs/gen/pb-go/dsse"
	protorekor "github.com/sigstore/protobuf-specs/gen/pb-go/rekor/v1"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	"github.com/sigstore/sigstore-go/pkg/tlog"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/chartpin/chartpin/internal/cosigned"
	"github.com/chartpin/chartpin/signature"
)

// Identity and Issuer are a GitHub Actions release workflow's, the
// signer the tests configure.
const (
	Identity = "https://github.com/acme/app/.github/workflows/release.yaml@refs/heads/main"
	Issuer   = "https://token.actions.githubusercontent.com"
)

// Sigstore is a Fulcio CA and a Rekor log of its own.
type Sigstore struct{ vs *ca.VirtualSigstore }

// New starts a virtual Sigstore (keys generated, nothing listens).
func New() (*Sigstore, error) {
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		return nil, err
	}
	return &Sigstore{vs: vs}, nil
}

// NewWithRoot is New and the new Sigstore's TrustedRoot.
func NewWithRoot() (*Sigstore, []byte, error) {
	s, err := New()
	if err != nil {
		return nil, nil, err
	}
	tr, err := s.TrustedRoot()
	if err != nil {
		return nil, nil, err
	}
	return s, tr, nil
}

// TrustedRoot is trusted_root.json for this Sigstore: its CA and its log,
// no CT log (its certificates carry no SCT) and no timestamp authority.
func (s *Sigstore) TrustedRoot() ([]byte, error) { return s.TrustedRootWithCA(s) }

// TrustedRootWithCTLog is TrustedRoot listing this Sigstore's certificate
// transparency log too, as the public root does: its certificates, which
// carry no signed certificate timestamp, must then be refused.
func (s *Sigstore) TrustedRootWithCTLog() ([]byte, error) { return s.trustedRoot(s, s.vs.CTLogs()) }

// TrustedRootWithCA is a trusted root with the certificate authority of
// ca and the log of s: a signature by s has a valid log entry whose
// certificate chains to no trusted CA.
func (s *Sigstore) TrustedRootWithCA(ca *Sigstore) ([]byte, error) { return s.trustedRoot(ca, nil) }

func (s *Sigstore) trustedRoot(ca *Sigstore, ctLogs map[string]*root.TransparencyLog) ([]byte, error) {
	logs, err := rawIDs(s.vs.RekorLogs())
	if err != nil {
		return nil, err
	}
	cts, err := rawIDs(ctLogs)
	if err != nil {
		return nil, err
	}
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01, ca.vs.FulcioCertificateAuthorities(), cts, nil, logs)
	if err != nil {
		return nil, err
	}
	return tr.MarshalJSON()
}

// rawIDs copies logs with each ID set to the raw key ID the file holds
// (the virtual Sigstore names its logs by the hex string).
func rawIDs(logs map[string]*root.TransparencyLog) (map[string]*root.TransparencyLog, error) {
	out := make(map[string]*root.TransparencyLog, len(logs))
	for id, l := range logs {
		raw, err := hex.DecodeString(id)
		if err != nil {
			return nil, err
		}
		c := *l
		c.ID = raw
		out[id] = &c
	}
	return out, nil
}

// Annotations signs payload as identity (issued by issuer) and returns the
// layer annotations cosign writes: signature, certificate, chain and the
// Rekor bundle.
func (s *Sigstore) Annotations(identity, issuer string, payload []byte) (map[string]string, error) {
	e, err := s.logged(s.vs.Sign(identity, issuer, payload))
	if err != nil {
		return nil, err
	}
	bundle, err := json.Marshal(map[string]any{"SignedEntryTimestamp": e.set, "Payload": e.rp})
	if err != nil {
		return nil, err
	}
	cert, err := cryptoutils.MarshalCertificateToPEM(e.cert)
	if err != nil {
		return nil, err
	}
	fulcio := s.vs.FulcioCertificateAuthorities()[0].(*root.FulcioCertificateAuthority)
	chain, err := cryptoutils.MarshalCertificatesToPEM(append(fulcio.Intermediates, fulcio.Root))
	if err != nil {
		return nil, err
	}
	return map[string]string{
		signature.SignatureAnnotation:   base64.StdEncoding.EncodeToString(e.sig.MessageSignatureContent().Signature()),
		signature.CertificateAnnotation: string(cert),
		signature.ChainAnnotation:       string(chain),
		signature.BundleAnnotation:      string(bundle),
	}, nil
}

// entry is one signing by the virtual Sigstore: its signature, its
// certificate, its log entry and the log's signed entry timestamp (set)
// over rp.
type entry struct {
	sig  verify.SignatureContent
	cert *x509.Certificate
	tle  *protorekor.TransparencyLogEntry
	rp   tlog.RekorPayload
	set  []byte
}

// logged reads a signing's parts and has the log sign its entry.
func (s *Sigstore) logged(te *ca.TestEntity, err error) (entry, error) {
	if err != nil {
		return entry{}, err
	}
	sc, err := te.SignatureContent()
	if err != nil {
		return entry{}, err
	}
	vc, err := te.VerificationContent()
	if err != nil {
		return entry{}, err
	}
	entries, err := te.TlogEntries()
	if err != nil || len(entries) != 1 {
		return entry{}, fmt.Errorf("virtual Sigstore: want one log entry, got %d (%v)", len(entries), err)
	}
	tle := entries[0].TransparencyLogEntry()
	logID, err := s.vs.RekorLogID()
	if err != nil {
		return entry{}, err
	}
	rp := tlog.RekorPayload{
		Body:           base64.StdEncoding.EncodeToString(tle.CanonicalizedBody),
		IntegratedTime: tle.IntegratedTime,
		LogIndex:       tle.LogIndex,
		LogID:          logID,
	}
	set, err := s.vs.RekorSignPayload(rp)
	if err != nil {
		return entry{}, err
	}
	return entry{sig: sc, cert: vc.Certificate(), tle: tle, rp: rp, set: set}, nil
}

// Image is the signature manifest of repository@digest signed as identity.
func (s *Sigstore) Image(identity, issuer, repository, digest string) (v1.Image, error) {
	p := cosigned.Payload(repository, digest)
	a, err := s.Annotations(identity, issuer, p)
	if err != nil {
		return nil, err
	}
	return cosigned.AnnotatedImage(p, a)
}

// Push signs repository@digest as identity and pushes the signature to
// its .sig tag; it returns the signature manifest's digest.
func (s *Sigstore) Push(identity, issuer, repository, digest string, nameOpts []name.Option, opts ...remote.Option) (string, error) {
	img, err := s.Image(identity, issuer, repository, digest)
	if err != nil {
		return "", err
	}
	return cosigned.PushTag(img, repository, digest, nameOpts, opts...)
}

// PushTampered signs repository@digest as identity and pushes to its .sig
// tag the signature beside a tampered payload (cosigned.Tamper); it returns
// the signature manifest's digest.
func (s *Sigstore) PushTampered(identity, issuer, repository, digest string, nameOpts []name.Option, opts ...remote.Option) (string, error) {
	p := cosigned.Payload(repository, digest)
	a, err := s.Annotations(identity, issuer, p)
	if err != nil {
		return "", err
	}
	img, err := cosigned.AnnotatedImage(cosigned.Tamper(p), a)
	if err != nil {
		return "", err
	}
	return cosigned.PushTag(img, repository, digest, nameOpts, opts...)
}

// Bundle signs an in-toto statement as identity, as `cosign sign
// --new-bundle-format` does, and returns the sigstore bundle (v0.3 JSON):
// a DSSE envelope, the certificate, and the Rekor entry with its inclusion
// proof and signed entry timestamp.
func (s *Sigstore) Bundle(identity, issuer string, statement []byte) ([]byte, error) {
	e, err := s.logged(s.vs.AttestAtTime(identity, issuer, statement, time.Now().Add(5*time.Minute), true))
	if err != nil {
		return nil, err
	}
	tle := e.tle
	tle.InclusionPromise = &protorekor.InclusionPromise{SignedEntryTimestamp: e.set}
	tle.KindVersion = &protorekor.KindVersion{Kind: "dsse", Version: "0.0.1"}
	env := e.sig.EnvelopeContent().RawEnvelope()
	payload, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		return nil, err
	}
	sig, err := base64.StdEncoding.DecodeString(env.Signatures[0].Sig)
	if err != nil {
		return nil, err
	}
	pb := &protobundle.Bundle{
		MediaType: signature.SigstoreBundleArtifactType,
		VerificationMaterial: &protobundle.VerificationMaterial{
			Content:     &protobundle.VerificationMaterial_Certificate{Certificate: &protocommon.X509Certificate{RawBytes: e.cert.Raw}},
			TlogEntries: []*protorekor.TransparencyLogEntry{tle},
		},
		Content: &protobundle.Bundle_DsseEnvelope{DsseEnvelope: &protodsse.Envelope{
			Payload:     payload,
			PayloadType: env.PayloadType,
			Signatures:  []*protodsse.Signature{{Sig: sig}},
		}},
	}
	return protojson.Marshal(pb)
}

// Statement is the in-toto statement `cosign sign --new-bundle-format`
// signs for repository@digest (predicate type predicateType).
func Statement(repository, digest, predicateType string) []byte {
	algo, hex, _ := strings.Cut(digest, ":")
	b, _ := json.Marshal(map[string]any{
		"_type":         "https://in-toto.io/Statement/v1",
		"subject":       []any{map[string]any{"name": repository, "digest": map[string]string{algo: hex}}},
		"predicateType": predicateType,
		"predicate":     map[string]any{},
	})
	return b
}

// PushBundle pushes a sigstore bundle as an OCI referrer of
// repository@digest, as cosign does; it returns the referrer's digest.
func PushBundle(bundle []byte, repository, digest string, nameOpts []name.Option, opts ...remote.Option) (string, error) {
	mt := types.MediaType(signature.SigstoreBundleArtifactType)
	img, err := cosigned.LayerImage(mt, mt, bundle, nil)
	if err != nil {
		return "", err
	}
	return cosigned.Attach(img, repository, digest, nameOpts, opts...)
}
