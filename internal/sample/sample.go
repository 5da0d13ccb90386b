// Package sample builds small random images and multi-arch indexes, for the
// demo's embedded registry and for tests.
package sample

import (
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Index is a multi-arch index of mt (types.OCIImageIndex or
// types.DockerManifestList) holding one random image per platform
// ("linux/amd64", "linux/arm64/v8"), with matching manifest media types.
func Index(mt types.MediaType, platforms ...string) (v1.ImageIndex, error) {
	imageType := types.OCIManifestSchema1
	if mt == types.DockerManifestList {
		imageType = types.DockerManifestSchema2
	}
	idx := mutate.IndexMediaType(empty.Index, mt)
	for _, p := range platforms {
		img, err := random.Image(256, 1)
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
	if mt == types.OCIManifestSchema1 {
		img = mutate.ConfigMediaType(mutate.MediaType(img, mt), types.OCIConfigJSON)
	}
	return img, nil
}
