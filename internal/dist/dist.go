// Package dist builds chartpin's release files into one directory: a static
// binary per platform, an SPDX SBOM of the modules compiled into them,
// SHA256SUMS over both, and the multi-arch non-root image as an OCI layout.
// The same sources and toolchain give byte-identical files.
package dist

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/chartpin/chartpin/internal/imagebuild"
)

// Platforms are the platforms a release ships binaries for.
var Platforms = []string{"darwin/amd64", "darwin/arm64", "linux/amd64", "linux/arm64", "windows/amd64", "windows/arm64"}

// BuildTags drop code the release binary carries without using: urfave/cli's
// Markdown and man page generator.
const BuildTags = "urfave_cli_no_docs"

// LDFlags strip the symbol table and stamp the version into main.version.
func LDFlags(version string) string { return "-s -w -X main.version=" + version }

// File names inside a dist directory.
const (
	SumsFile  = "SHA256SUMS"
	SBOMFile  = "chartpin.spdx.json"
	ImageDir  = "image"
	buildTemp = ".build"
)

// BinaryName is the release file name of the binary for platform ("linux/amd64").
func BinaryName(platform string) string {
	name := "chartpin_" + strings.ReplaceAll(platform, "/", "_")
	if strings.HasPrefix(platform, "windows/") {
		name += ".exe"
	}
	return name
}

// Options say what to build.
type Options struct {
	// Dir is the module root to build in (default: the working directory).
	Dir string
	// Out is the dist directory; it must be absent or empty.
	Out string
	// Version is stamped into the binaries, the SBOM and the image labels.
	Version string
	// Platforms to ship binaries for (default Platforms).
	Platforms []string
	// ImagePlatforms go into the image (default imagebuild.DefaultPlatforms);
	// each must be in Platforms.
	ImagePlatforms []string
	// CACerts is the PEM bundle installed in the image.
	CACerts []byte
	// Created dates the SBOM (reproducible builds take the commit time,
	// SOURCE_DATE_EPOCH); the image keeps the zero time.
	Created time.Time
	Logger  *slog.Logger
}

// Result lists what Build wrote.
type Result struct {
	// Files are the release files in SHA256SUMS order (binaries and SBOM).
	Files []string
	// Image is the digest of the image index in Out/image.
	Image v1.Hash
}

// Build writes the release into o.Out; on failure it leaves o.Out empty.
func Build(ctx context.Context, o Options) (res Result, err error) {
	if err := o.defaults(); err != nil {
		return Result{}, err
	}
	if err := emptyDir(o.Out); err != nil {
		return Result{}, err
	}
	defer func() {
		if err != nil {
			removeContents(o.Out)
		}
	}()
	tmp := filepath.Join(o.Out, buildTemp)
	defer os.RemoveAll(tmp)
	built, err := imagebuild.GoBuild{
		Dir: o.Dir, Package: "./cmd/chartpin", LDFlags: LDFlags(o.Version), Tags: BuildTags, Logger: o.Logger,
	}.CrossCompile(ctx, tmp, o.Platforms)
	if err != nil {
		return Result{}, err
	}
	for _, p := range o.Platforms {
		name := BinaryName(p)
		if err := os.Rename(built[p], filepath.Join(o.Out, name)); err != nil {
			return Result{}, err
		}
		built[p] = filepath.Join(o.Out, name)
		res.Files = append(res.Files, name)
	}
	sbom, err := SBOM(o.Version, o.Created, built)
	if err != nil {
		return Result{}, err
	}
	if err := os.WriteFile(filepath.Join(o.Out, SBOMFile), sbom, 0o644); err != nil {
		return Result{}, err
	}
	res.Files = append(res.Files, SBOMFile)
	sort.Strings(res.Files)
	if res.Image, err = writeImage(o, built); err != nil {
		return Result{}, err
	}
	if err := writeSums(o.Out, res.Files); err != nil {
		return Result{}, err
	}
	return res, nil
}

func (o *Options) defaults() error {
	if o.Out == "" || o.Version == "" {
		return errors.New("dist: name the output directory and the version")
	}
	if len(o.Platforms) == 0 {
		o.Platforms = Platforms
	}
	if o.ImagePlatforms == nil {
		o.ImagePlatforms = imagebuild.DefaultPlatforms
	}
	for _, ip := range o.ImagePlatforms {
		found := false
		for _, p := range o.Platforms {
			found = found || p == ip
		}
		if !found {
			return fmt.Errorf("dist: image platform %s is not among the binaries' platforms %s", ip, strings.Join(o.Platforms, ","))
		}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// emptyDir creates dir, or accepts it when empty: a release directory never
// mixes files of two builds.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		return fmt.Errorf("dist: %s is not empty: remove it or name another --out", dir)
	}
	return nil
}

// removeContents removes what a failed build wrote into dir (empty before it).
func removeContents(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		os.RemoveAll(filepath.Join(dir, e.Name()))
	}
}

func writeImage(o Options, built map[string]string) (v1.Hash, error) {
	if len(o.ImagePlatforms) == 0 {
		return v1.Hash{}, nil
	}
	bins := map[string]string{}
	for _, p := range o.ImagePlatforms {
		bins[p] = built[p]
	}
	idx, err := imagebuild.Build(imagebuild.Spec{
		Binaries: bins,
		CACerts:  o.CACerts,
		Labels:   imagebuild.Labels(o.Version),
	})
	if err != nil {
		return v1.Hash{}, err
	}
	if err := imagebuild.WriteLayout(filepath.Join(o.Out, ImageDir), idx, o.Version); err != nil {
		return v1.Hash{}, err
	}
	return idx.Digest()
}

// writeSums writes SHA256SUMS in the format sha256sum -c reads.
func writeSums(dir string, files []string) error {
	var b strings.Builder
	for _, f := range files {
		sum, err := fileSHA256(filepath.Join(dir, f))
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, f)
	}
	return os.WriteFile(filepath.Join(dir, SumsFile), []byte(b.String()), 0o644)
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
