package signature_test

import (
	"context"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/chartpin/chartpin/internal/cosigned/keyless"
	"github.com/chartpin/chartpin/internal/registrytest"
	"github.com/chartpin/chartpin/resolver"
	"github.com/chartpin/chartpin/signature"
)

const identity, issuer = keyless.Identity, keyless.Issuer

// newSigstore starts a virtual Sigstore and writes its trusted_root.json.
func newSigstore(t *testing.T) (*keyless.Sigstore, string) {
	t.Helper()
	s, tr, err := keyless.NewWithRoot()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "trusted_root.json")
	if err := os.WriteFile(path, tr, 0o644); err != nil {
		t.Fatal(err)
	}
	return s, path
}

// recordingChecker is the keyless policy for identity under rootPath and a
// checker reading reg that records what it verifies into lock.
func recordingChecker(t *testing.T, reg *registrytest.Registry, rootPath string) (*signature.Policy, *signature.Checker, *resolver.Lock) {
	t.Helper()
	policy, err := signature.LoadKeyless(identity, issuer, rootPath)
	if err != nil {
		t.Fatal(err)
	}
	r, err := resolver.New(resolver.Options{InsecureRegistries: []string{reg.Host}})
	if err != nil {
		t.Fatal(err)
	}
	lock := resolver.NewLock()
	return policy, signature.NewChecker(r).RecordInto(lock), lock
}

func TestKeyless(t *testing.T) {
	reg := registrytest.New(t)
	ss, rootPath := newSigstore(t)
	otherCA, _ := newSigstore(t)
	repo := reg.Host + "/app"
	push := func(tag string, sign func(digest string) error) string {
		t.Helper()
		d := reg.PushIndex(t, "app", tag, "linux/amd64")
		if sign != nil {
			if err := sign(d); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	var sigDigest string
	signed := push("signed", func(d string) (err error) {
		sigDigest, err = ss.Push(identity, issuer, repo, d, insecure)
		return err
	})
	otherIdentity := push("other-identity", func(d string) error {
		_, err := ss.Push("https://github.com/evil/app/.github/workflows/x.yaml@refs/heads/main", issuer, repo, d, insecure)
		return err
	})
	otherIssuer := push("other-issuer", func(d string) error {
		_, err := ss.Push(identity, "https://accounts.google.com", repo, d, insecure)
		return err
	})
	otherLog := push("other-log", func(d string) error {
		_, err := otherCA.Push(identity, issuer, repo, d, insecure)
		return err
	})
	// The payload is changed after signing: the signature no longer covers it.
	tampered := push("tampered", func(d string) error {
		_, err := ss.PushTampered(identity, issuer, repo, d, insecure)
		return err
	})
	// Signed with a key: no certificate to match an identity against.
	keySigned := push("key-signed", func(d string) error {
		k, _ := newKey(t)
		_, err := k.Push(repo, d, insecure)
		return err
	})

	policy, err := signature.LoadKeyless(identity, issuer, rootPath)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := newChecker(t, reg.Host, resolver.Options{})
	ctx := context.Background()
	reg.Reset()
	v, err := c.Check(ctx, policy, repo, signed)
	if err != nil {
		t.Fatalf("keyless signature refused: %v", err)
	}
	if v.Digest != signed || v.Signature != sigDigest {
		t.Errorf("verified = %+v, want digest %s signature %s", v, signed, sigDigest)
	}
	if n := len(pathsSeen(reg.Requests())); n != 2 {
		t.Errorf("registry saw %v, want the .sig manifest and its payload", pathsSeen(reg.Requests()))
	}
	// The same root quoted under another name (two reconcile targets, each
	// with its own copy) is the same policy: no second lookup.
	rootJSON, err := os.ReadFile(rootPath)
	if err != nil {
		t.Fatal(err)
	}
	quoted, err := signature.ParseKeyless(`targets.yaml:9: target "b" verify.trustedRoot`, identity, issuer, rootJSON)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Check(ctx, quoted, repo, signed); err != nil {
		t.Fatalf("the same policy, quoted: %v", err)
	}
	if n := len(pathsSeen(reg.Requests())); n != 2 {
		t.Errorf("registry saw %v after the quoted root, want no more than the first check's 2", pathsSeen(reg.Requests()))
	}
	for _, tc := range []struct{ name, digest, want string }{
		{"other identity", otherIdentity, `expected SAN value "` + identity + `"`},
		{"other issuer", otherIssuer, `expected issuer value "` + issuer + `"`},
		{"another Sigstore's log", otherLog, "not enough verified log entries"},
		{"tampered payload", tampered, "does not match artifact"},
		{"key-signed", keySigned, "no " + signature.CertificateAnnotation + " annotation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := c.Check(ctx, policy, repo, tc.digest)
			if !errors.Is(err, signature.ErrUnsigned) {
				t.Fatalf("Check = %+v, %v; want ErrUnsigned", v, err)
			}
			for _, want := range []string{tc.want, repo + "@" + tc.digest, "identity " + identity, "issuer " + issuer, rootPath} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
	for _, tc := range []struct {
		name string
		root func() ([]byte, error)
		want string
	}{
		// Our log, another CA: the log entry verifies, the certificate chains to nothing trusted.
		{"certificate from another CA", func() ([]byte, error) { return ss.TrustedRootWithCA(otherCA) }, "leaf certificate verification failed"},
		// A root listing a CT log asks for an SCT in the certificate, as cosign does.
		{"no SCT under a root with a CT log", ss.TrustedRootWithCTLog, "failed to verify signed certificate timestamp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := tc.root()
			if err != nil {
				t.Fatal(err)
			}
			p, err := signature.LoadKeyless(identity, issuer, writeFile(t, "trusted_root.json", string(tr)))
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Check(ctx, p, repo, signed)
			if !errors.Is(err, signature.ErrUnsigned) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Check = %v, want a refusal saying %q", err, tc.want)
			}
		})
	}
	t.Run("the same digest under a key policy", func(t *testing.T) {
		_, kp := newKey(t)
		if _, err := c.Check(ctx, kp, repo, signed); !errors.Is(err, signature.ErrUnsigned) {
			t.Errorf("a keyless signature verified under a key: %v", err)
		}
	})
}

func TestLoadKeylessRefusals(t *testing.T) {
	_, rootPath := newSigstore(t)
	for _, tc := range []struct{ identity, issuer, root, want string }{
		{identity, "", rootPath, "needs both an identity and an issuer"},
		{identity, issuer, filepath.Join(t.TempDir(), "missing.json"), "reading trusted root"},
		{identity, issuer, writeFile(t, "root.json", `{"mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1"}`), "lists no certificate authority"},
	} {
		if _, err := signature.LoadKeyless(tc.identity, tc.issuer, tc.root); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("LoadKeyless(%q, %q, %s) = %v, want %q", tc.identity, tc.issuer, tc.root, err, tc.want)
		}
	}
}

func writeFile(t *testing.T, name, data string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A keyless signature verified online is recorded with its certificate and
// Rekor bundle; the lock checker verifies it again from the lock alone and
// refuses it under another identity or once the recorded bundle is altered.
func TestKeylessFromTheLock(t *testing.T) {
	reg := registrytest.New(t)
	ss, rootPath := newSigstore(t)
	repo := reg.Host + "/app"
	digest := reg.PushIndex(t, "app", "1.0", "linux/amd64")
	sigDigest, err := ss.Push(identity, issuer, repo, digest, insecure)
	if err != nil {
		t.Fatal(err)
	}
	policy, c, lock := recordingChecker(t, reg, rootPath)
	ctx := context.Background()
	if _, err := c.Check(ctx, policy, repo, digest); err != nil {
		t.Fatal(err)
	}
	rec, ok := lock.Signature(repo, digest)
	if !ok || rec.Manifest != sigDigest || rec.Certificate == "" || rec.Bundle == "" {
		t.Fatalf("recorded %+v, %v; want the signature %s with its certificate and bundle", rec, ok, sigDigest)
	}
	read, err := resolver.ParseLock("digests.yaml", lock.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	reg.Reset()
	v, err := signature.NewLockChecker(read).Check(ctx, policy, repo, digest)
	if err != nil || v.Signature != sigDigest {
		t.Errorf("from the lock: %+v, %v; want signature %s", v, err, sigDigest)
	}
	if n := len(reg.Requests()); n != 0 {
		t.Errorf("the lock checker sent %d requests", n)
	}
	other, err := signature.LoadKeyless("someone@example.com", issuer, rootPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := signature.NewLockChecker(read).Check(ctx, other, repo, digest); !errors.Is(err, signature.ErrUnsigned) || !strings.Contains(err.Error(), "expected SAN value") {
		t.Errorf("another identity from the lock: %v, want refused", err)
	}
	// The recorded bundle claims another signing time: its signed entry timestamp no longer covers it.
	bundle, _ := base64.StdEncoding.DecodeString(rec.Bundle)
	altered := rec
	altered.Bundle = base64.StdEncoding.EncodeToString([]byte(strings.Replace(string(bundle), `"integratedTime":`, `"integratedTime":1`, 1)))
	tampered := resolver.NewLock()
	tampered.SetSignature(repo, digest, altered)
	if _, err := signature.NewLockChecker(tampered).Check(ctx, policy, repo, digest); !errors.Is(err, signature.ErrUnsigned) || !strings.Contains(err.Error(), "the signature the digest lock file records ("+sigDigest+") does not verify") {
		t.Errorf("altered bundle: %v, want refused", err)
	}
	if _, err := signature.NewLockChecker(resolver.NewLock()).Check(ctx, policy, repo, digest); !errors.Is(err, signature.ErrUnsigned) || !strings.Contains(err.Error(), "records no signature of it") {
		t.Errorf("nothing recorded: %v, want refused", err)
	}
}

// A sigstore bundle attached as an OCI referrer (cosign sign
// --new-bundle-format) verifies under a keyless policy, and again from the
// lock; an attestation of another predicate, a bundle for another digest and
// another identity's bundle do not; a key policy does not read bundles.
func TestKeylessBundleReferrer(t *testing.T) {
	reg := registrytest.New(t, registry.WithReferrersSupport(true))
	ss, rootPath := newSigstore(t)
	repo := reg.Host + "/app"
	push := func(tag string, statement func(digest string) []byte, id string) (string, string) {
		t.Helper()
		d := reg.PushIndex(t, "app", tag, "linux/amd64")
		b, err := ss.Bundle(id, issuer, statement(d))
		if err != nil {
			t.Fatal(err)
		}
		ref, err := keyless.PushBundle(b, repo, d, insecure)
		if err != nil {
			t.Fatal(err)
		}
		return d, ref
	}
	sign := func(d string) []byte { return keyless.Statement(repo, d, signature.SignPredicateType) }
	signed, ref := push("signed", sign, identity)
	sbom, _ := push("sbom", func(d string) []byte { return keyless.Statement(repo, d, "https://spdx.dev/Document") }, identity)
	other, _ := push("other", func(string) []byte { return sign(signed) }, identity)
	theirs, _ := push("theirs", sign, "someone@example.com")

	policy, c, lock := recordingChecker(t, reg, rootPath)
	ctx := context.Background()
	v, err := c.Check(ctx, policy, repo, signed)
	if err != nil || v.Signature != ref {
		t.Fatalf("bundle referrer: %+v, %v; want signature %s", v, err, ref)
	}
	for _, tc := range []struct{ name, digest, want string }{
		{"attestation", sbom, `bundle is an attestation (predicate "https://spdx.dev/Document")`},
		{"another digest", other, "bundle does not verify"},
		{"another identity", theirs, `expected SAN value "` + identity + `"`},
	} {
		if _, err := c.Check(ctx, policy, repo, tc.digest); !errors.Is(err, signature.ErrUnsigned) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a refusal saying %q", tc.name, err, tc.want)
		}
	}
	_, kp := newKey(t)
	if _, err := c.Check(ctx, kp, repo, signed); !errors.Is(err, signature.ErrUnsigned) || !strings.Contains(err.Error(), "has no signature") {
		t.Errorf("key policy over a bundle: %v, want no signature found", err)
	}
	read, err := resolver.ParseLock("digests.yaml", lock.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if rec, ok := read.Signature(repo, signed); !ok || rec.SigstoreBundle == "" || rec.Manifest != ref {
		t.Fatalf("lock recorded %+v, %v; want the bundle of %s", rec, ok, ref)
	}
	if _, err := signature.NewLockChecker(read).Check(ctx, policy, repo, signed); err != nil {
		t.Errorf("bundle from the lock: %v", err)
	}
}
