package pin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/chartpin/chartpin/internal/cosigned"
	"github.com/chartpin/chartpin/internal/cosigned/keyless"
	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/internal/registrytest"
	"github.com/chartpin/chartpin/resolver"
	"github.com/chartpin/chartpin/signature"
)

// planVerified plans cfg with a fresh resolver (its Stats are the plan's
// requests) checking signatures.
func planVerified(t *testing.T, opts resolver.Options, cfg string) (*Result, *resolver.Remote, error) {
	t.Helper()
	r, err := resolver.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Plan(context.Background(), Options{ConfigPath: cfg, Resolver: r, Signatures: signature.NewChecker(r)})
	return res, r, err
}

// verify: against Debian's docker-registry: a digest signed with the
// configured key is pinned; unsigned, other-key and tampered-payload digests
// are refused with the image and the reason, and nothing is written. A
// re-run over the verified pin reads no signature.
func TestVerifyAgainstDistribution(t *testing.T) {
	reg := registrytest.StartDistribution(t, registrytest.DistributionOptions{Htpasswd: map[string]string{"release": "s3cret"}})
	auth := remote.WithAuth(reg.Auth)
	insecure := []name.Option{name.Insecure}
	repo := reg.Host + "/team/app"
	old := reg.PushIndex(t, "team/app", "old", "linux/amd64", "linux/arm64")
	c, err := cosigned.PushCases(repo, func(tag string) string { return reg.PushIndex(t, "team/app", tag, "linux/amd64", "linux/arm64") }, insecure, auth)
	if err != nil {
		t.Fatal(err)
	}
	key, signed, sigDigest, otherKey, tampered := c.Key, c.Signed, c.Signature, c.OtherKey, c.Tampered

	setup := func(t *testing.T, tag string) (string, string) {
		dir := t.TempDir()
		writeTree(t, dir, map[string]string{
			"Chart.yaml":    "apiVersion: v2\nname: edge\nversion: 1.0.0\nappVersion: 1.0.0\n",
			"values.yaml":   "app:\n  repository: " + repo + "\n  tag: " + tag + "\n  digest: " + old + "\n",
			"chartpin.yaml": "charts:\n  - dir: .\n    images:\n      - at: app\n        verify:\n          key: keys/cosign.pub\n",
		})
		if err := os.MkdirAll(filepath.Join(dir, "keys"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "keys/cosign.pub"), key.PublicPEM(), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir, filepath.Join(dir, "chartpin.yaml")
	}
	plan := func(cfg string) (*Result, *resolver.Remote, error) {
		return planVerified(t, resolver.Options{InsecureRegistries: []string{reg.Host}, Keychain: resolver.StaticKeychain("release", "s3cret")}, cfg)
	}

	t.Run("signed", func(t *testing.T) {
		dir, cfg := setup(t, "signed")
		res, _, err := plan(cfg)
		if err != nil {
			t.Fatalf("signed digest refused: %v\nregistry log:\n%s", err, reg.Log())
		}
		if got := res.Charts[0].Pins[0]; got.NewDigest != signed || got.Signature != sigDigest {
			t.Errorf("pin = %+v, want digest %s verified by signature %s", got, signed, sigDigest)
		}
		if err := res.Apply(); err != nil {
			t.Fatal(err)
		}
		if values := read(t, filepath.Join(dir, "values.yaml")); !strings.Contains(values, "digest: "+signed+"\n") {
			t.Errorf("values.yaml:\n%s\nwant the signed digest", values)
		}
		// The pin stays: no signature is read again.
		again, r, err := plan(cfg)
		if err != nil || again.Changed() {
			t.Fatalf("re-run: %v, changed %v", err, again != nil && again.Changed())
		}
		if st := r.Stats(); st.GET != 0 || st.Other != 0 {
			t.Errorf("re-run over a verified pin sent %+v, want HEADs only", st)
		}
	})
	for _, tc := range []struct{ tag, digest, why string }{
		{"unsigned", "", "has no signature"},
		{"otherkey", otherKey, "signature does not verify"},
		{"tampered", tampered, "signature does not verify"},
	} {
		t.Run(tc.tag, func(t *testing.T) {
			dir, cfg := setup(t, tc.tag)
			before := hashTree(t, dir)
			res, _, err := plan(cfg)
			if !errors.Is(err, signature.ErrUnsigned) {
				t.Fatalf("Plan = %v, want a refusal wrapping ErrUnsigned", err)
			}
			msg := err.Error()
			for _, want := range []string{"values.yaml:4 (app.digest)", "image " + repo + ":" + tc.tag, tc.why, "keys/cosign.pub"} {
				if !strings.Contains(msg, want) {
					t.Errorf("refusal %q does not say %q", msg, want)
				}
			}
			if failure.Code(err) != 1 {
				t.Errorf("exit class %d, want 1", failure.Code(err))
			}
			if res == nil || !res.Refused() {
				t.Fatalf("result does not say refused")
			}
			if err := res.Apply(); err == nil {
				t.Errorf("Apply of a refused plan succeeded")
			}
			sameHashes(t, before, hashTree(t, dir))
		})
	}
	t.Run("missing key", func(t *testing.T) {
		dir, cfg := setup(t, "signed")
		if err := os.Remove(filepath.Join(dir, "keys/cosign.pub")); err != nil {
			t.Fatal(err)
		}
		_, _, err := plan(cfg)
		// A key path typed wrong is an input error before any request.
		if err == nil || !strings.Contains(err.Error(), "verify.key: ") || !strings.Contains(err.Error(), "keys/cosign.pub is not a readable file") || failure.Code(err) != 2 {
			t.Errorf("missing key: %v (exit class %d), want an input error naming the key", err, failure.Code(err))
		}
	})
	t.Run("offline", func(t *testing.T) {
		_, cfg := setup(t, "signed")
		lock := resolver.NewLock()
		lock.Set(repo+":signed", resolver.LockEntry{Digest: signed, Platforms: []string{"linux/amd64", "linux/arm64"}})
		lock.Set(repo+":old", resolver.LockEntry{Digest: old, Platforms: []string{"linux/amd64", "linux/arm64"}})
		_, err := Plan(context.Background(), Options{ConfigPath: cfg, Resolver: resolver.NewOffline(lock)})
		if !errors.Is(err, signature.ErrUnsigned) || !strings.Contains(err.Error(), "run online") {
			t.Errorf("offline with verify: %v, want a refusal", err)
		}
	})
}

// verify: {identity, issuer, trustedRoot}: a keyless signature by that
// identity under the trusted root in the chart repository is pinned; another
// identity, another issuer or a tampered payload is refused and nothing is
// written. A re-run over the verified pin reads no signature.
func TestVerifyKeyless(t *testing.T) {
	identity, issuer := keyless.Identity, keyless.Issuer
	reg := registrytest.New(t)
	insecure := []name.Option{name.Insecure}
	ss, trustedRoot, err := keyless.NewWithRoot()
	if err != nil {
		t.Fatal(err)
	}
	repo := reg.Host + "/team/app"
	old := reg.PushIndex(t, "team/app", "old", "linux/amd64", "linux/arm64")
	sign := func(tag, identity, issuer string) string {
		d := reg.PushIndex(t, "team/app", tag, "linux/amd64", "linux/arm64")
		sig, err := ss.Push(identity, issuer, repo, d, insecure)
		if err != nil {
			t.Fatal(err)
		}
		return sig
	}
	sigDigest := sign("signed", identity, issuer)
	sign("other-identity", "https://github.com/evil/app/.github/workflows/release.yaml@refs/heads/main", issuer)
	sign("other-issuer", identity, "https://accounts.google.com")
	tampered := reg.PushIndex(t, "team/app", "tampered", "linux/amd64", "linux/arm64")
	if _, err := ss.PushTampered(identity, issuer, repo, tampered, insecure); err != nil {
		t.Fatal(err)
	}

	setup := func(t *testing.T, tag string) (string, string) {
		dir := t.TempDir()
		writeTree(t, dir, map[string]string{
			"Chart.yaml":                 "apiVersion: v2\nname: edge\nversion: 1.0.0\nappVersion: 1.0.0\n",
			"values.yaml":                "app:\n  repository: " + repo + "\n  tag: " + tag + "\n  digest: " + old + "\n",
			"chartpin.yaml":              "charts:\n  - dir: .\n    images:\n      - at: app\n        verify:\n          identity: " + identity + "\n          issuer: " + issuer + "\n          trustedRoot: sigstore/trusted_root.json\n",
			"sigstore/trusted_root.json": string(trustedRoot),
		})
		return dir, filepath.Join(dir, "chartpin.yaml")
	}
	plan := func(cfg string) (*Result, *resolver.Remote, error) {
		return planVerified(t, resolver.Options{InsecureRegistries: []string{reg.Host}}, cfg)
	}

	t.Run("signed", func(t *testing.T) {
		dir, cfg := setup(t, "signed")
		res, _, err := plan(cfg)
		if err != nil {
			t.Fatalf("keyless signature refused: %v", err)
		}
		if got := res.Charts[0].Pins[0]; got.Signature != sigDigest {
			t.Errorf("pin = %+v, want it verified by signature %s", got, sigDigest)
		}
		if err := res.Apply(); err != nil {
			t.Fatal(err)
		}
		again, r, err := plan(cfg)
		if err != nil || again.Changed() {
			t.Fatalf("re-run: %v, changed %v", err, again != nil && again.Changed())
		}
		if st := r.Stats(); st.GET != 0 || st.Other != 0 {
			t.Errorf("re-run over a verified pin sent %+v, want HEADs only", st)
		}
		if values := read(t, filepath.Join(dir, "values.yaml")); strings.Contains(values, old) {
			t.Errorf("values.yaml still pins the old digest:\n%s", values)
		}
	})
	for _, tc := range []struct{ tag, why string }{
		{"other-identity", `expected SAN value "` + identity + `"`},
		{"other-issuer", `expected issuer value "` + issuer + `"`},
		{"tampered", "does not match artifact"},
	} {
		t.Run(tc.tag, func(t *testing.T) {
			dir, cfg := setup(t, tc.tag)
			before := hashTree(t, dir)
			res, _, err := plan(cfg)
			if !errors.Is(err, signature.ErrUnsigned) || failure.Code(err) != 1 {
				t.Fatalf("Plan = %v (exit class %d), want a refusal wrapping ErrUnsigned, exit 1", err, failure.Code(err))
			}
			for _, want := range []string{"values.yaml:4 (app.digest)", "image " + repo + ":" + tc.tag, tc.why, "identity " + identity} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("refusal %q does not say %q", err, want)
				}
			}
			if err := res.Apply(); err == nil {
				t.Errorf("Apply of a refused plan succeeded")
			}
			sameHashes(t, before, hashTree(t, dir))
		})
	}
}
