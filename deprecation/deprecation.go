// Package deprecation records and reads the recall state of a chart version
// published to an OCI registry. A published manifest is never re-tagged,
// changed or removed: a marker artifact refers to it (its subject) through the
// OCI referrers API, or the referrers tag schema (sha256-<digest>) on
// registries without that API. Markers only accumulate; the newest one says
// whether the version is deprecated, so --undeprecate is one more marker.
package deprecation

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// ArtifactType is the marker's config media type, which the referrers
	// listing reports as its artifactType.
	ArtifactType = "application/vnd.chartpin.deprecation.v1+json"
	// Annotation holds "true" (deprecated) or "false" (deprecation withdrawn).
	Annotation = "chartpin.io/deprecated"
	// CreatedAnnotation is the OCI creation-time annotation: on a chart
	// manifest, when it was published; on a marker, when it was set.
	CreatedAnnotation = "org.opencontainers.image.created"
)

// State is what the markers referring to one manifest say.
type State struct {
	Deprecated bool
	Since      time.Time // when the newest marker was set; zero without markers
	Markers    int       // markers found
}

// Read lists the markers referring to subject and returns the newest one's
// verdict (see verdict).
func Read(ctx context.Context, subject name.Digest, opts ...remote.Option) (State, error) {
	idx, err := remote.Referrers(subject, append(opts, remote.WithContext(ctx))...)
	if err != nil {
		return State{}, fmt.Errorf("listing what refers to %s: %w", subject, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return State{}, fmt.Errorf("reading the referrers of %s: %w", subject, err)
	}
	return verdict(subject.String(), im.Manifests)
}

// verdict is the newest marker's word among the descriptors referring to
// subject; no marker means not deprecated. A marker whose time does not parse
// counts as the newest, and at equal times "deprecated" wins: an unreadable
// recall must not be waved through.
func verdict(subject string, referrers []v1.Descriptor) (State, error) {
	var st State
	first := true
	for _, d := range referrers {
		if d.ArtifactType != ArtifactType {
			continue
		}
		st.Markers++
		v, ok := d.Annotations[Annotation]
		if !ok {
			return State{}, fmt.Errorf("deprecation marker %s of %s has no %s annotation", d.Digest, subject, Annotation)
		}
		dep, err := strconv.ParseBool(v)
		if err != nil {
			return State{}, fmt.Errorf("deprecation marker %s of %s: %s %q: want true or false", d.Digest, subject, Annotation, v)
		}
		at, terr := time.Parse(time.RFC3339Nano, d.Annotations[CreatedAnnotation])
		newer := first || terr != nil || at.After(st.Since) || (at.Equal(st.Since) && dep)
		if newer {
			st.Deprecated, st.Since, first = dep, at, false
		}
	}
	return st, nil
}

// Mark pushes a marker referring to subject (a manifest of mediaType and
// size, as the registry holds it) that sets it deprecated or not, at now.
// The marker is stored by digest: no tag is created or moved, except the
// referrers fallback tag on registries without the referrers API.
func Mark(ctx context.Context, pusher *remote.Pusher, subject name.Digest, desc v1.Descriptor, deprecated bool, now time.Time) (v1.Hash, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, ArtifactType)
	img = mutate.Annotations(img, map[string]string{
		Annotation:        strconv.FormatBool(deprecated),
		CreatedAnnotation: now.UTC().Format(time.RFC3339Nano),
	}).(v1.Image)
	img = mutate.Subject(img, v1.Descriptor{MediaType: desc.MediaType, Digest: desc.Digest, Size: desc.Size}).(v1.Image)
	d, err := img.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	if err := pusher.Push(ctx, subject.Context().Digest(d.String()), img); err != nil {
		return v1.Hash{}, fmt.Errorf("pushing the deprecation marker for %s: %w", subject, err)
	}
	return d, nil
}
