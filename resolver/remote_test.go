package resolver_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/chartpin/chartpin/internal/registrytest"
	"github.com/chartpin/chartpin/resolver"
)

func newRemote(t *testing.T, reg *registrytest.Registry, opts ...resolver.Option) *resolver.Remote {
	t.Helper()
	r, err := resolver.New(append([]resolver.Option{resolver.WithInsecureRegistries(reg.Host)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestResolveIndexDigestWithOneHEAD(t *testing.T) {
	reg := registrytest.New(t)
	want := reg.PushIndex(t, "app", "1.0", "linux/amd64", "linux/arm64")
	reg.Reset()
	r := newRemote(t, reg)
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		img, err := r.Resolve(ctx, reg.Host+"/app:1.0")
		if err != nil {
			t.Fatal(err)
		}
		if img.Digest != want {
			t.Fatalf("digest = %s, want index digest %s", img.Digest, want)
		}
		if !img.IsIndex() {
			t.Errorf("media type %s: want an index", img.MediaType)
		}
	}
	if got := reg.Count("HEAD"); got != 1 {
		t.Errorf("registry saw %d HEADs for one unique ref, want 1", got)
	}
	if got := reg.Count("GET"); got != 1 { // the /v2/ ping
		t.Errorf("registry saw %d GETs, want 1 (the ping): %v", got, reg.Requests())
	}
	img, _ := r.Resolve(ctx, reg.Host+"/app:1.0")
	plats, err := r.Platforms(ctx, img)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(plats, ",") != "linux/amd64,linux/arm64" {
		t.Errorf("platforms = %v", plats)
	}
	if _, err := r.Platforms(ctx, img); err != nil {
		t.Fatal(err)
	}
	if got := reg.Count("GET"); got != 2 {
		t.Errorf("registry saw %d GETs after two platform reads, want 2 (ping + one manifest): %v", got, reg.Requests())
	}
}

func TestResolveMissingTagNamesRef(t *testing.T) {
	reg := registrytest.New(t)
	reg.PushIndex(t, "app", "1.0", "linux/amd64")
	_, err := newRemote(t, reg).Resolve(context.Background(), reg.Host+"/app:9.9")
	if !errors.Is(err, resolver.ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	if !strings.Contains(err.Error(), reg.Host+"/app:9.9") {
		t.Errorf("error does not name the ref: %v", err)
	}
}

func TestPlainHTTPOnlyForInsecureHosts(t *testing.T) {
	reg := registrytest.New(t)
	reg.PushIndex(t, "app", "1.0", "linux/amd64")
	r, err := resolver.New()
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Resolve(context.Background(), reg.Host+"/app:1.0")
	if err == nil || !strings.Contains(err.Error(), "--insecure-registry "+reg.Host) {
		t.Fatalf("err = %v, want a refusal naming --insecure-registry", err)
	}
}

func TestSingleArchFailsPlatformCheck(t *testing.T) {
	reg := registrytest.New(t)
	reg.PushImage(t, "one", "1")
	r := newRemote(t, reg)
	ctx := context.Background()
	img, err := r.Resolve(ctx, reg.Host+"/one:1")
	if err != nil {
		t.Fatal(err)
	}
	plats, err := r.Platforms(ctx, img)
	if err != nil {
		t.Fatal(err)
	}
	err = resolver.RequirePlatforms(img.Ref, plats, []string{"linux/amd64", "linux/arm64"})
	if !errors.Is(err, resolver.ErrPlatforms) || !strings.Contains(err.Error(), "single-arch") {
		t.Fatalf("err = %v, want ErrPlatforms saying single-arch", err)
	}
}

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"nginx":                           "docker.io/library/nginx:latest",
		"nginx:1.27":                      "docker.io/library/nginx:1.27",
		"index.docker.io/library/nginx:1": "docker.io/library/nginx:1",
		"ghcr.io/a/b:0.8":                 "ghcr.io/a/b:0.8",
		"127.0.0.1:5000/x:1":              "127.0.0.1:5000/x:1",
		"ghcr.io/a/b:0.8@sha256:" + strings.Repeat("a", 64): "ghcr.io/a/b@sha256:" + strings.Repeat("a", 64),
	} {
		got, err := resolver.Normalize(in)
		if err != nil || got != want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
