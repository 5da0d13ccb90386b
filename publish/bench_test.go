package publish

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
)

// BenchmarkPublish packages a chart and ships a new version to an index
// directory and the in-process OCI registry each iteration; registry
// requests per publish are reported.
func BenchmarkPublish(b *testing.B) {
	host, requests := countingRegistry(b)
	chartDir := writeChart(b, b.TempDir(), "1.0.0", "1.0.0", "0.8")
	repoDir := b.TempDir()
	o := opts(Options{IndexDir: repoDir, OCI: "oci://" + host + "/charts", PlainHTTP: []string{host}, RegistryConfig: filepath.Join(b.TempDir(), "none.json")})
	var reqs int64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		writeChart(b, chartDir, "1.0."+strconv.Itoa(i), "1.0."+strconv.Itoa(i), "0.8")
		requests.Store(0)
		b.StartTimer()
		if _, err := Publish(context.Background(), chartDir, o); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		reqs += requests.Load()
	}
	b.ReportMetric(float64(reqs)/float64(b.N), "registry-req/op")
}
