package registrytest

import (
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// PushLayout pushes entries of the OCI image layout at dir to repo, each
// under its org.opencontainers.image.ref.name, with every manifest and blob
// it names, bytes unchanged; only the named tags, or all when none are
// named. It returns the pushed tags' digests.
func (p *Pusher) PushLayout(t testing.TB, dir, repo string, tags ...string) map[string]string {
	t.Helper()
	lp, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	root, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := root.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, tag := range tags {
		want[tag] = true
	}
	pushed := map[string]string{}
	for _, d := range im.Manifests {
		tag := d.Annotations["org.opencontainers.image.ref.name"]
		if tag == "" || len(want) > 0 && !want[tag] {
			continue
		}
		ref := p.ref(t, repo, tag)
		if d.MediaType.IsIndex() {
			idx, err := root.ImageIndex(d.Digest)
			if err == nil {
				err = remote.WriteIndex(ref, idx, p.options()...)
			}
			if err != nil {
				t.Fatalf("pushing %s: %v", ref, err)
			}
		} else {
			img, err := root.Image(d.Digest)
			if err == nil {
				err = remote.Write(ref, img, p.options()...)
			}
			if err != nil {
				t.Fatalf("pushing %s: %v", ref, err)
			}
		}
		pushed[tag] = d.Digest.String()
	}
	for _, tag := range tags {
		if _, ok := pushed[tag]; !ok {
			t.Fatalf("%s has no entry named %q", dir, tag)
		}
	}
	return pushed
}
