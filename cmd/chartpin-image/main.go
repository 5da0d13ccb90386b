// Command chartpin-image builds chartpin's multi-arch container image
// without a Docker engine and writes it as an OCI layout and/or pushes it.
//
//	go run ./cmd/chartpin-image --version v0.1.0 --layout bin/image-oci
//	go run ./cmd/chartpin-image --version v0.1.0 --push ghcr.io/chartpin/chartpin:v0.1.0
//	go run ./cmd/chartpin-image --from dist/image --push ghcr.io/chartpin/chartpin:0.1.0
//
// It prints the index digest, so a release can refer to the image by digest.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/chartpin/chartpin/internal/dist"
	"github.com/chartpin/chartpin/internal/imagebuild"
	"github.com/chartpin/chartpin/resolver"
)

func main() { dist.Main("chartpin-image", run) }

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("chartpin-image", flag.ContinueOnError)
	var b buildFlags
	fs.StringVar(&b.pkg, "package", "./cmd/chartpin", "main package to build")
	fs.StringVar(&b.version, "version", "dev", "version stamped into the binary (main.version) and the image labels")
	fs.StringVar(&b.platforms, "platforms", strings.Join(imagebuild.DefaultPlatforms, ","), "comma-separated os/arch list")
	fs.StringVar(&b.base, "base", "", "base index REF (default: scratch), e.g. gcr.io/distroless/static:nonroot")
	layoutDir := fs.String("layout", "", "write an OCI image layout to this DIR")
	from := fs.String("from", "", "push the index of this OCI layout `DIR` (e.g. make dist's dist/image) instead of building")
	push := fs.String("push", "", "push the index to REF (registry/repository:tag)")
	fs.BoolVar(&b.insecure, "insecure", false, "plain HTTP to the --push and --base registries (loopback test registries)")
	fs.StringVar(&b.out, "out", "bin/image", "where the cross-compiled binaries go")
	fs.StringVar(&b.caFile, "ca-certificates", "/etc/ssl/certs/ca-certificates.crt", "PEM bundle to install in the image")
	timeout := fs.Duration("timeout", 30*time.Minute, "deadline for the build and push")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *layoutDir == "" && *push == "" {
		return fmt.Errorf("name --layout DIR and/or --push REF: %w", flag.ErrHelp)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	var idx v1.ImageIndex
	var err error
	if *from != "" {
		idx, err = fromLayout(*from)
	} else {
		idx, err = b.build(ctx, log)
	}
	if err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	if *layoutDir != "" {
		if err := imagebuild.WriteLayout(*layoutDir, idx, b.version); err != nil {
			return err
		}
		log.Info("wrote OCI layout", "dir", *layoutDir, "digest", digest.String())
	}
	if *push != "" {
		if err := imagebuild.Push(ctx, *push, idx, b.insecure, nil); err != nil {
			return err
		}
		log.Info("pushed", "ref", *push, "digest", digest.String())
	}
	fmt.Println(digest.String())
	return nil
}

// fromLayout reads the one index an OCI layout holds (what make dist wrote).
func fromLayout(dir string) (v1.ImageIndex, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("--from %s: %w (run make dist first)", dir, err)
	}
	outer, err := p.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("--from %s: %w", dir, err)
	}
	im, err := outer.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("--from %s: %w", dir, err)
	}
	if len(im.Manifests) != 1 {
		return nil, fmt.Errorf("--from %s: the layout holds %d images, want the one image index make dist writes", dir, len(im.Manifests))
	}
	return outer.ImageIndex(im.Manifests[0].Digest)
}

type buildFlags struct {
	pkg, version, platforms, base, out, caFile string
	insecure                                   bool
}

// build cross-compiles the binaries and builds the index on scratch or --base.
func (b buildFlags) build(ctx context.Context, log *slog.Logger) (v1.ImageIndex, error) {
	ca, err := dist.ReadCACerts(b.caFile)
	if err != nil {
		return nil, err
	}
	bins, err := imagebuild.GoBuild{
		Package: b.pkg,
		LDFlags: dist.LDFlags(b.version),
		Tags:    dist.BuildTags,
		Logger:  log,
	}.CrossCompile(ctx, b.out, strings.Split(b.platforms, ","))
	if err != nil {
		return nil, err
	}
	spec := imagebuild.Spec{
		Binaries: bins,
		CACerts:  ca,
		Labels:   imagebuild.Labels(b.version),
	}
	if b.base != "" {
		var opts resolver.Options
		if b.insecure {
			ref, err := name.ParseReference(b.base)
			if err != nil {
				return nil, fmt.Errorf("--base %q: %w", b.base, err)
			}
			opts.InsecureRegistries = []string{ref.Context().RegistryStr()}
		}
		r, err := resolver.New(opts)
		if err != nil {
			return nil, err
		}
		if spec.Base, err = r.Index(ctx, b.base); err != nil {
			return nil, fmt.Errorf("pulling base %s: %w", b.base, err)
		}
	}
	return imagebuild.Build(spec)
}
