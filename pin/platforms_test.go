package pin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/internal/registrytest"
	"github.com/chartpin/chartpin/resolver"
)

// platformsChart writes a one-image chart pinned to pinned, and a
// chartpin.yaml when cfg is not "".
func platformsChart(t *testing.T, host, pinned, cfg string) (dir string, values []byte) {
	t.Helper()
	dir = t.TempDir()
	values = []byte("app:\n  image:\n    repository: " + host + "/team/app\n    tag: \"1.0\"\n    digest: " + pinned + "\n")
	files := map[string][]byte{"Chart.yaml": []byte(goodChart), "values.yaml": values}
	if cfg != "" {
		files["chartpin.yaml"] = []byte(cfg)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, values
}

func onlineResolver(t *testing.T, host string) resolver.Interface {
	t.Helper()
	r, err := resolver.New(resolver.Options{InsecureRegistries: []string{host}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Without platforms:, a new single-arch digest is refused: the HEAD already
// said it is no index. Nothing is planned, nothing written.
func TestDiscoveryRefusesSingleArch(t *testing.T) {
	reg := registrytest.New(t)
	old := reg.PushIndex(t, "team/app", "0.9", "linux/amd64", "linux/arm64")
	single := reg.PushImage(t, "team/app", "1.0")
	dir, values := platformsChart(t, reg.Host, old, "")
	res, err := Plan(context.Background(), Options{ChartDirs: []string{dir}, Resolver: onlineResolver(t, reg.Host)})
	if err == nil {
		t.Fatalf("single-arch %s planned as a pin:\n%s", single, res.Diff())
	}
	for _, want := range []string{"values.yaml:5 (app.image.digest)", "image " + reg.Host + "/team/app:1.0", single, "single-arch", "push a multi-arch index"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if !errors.Is(err, resolver.ErrPlatforms) {
		t.Errorf("error does not wrap ErrPlatforms: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "values.yaml")); string(got) != string(values) {
		t.Errorf("values.yaml changed:\n%s", got)
	}

	// An index for the same tag pins: one GET of the new index and one of
	// the pin it replaces, whose two platforms it must keep.
	index := reg.PushIndex(t, "team/app", "1.0", "linux/amd64", "linux/arm64")
	reg.Reset()
	res, err = Plan(context.Background(), Options{ChartDirs: []string{dir}, Resolver: onlineResolver(t, reg.Host)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Charts[0].Pins) != 1 || res.Charts[0].Pins[0].NewDigest != index {
		t.Errorf("pins %+v, want %s", res.Charts[0].Pins, index)
	}
	var gets []string
	for _, q := range reg.Requests() {
		if q.Method == "GET" && strings.Contains(q.Path, "/manifests/") {
			gets = append(gets, strings.TrimPrefix(q.Path, "/v2/team/app/manifests/"))
		}
	}
	if len(gets) != 2 || !slices.Contains(gets, old) || !slices.Contains(gets, index) {
		t.Errorf("manifest GETs %v, want one each of %s and %s", gets, old, index)
	}
}

// A pin that stays costs HEADs only: platforms are read for a digest about
// to be written, never for one that was checked when it was written.
func TestUnchangedPinReadsNoPlatforms(t *testing.T) {
	reg := registrytest.New(t)
	cfg := "charts:\n  - dir: .\n    images:\n      - at: app.image\n        platforms: [linux/amd64, linux/arm64]\n"
	index := reg.PushIndex(t, "team/app", "1.0", "linux/amd64", "linux/arm64")
	dir, _ := platformsChart(t, reg.Host, index, cfg)
	reg.Reset()
	res, err := Plan(context.Background(), Options{ConfigPath: filepath.Join(dir, "chartpin.yaml"), Resolver: onlineResolver(t, reg.Host)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Changed() {
		t.Errorf("unchanged pin changed files:\n%s", res.Diff())
	}
	for _, q := range reg.Requests() {
		if q.Method == "GET" && strings.Contains(q.Path, "/manifests/") {
			t.Errorf("manifest GET %s for a pin that stays", q.Path)
		}
	}
	if n := reg.Count("HEAD"); n != 1 {
		t.Errorf("HEADs = %d, want 1", n)
	}
}

// A pin never loses a platform, with or without platforms: configured: a
// one-platform index over a two-platform pin is refused with the plan (not
// applicable), and --platforms adds a requirement of its own.
func TestPlatformsNeverShrink(t *testing.T) {
	reg := registrytest.New(t)
	old := reg.PushIndex(t, "team/app", "0.9", "linux/amd64", "linux/arm64")
	narrow := reg.PushIndex(t, "team/app", "1.0", "linux/amd64")
	dir, values := platformsChart(t, reg.Host, old, "")
	res, err := Plan(context.Background(), Options{ChartDirs: []string{dir}, Resolver: onlineResolver(t, reg.Host)})
	if !errors.Is(err, resolver.ErrPlatforms) || res == nil || !res.Refused() {
		t.Fatalf("err %v, result %+v", err, res)
	}
	for _, want := range []string{"values.yaml:5 (app.image.digest)", "refusing to pin " + narrow, "linux/arm64 (index has linux/amd64)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if r := res.Charts[0].Refused; len(r) != 1 || r[0].Line != 5 || r[0].Path != "app.image.digest" {
		t.Errorf("refusals %+v", r)
	}
	if err := res.Apply(); err == nil {
		t.Error("a refused plan was applied")
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "values.yaml")); string(got) != string(values) {
		t.Errorf("values.yaml changed:\n%s", got)
	}

	// A wider index passes; --platforms then asks for one it lacks.
	wide := reg.PushIndex(t, "team/app", "1.0", "linux/amd64", "linux/arm64", "linux/s390x")
	if _, err := Plan(context.Background(), Options{ChartDirs: []string{dir}, Resolver: onlineResolver(t, reg.Host)}); err != nil {
		t.Fatalf("wider index %s refused: %v", wide, err)
	}
	_, err = Plan(context.Background(), Options{ChartDirs: []string{dir}, Resolver: onlineResolver(t, reg.Host), Platforms: []string{"linux/ppc64le"}})
	if !errors.Is(err, resolver.ErrPlatforms) || !strings.Contains(err.Error(), "linux/ppc64le") {
		t.Errorf("--platforms linux/ppc64le: %v", err)
	}
	_, err = Plan(context.Background(), Options{ChartDirs: []string{dir}, Resolver: onlineResolver(t, reg.Host), Platforms: []string{"linux"}})
	if failure.Code(err) != 2 {
		t.Errorf("--platforms linux: %v, want an input error", err)
	}
}

// A registry whose HEAD names a digest it does not serve, or calls a
// single-arch manifest an index: nothing is pinned, nothing written, and
// the registry saw one GET of the claimed digest.
func TestPinRefusesWhatTheRegistryDoesNotServe(t *testing.T) {
	for _, c := range []struct {
		name string
		lie  func(reg *registrytest.Registry) (registrytest.Lie, string)
		want string
	}{
		{"wrong digest header", func(reg *registrytest.Registry) (registrytest.Lie, string) {
			reg.PushIndex(t, "team/app", "1.0", "linux/amd64", "linux/arm64")
			other := reg.PushIndex(t, "team/app", "0.8", "linux/amd64", "linux/arm64")
			return registrytest.Lie{Serve: "1.0", Digest: other}, other
		}, "its bytes hash to"},
		{"index media type on a single-arch manifest", func(reg *registrytest.Registry) (registrytest.Lie, string) {
			single := reg.PushImage(t, "team/app", "1.0")
			return registrytest.Lie{MediaType: "application/vnd.oci.image.index.v1+json"}, single
		}, "the manifest says"},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg := registrytest.New(t)
			old := reg.PushIndex(t, "team/app", "0.9", "linux/amd64", "linux/arm64")
			lie, claimed := c.lie(reg)
			dir, values := platformsChart(t, reg.Host, old, "")
			reg.Reset()
			reg.Lie(lie)
			res, err := Plan(context.Background(), Options{ChartDirs: []string{dir}, Resolver: onlineResolver(t, reg.Host)})
			if err == nil {
				t.Fatalf("planned:\n%s", res.Diff())
			}
			if !errors.Is(err, resolver.ErrBadManifest) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "values.yaml:5 (app.image.digest)") {
				t.Errorf("err = %v, want ErrBadManifest naming the pin and saying %q", err, c.want)
			}
			if got, _ := os.ReadFile(filepath.Join(dir, "values.yaml")); string(got) != string(values) {
				t.Errorf("values.yaml changed:\n%s", got)
			}
			// One GET of the claimed digest, one of the pin it would replace.
			if n := reg.CountPath("GET", "/manifests/"); n != 2 || reg.CountPath("GET", "/manifests/"+claimed) != 1 || reg.CountPath("GET", "/manifests/"+old) != 1 {
				t.Errorf("manifest GETs %v, want one of the claimed digest %s and one of the old pin", reg.Requests(), claimed)
			}
		})
	}
}

// A first pin (nothing to keep, no platforms configured) of a single-arch
// image is refused all the same: chartpin pins indexes only.
func TestFirstPinRefusesSingleArch(t *testing.T) {
	reg := registrytest.New(t)
	single := reg.PushImage(t, "team/app", "1.0")
	dir, values := platformsChart(t, reg.Host, `""`, "")
	res, err := Plan(context.Background(), Options{ChartDirs: []string{dir}, Resolver: onlineResolver(t, reg.Host)})
	if err == nil || res != nil && !res.Refused() {
		t.Fatalf("single-arch %s planned as a first pin: %v", single, err)
	}
	if !errors.Is(err, resolver.ErrPlatforms) || !strings.Contains(err.Error(), "single-arch manifest") {
		t.Errorf("err = %v, want the single-arch refusal", err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "values.yaml")); string(got) != string(values) {
		t.Errorf("values.yaml changed:\n%s", got)
	}
}

// singleArch: true lets a first pin be a single-platform manifest (an image
// built for one platform only); it never lets a pin lose platforms it had.
func TestSingleArchAllowedByConfig(t *testing.T) {
	reg := registrytest.New(t)
	single := reg.PushImage(t, "team/app", "1.0")
	cfg := "charts:\n  - dir: .\n    images:\n      - at: app.image\n        singleArch: true\n"

	dir, _ := platformsChart(t, reg.Host, `""`, cfg)
	res, err := Plan(context.Background(), Options{ConfigPath: filepath.Join(dir, "chartpin.yaml"), Resolver: onlineResolver(t, reg.Host)})
	if err != nil || res.Refused() {
		t.Fatalf("single-arch first pin with singleArch: true: %v", err)
	}
	if err := res.Apply(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "values.yaml")); !strings.Contains(string(got), "digest: \""+single+"\"") {
		t.Errorf("values.yaml does not pin %s:\n%s", single, got)
	}

	index := reg.PushIndex(t, "team/app", "0.9", "linux/amd64", "linux/arm64")
	dir, values := platformsChart(t, reg.Host, `"`+index+`"`, cfg)
	res, err = Plan(context.Background(), Options{ConfigPath: filepath.Join(dir, "chartpin.yaml"), Resolver: onlineResolver(t, reg.Host)})
	if err == nil && (res == nil || !res.Refused()) {
		t.Fatal("singleArch: true let a two-platform pin shrink to one platform")
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "values.yaml")); string(got) != string(values) {
		t.Errorf("values.yaml changed:\n%s", got)
	}
}
