package pin

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chartpin/chartpin/internal/registrytest"
	"github.com/chartpin/chartpin/resolver"
)

// The release-time job against Debian's docker-registry (CNCF distribution)
// with htpasswd auth: versions list the tags, platforms read the new index,
// the pin and the lockstep bump land, and a second run is a no-op.
func TestPinAgainstDistribution(t *testing.T) {
	reg := registrytest.StartDistribution(t, registrytest.DistributionOptions{Htpasswd: map[string]string{"release": "s3cret"}})
	old := reg.PushIndex(t, "team/ingestor", "0.8.2", "linux/amd64", "linux/arm64")
	want := reg.PushIndex(t, "team/ingestor", "0.8.4", "linux/amd64", "linux/arm64")
	reg.PushIndex(t, "team/ingestor", "0.8.8", "linux/amd64", "linux/arm64")
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: edge\nversion: 1.9.38\nappVersion: 1.9.38\n",
		"values.yaml": "images:\n  ingestor:\n    repository: " + reg.Host + "/team/ingestor\n    channelTags:\n      prod: \"0.8\"\n    prodDigest: " + old + "\n",
		"chartpin.yaml": "charts:\n  - dir: .\n    images:\n      - at: images.ingestor\n        tagFrom: channelTags.prod\n        pin: prodDigest\n" +
			"        versions: \">=0.8.0 <=0.8.4\"\n        platforms: [linux/amd64, linux/arm64]\n",
	})
	newResolver := func() *resolver.Remote {
		r, err := resolver.New(resolver.Options{InsecureRegistries: []string{reg.Host}, Keychain: resolver.StaticKeychain("release", "s3cret")})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	opts := Options{ConfigPath: filepath.Join(dir, "chartpin.yaml"), Resolver: newResolver()}
	res, err := Plan(context.Background(), opts)
	if err != nil {
		t.Fatalf("%v\nregistry log:\n%s", err, reg.Log())
	}
	if err := res.Apply(); err != nil {
		t.Fatal(err)
	}
	values := read(t, filepath.Join(dir, "values.yaml"))
	if !strings.Contains(values, "prodDigest: "+want+"\n") {
		t.Errorf("values.yaml:\n%s\nwant prodDigest %s (0.8.4, the range's highest; the float has 0.8.8)", values, want)
	}
	if chart := read(t, filepath.Join(dir, "Chart.yaml")); !strings.Contains(chart, "version: 1.9.39\nappVersion: 1.9.39\n") {
		t.Errorf("Chart.yaml:\n%s", chart)
	}
	opts.Resolver = newResolver()
	again, err := Plan(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if again.Changed() {
		t.Errorf("second run changes files:\n%s", again.Diff())
	}

	// Wrong credentials: refused, named, nothing written.
	before := hashTree(t, dir)
	bad, err := resolver.New(resolver.Options{InsecureRegistries: []string{reg.Host}, Keychain: resolver.StaticKeychain("release", "wrong")})
	if err != nil {
		t.Fatal(err)
	}
	opts.Resolver = bad
	_, err = Plan(context.Background(), opts)
	if err == nil || !strings.Contains(err.Error(), "values.yaml:6 (images.ingestor.prodDigest)") {
		t.Errorf("bad credentials: %v", err)
	}
	if err != nil && strings.Contains(err.Error(), "wrong") {
		t.Errorf("error leaks the password: %v", err)
	}
	sameHashes(t, before, hashTree(t, dir))
}
