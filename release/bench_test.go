package release

import (
	"context"
	"testing"
)

// BenchmarkRelease measures a first run (pin → commit → push → PR) and an
// unchanged re-run from a fresh CI checkout, over smart HTTP, the in-process
// registry and the fake GitHub; requests per run are reported as metrics.
func BenchmarkRelease(b *testing.B) {
	b.Run("first-run", func(b *testing.B) {
		var git, gh, reg int64
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			w := newWorld(b)
			opts := w.options(b, w.clone(b), false)
			w.git.Reset()
			b.StartTimer()
			if _, err := Run(context.Background(), opts); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			git, gh, reg = git+int64(len(w.git.Requests())), gh+int64(len(w.gh.Calls())), reg+int64(w.reg.Count(""))
		}
		b.ReportMetric(float64(git)/float64(b.N), "git-req/op")
		b.ReportMetric(float64(gh)/float64(b.N), "github-req/op")
		b.ReportMetric(float64(reg)/float64(b.N), "registry-req/op")
	})
	b.Run("unchanged-rerun", func(b *testing.B) {
		w := newWorld(b)
		if _, err := Run(context.Background(), w.options(b, w.clone(b), false)); err != nil {
			b.Fatal(err)
		}
		var git, gh, reg int64
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			opts := w.options(b, w.clone(b), false)
			w.git.Reset()
			w.gh.Reset()
			w.reg.Reset()
			b.StartTimer()
			rep, err := Run(context.Background(), opts)
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if rep.Pushed || rep.CommitCreated {
				b.Fatalf("unchanged re-run pushed or committed: %+v", rep)
			}
			git, gh, reg = git+int64(len(w.git.Requests())), gh+int64(len(w.gh.Calls())), reg+int64(w.reg.Count(""))
		}
		b.ReportMetric(float64(git)/float64(b.N), "git-req/op")
		b.ReportMetric(float64(gh)/float64(b.N), "github-req/op")
		b.ReportMetric(float64(reg)/float64(b.N), "registry-req/op")
	})
}
