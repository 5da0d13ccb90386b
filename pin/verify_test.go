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
	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/internal/registrytest"
	"github.com/chartpin/chartpin/resolver"
	"github.com/chartpin/chartpin/signature"
)

// verify: against Debian's docker-registry: a digest signed with the
// configured key is pinned; unsigned, other-key and tampered-payload digests
// are refused with the image and the reason, and nothing is written. A
// re-run over the verified pin reads no signature.
func TestVerifyAgainstDistribution(t *testing.T) {
	reg := registrytest.StartDistribution(t, registrytest.DistributionOptions{Htpasswd: map[string]string{"release": "s3cret"}})
	auth := remote.WithAuth(reg.Auth)
	insecure := []name.Option{name.Insecure}
	key, err := cosigned.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	other, err := cosigned.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	repo := reg.Host + "/team/app"
	old := reg.PushIndex(t, "team/app", "old", "linux/amd64", "linux/arm64")
	signed := reg.PushIndex(t, "team/app", "signed", "linux/amd64", "linux/arm64")
	sigDigest, err := key.Push(repo, signed, insecure, auth)
	if err != nil {
		t.Fatal(err)
	}
	reg.PushIndex(t, "team/app", "unsigned", "linux/amd64", "linux/arm64")
	otherKey := reg.PushIndex(t, "team/app", "otherkey", "linux/amd64", "linux/arm64")
	if _, err := other.Push(repo, otherKey, insecure, auth); err != nil {
		t.Fatal(err)
	}
	tampered := reg.PushIndex(t, "team/app", "tampered", "linux/amd64", "linux/arm64")
	sig, err := key.Sign(cosigned.Payload(repo, tampered))
	if err != nil {
		t.Fatal(err)
	}
	evil := []byte(strings.Replace(string(cosigned.Payload(repo, tampered)), `"optional":null`, `"optional":{"by":"ci"}`, 1))
	img, err := cosigned.Image(evil, sig)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cosigned.PushTag(img, repo, tampered, insecure, auth); err != nil {
		t.Fatal(err)
	}

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
		r, err := resolver.New(resolver.WithInsecureRegistries(reg.Host), resolver.WithKeychain(resolver.StaticKeychain("release", "s3cret")))
		if err != nil {
			t.Fatal(err)
		}
		res, err := Plan(context.Background(), Options{ConfigPath: cfg, Resolver: r, Signatures: signature.NewChecker(r)})
		return res, r, err
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
		if err == nil || !strings.Contains(err.Error(), "chartpin.yaml:4): reading verify key") || !strings.Contains(err.Error(), "keys/cosign.pub") {
			t.Errorf("missing key: %v", err)
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
