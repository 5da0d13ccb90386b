// Package sample builds small random images and multi-arch indexes, for the
// demo's embedded registry and for tests.
package sample

import (
	"archive/tar"
	"bytes"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Index is a multi-arch index of mt (types.OCIImageIndex or
// types.DockerManifestList) holding one random image per platform
// ("linux/amd64", "linux/arm64/v8"), with matching manifest media types.
func Index(mt types.MediaType, platforms ...string) (v1.ImageIndex, error) {
	return index(mt, func(string) (v1.Image, error) { return random.Image(256, 1) }, platforms)
}

// FixedIndex is Index with every image's content derived from seed and its
// platform, not chance: the same seed gives the same digests on every run.
func FixedIndex(seed string, mt types.MediaType, platforms ...string) (v1.ImageIndex, error) {
	return index(mt, func(p string) (v1.Image, error) { return fixedImage(seed + " " + p) }, platforms)
}

func index(mt types.MediaType, image func(platform string) (v1.Image, error), platforms []string) (v1.ImageIndex, error) {
	imageType := types.OCIManifestSchema1
	if mt == types.DockerManifestList {
		imageType = types.DockerManifestSchema2
	}
	idx := mutate.IndexMediaType(empty.Index, mt)
	for _, p := range platforms {
		img, err := image(p)
		if err != nil {
			return nil, err
		}
		plat, err := v1.ParsePlatform(p)
		if err != nil {
			return nil, err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        mutate.MediaType(img, imageType),
			Descriptor: v1.Descriptor{Platform: plat},
		})
	}
	return idx, nil
}

// Image is a random single-arch image with manifest media type mt
// (types.DockerManifestSchema2 or types.OCIManifestSchema1).
func Image(mt types.MediaType) (v1.Image, error) {
	img, err := random.Image(256, 1)
	if err != nil {
		return nil, err
	}
	return withType(img, mt), nil
}

// FixedImage is Image with its content derived from seed, not chance.
func FixedImage(seed string, mt types.MediaType) (v1.Image, error) {
	img, err := fixedImage(seed)
	if err != nil {
		return nil, err
	}
	return withType(img, mt), nil
}

func withType(img v1.Image, mt types.MediaType) v1.Image {
	if mt == types.OCIManifestSchema1 {
		img = mutate.ConfigMediaType(mutate.MediaType(img, mt), types.OCIConfigJSON)
	}
	return img
}

// fixedImage is a one-layer image whose layer is a tar of one file holding
// seed, with a zero modification time.
func fixedImage(seed string) (v1.Image, error) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	if err := tw.WriteHeader(&tar.Header{Name: "seed", Mode: 0o644, Size: int64(len(seed)), Format: tar.FormatPAX}); err != nil {
		return nil, err
	}
	if _, err := io.WriteString(tw, seed); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return mutate.AppendLayers(empty.Image, static.NewLayer(b.Bytes(), types.DockerUncompressedLayer))
}
