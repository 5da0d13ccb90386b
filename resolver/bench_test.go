package resolver_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/crane"

	"github.com/chartpin/chartpin/internal/registrytest"
	"github.com/chartpin/chartpin/resolver"
)

const (
	benchRepos       = 20
	benchTagsPerRepo = 5 // 100 unique refs
	benchRefs        = 200
	benchLatency     = 20 * time.Millisecond
	benchConcurrency = 8
)

// benchRig: 200 refs over 20 repositories (each unique ref named twice, in
// shuffled order) behind a proxy that adds 20 ms to every request.
func benchRig(b *testing.B) (*registrytest.Proxy, []string, int) {
	b.Helper()
	return benchRigOn(b, registrytest.New(b))
}

func benchRigOn(b *testing.B, reg *registrytest.Registry) (*registrytest.Proxy, []string, int) {
	b.Helper()
	var unique []string
	for i := 0; i < benchRepos; i++ {
		repo := fmt.Sprintf("team/svc%02d", i)
		for j := 0; j < benchTagsPerRepo; j++ {
			tag := fmt.Sprintf("1.%d", j)
			if j%2 == 0 {
				reg.PushIndex(b, repo, tag, "linux/amd64", "linux/arm64")
			} else {
				reg.PushImage(b, repo, tag)
			}
			unique = append(unique, repo+":"+tag)
		}
	}
	proxy := registrytest.NewProxy(b, reg.Host)
	proxy.SetDelay(benchLatency)
	var refs []string
	for len(refs) < benchRefs {
		for _, u := range unique {
			refs = append(refs, proxy.Host+"/"+u)
		}
	}
	refs = refs[:benchRefs]
	rng := rand.New(rand.NewPCG(1, 2))
	rng.Shuffle(len(refs), func(i, j int) { refs[i], refs[j] = refs[j], refs[i] })
	return proxy, refs, len(unique)
}

func reportRequests(b *testing.B, p *registrytest.Proxy, wall time.Duration, unique int) {
	b.Helper()
	n := float64(b.N)
	ideal := time.Duration(math.Ceil(float64(unique)/benchConcurrency)) * benchLatency
	b.ReportMetric(float64(wall.Milliseconds())/n, "wall-ms/run")
	b.ReportMetric(float64(p.CountPath("HEAD", "/manifests/"))/n, "HEAD/run")
	b.ReportMetric(float64(p.CountPath("GET", "/manifests/"))/n, "GET/run")
	b.ReportMetric(float64(p.Count("")-p.CountPath("", "/v2/"))/n, "token/run")
	b.ReportMetric(float64(p.Count(""))/n, "requests/run")
	b.ReportMetric(float64(ideal.Milliseconds()), "ideal-ms")
	b.ReportMetric(float64(wall)/n/float64(ideal), "x-ideal")
	b.ReportMetric(0, "ns/op") // wall-ms/run says it, in the unit that matters here
}

// BenchmarkResolveAll is one chartpin run: one Remote, all refs at once.
func BenchmarkResolveAll(b *testing.B) {
	proxy, refs, unique := benchRig(b)
	ctx := context.Background()
	proxy.Reset()
	var wall time.Duration
	for i := 0; i < b.N; i++ {
		start := time.Now()
		r, err := resolver.New(resolver.Options{InsecureRegistries: []string{proxy.Host}, Concurrency: benchConcurrency})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := resolver.ResolveAll(ctx, r, refs); err != nil {
			b.Fatal(err)
		}
		wall += time.Since(start)
		if s := r.Stats(); s.HEAD != unique || s.Ping != 1 {
			b.Fatalf("stats %+v: want %d HEADs and one ping", s, unique)
		}
	}
	reportRequests(b, proxy, wall, unique)
}

// BenchmarkResolveAllBearer is BenchmarkResolveAll against a registry that
// wants bearer tokens (as Docker Hub and GHCR do): one token per repository.
func BenchmarkResolveAllBearer(b *testing.B) {
	proxy, refs, unique := benchRigOn(b, registrytest.NewWithTokenAuth(b, "", ""))
	ctx := context.Background()
	proxy.Reset()
	var wall time.Duration
	for i := 0; i < b.N; i++ {
		start := time.Now()
		r, err := resolver.New(resolver.Options{InsecureRegistries: []string{proxy.Host}, Concurrency: benchConcurrency})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := resolver.ResolveAll(ctx, r, refs); err != nil {
			b.Fatal(err)
		}
		wall += time.Since(start)
		if s := r.Stats(); s.HEAD != unique || s.Ping != 1 || s.Token != benchRepos {
			b.Fatalf("stats %+v: want %d HEADs, %d tokens and one ping", s, unique, benchRepos)
		}
	}
	reportRequests(b, proxy, wall, unique)
}

// BenchmarkOneByOneFreshClient resolves the refs in a loop with a new
// resolver each time, as a script calling a CLI per image would.
func BenchmarkOneByOneFreshClient(b *testing.B) {
	proxy, refs, unique := benchRig(b)
	ctx := context.Background()
	proxy.Reset()
	var wall time.Duration
	for i := 0; i < b.N; i++ {
		start := time.Now()
		for _, ref := range refs {
			r, err := resolver.New(resolver.Options{InsecureRegistries: []string{proxy.Host}})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := r.Resolve(ctx, ref); err != nil {
				b.Fatal(err)
			}
		}
		wall += time.Since(start)
	}
	reportRequests(b, proxy, wall, unique)
}

// BenchmarkCraneDigestLoop is the shell script's loop: `crane digest REF` per image.
func BenchmarkCraneDigestLoop(b *testing.B) {
	proxy, refs, unique := benchRig(b)
	proxy.Reset()
	var wall time.Duration
	for i := 0; i < b.N; i++ {
		start := time.Now()
		for _, ref := range refs {
			if _, err := crane.Digest(ref, crane.Insecure); err != nil {
				b.Fatal(err)
			}
		}
		wall += time.Since(start)
	}
	reportRequests(b, proxy, wall, unique)
}

// BenchmarkResolveVersusCrane runs, on the same refs through the same 20 ms
// proxy in one run, what `chartpin resolve` does (ResolveOrdered), a
// sequential crane.Digest loop and eight goroutines of crane.Digest, and
// reports the wall time of each and the ratios crane/chartpin (above 1:
// chartpin is faster).
func BenchmarkResolveVersusCrane(b *testing.B) {
	proxy, refs, unique := benchRig(b)
	ctx := context.Background()
	var chartpin, loop, parallel time.Duration
	for i := 0; i < b.N; i++ {
		proxy.Reset()
		start := time.Now()
		r, err := resolver.New(resolver.Options{InsecureRegistries: []string{proxy.Host}, Concurrency: benchConcurrency})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := resolver.ResolveOrdered(ctx, r, refs); err != nil {
			b.Fatal(err)
		}
		chartpin += time.Since(start)
		if got := proxy.CountPath("", "/manifests/"); got != unique {
			b.Fatalf("chartpin sent %d manifest requests for %d unique refs", got, unique)
		}

		start = time.Now()
		for _, ref := range refs {
			if _, err := crane.Digest(ref, crane.Insecure); err != nil {
				b.Fatal(err)
			}
		}
		loop += time.Since(start)

		start = time.Now()
		work := make(chan string)
		errs := make(chan error, benchConcurrency)
		for w := 0; w < benchConcurrency; w++ {
			go func() {
				var first error
				for ref := range work {
					if _, err := crane.Digest(ref, crane.Insecure); err != nil && first == nil {
						first = err
					}
				}
				errs <- first
			}()
		}
		for _, ref := range refs {
			work <- ref
		}
		close(work)
		for w := 0; w < benchConcurrency; w++ {
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
		}
		parallel += time.Since(start)
	}
	n := float64(b.N)
	b.ReportMetric(float64(chartpin.Milliseconds())/n, "chartpin-ms/run")
	b.ReportMetric(float64(loop.Milliseconds())/n, "crane-loop-ms/run")
	b.ReportMetric(float64(parallel.Milliseconds())/n, "crane-8-ms/run")
	b.ReportMetric(float64(loop)/float64(chartpin), "loop/chartpin")
	b.ReportMetric(float64(parallel)/float64(chartpin), "crane-8/chartpin")
	b.ReportMetric(0, "ns/op")
}
