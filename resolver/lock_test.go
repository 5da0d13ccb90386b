package resolver_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chartpin/chartpin/internal/registrytest"
	"github.com/chartpin/chartpin/resolver"
)

var (
	dA = "sha256:" + strings.Repeat("a", 64)
	dB = "sha256:" + strings.Repeat("b", 64)
)

func TestParseLockBothForms(t *testing.T) {
	lock, err := resolver.ParseLock("digests.yaml", []byte(`# ref (fully qualified, with tag): index digest
docker.io/library/nginx:1.27.3: `+dA+`
ghcr.io/example/ingestor:0.8:
  digest: `+dB+`
  platforms: [linux/amd64, linux/arm64]
`))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	off := resolver.NewOffline(lock)
	img, err := off.Resolve(ctx, "nginx:1.27.3") // short names normalize onto the lock's keys
	if err != nil || img.Digest != dA || img.Ref != "docker.io/library/nginx:1.27.3" {
		t.Errorf("nginx: %+v, %v", img, err)
	}
	if _, err := off.Platforms(ctx, img); !errors.Is(err, resolver.ErrNotInLock) {
		t.Errorf("platforms of an entry without them: %v, want ErrNotInLock", err)
	}
	img, err = off.Resolve(ctx, "ghcr.io/example/ingestor:0.8")
	if err != nil || img.Digest != dB {
		t.Fatalf("ingestor: %+v, %v", img, err)
	}
	if p, err := off.Platforms(ctx, img); err != nil || strings.Join(p, ",") != "linux/amd64,linux/arm64" {
		t.Errorf("platforms %v, %v", p, err)
	}
	_, err = off.Resolve(ctx, "ghcr.io/example/ingestor:0.9")
	if !errors.Is(err, resolver.ErrNotInLock) || !strings.Contains(err.Error(), "ghcr.io/example/ingestor:0.9") {
		t.Errorf("missing entry: %v, want ErrNotInLock naming the ref", err)
	}
	if _, err := off.Tags(ctx, "ghcr.io/example/ingestor"); !errors.Is(err, resolver.ErrUnsupported) {
		t.Errorf("tags offline: %v", err)
	}
}

func TestParseLockErrorsNameFileAndLine(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{"a/b:1: " + dA + "\na/b:2: sha256:short\n", "digests.yaml:2:"},
		{"a/b:1: " + dA + "\na/b:1: " + dB + "\n", "digests.yaml:2: a/b:1 appears twice"},
		{"a/b:1:\n  digest: " + dA + "\n  platform: [linux/amd64]\n", `digests.yaml:3: a/b:1: unknown key "platform"`},
		{"- a/b:1\n", "digests.yaml:1: want a mapping"},
		{"a/b:1: " + dA + "\n---\na/b:2: " + dB + "\n", "digests.yaml:2: a second YAML document"},
		{"a/b:1: {digest: " + dA + ", platforms: [\"linux/amd64\\nnginx:1.27: " + dB + "\"]}\n", `digests.yaml:1: a/b:1: platform "linux/amd64\nnginx:1.27`},
		{"a/b:1: {digest: " + dA + ", platforms: [\"::error::x/amd64\"]}\n", `platform "::error::x/amd64"`},
		{"a/b:1: {digest: " + dA + ", mediaType: text/html}\n", `mediaType "text/html" is neither`},
		{"a/b:1: {digest: " + dA + ", source: \"x y\"}\n", `source "x y" is not an image reference`},
		{"a/b: {tags: [\"1.0\", \"::warning::x\"]}\n", `"::warning::x" is not an image tag`},
		{"a/b:1: [x]\n", "digests.yaml:1:"},
		{"a/b:1: {digest: " + dA + ", signature: {manifest: " + dB + ", payload: \"e30=\", signature: \"e30=\", cert: \"x\"}}\n", `digests.yaml:1: a/b:1: signature: unknown key "cert"`},
		{"a/b:1: {digest: " + dA + ", signature: {manifest: sha256:short, payload: \"e30=\", signature: \"e30=\"}}\n", `signature manifest "sha256:short" is not a sha256 digest`},
		{"a/b:1: {digest: " + dA + ", signature: {manifest: " + dB + ", payload: \"not base64!\", signature: \"e30=\"}}\n", "signature payload is not base64"},
		{"a/b:1: {digest: " + dA + ", signature: {manifest: " + dB + ", payload: \"e30=\"}}\n", "signature signature is not base64"},
		{"a/b:1: {digest: " + dA + ", signature: sha256:x}\n", "signature: want a mapping"},
	} {
		_, err := resolver.ParseLock("digests.yaml", []byte(c.body))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err = %v, want %q", c.body, err, c.want)
		}
	}
}

// A run recorded with --write-digests answers the same run offline, with no registry.
func TestLockRoundTrip(t *testing.T) {
	origin := registrytest.New(t)
	mirror := registrytest.New(t)
	multi := origin.PushIndex(t, "app", "1", "linux/amd64", "linux/arm64")
	single := origin.PushImage(t, "tool", "2")
	mirrored := mirror.PushIndex(t, "lib/x", "3", "linux/arm64")
	r, err := resolver.New(resolver.Options{InsecureRegistries: []string{origin.Host, mirror.Host}, Mirrors: map[string]string{"docker.io": mirror.Host}})
	if err != nil {
		t.Fatal(err)
	}
	rec := resolver.NewRecorder(r)
	refs := []string{origin.Host + "/app:1", origin.Host + "/tool:2", "docker.io/lib/x:3"}
	online, err := resolver.ResolveEach(context.Background(), rec, refs, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "digests.yaml")
	if err := rec.Lock().WriteFile(path); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	for _, want := range []string{
		origin.Host + "/app:1: {digest: " + multi + ", mediaType: application/vnd.oci.image.index.v1+json, platforms: [linux/amd64, linux/arm64]}\n",
		origin.Host + "/tool:2: {digest: " + single + ", mediaType: application/vnd.docker.distribution.manifest.v2+json}\n",
		"docker.io/lib/x:3: {digest: " + mirrored + ", mediaType: application/vnd.oci.image.index.v1+json, platforms: [linux/arm64], source: " + mirror.Host + "/lib/x:3}\n",
	} {
		if !strings.Contains(string(data), want) {
			t.Errorf("lock file lacks %q:\n%s", want, data)
		}
	}
	lock, err := resolver.ReadLock(path)
	if err != nil {
		t.Fatal(err)
	}
	offline, err := resolver.ResolveEach(context.Background(), resolver.NewOffline(lock), refs, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range refs {
		on, off := online[i], offline[i]
		if on.Ref != off.Ref || on.Digest != off.Digest || on.Source != off.Source || on.MediaType != off.MediaType || strings.Join(on.Platforms, ",") != strings.Join(off.Platforms, ",") {
			t.Errorf("online %+v\noffline %+v", on, off)
		}
	}
	// Offline, a required-platforms check runs from the recorded platforms.
	if _, err := resolver.ResolveEach(context.Background(), resolver.NewOffline(lock), refs[:1], []string{"linux/s390x"}); !errors.Is(err, resolver.ErrPlatforms) {
		t.Errorf("offline platforms check: %v, want ErrPlatforms", err)
	}
}

// A recorded run keeps what an offline run needs to check a move: the
// platforms of a replaced pin (by digest) and the tags a range was
// chosen from. A lock without them says how to get them.
func TestLockRecordsReplacedPinsAndTags(t *testing.T) {
	reg := registrytest.New(t)
	old := reg.PushIndex(t, "app", "0.9", "linux/amd64", "linux/arm64")
	cur := reg.PushIndex(t, "app", "1.0", "linux/amd64", "linux/arm64", "linux/s390x")
	r, err := resolver.New(resolver.Options{InsecureRegistries: []string{reg.Host}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rec := resolver.NewRecorder(r)
	img, err := rec.Resolve(ctx, reg.Host+"/app:1.0")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{img.Digest, old} {
		if _, err := rec.Manifest(ctx, resolver.DigestRef(img.Ref, d)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rec.Tags(ctx, reg.Host+"/app"); err != nil {
		t.Fatal(err)
	}
	data := string(rec.Lock().Bytes())
	for _, want := range []string{
		reg.Host + "/app:1.0: {digest: " + cur + ", mediaType: application/vnd.oci.image.index.v1+json, platforms: [linux/amd64, linux/arm64, linux/s390x]}\n",
		reg.Host + "/app@" + old + ": {digest: " + old + ", mediaType: application/vnd.oci.image.index.v1+json, platforms: [linux/amd64, linux/arm64]}\n",
		reg.Host + "/app: {tags: [0.9, 1.0]}\n",
	} {
		if !strings.Contains(data, want) {
			t.Errorf("lock lacks %q:\n%s", want, data)
		}
	}
	lock, err := resolver.ParseLock("digests.yaml", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	off := resolver.NewOffline(lock)
	if p, err := off.Platforms(ctx, resolver.Image{Ref: img.Ref, Digest: old}); err != nil || strings.Join(p, ",") != "linux/amd64,linux/arm64" {
		t.Errorf("offline platforms of the replaced pin: %v, %v", p, err)
	}
	if tags, err := off.Tags(ctx, reg.Host+"/app"); err != nil || strings.Join(tags, ",") != "0.9,1.0" {
		t.Errorf("offline tags: %v, %v", tags, err)
	}
	if _, err := off.Tags(ctx, reg.Host+"/other"); !errors.Is(err, resolver.ErrUnsupported) || !strings.Contains(err.Error(), "record the lock online") || strings.Contains(err.Error(), "--") {
		t.Errorf("offline tags of an unrecorded repository: %v", err)
	}
	for body, want := range map[string]string{
		"a/b@" + dA + ": {digest: " + dB + "}\n": "differs from the one in the reference",
		"a/b:1: {tags: [1]}\n":                   "tags: belong to a repository without tag or digest",
		"a/b: {tags: [1], digest: " + dA + "}\n": "a tag list holds tags: only",
	} {
		if _, err := resolver.ParseLock("digests.yaml", []byte(body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", body, err, want)
		}
	}
}

// A recorded signature is written on the entries of its repository and
// digest (or under repository@digest when none holds it), read back from
// the file, and found by repository and digest.
func TestLockSignatureRoundTrip(t *testing.T) {
	lock := resolver.NewLock()
	lock.Set("registry.example/team/app:1.0", resolver.LockEntry{Digest: dA, Platforms: []string{"linux/amd64"}})
	sig := resolver.LockSignature{Manifest: dB, Payload: "eyJhIjoxfQ==", Signature: "MEUCIQ+/", Certificate: "LS0t", Bundle: "1234"}
	lock.SetSignature("registry.example/team/app", dA, sig)
	lock.SetSignature("registry.example/team/other", dB, resolver.LockSignature{Manifest: dA, Payload: "e30=", Signature: "e30="})
	data := string(lock.Bytes())
	for _, want := range []string{
		"registry.example/team/app:1.0: {digest: " + dA + ", platforms: [linux/amd64], signature: {manifest: " + dB + `, payload: "eyJhIjoxfQ==", signature: "MEUCIQ+/", certificate: "LS0t", bundle: "1234"}}` + "\n",
		"registry.example/team/other@" + dB + ": {digest: " + dB + ", signature: {manifest: " + dA + `, payload: "e30=", signature: "e30="}}` + "\n",
	} {
		if !strings.Contains(data, want) {
			t.Errorf("lock lacks %q:\n%s", want, data)
		}
	}
	back, err := resolver.ParseLock("digests.yaml", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := back.Signature("registry.example/team/app", dA); !ok || got != sig {
		t.Errorf("signature read back = %+v, %v; want %+v", got, ok, sig)
	}
	if _, ok := back.Signature("registry.example/team/app", dB); ok {
		t.Errorf("a signature found for a digest the lock did not sign")
	}
	if string(back.Bytes()) != data {
		t.Errorf("rewritten lock differs:\n%s\nwant\n%s", back.Bytes(), data)
	}
}
