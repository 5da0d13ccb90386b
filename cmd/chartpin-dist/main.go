// Command chartpin-dist builds a chartpin release into one directory:
// static binaries for every platform, chartpin.spdx.json, SHA256SUMS and the
// multi-arch image as an OCI layout (image/). `make dist` runs it.
//
//	go run ./cmd/chartpin-dist --version v0.2.0 --out dist
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/chartpin/chartpin/internal/dist"
	"github.com/chartpin/chartpin/internal/imagebuild"
)

func main() { dist.Main("chartpin-dist", run) }

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("chartpin-dist", flag.ContinueOnError)
	out := fs.String("out", "dist", "release `DIR` (absent or empty)")
	version := fs.String("version", "", "release version stamped into the binaries, e.g. v0.2.0")
	platforms := fs.String("platforms", strings.Join(dist.Platforms, ","), "binaries' os/arch list")
	imagePlatforms := fs.String("image-platforms", strings.Join(imagebuild.DefaultPlatforms, ","), "the image's os/arch list (\"\" for no image)")
	caFile := fs.String("ca-certificates", "/etc/ssl/certs/ca-certificates.crt", "PEM bundle to install in the image")
	timeout := fs.Duration("timeout", time.Hour, "deadline for the whole build")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *version == "" || fs.NArg() > 0 {
		return fmt.Errorf("name --version (and no arguments): %w", flag.ErrHelp)
	}
	created, err := sourceDate(os.Getenv("SOURCE_DATE_EPOCH"))
	if err != nil {
		return err
	}
	ca, err := dist.ReadCACerts(*caFile)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	res, err := dist.Build(ctx, dist.Options{
		Out: *out, Version: *version, Platforms: split(*platforms), ImagePlatforms: split(*imagePlatforms),
		CACerts: ca, Created: created, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
	if err != nil {
		return err
	}
	for _, f := range res.Files {
		fmt.Println(f)
	}
	if res.Image.Hex != "" {
		fmt.Printf("%s/ %s\n", dist.ImageDir, res.Image)
	}
	return nil
}

// sourceDate reads SOURCE_DATE_EPOCH (the reproducible-builds convention);
// unset means the Unix epoch, never the clock.
func sourceDate(s string) (time.Time, error) {
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: want seconds since 1970 (git log -1 --format=%%ct)", s)
	}
	return time.Unix(n, 0).UTC(), nil
}

func split(s string) []string {
	if s == "" {
		return []string{}
	}
	return strings.Split(s, ",")
}
