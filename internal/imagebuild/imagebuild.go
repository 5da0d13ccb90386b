// Package imagebuild builds chartpin's container image without a Docker
// engine: one layer holding the static binary (plus CA certificates and a
// passwd entry for the non-root user) appended to scratch or a base index,
// one image per platform, gathered in a multi-arch OCI index. Builds are
// reproducible: the same binaries and Created time give the same digest.
package imagebuild

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// NonRootUID is the user the image runs as (distroless's "nonroot").
const NonRootUID = 65532

// DefaultPath is where the binary goes in the image.
const DefaultPath = "/usr/local/bin/chartpin"

// DefaultPlatforms are the platforms chartpin ships for.
var DefaultPlatforms = []string{"linux/amd64", "linux/arm64"}

// Labels are chartpin's OCI image labels for a version.
func Labels(version string) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":   "chartpin",
		"org.opencontainers.image.version": version,
		"org.opencontainers.image.source":  "https://github.com/chartpin/chartpin",
	}
}

// Spec describes one multi-arch image.
type Spec struct {
	// Binaries maps a platform ("linux/arm64") to a static binary built for it.
	Binaries map[string]string
	// Path is where the binary goes in the image (default
	// /usr/local/bin/chartpin: on PATH, so the chart's command ["chartpin"] finds it).
	Path string
	// Base is the index to build on; nil means scratch.
	Base v1.ImageIndex
	// CACerts is a PEM bundle installed as /etc/ssl/certs/ca-certificates.crt
	// (scratch has none; the binary talks TLS to registries and the API server).
	CACerts []byte
	// Created is the image creation time; zero keeps builds reproducible.
	Created time.Time
	// Labels become image config labels (org.opencontainers.image.*).
	Labels map[string]string
}

// Build returns the multi-arch index for spec.
func Build(spec Spec) (v1.ImageIndex, error) {
	if len(spec.Binaries) == 0 {
		return nil, errors.New("imagebuild: no binaries; build one per platform first")
	}
	if spec.Path == "" {
		spec.Path = DefaultPath
	}
	platforms := make([]string, 0, len(spec.Binaries))
	for p := range spec.Binaries {
		platforms = append(platforms, p)
	}
	sort.Strings(platforms)
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range platforms {
		plat, err := v1.ParsePlatform(p)
		if err != nil {
			return nil, fmt.Errorf("platform %q: %w", p, err)
		}
		img, err := buildOne(spec, plat, spec.Binaries[p])
		if err != nil {
			return nil, fmt.Errorf("building %s: %w", p, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: plat},
		})
	}
	return idx, nil
}

func buildOne(spec Spec, plat *v1.Platform, binary string) (v1.Image, error) {
	base, err := baseFor(spec.Base, plat)
	if err != nil {
		return nil, err
	}
	bin, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	data, err := layerTar(spec.Path, bin, spec.CACerts, spec.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, MediaType: types.OCILayer})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = plat.OS, plat.Architecture, plat.Variant
	cf.Created = v1.Time{Time: spec.Created}
	cf.Author = "chartpin"
	cf.Config.User = fmt.Sprintf("%d:%d", NonRootUID, NonRootUID)
	cf.Config.Entrypoint = []string{spec.Path}
	cf.Config.Cmd = nil
	cf.Config.WorkingDir = "/"
	cf.Config.Env = setEnv(cf.Config.Env, "SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt")
	cf.Config.Env = setEnv(cf.Config.Env, "PATH", "/usr/local/bin:/usr/bin:/bin")
	if cf.Config.Labels == nil {
		cf.Config.Labels = map[string]string{}
	}
	for k, v := range spec.Labels {
		cf.Config.Labels[k] = v
	}
	// History gets one entry per layer so tools that pair them stay happy.
	cf.History = append(cf.History, v1.History{Created: v1.Time{Time: spec.Created}, CreatedBy: "chartpin-image: add " + spec.Path, Comment: "static binary, non-root"})
	return mutate.ConfigFile(img, cf)
}

func baseFor(base v1.ImageIndex, plat *v1.Platform) (v1.Image, error) {
	if base == nil {
		img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
		return mutate.ConfigMediaType(img, types.OCIConfigJSON), nil
	}
	im, err := base.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range im.Manifests {
		if d.Platform != nil && d.Platform.Satisfies(*plat) {
			return base.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("base image has no %s variant", plat)
}

func setEnv(env []string, k, v string) []string {
	for i, e := range env {
		if strings.HasPrefix(e, k+"=") {
			env[i] = k + "=" + v
			return env
		}
	}
	return append(env, k+"="+v)
}

// layerTar is the one layer: the binary (root-owned, 0755), the CA bundle,
// passwd/group entries for the non-root user, and /tmp (the chart mounts an
// emptyDir there; the root filesystem is read-only).
func layerTar(path string, bin, ca []byte, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(name string, mode int64) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode, ModTime: mtime, Format: tar.FormatPAX})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", NonRootUID, NonRootUID)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", NonRootUID)
	steps := []error{
		dir("etc/", 0o755),
		file("etc/passwd", 0o644, []byte(passwd)),
		file("etc/group", 0o644, []byte(group)),
		dir("tmp/", 0o1777),
	}
	if len(ca) > 0 {
		steps = append(steps, dir("etc/ssl/", 0o755), dir("etc/ssl/certs/", 0o755), file("etc/ssl/certs/ca-certificates.crt", 0o644, ca))
	}
	var parents []string
	for d := filepath.Dir(strings.TrimPrefix(path, "/")); d != "." && d != "/"; d = filepath.Dir(d) {
		parents = append([]string{d + "/"}, parents...)
	}
	for _, d := range parents {
		steps = append(steps, dir(d, 0o755))
	}
	steps = append(steps, file(strings.TrimPrefix(path, "/"), 0o755, bin))
	if err := errors.Join(steps...); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteLayout writes idx into an OCI image layout at dir (created or
// appended to), under the ref name tag.
func WriteLayout(dir string, idx v1.ImageIndex, tag string) error {
	p, err := layout.FromPath(dir)
	if err != nil {
		if p, err = layout.Write(dir, empty.Index); err != nil {
			return fmt.Errorf("creating OCI layout %s: %w", dir, err)
		}
	}
	var opts []layout.Option
	if tag != "" {
		opts = append(opts, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tag}))
	}
	if err := p.AppendIndex(idx, opts...); err != nil {
		return fmt.Errorf("writing OCI layout %s: %w", dir, err)
	}
	return nil
}

// Push uploads idx (and every image and blob it names) to ref.
func Push(ctx context.Context, ref string, idx v1.ImageIndex, insecure bool, kc authn.Keychain) error {
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	r, err := name.ParseReference(ref, opts...)
	if err != nil {
		return fmt.Errorf("push target %q: %w", ref, err)
	}
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	if err := remote.WriteIndex(r, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(kc)); err != nil {
		return fmt.Errorf("pushing %s: %w", ref, err)
	}
	return nil
}

// GoBuild is how to build the binary.
type GoBuild struct {
	// Go is the go tool (default "go").
	Go string
	// Dir is the directory to build in (default: the working directory).
	Dir string
	// Package is the main package, e.g. ./cmd/chartpin.
	Package string
	// LDFlags, e.g. "-s -w -X main.version=v1.2.3".
	LDFlags string
	// Tags are build tags, e.g. "urfave_cli_no_docs".
	Tags   string
	Logger *slog.Logger
}

// CrossCompile builds the package once per platform with CGO_ENABLED=0 (a
// static binary) into outDir/<os>-<arch>/<name> (<name>.exe on Windows) and
// returns the paths by platform. Builds are -trimpath and -buildvcs=false:
// the bytes depend on the sources and the toolchain only, not on the
// checkout's path or commit, so checksums can be committed with the sources.
func (b GoBuild) CrossCompile(ctx context.Context, outDir string, platforms []string) (map[string]string, error) {
	goTool, log := b.Go, b.Logger
	if goTool == "" {
		goTool = "go"
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	out := map[string]string{}
	for _, p := range platforms {
		plat, err := v1.ParsePlatform(p)
		if err != nil {
			return nil, fmt.Errorf("platform %q: %w", p, err)
		}
		exe := filepath.Base(b.Package)
		if plat.OS == "windows" {
			exe += ".exe"
		}
		bin, err := filepath.Abs(filepath.Join(outDir, plat.OS+"-"+plat.Architecture+plat.Variant, exe))
		if err != nil {
			return nil, err
		}
		args := []string{"build", "-trimpath", "-buildvcs=false", "-o", bin}
		if b.LDFlags != "" {
			args = append(args, "-ldflags", b.LDFlags)
		}
		if b.Tags != "" {
			args = append(args, "-tags", b.Tags)
		}
		args = append(args, b.Package)
		cmd := exec.CommandContext(ctx, goTool, args...)
		cmd.Dir = b.Dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+plat.OS, "GOARCH="+plat.Architecture)
		if plat.Architecture == "arm" && strings.HasPrefix(plat.Variant, "v") {
			cmd.Env = append(cmd.Env, "GOARM="+strings.TrimPrefix(plat.Variant, "v"))
		}
		start := time.Now()
		if outb, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build %s for %s: %w\n%s", b.Package, p, err, outb)
		}
		log.Info("built", "platform", p, "binary", bin, "took", time.Since(start).Round(time.Millisecond))
		out[p] = bin
	}
	return out, nil
}
