package demo_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/Masterminds/semver/v3"

	"github.com/chartpin/chartpin"
	"github.com/chartpin/chartpin/demo"
)

// The demo runs the real job: the chart copy ends up pinned and bumped, only
// pin and version lines differ, and the second run changes nothing.
func TestDemoPinsTheExampleChart(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	if err := demo.Run(context.Background(), &out, demo.Options{Charts: chartpin.Charts(), Config: chartpin.Config, Dir: dir}); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "no changes") {
		t.Errorf("second run not reported idempotent:\n%s", out.String())
	}
	// The signed release: the unsigned build is refused, then pinned once signed.
	for _, want := range []string{"REFUSED charts/example/values.yaml:59 images.jobsManager.prodDigest", "has no signature", "images.jobsManager.prodDigest sha256:", "(signature verified)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the signed release does not say %q:\n%s", want, out.String())
		}
	}
	before, err := os.ReadFile(filepath.Join("..", "charts", "example", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	after, err := os.ReadFile(filepath.Join(dir, "charts", "example", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	bl, al := strings.Split(string(before), "\n"), strings.Split(string(after), "\n")
	if len(bl) != len(al) {
		t.Fatalf("values.yaml has %d lines after the pin, %d before", len(al), len(bl))
	}
	pinLine := regexp.MustCompile(`^\s+(prodDigest|digest): "sha256:[0-9a-f]{64}"$`)
	changed := 0
	for i := range bl {
		if bl[i] == al[i] {
			continue
		}
		changed++
		if !pinLine.MatchString(al[i]) {
			t.Errorf("line %d changed to something that is not a pin: %q (was %q)", i+1, al[i], bl[i])
		}
	}
	if changed == 0 {
		t.Error("no pin was written")
	}
	old := chartVersion(t, filepath.Join("..", "charts", "example", "Chart.yaml"))
	got := chartVersion(t, filepath.Join(dir, "charts", "example", "Chart.yaml"))
	// Two releases: the first pin, and the signed build.
	if want := old.IncPatch().IncPatch(); !got.Equal(&want) {
		t.Errorf("Chart.yaml version = %s, want two patch bumps of %s", got, old)
	}
}

func chartVersion(t *testing.T, path string) *semver.Version {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^version: "?([^"\s]+)"?`).FindSubmatch(data)
	if m == nil {
		t.Fatalf("%s: no version line", path)
	}
	v, err := semver.StrictNewVersion(string(m[1]))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}
