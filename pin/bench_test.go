package pin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
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

// heldCopies is how many copies of one chart BenchmarkPlanHeldMemory plans in one run.
const heldCopies = 64

// BenchmarkPlanHeldMemory plans one run over heldCopies copies of
// kube-prometheus-stack (the largest corpus values.yaml) and reports the
// live heap per chart while the plan is held: once every chart is loaded
// (at the first registry lookup) and again once the plan is returned,
// before any apply. heap-B/chart is the larger growth over the heap before
// the run, per chart; x-files is that over the size of a chart's files. A
// planned chart should keep its bytes and its splices, not its parse trees.
func BenchmarkPlanHeldMemory(b *testing.B) {
	orig := filepath.Join("testdata", "kube-prometheus-stack")
	lockData, err := os.ReadFile(filepath.Join(orig, "digests.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	lock, err := resolver.ParseLock("digests.yaml", lockData)
	if err != nil {
		b.Fatal(err)
	}
	root := b.TempDir()
	var dirs []string
	fileBytes := 0
	for i := range heldCopies {
		dir := filepath.Join(root, fmt.Sprintf("chart%03d", i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		fileBytes = 0
		for _, name := range []string{"Chart.yaml", "values.yaml"} {
			data, err := os.ReadFile(filepath.Join(orig, "original", name))
			if err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				b.Fatal(err)
			}
			fileBytes += len(data)
		}
		dirs = append(dirs, dir)
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse
	}
	var worst uint64
	for b.Loop() {
		r := &measuring{Interface: resolver.NewOffline(lock), heap: heap}
		base := heap()
		res, err := Plan(context.Background(), Options{ChartDirs: dirs, Resolver: r})
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Charts) != heldCopies || !res.Changed() || r.loaded == 0 {
			b.Fatalf("planned %d charts (changed %v, measured %d); want %d that move", len(res.Charts), res.Changed(), r.loaded, heldCopies)
		}
		held := max(r.loaded, heap())
		runtime.KeepAlive(res)
		if held > base {
			worst = max(worst, held-base)
		}
	}
	perChart := float64(worst) / heldCopies
	b.ReportMetric(perChart, "heap-B/chart")
	b.ReportMetric(perChart/float64(fileBytes), "x-files")
}

// measuring takes the heap at the first lookup, when every chart of the run is loaded.
type measuring struct {
	resolver.Interface
	heap   func() uint64
	once   sync.Once
	loaded uint64
}

func (m *measuring) Resolve(ctx context.Context, ref string) (resolver.Image, error) {
	m.once.Do(func() { m.loaded = m.heap() })
	return m.Interface.Resolve(ctx, ref)
}
