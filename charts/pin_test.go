package charts_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/Masterminds/semver/v3"
	"helm.sh/helm/v3/pkg/chart/loader"
	"sigs.k8s.io/yaml"

	"github.com/chartpin/chartpin/config"
	"github.com/chartpin/chartpin/pin"
	"github.com/chartpin/chartpin/resolver"
)

// TestPinExample runs the release-time path on a copy of this repository's
// chartpin.yaml and charts/: `chartpin pin` from an offline digest lock must
// change only the pin values in values.yaml and version/appVersion (lockstep)
// in Chart.yaml, and the pinned chart must then render prod by digest with
// the reconcile retired.
func TestPinExample(t *testing.T) {
	root := t.TempDir()
	cfgBytes, err := os.ReadFile("../chartpin.yaml")
	if err != nil {
		t.Fatalf("the repository's chartpin.yaml: %v", err)
	}
	if err := os.WriteFile(filepath.Join(root, "chartpin.yaml"), cfgBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"chartpin-lib", "example"} {
		if err := copyChart(name, filepath.Join(root, "charts", name)); err != nil {
			t.Fatal(err)
		}
	}
	exDir := filepath.Join(root, "charts", "example")
	valuesPath := filepath.Join(exDir, "values.yaml")
	chartPath := filepath.Join(exDir, "Chart.yaml")

	// Start from no pins (the committed values.yaml may already carry some),
	// changing only pin values so the file stays the committed one otherwise.
	before := clearPins(t, mustRead(t, valuesPath))
	if err := os.WriteFile(valuesPath, before, 0o644); err != nil {
		t.Fatal(err)
	}
	chartBefore := mustRead(t, chartPath)

	cfg, err := config.Load(filepath.Join(root, "chartpin.yaml"))
	if err != nil {
		t.Fatalf("chartpin.yaml does not load: %v", err)
	}
	if len(cfg.Charts) != 1 || cfg.Charts[0].Dir != exDir || cfg.Charts[0].AppVersion != "lockstep" {
		t.Fatalf("chartpin.yaml configures %+v, want charts/example with appVersion lockstep", cfg.Charts)
	}

	// The lock answers for the refs values.yaml names today (a release cut
	// may have moved a tag since this test was written).
	var committed map[string]any
	if err := yaml.Unmarshal(before, &committed); err != nil {
		t.Fatal(err)
	}
	ref := func(path, tagKey string) string {
		var block any = committed
		for _, k := range strings.Split(path, ".") {
			block = block.(map[string]any)[k]
		}
		b := block.(map[string]any)
		var tag any = b
		for _, k := range strings.Split(tagKey, ".") {
			tag = tag.(map[string]any)[k]
		}
		return fmt.Sprintf("%s:%v", b["repository"], tag)
	}
	both := []string{"linux/amd64", "linux/arm64"}
	lock := resolver.NewLock()
	for r, d := range map[string]string{
		ref("images.jobsManager", "channelTags.prod"):     dJMProd,
		ref("images.podsMonitor", "channelTags.prod"):     dPM,
		ref("images.resourceMonitor", "channelTags.prod"): dRM,
		ref("reconcile.image", "tag"):                     dTool,
		ref("autoUpgrade.image", "tag"):                   dTool,
	} {
		lock.Set(r, resolver.LockEntry{Digest: d, Platforms: both})
	}
	res, err := pin.Plan(context.Background(), pin.Options{
		ConfigPath: filepath.Join(root, "chartpin.yaml"),
		Resolver:   resolver.NewOffline(lock),
	})
	if err != nil {
		t.Fatalf("pin.Plan: %v", err)
	}
	if err := res.Apply(); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	after := mustRead(t, valuesPath)

	// values.yaml: only the pin values moved, line for line.
	wantPins := map[string]string{ // values path -> digest
		"images.jobsManager.prodDigest": dJMProd, "images.podsMonitor.prodDigest": dPM,
		"images.requestsProxy.prodDigest": dJMProd, "images.resourceMonitor.prodDigest": dRM,
		"reconcile.image.digest": dTool, "autoUpgrade.image.digest": dTool,
	}
	bl, al := strings.Split(string(before), "\n"), strings.Split(string(after), "\n")
	if len(bl) != len(al) {
		t.Fatalf("pin changed the number of lines of values.yaml: %d -> %d", len(bl), len(al))
	}
	moved := 0
	for i := range bl {
		if bl[i] == al[i] {
			continue
		}
		moved++
		key := strings.TrimSpace(strings.SplitN(bl[i], ":", 2)[0])
		if !strings.HasSuffix(bl[i], `: ""`) || strings.TrimSuffix(bl[i], `""`) != strings.TrimSuffix(al[i], al[i][strings.LastIndex(al[i], " ")+1:]) {
			t.Errorf("values.yaml:%d: %q -> %q is not a pin value edit", i+1, bl[i], al[i])
		}
		if key != "prodDigest" && key != "digest" {
			t.Errorf("values.yaml:%d: pin wrote %s", i+1, key)
		}
	}
	var vals map[string]any
	if err := yaml.Unmarshal(after, &vals); err != nil {
		t.Fatal(err)
	}
	for path, d := range wantPins {
		var got any = vals
		for _, k := range strings.Split(path, ".") {
			m, _ := got.(map[string]any)
			got = m[k]
		}
		if got != d {
			t.Errorf("after pin %s = %v, want %s", path, got, d)
		}
	}
	if moved != len(wantPins) {
		t.Errorf("pin moved %d lines of values.yaml, want %d:\n%s", moved, len(wantPins), res.Diff())
	}

	// Chart.yaml: version and appVersion, lockstep, nothing else.
	chartAfter := mustRead(t, chartPath)
	var meta struct{ Version, AppVersion string }
	if err := yaml.Unmarshal(chartBefore, &meta); err != nil {
		t.Fatal(err)
	}
	v := semver.MustParse(meta.Version)
	next := v.IncPatch().String()
	if meta.AppVersion != meta.Version {
		t.Fatalf("Chart.yaml version %s and appVersion %s are not in lockstep", meta.Version, meta.AppVersion)
	}
	wantChart := bytes.Replace(chartBefore, []byte("version: "+meta.Version), []byte("version: "+next), 1)
	wantChart = bytes.Replace(wantChart, []byte(`appVersion: "`+meta.Version+`"`), []byte(`appVersion: "`+next+`"`), 1)
	if !bytes.Equal(chartAfter, wantChart) {
		t.Errorf("Chart.yaml after pin:\n%s\nwant:\n%s", chartAfter, wantChart)
	}

	// Pinning again is a no-op.
	again, err := pin.Plan(context.Background(), pin.Options{ConfigPath: filepath.Join(root, "chartpin.yaml"), Resolver: resolver.NewOffline(lock)})
	if err != nil {
		t.Fatal(err)
	}
	if again.Changed() {
		t.Errorf("a second pin changes files:\n%s", again.Diff())
	}

	// The pinned chart renders prod by digest; the reconcile retires.
	if err := copyChart(filepath.Join(builtCharts(t), "example", "charts"), filepath.Join(exDir, "charts")); err != nil {
		t.Fatal(err)
	}
	c, err := loader.Load(exDir)
	if err != nil {
		t.Fatal(err)
	}
	manifest, _, err := installDryRun(c, releaseNs, nil)
	if err != nil {
		t.Fatalf("rendering the pinned example: %v", err)
	}
	r := renderParsed(t, rendered{ns: releaseNs}, manifest)
	for name, w := range map[string]want{
		"api": {jm + "@" + dJMProd, ifnp}, "pods-monitor": {pm + "@" + dPM, ifnp},
		"proxy": {jm + "@" + dJMProd, ifnp}, "resource-monitor": {rm + "@" + dRM, ifnp},
		"upgrade": {"ghcr.io/chartpin/chartpin@" + dTool, ifnp},
	} {
		if c := r.container(t, name); c.Image != w.image || c.Policy != w.policy {
			t.Errorf("pinned chart: %s %s %s, want %s %s", name, c.Image, c.Policy, w.image, w.policy)
		}
	}
	if r.targets != nil {
		t.Errorf("every image pinned, yet the reconcile renders targets %v", r.targetIDs())
	}
	checkInvariants(t, r, true)
	// In dev the same chart still floats and reconciles.
	manifest, _, err = installDryRun(c, releaseNs, parseValues(t, "env: dev"))
	if err != nil {
		t.Fatal(err)
	}
	r = renderParsed(t, rendered{ns: releaseNs}, manifest)
	if got := r.container(t, "api"); got.Image != jm+":dev" || got.Policy != ifnp || len(r.targetIDs()) != 4 {
		t.Errorf("pinned chart in dev: api %s %s, targets %v", got.Image, got.Policy, r.targetIDs())
	}
	checkInvariants(t, r, true)
}

// clearPins empties every digest and prodDigest value in values.yaml text.
func clearPins(t *testing.T, b []byte) []byte {
	t.Helper()
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		trimmed := strings.TrimSpace(l)
		for _, key := range []string{"digest: ", "prodDigest: "} {
			if strings.HasPrefix(trimmed, key) {
				lines[i] = l[:strings.Index(l, key)+len(key)] + `""`
			}
		}
	}
	return []byte(strings.Join(lines, "\n"))
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
