package dist

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chartpin/chartpin/internal/golden"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// The release build is the slowest test here (two links of the full
// binary), so it builds one platform twice; `make dist-check` builds every
// platform twice and compares the trees.
func TestBuildIsReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("links chartpin twice")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	build := func(out string) Result {
		t.Helper()
		res, err := Build(context.Background(), Options{
			Dir: root, Out: out, Version: "v9.8.7-test",
			Platforms: []string{"linux/amd64"}, ImagePlatforms: []string{"linux/amd64"},
			CACerts: []byte("-----BEGIN CERTIFICATE-----\n"), Created: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC),
		})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	res := build(a)
	if again := build(b); again.Image != res.Image {
		t.Errorf("image digest %s, then %s", res.Image, again.Image)
	}
	treeA, treeB := golden.ReadTree(t, a), golden.ReadTree(t, b)
	if len(treeA) != len(treeB) {
		t.Errorf("first build wrote %d files, second %d", len(treeA), len(treeB))
	}
	for name, data := range treeA {
		if !bytes.Equal(data, treeB[name]) {
			t.Errorf("%s differs between two builds of the same sources", name)
		}
	}
	wantFiles := []string{"SHA256SUMS", "chartpin.spdx.json", "chartpin_linux_amd64", "image/index.json", "image/oci-layout"}
	for _, f := range wantFiles {
		if _, ok := treeA[f]; !ok {
			t.Errorf("dist lacks %s; wrote %v", f, keys(treeA))
		}
	}
	for name := range treeA {
		if !slices.Contains(wantFiles, name) && !strings.HasPrefix(name, "image/blobs/sha256/") {
			t.Errorf("dist holds an unexpected %s (a leftover of the build?)", name)
		}
	}

	bin := filepath.Join(a, "chartpin_linux_amd64")
	checkSums(t, a, treeA["SHA256SUMS"], []string{"chartpin.spdx.json", "chartpin_linux_amd64"})
	checkBinary(t, root, bin, treeA[filepath.Base(bin)])
	checkSBOM(t, root, treeA["chartpin.spdx.json"])
	checkImage(t, a, res, treeA[filepath.Base(bin)])
}

func TestBuildRefusesAFullDirectory(t *testing.T) {
	out := t.TempDir()
	old := filepath.Join(out, "chartpin_linux_amd64")
	if err := os.WriteFile(old, []byte("an older release"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Build(context.Background(), Options{Out: out, Version: "v1.0.0"})
	if err == nil || !strings.Contains(err.Error(), out+" is not empty") {
		t.Fatalf("err = %v, want a refusal naming %s", err, out)
	}
	if got := golden.ReadTree(t, out); len(got) != 1 || string(got["chartpin_linux_amd64"]) != "an older release" {
		t.Errorf("the refused build touched %s: %v", out, keys(got))
	}
	_, err = Build(context.Background(), Options{Out: t.TempDir(), Version: "v1.0.0", Platforms: []string{"darwin/arm64"}})
	if err == nil || !strings.Contains(err.Error(), "image platform linux/amd64 is not among") {
		t.Errorf("image platform without a binary: %v", err)
	}
	// A failed build leaves nothing behind (here: no Go module to build).
	failed := filepath.Join(t.TempDir(), "dist")
	_, err = Build(context.Background(), Options{Dir: t.TempDir(), Out: failed, Version: "v1.0.0", Platforms: []string{"linux/amd64"}, ImagePlatforms: []string{}})
	if err == nil || !strings.Contains(err.Error(), "go build ./cmd/chartpin for linux/amd64") {
		t.Errorf("build outside a module: %v", err)
	}
	if got := golden.ReadTree(t, failed); len(got) != 0 {
		t.Errorf("a failed build left %v", keys(got))
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// checkSums: SHA256SUMS lists exactly the files, in order, and sha256sum -c agrees.
func checkSums(t *testing.T, dir string, sums []byte, files []string) {
	t.Helper()
	var want strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		want.WriteString(hex.EncodeToString(sum[:]) + "  " + f + "\n")
	}
	if string(sums) != want.String() {
		t.Errorf("SHA256SUMS:\n%s\nwant:\n%s", sums, want.String())
	}
	if _, err := exec.LookPath("sha256sum"); err == nil {
		cmd := exec.Command("sha256sum", "-c", "SHA256SUMS")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("sha256sum -c: %v\n%s", err, out)
		}
	}
}

// checkBinary: version stamped, static, trimmed, tagged, no build paths inside.
func checkBinary(t *testing.T, root, bin string, data []byte) {
	t.Helper()
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "v9.8.7-test") {
		t.Errorf("%s --version: %v: %q, want the stamped version", bin, err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary has a dynamic interpreter: not static")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %v", libs)
	}
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	for k, v := range map[string]string{"-trimpath": "true", "CGO_ENABLED": "0", "-tags": BuildTags} {
		if settings[k] != v {
			t.Errorf("build setting %s = %q, want %q", k, settings[k], v)
		}
	}
	for k := range settings {
		if strings.HasPrefix(k, "vcs.") {
			t.Errorf("build setting %s: the commit would change the bytes", k)
		}
	}
	paths := []string{root}
	// The home directory itself is no test: "/root/" is also a Go package path (".../pkg/root/").
	for _, v := range []string{"GOMODCACHE", "GOROOT", "GOPATH", "GOCACHE"} {
		if p, err := exec.Command("go", "env", v).Output(); err == nil && len(bytes.TrimSpace(p)) > 0 {
			paths = append(paths, string(bytes.TrimSpace(p)))
		}
	}
	for _, p := range paths {
		if bytes.Contains(data, []byte(p)) {
			t.Errorf("the binary contains the build path %s", p)
		}
	}
}

// checkSBOM: the SBOM lists exactly the modules whose packages the binary
// compiles in (as the go tool computes them for linux/amd64 and the tags).
func checkSBOM(t *testing.T, root string, data []byte) {
	t.Helper()
	var doc spdx
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.SPDXVersion != "SPDX-2.3" || doc.CreationInfo.Created != "2026-12-01T10:00:00Z" || doc.Name != "chartpin-v9.8.7-test" {
		t.Errorf("SBOM header: %s %s %s", doc.SPDXVersion, doc.CreationInfo.Created, doc.Name)
	}
	cmd := exec.Command("go", "list", "-deps", "-tags", BuildTags, "-f", "{{with .Module}}{{if not .Main}}{{.Path}}@{{.Version}}{{end}}{{end}}", "./cmd/chartpin")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=amd64", "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, m := range strings.Fields(string(out)) {
		want[m] = true
	}
	got := map[string]bool{}
	ids := map[string]bool{}
	for _, p := range doc.Packages {
		if ids[p.SPDXID] {
			t.Errorf("SPDXID %s twice", p.SPDXID)
		}
		ids[p.SPDXID] = true
		if p.Name == "stdlib" || p.SPDXID == "SPDXRef-Package-chartpin" {
			continue
		}
		got[p.Name+"@"+p.VersionInfo] = true
		if len(p.Checksums) != 1 || len(p.Checksums[0].ChecksumValue) != 64 {
			t.Errorf("%s: checksums %v, want the go.sum hash in hex", p.Name, p.Checksums)
		}
	}
	for m := range want {
		if !got[m] {
			t.Errorf("SBOM lacks %s, which the binary compiles in", m)
		}
	}
	for m := range got {
		if !want[m] {
			t.Errorf("SBOM lists %s, which the binary does not compile in", m)
		}
	}
	if !got["helm.sh/helm/v3@v3.22.0"] {
		t.Error("SBOM lacks helm.sh/helm/v3@v3.22.0")
	}
	if len(doc.Relationships) != len(doc.Packages) { // DESCRIBES + one DEPENDS_ON per other package
		t.Errorf("%d relationships for %d packages", len(doc.Relationships), len(doc.Packages))
	}
}

// checkImage: the layout's index is the digest Build returned, runs non-root,
// and carries the very binary released beside it.
func checkImage(t *testing.T, dir string, res Result, bin []byte) {
	t.Helper()
	p, err := layout.FromPath(filepath.Join(dir, ImageDir))
	if err != nil {
		t.Fatal(err)
	}
	outer, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	om, err := outer.IndexManifest()
	if err != nil || len(om.Manifests) != 1 || om.Manifests[0].Digest != res.Image {
		t.Fatalf("layout index: %v %+v, want the one index %s", err, om, res.Image)
	}
	idx, err := outer.ImageIndex(res.Image)
	if err != nil {
		t.Fatal(err)
	}
	im, _ := idx.IndexManifest()
	if len(im.Manifests) != 1 || im.Manifests[0].Platform.String() != "linux/amd64" {
		t.Fatalf("image manifests %+v, want linux/amd64", im.Manifests)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, _ := img.ConfigFile()
	if cf.Config.User != "65532:65532" || cf.Config.Labels["org.opencontainers.image.version"] != "v9.8.7-test" {
		t.Errorf("image config user %q labels %v", cf.Config.User, cf.Config.Labels)
	}
	layers, _ := img.Layers()
	rc, err := layers[len(layers)-1].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			t.Fatal("the image has no /usr/local/bin/chartpin")
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == "usr/local/bin/chartpin" {
			data, _ := io.ReadAll(tr)
			if !bytes.Equal(data, bin) {
				t.Error("the image's binary is not the released chartpin_linux_amd64")
			}
			return
		}
	}
}
