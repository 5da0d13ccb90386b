// Package keyless signs images the way keyless `cosign sign` (v2) does,
// against sigstore-go's in-process virtual Sigstore (a Fulcio CA issuing
// certificates for an identity and issuer, a Rekor log signing entries),
// and writes that Sigstore's trusted_root.json. For tests only.
package keyless

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	"github.com/sigstore/sigstore-go/pkg/tlog"
	"github.com/sigstore/sigstore/pkg/cryptoutils"

	"github.com/chartpin/chartpin/internal/cosigned"
	"github.com/chartpin/chartpin/signature"
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
	logs := map[string]*root.TransparencyLog{}
	for id, l := range s.vs.RekorLogs() {
		c := *l
		// The virtual log names itself by the hex string; the file holds the raw key ID.
		raw, err := hex.DecodeString(id)
		if err != nil {
			return nil, err
		}
		c.ID = raw
		logs[id] = &c
	}
	cts := map[string]*root.TransparencyLog{}
	for id, l := range ctLogs {
		c := *l
		raw, err := hex.DecodeString(id)
		if err != nil {
			return nil, err
		}
		c.ID = raw
		cts[id] = &c
	}
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01, ca.vs.FulcioCertificateAuthorities(), cts, nil, logs)
	if err != nil {
		return nil, err
	}
	return tr.MarshalJSON()
}

// Annotations signs payload as identity (issued by issuer) and returns the
// layer annotations cosign writes: signature, certificate, chain and the
// Rekor bundle.
func (s *Sigstore) Annotations(identity, issuer string, payload []byte) (map[string]string, error) {
	e, err := s.vs.Sign(identity, issuer, payload)
	if err != nil {
		return nil, err
	}
	sc, err := e.SignatureContent()
	if err != nil {
		return nil, err
	}
	vc, err := e.VerificationContent()
	if err != nil {
		return nil, err
	}
	entries, err := e.TlogEntries()
	if err != nil || len(entries) != 1 {
		return nil, fmt.Errorf("virtual Sigstore: want one log entry, got %d (%v)", len(entries), err)
	}
	tle := entries[0].TransparencyLogEntry()
	logID, err := s.vs.RekorLogID()
	if err != nil {
		return nil, err
	}
	rp := tlog.RekorPayload{
		Body:           base64.StdEncoding.EncodeToString(tle.CanonicalizedBody),
		IntegratedTime: tle.IntegratedTime,
		LogIndex:       tle.LogIndex,
		LogID:          logID,
	}
	set, err := s.vs.RekorSignPayload(rp)
	if err != nil {
		return nil, err
	}
	bundle, err := json.Marshal(map[string]any{"SignedEntryTimestamp": set, "Payload": rp})
	if err != nil {
		return nil, err
	}
	cert, err := cryptoutils.MarshalCertificateToPEM(vc.Certificate())
	if err != nil {
		return nil, err
	}
	fulcio := s.vs.FulcioCertificateAuthorities()[0].(*root.FulcioCertificateAuthority)
	chain, err := cryptoutils.MarshalCertificatesToPEM(append(fulcio.Intermediates, fulcio.Root))
	if err != nil {
		return nil, err
	}
	return map[string]string{
		signature.SignatureAnnotation:   base64.StdEncoding.EncodeToString(sc.MessageSignatureContent().Signature()),
		signature.CertificateAnnotation: string(cert),
		signature.ChainAnnotation:       string(chain),
		signature.BundleAnnotation:      string(bundle),
	}, nil
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
