package pin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chartpin/chartpin/resolver"
)

// BenchmarkPlanKubePrometheusStack20 plans a pin write of the largest corpus
// values.yaml (kube-prometheus-stack, ~200 KB) with 20 pin keys: its own 10
// sha: keys (6 pinnable, 4 with an empty tag and listed) plus 10 image
// blocks appended at the end. Offline resolver, so it measures chartpin.
func BenchmarkPlanKubePrometheusStack20(b *testing.B) {
	orig := filepath.Join("testdata", "kube-prometheus-stack", "original")
	values, err := os.ReadFile(filepath.Join(orig, "values.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	chart, err := os.ReadFile(filepath.Join(orig, "Chart.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	lock, err := os.ReadFile(filepath.Join("testdata", "kube-prometheus-stack", "digests.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	var extra, extraLock strings.Builder
	extra.WriteString("\nbenchExtraImages:\n")
	for i := range 10 {
		fmt.Fprintf(&extra, "  img%d:\n    registry: quay.io\n    repository: bench/img%d\n    tag: \"v1.%d.0\"\n    sha: \"\"\n", i, i, i)
		fmt.Fprintf(&extraLock, "quay.io/bench/img%d:v1.%d.0: sha256:%064x\n", i, i, i+1)
	}
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "values.yaml"), append(values, extra.String()...), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "Chart.yaml"), chart, 0o644); err != nil {
		b.Fatal(err)
	}
	l, err := resolver.ParseLock("digests.yaml", append(lock, extraLock.String()...))
	if err != nil {
		b.Fatal(err)
	}
	opts := Options{ChartDirs: []string{dir}, Resolver: resolver.NewOffline(l)}
	res, err := Plan(context.Background(), opts)
	if err != nil {
		b.Fatal(err)
	}
	pins, changed := 0, 0
	for _, p := range res.Charts[0].Pins {
		pins++
		if p.Changed {
			changed++
		}
	}
	if pins+len(res.Charts[0].Skipped) != 20 || changed != 16 {
		b.Fatalf("pins %d (+%d skipped), changed %d; want 20 pin keys, 16 written", pins, len(res.Charts[0].Skipped), changed)
	}
	b.SetBytes(int64(len(values) + extra.Len()))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := Plan(context.Background(), opts); err != nil {
			b.Fatal(err)
		}
	}
}
