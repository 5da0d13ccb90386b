package drift_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chartpin/chartpin/config"
	"github.com/chartpin/chartpin/drift"
	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/internal/registrytest"
	"github.com/chartpin/chartpin/pin"
	"github.com/chartpin/chartpin/resolver"
)

// writeFiles writes name → content under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func newResolver(t *testing.T, host string) *resolver.Remote {
	t.Helper()
	r, err := resolver.New(resolver.Options{InsecureRegistries: []string{host}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// With a config, a block discovery refuses is a finding unless the config
// settles it; either way the pins after it are still looked at.
func TestDiscoveryFailureWithConfigIsAFinding(t *testing.T) {
	reg := registrytest.New(t)
	app := reg.PushIndex(t, "team/app", "1.0", "linux/amd64", "linux/arm64")
	amb := reg.PushIndex(t, "team/amb", "1.0", "linux/amd64", "linux/arm64")
	lateOld := reg.PushIndex(t, "team/late", "1.0", "linux/amd64", "linux/arm64")
	reg.PushIndex(t, "team/late", "1.0", "linux/amd64", "linux/arm64") // the float moved
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"values.yaml": "app:\n  repository: " + reg.Host + "/team/app\n  tag: \"1.0\"\n  digest: " + app + "\n" +
		"amb:\n  repository: " + reg.Host + "/team/amb\n  tag: 1.0@" + amb + "\n  digest: " + amb + "\n" + // block at line 6
		"late:\n  repository: " + reg.Host + "/team/late\n  tag: \"1.0\"\n  digest: " + lateOld + "\n"})
	r := newResolver(t, reg.Host)

	// Only app is configured: amb stops discovery, so late goes unwatched.
	cfg, err := config.Parse(filepath.Join(dir, "chartpin.yaml"), []byte("charts:\n  - dir: .\n    images:\n      - at: app\n"))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := drift.Check(context.Background(), r, []drift.Target{{Dir: dir, Config: &cfg.Charts[0]}}, drift.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Err(); !errors.Is(err, failure.ErrFindings) || failure.Code(err) != 1 {
		t.Fatalf("unwatched pins passed: err %v; %s", err, rep.Summary())
	}
	var un *drift.Item
	for i, it := range rep.Items {
		if it.Status == drift.Unwatchable {
			un = &rep.Items[i]
		}
	}
	if un == nil || un.Pin.Line != 6 || filepath.Base(un.Pin.File) != "values.yaml" || !strings.Contains(un.Message, "ambiguous") {
		t.Fatalf("want an UNWATCHABLE item at values.yaml:6 naming the ambiguity, got %+v", rep.Items)
	}
	if got := byPath(t, rep)["app.digest"]; got.Status != drift.OK {
		t.Errorf("configured app: %s %q", got.Status, got.Message)
	}
	var text strings.Builder
	if err := drift.WriteText(&text, rep, func(s string) string { return s }); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "UNWATCHABLE") || !strings.Contains(text.String(), "values.yaml:6") {
		t.Errorf("text view hides the finding:\n%s", text.String())
	}

	// digest plus sha, with amb configured by pin: digest, is settled:
	// discovery walks on past it and finds late's drift.
	writeFiles(t, dir, map[string]string{"values.yaml": "app:\n  repository: " + reg.Host + "/team/app\n  tag: \"1.0\"\n  digest: " + app + "\n" +
		"amb:\n  repository: " + reg.Host + "/team/amb\n  tag: \"1.0\"\n  digest: " + amb + "\n  sha: " + strings.TrimPrefix(amb, "sha256:") + "\n" +
		"late:\n  repository: " + reg.Host + "/team/late\n  tag: \"1.0\"\n  digest: " + lateOld + "\n"})
	cfg, err = config.Parse(filepath.Join(dir, "chartpin.yaml"), []byte("charts:\n  - dir: .\n    images:\n      - at: app\n      - at: amb\n        pin: digest\n"))
	if err != nil {
		t.Fatal(err)
	}
	rep, err = drift.Check(context.Background(), r, []drift.Target{{Dir: dir, Config: &cfg.Charts[0]}}, drift.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := byPath(t, rep)
	if got["late.digest"].Status != drift.Drift || got["amb.digest"].Status != drift.OK || rep.Count(drift.Unwatchable) != 0 {
		t.Errorf("settled: %+v", rep.Items)
	}
	if len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "chartpin.yaml:5") {
		t.Errorf("notes %q: want one naming the settling entry", rep.Notes)
	}
}

// pinThenDrift pins the chart in dir with its chartpin.yaml, then runs
// drift against the same registry: it must pass.
func pinThenDrift(t *testing.T, reg *registrytest.Registry, dir string) *drift.Report {
	t.Helper()
	cfgPath := filepath.Join(dir, "chartpin.yaml")
	res, err := pin.Plan(context.Background(), pin.Options{ConfigPath: cfgPath, Resolver: newResolver(t, reg.Host), Bump: "none"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Changed() {
		t.Fatal("pin changed nothing; the test needs a pin that moves")
	}
	if err := res.Apply(); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := drift.Check(context.Background(), newResolver(t, reg.Host), []drift.Target{{Dir: dir, Config: &cfg.Charts[0]}}, drift.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Err(); err != nil {
		var text strings.Builder
		drift.WriteText(&text, rep, func(s string) string { return s })
		t.Errorf("drift right after pin: %v\n%s", err, text.String())
	}
	return rep
}

// versions: pin and drift pick the same tag; the float 0.8 (lenient semver
// reads it as 0.8.0) is never the one watched.
func TestPinThenDriftVersionsRange(t *testing.T) {
	reg := registrytest.New(t)
	old := reg.PushIndex(t, "team/app", "0.7.0", "linux/amd64", "linux/arm64")
	d080 := reg.PushIndex(t, "team/app", "0.8.0", "linux/amd64", "linux/arm64")
	d089 := reg.PushIndex(t, "team/app", "0.8.9", "linux/amd64", "linux/arm64")
	reg.Tag(t, "team/app", d089, "0.8")
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"Chart.yaml":    "apiVersion: v2\nname: app\nversion: 1.0.0\nappVersion: \"1.0.0\"\n",
		"values.yaml":   "app:\n  repository: " + reg.Host + "/team/app\n  tag: \"0.8\"\n  digest: " + old + "\n",
		"chartpin.yaml": "charts:\n  - dir: .\n    images:\n      - at: app\n        versions: \">=0.8.0 <=0.8.4\"\n",
	})
	rep := pinThenDrift(t, reg, dir)
	if it := byPath(t, rep)["app.digest"]; it.Status != drift.OK || it.Current != d080 || !strings.HasPrefix(it.Float, reg.Host+"/team/app:0.8.0 ") {
		t.Errorf("app: %s float %q current %s, want ok at 0.8.0 (%s)", it.Status, it.Float, it.Current, d080)
	}
}

// follows: an image configured twice with different pin keys; the follower
// takes the entry with its own pin key, in pin and in drift alike.
func TestPinThenDriftFollowsByPinKey(t *testing.T) {
	reg := registrytest.New(t)
	old := reg.PushIndex(t, "team/ingestor", "0.1", "linux/amd64", "linux/arm64")
	prod := reg.PushIndex(t, "team/ingestor", "1.0", "linux/amd64", "linux/arm64")
	stg := reg.PushIndex(t, "team/ingestor", "2.0", "linux/amd64", "linux/arm64")
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: app\nversion: 1.0.0\nappVersion: \"1.0.0\"\n",
		"values.yaml": "images:\n  ingestor:\n    repository: " + reg.Host + "/team/ingestor\n    channelTags:\n      prod: \"1.0\"\n      stg: \"2.0\"\n" +
			"    prodDigest: " + old + "\n    stgDigest: " + old + "\n" +
			"  sidecar:\n    repository: " + reg.Host + "/team/ingestor\n    tag: \"2.0\"\n    stgDigest: " + old + "\n",
		"chartpin.yaml": "charts:\n  - dir: .\n    images:\n" +
			"      - at: images.ingestor\n        tagFrom: channelTags.prod\n        pin: prodDigest\n" +
			"      - at: images.ingestor\n        tagFrom: channelTags.stg\n        pin: stgDigest\n" +
			"      - at: images.sidecar\n        pin: stgDigest\n        follows: images.ingestor\n",
	})
	rep := pinThenDrift(t, reg, dir)
	got := byPath(t, rep)
	if it := got["images.sidecar.stgDigest"]; it.Status != drift.OK || it.Current != stg || it.Pinned != stg {
		t.Errorf("sidecar: %s pinned %s current %s, want ok at stg %s", it.Status, it.Pinned, it.Current, stg)
	}
	if it := got["images.ingestor.prodDigest"]; it.Status != drift.OK || it.Current != prod {
		t.Errorf("ingestor prod: %s %s", it.Status, it.Current)
	}
}

// The text summary counts every request the JSON does.
func TestSummaryCountsEveryRequest(t *testing.T) {
	rep := &drift.Report{Requests: &resolver.Stats{HEAD: 1, GET: 2, Token: 3, Ping: 4, Other: 5, Retries: 6}}
	s := rep.Summary()
	for _, want := range []string{"HEAD 1", "GET 2", "token 3", "ping 4", "other 5", "15 in all", "6 of them retries"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary %q lacks %q", s, want)
		}
	}
}
