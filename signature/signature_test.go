package signature_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/chartpin/chartpin/internal/cosigned"
	"github.com/chartpin/chartpin/internal/registrytest"
	"github.com/chartpin/chartpin/resolver"
	"github.com/chartpin/chartpin/signature"
)

var insecure = []name.Option{name.Insecure}

func newKey(t *testing.T) (*cosigned.Key, *signature.Policy) {
	t.Helper()
	k, err := cosigned.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cosign.pub")
	if err := os.WriteFile(path, k.PublicPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := signature.LoadKey(path)
	if err != nil {
		t.Fatal(err)
	}
	return k, p
}

// newChecker checks through a Remote with o that speaks plain HTTP to host.
func newChecker(t *testing.T, host string, o resolver.Options) (*signature.Checker, *resolver.Remote) {
	t.Helper()
	o.InsecureRegistries = append(o.InsecureRegistries, host)
	r, err := resolver.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return signature.NewChecker(r), r
}

// pathsSeen lists the request paths the registry saw, ping excluded.
func pathsSeen(reqs []registrytest.Request) []string {
	var out []string
	for _, q := range reqs {
		if q.Path != "/v2/" {
			out = append(out, q.Method+" "+q.Path)
		}
	}
	return out
}

func TestSignedDigestVerifiesWithOneLookup(t *testing.T) {
	reg := registrytest.New(t)
	key, policy := newKey(t)
	repo := reg.Host + "/app"
	digest := reg.PushIndex(t, "app", "1.0", "linux/amd64", "linux/arm64")
	sigDigest, err := key.Push(repo, digest, insecure)
	if err != nil {
		t.Fatal(err)
	}
	reg.Reset()
	c, _ := newChecker(t, reg.Host, resolver.Options{})
	ctx := context.Background()
	for range 3 {
		v, err := c.Check(ctx, policy, repo, digest)
		if err != nil {
			t.Fatalf("signed digest refused: %v", err)
		}
		if v.Digest != digest || v.Signature != sigDigest {
			t.Fatalf("verified = %+v, want digest %s signature %s", v, digest, sigDigest)
		}
	}
	// One lookup: the .sig manifest and its payload blob, once for three checks.
	got := strings.Join(pathsSeen(reg.Requests()), "\n")
	tag := "sha256-" + strings.TrimPrefix(digest, "sha256:") + ".sig"
	if !strings.HasPrefix(got, "GET /v2/app/manifests/"+tag+"\nGET /v2/app/blobs/sha256:") || strings.Count(got, "\n") != 1 {
		t.Errorf("registry saw:\n%s\nwant one GET of the %s manifest and one of its payload", got, tag)
	}
}

func TestRefusals(t *testing.T) {
	reg := registrytest.New(t)
	key, policy := newKey(t)
	other, _ := newKey(t)
	repo := reg.Host + "/app"
	unsigned := reg.PushIndex(t, "app", "unsigned", "linux/amd64")
	otherKey := reg.PushIndex(t, "app", "other", "linux/amd64")
	if _, err := other.Push(repo, otherKey, insecure); err != nil {
		t.Fatal(err)
	}
	// The payload is changed after signing: the signature no longer covers it.
	tampered := reg.PushIndex(t, "app", "tampered", "linux/amd64")
	sig, err := key.Sign(cosigned.Payload(repo, tampered))
	if err != nil {
		t.Fatal(err)
	}
	evil := strings.Replace(string(cosigned.Payload(repo, tampered)), "cosign container image signature", "cosign container image signaturE", 1)
	img, err := cosigned.Image([]byte(evil), sig)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cosigned.PushTag(img, repo, tampered, insecure); err != nil {
		t.Fatal(err)
	}
	// A valid signature of another digest copied to this digest's tag.
	replayed := reg.PushIndex(t, "app", "replayed", "linux/amd64")
	p := cosigned.Payload(repo, otherKey)
	sig, err = key.Sign(p)
	if err != nil {
		t.Fatal(err)
	}
	if img, err = cosigned.Image(p, sig); err != nil {
		t.Fatal(err)
	}
	if _, err := cosigned.PushTag(img, repo, replayed, insecure); err != nil {
		t.Fatal(err)
	}

	c, _ := newChecker(t, reg.Host, resolver.Options{})
	for _, tc := range []struct {
		name, digest, want string
	}{
		{"unsigned", unsigned, "has no signature (no sha256-" + strings.TrimPrefix(unsigned, "sha256:") + ".sig tag, no signature referrer)"},
		{"other key", otherKey, "signature does not verify"},
		{"tampered payload", tampered, "signature does not verify"},
		{"replayed signature", replayed, "signed payload names " + otherKey + ", not this digest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := c.Check(context.Background(), policy, repo, tc.digest)
			if !errors.Is(err, signature.ErrUnsigned) {
				t.Fatalf("Check = %+v, %v; want ErrUnsigned", v, err)
			}
			msg := err.Error()
			for _, want := range []string{tc.want, repo + "@" + tc.digest, policy.KeyPath} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not say %q", msg, want)
				}
			}
		})
	}
}

func TestReferrerSignature(t *testing.T) {
	reg := registrytest.New(t, registry.WithReferrersSupport(true))
	key, policy := newKey(t)
	repo := reg.Host + "/app"
	digest := reg.PushIndex(t, "app", "1.0", "linux/amd64")
	sigDigest, err := key.PushReferrer(repo, digest, insecure)
	if err != nil {
		t.Fatal(err)
	}
	reg.Reset()
	c, _ := newChecker(t, reg.Host, resolver.Options{})
	v, err := c.Check(context.Background(), policy, repo, digest)
	if err != nil {
		t.Fatalf("referrer signature refused: %v", err)
	}
	if v.Signature != sigDigest {
		t.Errorf("signature = %s, want the referrer %s", v.Signature, sigDigest)
	}
	if n := reg.CountPath("GET", "/referrers/"); n != 1 {
		t.Errorf("registry saw %d referrers GETs, want 1: %v", n, pathsSeen(reg.Requests()))
	}
}

func TestMirrorServesTheSignature(t *testing.T) {
	mirror := registrytest.New(t)
	key, policy := newKey(t)
	digest := mirror.PushIndex(t, "team/app", "1.0", "linux/amd64")
	if _, err := key.Push(mirror.Host+"/team/app", digest, insecure); err != nil {
		t.Fatal(err)
	}
	mirror.Reset()
	c, _ := newChecker(t, mirror.Host, resolver.Options{Mirrors: map[string]string{"registry.example": mirror.Host}})
	if _, err := c.Check(context.Background(), policy, "registry.example/team/app", digest); err != nil {
		t.Fatalf("signature through the mirror refused: %v", err)
	}
	if mirror.CountPath("GET", "/manifests/") != 1 {
		t.Errorf("mirror saw %v, want the .sig manifest once", pathsSeen(mirror.Requests()))
	}
}

func TestParseKeyRefusesNonKeys(t *testing.T) {
	_, err := signature.ParseKey("keys/cosign.pub", []byte("-----BEGIN COSIGN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END COSIGN ENCRYPTED PRIVATE KEY-----\n"))
	if err == nil || !strings.Contains(err.Error(), "keys/cosign.pub: not a PEM public key") {
		t.Fatalf("err = %v, want a refusal naming the file", err)
	}
}

func TestDistribution(t *testing.T) {
	reg := registrytest.StartDistribution(t, registrytest.DistributionOptions{Htpasswd: map[string]string{"ci": "s3cret"}})
	key, policy := newKey(t)
	repo := reg.Host + "/app"
	signed := reg.PushIndex(t, "app", "signed", "linux/amd64", "linux/arm64")
	unsigned := reg.PushIndex(t, "app", "unsigned", "linux/amd64", "linux/arm64")
	auth := remote.WithAuth(reg.Auth)
	sigDigest, err := key.Push(repo, signed, insecure, auth)
	if err != nil {
		t.Fatal(err)
	}
	referred := reg.PushIndex(t, "app", "referred", "linux/amd64")
	refDigest, err := key.PushReferrer(repo, referred, insecure, auth)
	if err != nil {
		t.Fatal(err)
	}
	keychain, err := resolver.RegistryAuthKeychain(reg.Host+"=ci:s3cret", authn.DefaultKeychain)
	if err != nil {
		t.Fatal(err)
	}
	c, r := newChecker(t, reg.Host, resolver.Options{Keychain: keychain})
	ctx := context.Background()
	v, err := c.Check(ctx, policy, repo, signed)
	if err != nil || v.Signature != sigDigest {
		t.Fatalf("signed: %+v, %v; want signature %s", v, err, sigDigest)
	}
	// distribution 2.8 has no referrers API: the fallback tag is read.
	v, err = c.Check(ctx, policy, repo, referred)
	if err != nil || v.Signature != refDigest {
		t.Fatalf("referrer on distribution: %+v, %v; want signature %s", v, err, refDigest)
	}
	before := r.Stats()
	if _, err := c.Check(ctx, policy, repo, unsigned); !errors.Is(err, signature.ErrUnsigned) {
		t.Fatalf("unsigned: %v, want ErrUnsigned", err)
	}
	// An unsigned digest costs three GETs: the .sig tag, the referrers API and its fallback tag.
	after := r.Stats()
	if got := after.Total() - before.Total(); got != 3 {
		t.Errorf("unsigned digest cost %d requests (%+v → %+v), want 3", got, before, after)
	}
}
