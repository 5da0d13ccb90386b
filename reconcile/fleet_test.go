package reconcile

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/chartpin/chartpin/internal/registrytest"
	"github.com/chartpin/chartpin/internal/testenv"
	"github.com/chartpin/chartpin/resolver"
)

// BenchmarkFleet simulates a fleet of edges, each a fake clientset holding
// the example chart's workloads, ticking through the real reconcile code
// against one Debian docker-registry on loopback behind a proxy that rate
// limits per client address and answers 429 with Retry-After. Each edge is
// its own client: its connections leave from its own loopback address
// (127.0.x.y), as edges on their own sites do. The mirror is docker-registry's
// pull-through mode behind a tag cache with a TTL (a remote repository's
// metadata cache, as in Artifactory or Nexus): docker-registry alone asks
// upstream for every tag lookup. Time is compressed: one schedule period (15
// minutes) lasts CHARTPIN_FLEET_PERIOD of real time. It runs only with
// CHARTPIN_FLEET=1 (make fleet); its figures are reported as benchmark metrics.
func BenchmarkFleet(b *testing.B) {
	if os.Getenv("CHARTPIN_FLEET") != "1" {
		b.Skip("fleet simulation: run with CHARTPIN_FLEET=1 (make fleet)")
	}
	testenv.RequireBinary(b, "docker-registry", "docker-registry")
	cfg := fleetConfig{
		edges:  envInt("CHARTPIN_FLEET_EDGES", 1000),
		period: envDuration("CHARTPIN_FLEET_PERIOD", 30*time.Second),
		limit:  envInt("CHARTPIN_FLEET_LIMIT", 100),
	}
	cfg.scale = (15 * time.Minute).Seconds() / cfg.period.Seconds()
	cfg.window = time.Duration(float64(cfg.period) * 10 / 15) // the chart's default: 10m of a 15m schedule
	// The mirror's tag TTL: at least the window, so a tick's lookups reach
	// upstream once per image; under the period, so a tag move is seen by
	// every edge within two periods (TTL + one period).
	// CHARTPIN_FLEET_TAG_TTL=0s measures docker-registry's proxy mode alone.
	cfg.tagTTL = cfg.window
	if v, ok := os.LookupEnv("CHARTPIN_FLEET_TAG_TTL"); ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("CHARTPIN_FLEET_TAG_TTL: %v", err)
		}
		cfg.tagTTL = d
	}
	b.Run("one-tick-memory", func(b *testing.B) { fleetTickMemory(b, cfg) })
	for _, mirror := range []bool{false, true} {
		for _, spread := range []bool{false, true} {
			b.Run(fmt.Sprintf("mirror=%v/spread=%v", mirror, spread), func(b *testing.B) {
				runFleet(b, cfg, mirror, spread)
			})
		}
	}
}

type fleetConfig struct {
	edges          int
	period, window time.Duration // real time
	tagTTL         time.Duration // real time; the mirror's tag cache
	scale          float64       // simulated seconds per real second
	limit          int           // requests per simulated minute per client
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d > 0 {
		return d
	}
	return def
}

var fleetRepos = []string{"chartpin/jobs-manager", "chartpin/pods-monitor", "chartpin/resource-monitor"}

// rateLimit is the upstream's limiter: a fixed window of one simulated
// minute per client address; it also counts requests per simulated second.
type rateLimit struct {
	mu        sync.Mutex
	cfg       fleetConfig
	start     time.Time
	winStart  time.Time
	perClient map[string]int
	perSecond map[int64]int
	total     int
	tags      int // manifest requests by tag
	tooMany   int
}

func newRateLimit(cfg fleetConfig) *rateLimit {
	now := time.Now()
	return &rateLimit{cfg: cfg, start: now, winStart: now, perClient: map[string]int{}, perSecond: map[int64]int{}}
}

func (l *rateLimit) fault(_ int, req *http.Request) registrytest.Fault {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	win := time.Duration(float64(time.Minute) / l.cfg.scale)
	if now.Sub(l.winStart) >= win {
		l.winStart, l.perClient = now, map[string]int{}
	}
	l.total++
	if _, ref, ok := strings.Cut(req.URL.Path, "/manifests/"); ok && !strings.HasPrefix(ref, "sha256:") {
		l.tags++
	}
	l.perSecond[int64(now.Sub(l.start).Seconds()*l.cfg.scale)]++
	client, _, _ := net.SplitHostPort(req.RemoteAddr)
	l.perClient[client]++
	if l.perClient[client] <= l.cfg.limit {
		return registrytest.Fault{}
	}
	l.tooMany++
	wait := int(math.Ceil((win - now.Sub(l.winStart)).Seconds()))
	return registrytest.Fault{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {strconv.Itoa(max(wait, 1))}},
		Body: `{"errors":[{"code":"TOOMANYREQUESTS","message":"rate limit"}]}`}
}

// take returns and resets the counts since the last call.
func (l *rateLimit) take() (total, tags, tooMany, peak int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range l.perSecond {
		peak = max(peak, n)
	}
	total, tags, tooMany = l.total, l.tags, l.tooMany
	l.total, l.tags, l.tooMany, l.perSecond = 0, 0, 0, map[int64]int{}
	return total, tags, tooMany, peak
}

// edgeTransport is edge i's own HTTP client: its connections leave from
// 127.0.x.y (Linux routes all of 127/8 to loopback), so a per-address limit
// sees each edge as itself.
func edgeTransport(i int) *http.Transport {
	ip := net.IPv4(127, 0, byte(1+i/250), byte(1+i%250))
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}, Timeout: 10 * time.Second}
	return &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 4, IdleConnTimeout: 30 * time.Second}
}

// tagCache fronts a mirror and keeps each manifest-by-tag answer for ttl, as
// a remote repository's metadata cache does; everything else (digests,
// blobs) goes to the mirror, which stores content once.
type tagCache struct {
	mu      sync.Mutex
	ttl     time.Duration
	entries map[string]tagEntry
	next    http.Handler
	misses  int
}

type tagEntry struct {
	at     time.Time
	status int
	header http.Header
	body   []byte
}

func newTagCache(t testing.TB, mirror string, ttl time.Duration) *httptest.Server {
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: mirror})
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	rp.Transport = tr
	c := &tagCache{ttl: ttl, entries: map[string]tagEntry{}, next: rp}
	srv := httptest.NewServer(c)
	t.Cleanup(func() { srv.Close(); tr.CloseIdleConnections() })
	return srv
}

func (c *tagCache) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	_, ref, ok := strings.Cut(req.URL.Path, "/manifests/")
	if !ok || strings.HasPrefix(ref, "sha256:") || (req.Method != http.MethodGet && req.Method != http.MethodHead) {
		c.next.ServeHTTP(w, req)
		return
	}
	// One lookup per tag at a time: concurrent edges wait for it.
	c.mu.Lock()
	defer c.mu.Unlock()
	e, hit := c.entries[req.URL.Path]
	if !hit || time.Since(e.at) >= c.ttl {
		c.misses++
		get := httptest.NewRecorder()
		up := req.Clone(req.Context())
		up.Method = http.MethodGet
		c.next.ServeHTTP(get, up)
		e = tagEntry{at: time.Now(), status: get.Code, header: get.Header().Clone(), body: get.Body.Bytes()}
		if e.status == http.StatusOK {
			c.entries[req.URL.Path] = e
		}
	}
	for k, vs := range e.header {
		w.Header()[k] = vs
	}
	w.WriteHeader(e.status)
	if req.Method == http.MethodGet {
		_, _ = w.Write(e.body)
	}
}

// fleetTargets is the example chart's targets file with its images on host.
func fleetTargets(t testing.TB, host string) *File {
	t.Helper()
	data, err := os.ReadFile("testdata/example-chart-dev.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc struct {
			Kind     string                `yaml:"kind"`
			Metadata struct{ Name string } `yaml:"metadata"`
			Data     map[string]string     `yaml:"data"`
		}
		if err := dec.Decode(&doc); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if doc.Kind == "ConfigMap" && doc.Data["targets.yaml"] != "" {
			f, err := ParseTargets("targets.yaml", []byte(strings.ReplaceAll(doc.Data["targets.yaml"], `"docker.io/`, `"`+host+`/`)))
			if err != nil {
				t.Fatal(err)
			}
			f.PullSecrets = nil // the simulated edges pull anonymously
			return f
		}
	}
	t.Fatal("no targets ConfigMap in the example chart's manifest")
	return nil
}

// newEdge is one edge: the example chart's workloads running the old digests.
func newEdge(t testing.TB, host string, old map[string]string) *env {
	img := func(repo string) string { return host + "/" + repo + "@" + old[repo] }
	e := &env{t: t, client: fake.NewSimpleClientset(
		deployment(ns, "rel-jobs-manager", 1, containers("api", img(fleetRepos[0]), "pods-monitor", img(fleetRepos[1]))),
		pod(ns, "rel-jobs-manager", 0, "api", img(fleetRepos[0]), "pods-monitor", img(fleetRepos[1])),
		deployment(ns, "rel-requests-proxy", 1, containers("proxy", img(fleetRepos[0]))),
		pod(ns, "rel-requests-proxy", 0, "proxy", img(fleetRepos[0])),
		daemonSet("node-agents", "rel-resource-monitor", 1, containers("resource-monitor", img(fleetRepos[2]))),
		pod("node-agents", "rel-resource-monitor", 0, "resource-monitor", img(fleetRepos[2])),
	), logs: &bytes.Buffer{}, stuck: map[string]bool{}, reports: map[string]string{}}
	e.controller()
	return e
}

// converged: every container runs the newest digest.
func (e *env) converged(latest map[string]string) bool {
	want := map[string]string{"api": latest[fleetRepos[0]], "pods-monitor": latest[fleetRepos[1]], "proxy": latest[fleetRepos[0]], "resource-monitor": latest[fleetRepos[2]]}
	got := map[string]string{}
	for _, name := range []string{"rel-jobs-manager", "rel-requests-proxy"} {
		for _, c := range e.deployment(ns, name).Spec.Template.Spec.Containers {
			got[c.Name] = specDigest(c.Image)
		}
	}
	obj, err := e.client.Tracker().Get(daemonSetsGVR, "node-agents", "rel-resource-monitor")
	if err != nil {
		e.t.Fatal(err)
	}
	for _, c := range obj.(*appsv1.DaemonSet).Spec.Template.Spec.Containers {
		got[c.Name] = specDigest(c.Image)
	}
	return fmt.Sprint(got) == fmt.Sprint(want)
}

func fleetTick(ctx context.Context, e *env, f *File, host string, rt http.RoundTripper, delay time.Duration) error {
	if tr, ok := rt.(*http.Transport); ok {
		defer tr.CloseIdleConnections() // the tick's process exits
	}
	res, err := resolver.New(resolver.Options{InsecureRegistries: []string{host}, Transport: rt})
	if err != nil {
		return err
	}
	r, err := New(e.client, res, options(func(o *Options) {
		o.Spread, o.PollInterval, o.RolloutTimeout = delay, 5*time.Millisecond, 10*time.Second
	}))
	if err != nil {
		return err
	}
	_, err = r.Tick(ctx, f)
	return err
}

// upstream starts the registry with the old builds behind the rate limiter.
func upstream(b *testing.B, cfg fleetConfig) (up *registrytest.Distribution, proxy *registrytest.Proxy, lim *rateLimit, old map[string]string) {
	up = registrytest.StartDistribution(b, registrytest.DistributionOptions{})
	old = map[string]string{}
	for _, repo := range fleetRepos {
		old[repo] = up.PushIndex(b, repo, "dev", "linux/amd64", "linux/arm64")
	}
	proxy = registrytest.NewProxy(b, up.Host)
	lim = newRateLimit(cfg)
	proxy.Inject(lim.fault)
	return up, proxy, lim, old
}

func runFleet(b *testing.B, cfg fleetConfig, mirror, spread bool) {
	up, proxy, lim, old := upstream(b, cfg)
	host := proxy.Host
	if mirror {
		m := registrytest.StartDistribution(b, registrytest.DistributionOptions{ProxyRemoteURL: "http://" + proxy.Host})
		host = m.Host
		if cfg.tagTTL > 0 {
			host = strings.TrimPrefix(newTagCache(b, m.Host, cfg.tagTTL).URL, "http://")
		}
	}
	f := fleetTargets(b, host)
	edges := make([]*env, cfg.edges)
	for i := range edges {
		edges[i] = newEdge(b, host, old)
	}
	if mirror {
		// The worst case for a mirror: it looked the tags up just before they moved.
		if err := fleetTick(context.Background(), newEdge(b, host, old), f, host, edgeTransport(cfg.edges), 0); err != nil {
			b.Fatal(err)
		}
	}
	// The tags move: every edge has three images to re-pin.
	latest := map[string]string{}
	for _, repo := range fleetRepos {
		latest[repo] = up.PushIndex(b, repo, "dev", "linux/amd64", "linux/arm64")
	}
	lim.take()
	b.ResetTimer()
	for period := 1; period <= 2; period++ {
		start := time.Now()
		var failed atomic.Int64
		var errMu sync.Mutex
		errs := map[string]int{}
		var wg sync.WaitGroup
		for i, e := range edges {
			delay := time.Duration(0)
			if spread {
				delay = SpreadDelay(fmt.Sprintf("edge-%04d/5d0c7a9e-%04d-4c53-9d6e-2f4c8a0b1e11", i, i), cfg.window)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), cfg.period-time.Second)
				defer cancel()
				if err := fleetTick(ctx, e, f, host, edgeTransport(i), delay); err != nil {
					failed.Add(1)
					msg := err.Error()
					if i := strings.Index(msg, "; nothing was changed"); i > 0 {
						msg = msg[:i]
					}
					errMu.Lock()
					errs[msg]++
					errMu.Unlock()
				}
			}()
		}
		wg.Wait()
		took := time.Since(start)
		time.Sleep(cfg.period - took) // the next tick starts at the next period
		total, tags, tooMany, peak := lim.take()
		converged := 0
		for _, e := range edges {
			if e.converged(latest) {
				converged++
			}
		}
		b.ReportMetric(float64(total), fmt.Sprintf("upstream-req/tick%d", period))
		b.ReportMetric(float64(tags), fmt.Sprintf("upstream-tag-lookups/tick%d", period))
		b.ReportMetric(float64(peak), fmt.Sprintf("peak-req/s-tick%d", period))
		b.ReportMetric(float64(tooMany), fmt.Sprintf("429s-tick%d", period))
		b.ReportMetric(float64(converged), fmt.Sprintf("converged-after-%d", period))
		b.ReportMetric(float64(failed.Load()), fmt.Sprintf("failed-ticks-%d", period))
		for msg, n := range errs {
			b.Logf("period %d: %d ticks failed with: %.400s", period, n, msg)
		}
		b.Logf("period %d: %d edges, upstream requests %d (tag lookups %d, peak %d/s simulated), 429s %d, failed ticks %d, converged %d; ticks took %s real",
			period, cfg.edges, total, tags, peak, tooMany, failed.Load(), converged, took.Round(time.Millisecond))
	}
	b.Logf("proxy saw %d HEAD, %d GET in all", proxy.Count("HEAD"), proxy.Count("GET"))
	if os.Getenv("CHARTPIN_FLEET_DEBUG") != "" {
		b.Logf("%v", proxy.Requests())
	}
}

// fleetTickMemory is the peak Go heap of one edge's tick that re-images all
// three workloads, sampled while the tick runs.
func fleetTickMemory(b *testing.B, cfg fleetConfig) {
	up, proxy, _, old := upstream(b, fleetConfig{scale: 1, limit: 1 << 30})
	e := newEdge(b, proxy.Host, old)
	f := fleetTargets(b, proxy.Host)
	for _, repo := range fleetRepos {
		up.PushIndex(b, repo, "dev", "linux/amd64", "linux/arm64")
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var peak atomic.Uint64
	done := make(chan struct{})
	go func() {
		var m runtime.MemStats
		for {
			select {
			case <-done:
				return
			case <-time.After(200 * time.Microsecond):
				runtime.ReadMemStats(&m)
				if m.HeapAlloc > peak.Load() {
					peak.Store(m.HeapAlloc)
				}
			}
		}
	}()
	err := fleetTick(context.Background(), e, f, proxy.Host, http.DefaultTransport, 0)
	close(done)
	if err != nil {
		b.Fatal(err)
	}
	grew := float64(peak.Load()) - float64(before.HeapAlloc)
	b.ReportMetric(max(grew, 0)/(1<<20), "peak-heap-MiB/tick")
	b.ReportMetric(float64(before.HeapAlloc)/(1<<20), "heap-before-MiB")
}
