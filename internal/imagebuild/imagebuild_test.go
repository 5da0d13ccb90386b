package imagebuild

import (
	"archive/tar"
	"context"
	"debug/elf"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/chartpin/chartpin/internal/registrytest"
)

// hello cross-compiles a tiny static program for both platforms.
func hello(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":  "module hello\n\ngo 1.26.0\n",
		"main.go": "package main\n\nfunc main() { println(\"chartpin\") }\n",
	}
	for n, c := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bins, err := GoBuild{Dir: dir, Package: ".", LDFlags: "-s -w"}.CrossCompile(context.Background(), filepath.Join(dir, "out"), DefaultPlatforms)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]elf.Machine{"linux/amd64": elf.EM_X86_64, "linux/arm64": elf.EM_AARCH64}
	for p, m := range want {
		f, err := elf.Open(bins[p])
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if f.Machine != m {
			t.Errorf("%s binary is %s, want %s", p, f.Machine, m)
		}
		// Static: no dynamic interpreter.
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				t.Errorf("%s binary is dynamically linked", p)
			}
		}
		f.Close()
	}
	return bins
}

func TestBuildPushAndLayout(t *testing.T) {
	bins := hello(t)
	spec := Spec{Binaries: bins, CACerts: []byte("-----BEGIN CERTIFICATE-----\n"), Labels: map[string]string{"org.opencontainers.image.version": "v0.0.1"}}
	idx, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := idx.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("two builds of the same binaries differ: %s vs %s", d1, d2)
	}

	reg := registrytest.New(t)
	ref := reg.Host + "/chartpin/chartpin:test"
	if err := Push(context.Background(), ref, idx, true, authn.DefaultKeychain); err != nil {
		t.Fatal(err)
	}
	r, _ := name.ParseReference(ref, name.Insecure)
	pulled, err := remote.Index(r)
	if err != nil {
		t.Fatal(err)
	}
	pd, _ := pulled.Digest()
	if pd != d1 {
		t.Errorf("registry has %s, built %s", pd, d1)
	}
	im, err := pulled.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.MediaType != types.OCIImageIndex || len(im.Manifests) != 2 {
		t.Fatalf("index %s with %d manifests", im.MediaType, len(im.Manifests))
	}
	var plats []string
	for _, m := range im.Manifests {
		plats = append(plats, m.Platform.String())
		img, err := pulled.Image(m.Digest)
		if err != nil {
			t.Fatal(err)
		}
		checkImage(t, img, m.Platform, bins[m.Platform.String()])
	}
	if !slices.Equal(plats, DefaultPlatforms) {
		t.Errorf("platforms %v", plats)
	}

	dir := filepath.Join(t.TempDir(), "oci")
	if err := WriteLayout(dir, idx, "v0.0.1"); err != nil {
		t.Fatal(err)
	}
	lp, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	outer, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	om, _ := outer.IndexManifest()
	if len(om.Manifests) != 1 || om.Manifests[0].Digest != d1 || om.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "v0.0.1" {
		t.Errorf("layout index.json %+v, want one entry %s named v0.0.1", om.Manifests, d1)
	}
}

func checkImage(t *testing.T, img v1.Image, plat *v1.Platform, bin string) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" || !slices.Equal(cf.Config.Entrypoint, []string{"/usr/local/bin/chartpin"}) || cf.Architecture != plat.Architecture || cf.OS != "linux" {
		t.Errorf("%s config: user %q entrypoint %v arch %s", plat, cf.Config.User, cf.Config.Entrypoint, cf.Architecture)
	}
	if !cf.Created.IsZero() && cf.Created.Time != (time.Time{}) {
		t.Errorf("created %s, want the zero time (reproducible)", cf.Created)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers (%v), want 1 on scratch", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	want, _ := os.ReadFile(bin)
	tr := tar.NewReader(rc)
	seen := map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		seen[h.Name] = h
		if h.Name == "usr/local/bin/chartpin" {
			got, _ := io.ReadAll(tr)
			if string(got) != string(want) {
				t.Errorf("%s: /usr/local/bin/chartpin is not the %s binary", plat, plat)
			}
		}
	}
	if h := seen["usr/local/bin/chartpin"]; h == nil || h.Mode != 0o755 || h.Uid != 0 {
		t.Errorf("%s: /usr/local/bin/chartpin header %+v, want root-owned 0755", plat, h)
	}
	// The chart runs command ["chartpin"]: the binary must be on the image's PATH.
	if !slices.Contains(cf.Config.Env, "PATH=/usr/local/bin:/usr/bin:/bin") {
		t.Errorf("%s: env %v lacks a PATH with /usr/local/bin", plat, cf.Config.Env)
	}
	for _, n := range []string{"etc/passwd", "etc/ssl/certs/ca-certificates.crt", "tmp/", "usr/", "usr/local/", "usr/local/bin/"} {
		if seen[n] == nil {
			t.Errorf("%s: layer lacks %s", plat, n)
		}
	}
}

func TestBuildOnBase(t *testing.T) {
	reg := registrytest.New(t)
	reg.PushIndex(t, "distroless/static", "nonroot", "linux/amd64", "linux/arm64")
	r, _ := name.ParseReference(reg.Host+"/distroless/static:nonroot", name.Insecure)
	base, err := remote.Index(r)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "chartpin")
	if err := os.WriteFile(bin, []byte("not really a binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	idx, err := Build(Spec{Base: base, Binaries: map[string]string{"linux/amd64": bin, "linux/arm64": bin}})
	if err != nil {
		t.Fatal(err)
	}
	im, _ := idx.IndexManifest()
	for _, m := range im.Manifests {
		img, _ := idx.Image(m.Digest)
		layers, _ := img.Layers()
		if len(layers) != 2 {
			t.Errorf("%s: %d layers, want the base's 1 + ours", m.Platform, len(layers))
		}
	}
	if _, err := Build(Spec{Base: base, Binaries: map[string]string{"linux/s390x": bin}}); err == nil {
		t.Error("a platform the base lacks was accepted")
	}
}
