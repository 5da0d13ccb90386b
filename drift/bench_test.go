package drift_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chartpin/chartpin/drift"
	"github.com/chartpin/chartpin/internal/registrytest"
	"github.com/chartpin/chartpin/resolver"
)

// BenchmarkCheck200Pins: 200 pins over 50 unique floats in the in-process
// registry; reports the HEADs each run sends (want 50: one per float).
func BenchmarkCheck200Pins(b *testing.B) {
	reg := registrytest.New(b)
	var v strings.Builder
	for i := 0; i < 50; i++ {
		d := reg.PushIndex(b, fmt.Sprintf("team/img%02d", i), "1.0", "linux/amd64")
		for j := 0; j < 4; j++ {
			fmt.Fprintf(&v, "img%02d_%d:\n  repository: %s/team/img%02d\n  tag: \"1.0\"\n  digest: %s\n", i, j, reg.Host, i, d)
		}
	}
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "values.yaml"), []byte(v.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	heads := 0
	for i := 0; i < b.N; i++ {
		r, err := resolver.New(resolver.Options{InsecureRegistries: []string{reg.Host}})
		if err != nil {
			b.Fatal(err)
		}
		rep, err := drift.Check(context.Background(), r, []drift.Target{{Dir: dir}}, drift.Options{})
		if err != nil || rep.Count(drift.OK) != 200 {
			b.Fatalf("err %v: %s", err, rep.Summary())
		}
		heads += r.Stats().HEAD
	}
	b.ReportMetric(float64(heads)/float64(b.N), "HEADs/op")
}
