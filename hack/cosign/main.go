// Command cosign is fixture.sh's Go half: it pushes the small multi-arch
// test image that the cosign CLI then signs, and exports what the registry
// holds for it as an OCI image layout the tests load back.
//
//	go run ./hack/cosign push HOST/REPO:TAG
//	go run ./hack/cosign export DIR HOST/REPO TAG...
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/chartpin/chartpin/internal/imagebuild"
	"github.com/chartpin/chartpin/internal/sample"
)

func main() {
	if err := run(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "hack/cosign:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	switch {
	case len(args) == 2 && args[0] == "push":
		return push(ctx, args[1])
	case len(args) >= 4 && args[0] == "export":
		return export(args[1], args[2], args[3:])
	}
	return fmt.Errorf("usage: push HOST/REPO:TAG | export DIR HOST/REPO TAG...")
}

// push writes a two-platform index whose content follows from its seed, so
// a regenerated fixture holds the same image digest; it prints the digest.
func push(ctx context.Context, ref string) error {
	idx, err := sample.FixedIndex("cosign fixture", types.OCIImageIndex, "linux/amd64", "linux/arm64")
	if err != nil {
		return err
	}
	if err := imagebuild.Push(ctx, ref, idx, true, nil); err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Println(d)
	return nil
}

// export copies repository:tag for each tag, with every manifest and blob
// it names, into a fresh OCI layout at dir; each entry of index.json carries
// its tag as org.opencontainers.image.ref.name. Manifests keep their bytes,
// so the digests (and the signatures over them) survive the round trip.
func export(dir, repository string, tags []string) error {
	if _, err := os.Stat(dir); err == nil {
		return fmt.Errorf("%s exists; remove it first", dir)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	for _, tag := range tags {
		ref, err := name.NewTag(repository+":"+tag, name.Insecure)
		if err != nil {
			return err
		}
		desc, err := remote.Get(ref)
		if err != nil {
			return err
		}
		opt := layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tag})
		if err := appendTo(p, desc, opt); err != nil {
			return fmt.Errorf("exporting %s: %w", ref, err)
		}
	}
	return nil
}

func appendTo(p layout.Path, desc *remote.Descriptor, opt layout.Option) error {
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		if err != nil {
			return err
		}
		return p.AppendIndex(idx, opt)
	}
	img, err := desc.Image()
	if err != nil {
		return err
	}
	return p.AppendImage(img, opt)
}
