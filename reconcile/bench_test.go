package reconcile

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/chartpin/chartpin/resolver"
)

// benchFixture is 50 targets: 50 Deployments (2 ready pods each) running 25
// images, two workloads per image.
func benchFixture(b *testing.B) (*env, *File) {
	e := newEnv(b)
	var sb strings.Builder
	sb.WriteString("mirror: \"\"\ntargets:\n")
	for i := 0; i < 50; i++ {
		repo := fmt.Sprintf("example/app-%02d", i/2)
		if i%2 == 0 {
			e.reg.PushIndex(b, repo, "old", "linux/amd64", "linux/arm64")
			e.reg.PushIndex(b, repo, "dev", "linux/amd64", "linux/arm64")
		}
		fmt.Fprintf(&sb, "  - {id: t%02d, kind: Deployment, namespace: prod-ns, name: w%02d, container: app, image: %q}\n", i, i, e.reg.Host+"/"+repo+":dev")
	}
	f, err := ParseTargets("targets.yaml", []byte(sb.String()))
	if err != nil {
		b.Fatal(err)
	}
	return e, f
}

// install (re)creates the 50 workloads running the old or the newest digest.
func benchInstall(b *testing.B, e *env, f *File, digests map[string]string) {
	for _, t := range f.Targets {
		repo := repository(t.Image)
		d := deployment(ns, t.Name, 2, containers("app", repo+"@"+digests[t.Image]))
		_ = e.client.Tracker().Delete(deploymentsGVR, ns, t.Name)
		if err := e.client.Tracker().Add(d); err != nil {
			b.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			p := pod(ns, t.Name, i, "app", repo+"@"+digests[t.Image])
			_ = e.client.Tracker().Delete(podsGVR, ns, p.Name)
			if err := e.client.Tracker().Add(p); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func benchDigests(b *testing.B, e *env, f *File, tag string) map[string]string {
	r, err := resolver.New(resolver.Options{InsecureRegistries: []string{e.reg.Host}})
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]string{}
	for _, t := range f.Targets {
		img, err := r.Resolve(context.Background(), strings.TrimSuffix(t.Image, ":dev")+":"+tag)
		if err != nil {
			b.Fatal(err)
		}
		out[t.Image] = img.Digest
	}
	return out
}

// BenchmarkTick50 is one tick over 50 targets: steady state (nothing moved,
// the common case) and every tag moved (50 re-images and rollouts).
func BenchmarkTick50(b *testing.B) {
	for _, moved := range []bool{false, true} {
		name := "steady"
		if moved {
			name = "all-moved"
		}
		b.Run(name, func(b *testing.B) {
			e, f := benchFixture(b)
			running := benchDigests(b, e, f, "dev")
			if moved {
				running = benchDigests(b, e, f, "old")
			}
			var api, heads, gets, patches int
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				benchInstall(b, e, f, running)
				e.client.ClearActions()
				e.reg.Reset()
				res, err := resolver.New(resolver.Options{InsecureRegistries: []string{e.reg.Host}})
				if err != nil {
					b.Fatal(err)
				}
				r, err := New(e.client, res, options(func(o *Options) { o.PollInterval = 1 }))
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				out, err := r.Tick(context.Background(), f)
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				if moved && len(out.RolledOut) != 50 || !moved && len(out.Patched) != 0 {
					b.Fatalf("patched %d, rolled out %d", len(out.Patched), len(out.RolledOut))
				}
				api += len(e.client.Actions())
				patches += e.countPatches()
				heads += e.reg.Count("HEAD")
				for _, q := range e.reg.Requests() {
					if q.Method == "GET" && q.Path != "/v2/" {
						gets++
					}
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(api)/float64(b.N), "api-calls/op")
			b.ReportMetric(float64(patches)/float64(b.N), "patches/op")
			b.ReportMetric(float64(heads)/float64(b.N), "registry-HEAD/op")
			b.ReportMetric(float64(gets)/float64(b.N), "registry-manifest-GET/op")
		})
	}
}

func (e *env) countPatches() int {
	n := 0
	for _, a := range e.client.Actions() {
		if a.GetVerb() == "patch" {
			n++
		}
	}
	return n
}
