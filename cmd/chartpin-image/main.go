// Command chartpin-image builds chartpin's multi-arch container image
// without a Docker engine and writes it as an OCI layout and/or pushes it.
//
//	go run ./cmd/chartpin-image --version v0.1.0 --layout bin/image-oci
//	go run ./cmd/chartpin-image --version v0.1.0 --push ghcr.io/chartpin/chartpin:v0.1.0
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/chartpin/chartpin/internal/imagebuild"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "chartpin-image:", err)
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("chartpin-image", flag.ContinueOnError)
	pkg := fs.String("package", "./cmd/chartpin", "main package to build")
	version := fs.String("version", "dev", "version stamped into the binary (main.version) and the image labels")
	platforms := fs.String("platforms", strings.Join(imagebuild.DefaultPlatforms, ","), "comma-separated os/arch list")
	base := fs.String("base", "", "base index REF (default: scratch), e.g. gcr.io/distroless/static:nonroot")
	layoutDir := fs.String("layout", "", "write an OCI image layout to this DIR")
	push := fs.String("push", "", "push the index to REF (registry/repository:tag)")
	insecure := fs.Bool("insecure", false, "plain HTTP to the --push and --base registries (loopback test registries)")
	out := fs.String("out", "bin/image", "where the cross-compiled binaries go")
	caFile := fs.String("ca-certificates", "/etc/ssl/certs/ca-certificates.crt", "PEM bundle to install in the image")
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

	ca, err := os.ReadFile(*caFile)
	if err != nil {
		return fmt.Errorf("reading CA bundle: %w (install ca-certificates or pass --ca-certificates FILE)", err)
	}
	bins, err := imagebuild.GoBuild{
		Package: *pkg,
		LDFlags: "-s -w -X main.version=" + *version,
		Logger:  log,
	}.CrossCompile(ctx, *out, strings.Split(*platforms, ","))
	if err != nil {
		return err
	}
	spec := imagebuild.Spec{
		Binaries: bins,
		CACerts:  ca,
		Labels: map[string]string{
			"org.opencontainers.image.title":   "chartpin",
			"org.opencontainers.image.version": *version,
			"org.opencontainers.image.source":  "https://github.com/chartpin/chartpin",
		},
	}
	if *base != "" {
		var opts []name.Option
		if *insecure {
			opts = append(opts, name.Insecure)
		}
		ref, err := name.ParseReference(*base, opts...)
		if err != nil {
			return fmt.Errorf("--base %q: %w", *base, err)
		}
		if spec.Base, err = remote.Index(ref, remote.WithContext(ctx)); err != nil {
			return fmt.Errorf("pulling base %s: %w", *base, err)
		}
	}
	idx, err := imagebuild.Build(spec)
	if err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	if *layoutDir != "" {
		if err := imagebuild.WriteLayout(*layoutDir, idx, *version); err != nil {
			return err
		}
		log.Info("wrote OCI layout", "dir", *layoutDir, "digest", digest.String())
	}
	if *push != "" {
		if err := imagebuild.Push(ctx, *push, idx, *insecure, nil); err != nil {
			return err
		}
		log.Info("pushed", "ref", *push, "digest", digest.String())
	}
	fmt.Println(digest.String())
	return nil
}
