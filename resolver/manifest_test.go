package resolver_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/chartpin/chartpin/internal/registrytest"
	"github.com/chartpin/chartpin/resolver"
)

func TestManifestReadsAndVerifiesOnce(t *testing.T) {
	reg := registrytest.New(t)
	d := reg.PushIndex(t, "app", "1.0", "linux/amd64", "linux/arm64/v8")
	reg.Reset()
	r := newRemote(t, reg, resolver.Options{})
	ctx := context.Background()
	for range 3 {
		m, err := r.Manifest(ctx, reg.Host+"/app:1.0@"+d)
		if err != nil {
			t.Fatal(err)
		}
		if m.Digest != d || m.Ref != reg.Host+"/app@"+d || !m.IsIndex() || m.MediaType != string(types.OCIImageIndex) {
			t.Errorf("manifest %+v", m)
		}
		if strings.Join(m.Platforms, ",") != "linux/amd64,linux/arm64/v8" || len(m.Children) != 2 {
			t.Errorf("platforms %v, children %v", m.Platforms, m.Children)
		}
	}
	if n := reg.CountPath("GET", "/manifests/"+d); n != 1 || reg.Count("HEAD") != 0 {
		t.Errorf("registry saw %v; want one manifest GET for three asks", reg.Requests())
	}
	if s := r.Stats(); s.GET != 1 || s.Total() != reg.Count("") {
		t.Errorf("stats %+v, registry saw %d", s, reg.Count(""))
	}
	if _, err := r.Manifest(ctx, reg.Host+"/app:1.0"); err == nil {
		t.Error("a tag reference was accepted; Manifest reads by digest only")
	}
}

// A registry that lies in its HEAD answers, or serves a manifest no image
// should have: the digest the HEAD reports is refused by Manifest.
func TestManifestRefusesWhatARegistrySaysButDoesNotServe(t *testing.T) {
	reg := registrytest.New(t)
	index := reg.PushIndex(t, "app", "1.0", "linux/amd64", "linux/arm64")
	other := reg.PushIndex(t, "app", "0.9", "linux/amd64")
	reg.PushImage(t, "app", "single")
	amd := reg.PushImage(t, "app", "amd")
	emptyIndex := []byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}`)
	hostile, _ := json.Marshal(v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: []v1.Descriptor{{
		MediaType: types.DockerManifestSchema2, Digest: v1.Hash{Algorithm: "sha256", Hex: strings.TrimPrefix(amd, "sha256:")}, Size: 1,
		Platform: &v1.Platform{OS: "linux", Architecture: "amd64\nnginx:1.27: sha256:" + strings.Repeat("e", 64)},
	}}})
	reg.PutManifest(t, "app", "hostile", types.OCIImageIndex, hostile)
	commandIndex, _ := json.Marshal(v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: []v1.Descriptor{{
		MediaType: types.DockerManifestSchema2, Digest: v1.Hash{Algorithm: "sha256", Hex: strings.TrimPrefix(amd, "sha256:")}, Size: 1,
		Platform: &v1.Platform{OS: "::error::pwned", Architecture: "amd64"},
	}}})
	reg.PutManifest(t, "app", "command", types.OCIImageIndex, commandIndex)

	for _, c := range []struct {
		name string
		lie  registrytest.Lie
		tag  string
		want string
	}{
		// HEAD 1.0 says another image's digest; GET by it serves 1.0's bytes.
		{"wrong digest header", registrytest.Lie{Serve: "1.0", Digest: other}, "1.0", "hash to " + index + ", not \"" + other + "\""},
		{"index media type on a single-arch manifest", registrytest.Lie{MediaType: string(types.OCIImageIndex)}, "single", "the manifest says"},
		{"huge body", registrytest.Lie{Body: emptyIndex, Pad: 64 << 20}, "1.0", "more than the 4194304 bytes"},
		{"index without manifests", registrytest.Lie{Body: emptyIndex}, "1.0", "lists no manifests"},
		{"platform with a newline", registrytest.Lie{}, "hostile", `invalid platform part "amd64\nnginx:1.27`},
		{"platform with a workflow command", registrytest.Lie{}, "command", `invalid platform part "::error::pwned"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRemote(t, reg, resolver.Options{})
			ctx := context.Background()
			reg.Lie(c.lie)
			defer reg.Lie(registrytest.Lie{})
			img, err := r.Resolve(ctx, reg.Host+"/app:"+c.tag)
			if err != nil {
				t.Fatal(err)
			}
			m, err := r.Manifest(ctx, resolver.DigestRef(img.Ref, img.Digest))
			if !errors.Is(err, resolver.ErrBadManifest) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("manifest %+v, err %v; want ErrBadManifest saying %q", m, err, c.want)
			}
			if strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), reg.Host+"/app@") {
				t.Errorf("error has a raw newline or does not name the image: %q", err)
			}
			// The resolve command's path refuses the same digest.
			if _, err := resolver.ResolveEach(ctx, r, []string{reg.Host + "/app:" + c.tag}, nil); !errors.Is(err, resolver.ErrBadManifest) {
				t.Errorf("ResolveEach: %v, want ErrBadManifest", err)
			}
		})
	}
}

func TestManifestOffline(t *testing.T) {
	lock, err := resolver.ParseLock("digests.yaml", []byte("docker.io/library/nginx:1.27: {digest: "+dA+", platforms: [linux/amd64]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	off := resolver.NewOffline(lock)
	ctx := context.Background()
	m, err := off.Manifest(ctx, "nginx@"+dA)
	if err != nil || m.Digest != dA || strings.Join(m.Platforms, ",") != "linux/amd64" {
		t.Errorf("recorded digest: %+v, %v", m, err)
	}
	if err := m.Require("nginx", []string{"linux/arm64"}); !errors.Is(err, resolver.ErrPlatforms) {
		t.Errorf("missing platform: %v", err)
	}
	m, err = off.Manifest(ctx, "nginx@"+dB)
	if err != nil || m.Digest != dB || len(m.Platforms) != 0 {
		t.Errorf("unrecorded digest: %+v, %v", m, err)
	}
	if err := m.Require("nginx", []string{"linux/amd64"}); !errors.Is(err, resolver.ErrNotInLock) {
		t.Errorf("platforms required of a digest the lock says nothing about: %v, want ErrNotInLock", err)
	}
}

// Offline, a reference by digest resolves to that digest, whatever the
// lock says of the repository's tags.
func TestOfflineDigestRefIsTheDigest(t *testing.T) {
	lock, err := resolver.ParseLock("digests.yaml", []byte("docker.io/library/nginx:1.27: "+dA+"\ndocker.io/library/nginx:latest: "+dA+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	off := resolver.NewOffline(lock)
	for _, ref := range []string{"nginx@" + dB, "nginx:1.27@" + dB, "docker.io/library/nginx@" + dB} {
		img, err := off.Resolve(context.Background(), ref)
		if err != nil || img.Digest != dB || img.Ref != "docker.io/library/nginx@"+dB {
			t.Errorf("%s: %+v, %v; want %s", ref, img, err, dB)
		}
	}
}
