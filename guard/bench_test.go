package guard_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/chartpin/chartpin/guard"
	"github.com/chartpin/chartpin/guard/guardtest"
)

// BenchmarkCheck20Charts: 20 charts of 60 files each, one template changed
// and bumped, charts found by walking (working tree and base tree).
func BenchmarkCheck20Charts(b *testing.B) {
	r := guardtest.New(b)
	for c := 0; c < 20; c++ {
		dir := fmt.Sprintf("charts/c%02d", c)
		r.Chart(dir, fmt.Sprintf("c%02d", c), "1.0.0", "1.0.0")
		for f := 0; f < 58; f++ {
			r.Write(fmt.Sprintf("%s/templates/t%02d.yaml", dir, f), strings.Repeat("kind: ConfigMap\n", 50))
		}
	}
	r.Base()
	r.Write("charts/c07/templates/t03.yaml", "kind: Secret\n")
	r.ChartYAML("charts/c07", "c07", "1.0.1", "1.0.1")
	r.Commit("change one chart")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := guard.Check(context.Background(), r.Dir, guard.Options{Base: "origin/main"})
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Charts) != 20 || res.Err() != nil {
			b.Fatalf("%d charts, err %v", len(res.Charts), res.Err())
		}
	}
}
