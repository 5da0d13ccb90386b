package drift_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chartpin/chartpin/config"
	"github.com/chartpin/chartpin/drift"
	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/internal/registrytest"
	"github.com/chartpin/chartpin/resolver"
)

const zero = "sha256:0000000000000000000000000000000000000000000000000000000000000000"

// fixture is a chart whose pins cover every classification.
type fixture struct {
	dir                  string
	appDigest, workerOld string
	workerNew, deep      string
	proxyDigest          string
}

// writeChart pushes images through push and writes a values.yaml that
// refers to them as host (the registry, or a proxy in front of it).
func writeChart(t *testing.T, push *registrytest.Pusher, host string) fixture {
	t.Helper()
	f := fixture{dir: t.TempDir()}
	f.appDigest = push.PushIndex(t, "team/app", "1.0", "linux/amd64", "linux/arm64")
	f.workerOld = push.PushIndex(t, "team/worker", "2.0", "linux/amd64", "linux/arm64")
	f.workerNew = push.PushIndex(t, "team/worker", "2.0", "linux/amd64", "linux/arm64") // the float moved
	push.Tag(t, "team/worker", f.workerNew, "2.0.7")
	push.Tag(t, "team/worker", f.workerNew, "latest")
	f.proxyDigest = push.PushIndex(t, "team/proxy", "1.0", "linux/amd64")
	f.deep = push.PushIndex(t, "team/deep", "1", "linux/amd64")
	values := `# every kind of pin; line numbers matter to the test
global:
  imageRegistry: ""
images:
  app:
    repository: HOST/team/app
    tag: "1.0"
    digest: APP
  appCopy:
    repository: HOST/team/app
    tag: "1.0"
    digest: "APP"
  worker:
    repository: HOST/team/worker
    tag: '2.0'
    digest: 'WORKEROLD'
  orphan:
    tag: "3.0"
    digest: ZERO
  gone:
    repository: HOST/team/gone
    tag: "9"
    digest: ZERO
  fresh:
    repository: HOST/team/app
    tag: "1.0"
    digest: ""
egressProxy:
  image:
    repository: HOST/team/proxy
    tag: "1.0"
    digest: PROXY
# deeply nested, outside images:
platform:
  jobs:
    - name: nightly
      spec:
        runner:
          image:
            repository: HOST/team/deep
            tag: "1"
            digest: DEEP
`
	values = strings.NewReplacer("HOST", host, "WORKEROLD", f.workerOld, "APP", f.appDigest, "ZERO", zero,
		"PROXY", f.proxyDigest, "DEEP", f.deep).Replace(values)
	if err := os.WriteFile(filepath.Join(f.dir, "values.yaml"), []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func byPath(t *testing.T, rep *drift.Report) map[string]drift.Item {
	t.Helper()
	m := map[string]drift.Item{}
	for _, it := range rep.Items {
		if _, dup := m[it.Pin.Path]; dup {
			t.Errorf("pin %s reported twice", it.Pin.Path)
		}
		m[it.Pin.Path] = it
	}
	return m
}

// checkClassifications runs drift and asserts every pin's verdict and the
// requests the registry saw: one HEAD per unique float, no GET of a manifest.
func checkClassifications(t *testing.T, push *registrytest.Pusher, host string, rec *registrytest.Recorder) {
	f := writeChart(t, push, host)
	r, err := resolver.New(resolver.Options{InsecureRegistries: []string{host}})
	if err != nil {
		t.Fatal(err)
	}
	rec.Reset()
	rep, err := drift.Check(context.Background(), r, []drift.Target{{Dir: f.dir}}, drift.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := byPath(t, rep)
	want := map[string]drift.Status{
		"images.app.digest":                         drift.OK,
		"images.appCopy.digest":                     drift.OK,
		"images.worker.digest":                      drift.Drift,
		"images.orphan.digest":                      drift.Unwatchable,
		"images.gone.digest":                        drift.Unresolved,
		"images.fresh.digest":                       drift.NotPinned,
		"egressProxy.image.digest":                  drift.OK,
		"platform.jobs[0].spec.runner.image.digest": drift.OK,
	}
	for path, st := range want {
		it, ok := got[path]
		if !ok {
			t.Errorf("pin %s not reported: every pin must be watched or reported", path)
			continue
		}
		if it.Status != st {
			t.Errorf("%s: %s (%s), want %s", path, it.Status, it.Message, st)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d pins reported, want %d: %v", len(got), len(want), got)
	}
	w := got["images.worker.digest"]
	if w.Pinned != f.workerOld || w.Current != f.workerNew || w.Pin.Line != 16 {
		t.Errorf("worker drift: pinned %s current %s line %d; want %s, %s, 16", w.Pinned, w.Current, w.Pin.Line, f.workerOld, f.workerNew)
	}
	if o := got["images.orphan.digest"]; o.Pin.Line != 19 || !strings.Contains(o.Message, "images.orphan") {
		t.Errorf("orphan: line %d message %q", o.Pin.Line, o.Message)
	}
	if g := got["images.gone.digest"]; !strings.Contains(g.Message, host+"/team/gone:9") {
		t.Errorf("gone: message %q does not name the ref", g.Message)
	}
	if rep.Findings() != 3 || !errors.Is(rep.Err(), failure.ErrFindings) {
		t.Errorf("findings %d, err %v; want 3 and ErrFindings", rep.Findings(), rep.Err())
	}
	// app:1.0 (twice), worker:2.0, gone:9, proxy:1.0, deep:1 → 5 unique floats.
	if n := rec.CountPath(http.MethodHead, "/manifests/"); n != 5 {
		t.Errorf("%d manifest HEADs, want 5 (one per unique float): %v", n, rec.Requests())
	}
	if n := rec.CountPath(http.MethodGet, "/manifests/") + rec.CountPath(http.MethodGet, "/tags/"); n != 0 {
		t.Errorf("%d GETs of manifests or tags without --show-tags: %v", n, rec.Requests())
	}
	if s := r.Stats(); s.HEAD != 5 {
		t.Errorf("resolver counted %d HEADs, want 5", s.HEAD)
	}
}

func TestClassificationsInProcessRegistry(t *testing.T) {
	reg := registrytest.New(t)
	checkClassifications(t, &reg.Pusher, reg.Host, &reg.Recorder)
}

func TestClassificationsDistribution(t *testing.T) {
	d := registrytest.StartDistribution(t, registrytest.DistributionOptions{})
	p := registrytest.NewProxy(t, d.Host) // counts what the real registry is asked
	checkClassifications(t, &d.Pusher, p.Host, &p.Recorder)
}

func TestDistributionWithAuth(t *testing.T) {
	d := registrytest.StartDistribution(t, registrytest.DistributionOptions{Htpasswd: map[string]string{"ci": "s3cret"}})
	f := writeChart(t, &d.Pusher, d.Host)
	anon, err := resolver.New(resolver.Options{InsecureRegistries: []string{d.Host}, Keychain: resolver.StaticKeychain("ci", "wrong")})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := drift.Check(context.Background(), anon, []drift.Target{{Dir: f.dir}}, drift.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Refused credentials are UNRESOLVED, never ok: an error is a finding.
	for _, it := range rep.Items {
		if it.Status == drift.OK || it.Status == drift.Drift {
			t.Errorf("%s: %s with bad credentials", it.Pin.Path, it.Status)
		}
	}
	if rep.Count(drift.Unresolved) != 6 {
		t.Errorf("%d UNRESOLVED with bad credentials, want 6", rep.Count(drift.Unresolved))
	}
	good, err := resolver.New(resolver.Options{InsecureRegistries: []string{d.Host}, Keychain: resolver.StaticKeychain("ci", "s3cret")})
	if err != nil {
		t.Fatal(err)
	}
	rep, err = drift.Check(context.Background(), good, []drift.Target{{Dir: f.dir}}, drift.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Count(drift.OK) != 4 || rep.Count(drift.Drift) != 1 {
		t.Errorf("with credentials: %s", rep.Summary())
	}
}

func TestRegistryTimeoutIsUnresolved(t *testing.T) {
	reg := registrytest.New(t)
	p := registrytest.NewProxy(t, reg.Host)
	f := writeChart(t, &reg.Pusher, p.Host)
	p.Inject(func(_ int, req *http.Request) registrytest.Fault {
		if strings.Contains(req.URL.Path, "/team/worker/") {
			return registrytest.Fault{Delay: 10 * time.Second} // hangs until the client gives up
		}
		return registrytest.Fault{}
	})
	r, err := resolver.New(resolver.Options{InsecureRegistries: []string{p.Host}, RequestTimeout: 300 * time.Millisecond, RetryAttempts: 2, RetryBase: 10 * time.Millisecond, RetryMax: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := drift.Check(context.Background(), r, []drift.Target{{Dir: f.dir}}, drift.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := byPath(t, rep)
	if w := got["images.worker.digest"]; w.Status != drift.Unresolved || !strings.Contains(w.Message, "team/worker:2.0") {
		t.Errorf("hanging registry: %s %q, want UNRESOLVED naming the ref", w.Status, w.Message)
	}
	if got["images.app.digest"].Status != drift.OK {
		t.Errorf("a slow repository spoiled the others: %+v", got["images.app.digest"])
	}
}

func TestAcknowledgedThenExpired(t *testing.T) {
	reg := registrytest.New(t)
	f := writeChart(t, &reg.Pusher, reg.Host)
	cfgText := "charts:\n  - dir: .\n    images:\n      - at: images.worker\n    acknowledge:\n" +
		"      - at: images.worker\n        digest: " + f.workerNew + "\n        until: 2027-01-31\n        reason: ordering ceiling\n"
	cfg, err := config.Parse(filepath.Join(f.dir, "chartpin.yaml"), []byte(cfgText))
	if err != nil {
		t.Fatal(err)
	}
	run := func(now time.Time) drift.Item {
		r, err := resolver.New(resolver.Options{InsecureRegistries: []string{reg.Host}})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := drift.Check(context.Background(), r, []drift.Target{{Dir: f.dir, Config: &cfg.Charts[0]}},
			drift.Options{Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		got := byPath(t, rep)
		if len(got) != 8 {
			t.Errorf("with a config naming one image, %d pins reported, want all 8 (discovery too)", len(got))
		}
		return got["images.worker.digest"]
	}
	last := run(time.Date(2027, 1, 31, 23, 59, 0, 0, time.UTC))
	if last.Status != drift.Acknowledged || !strings.Contains(last.Message, "ordering ceiling") {
		t.Errorf("on the until date: %s %q, want ACKNOWLEDGED with the reason", last.Status, last.Message)
	}
	after := run(time.Date(2027, 2, 1, 0, 0, 0, 0, time.UTC))
	if after.Status != drift.Drift || !strings.Contains(after.Message, "expired on 2027-01-31") {
		t.Errorf("after the until date: %s %q, want DRIFT saying the acknowledgement expired", after.Status, after.Message)
	}
	// The float moving again is new drift, whatever the acknowledgement says.
	reg.PushIndex(t, "team/worker", "2.0", "linux/amd64")
	again := run(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC))
	if again.Status != drift.Drift || !strings.Contains(again.Message, "not this drift") {
		t.Errorf("new drift under an old acknowledgement: %s %q", again.Status, again.Message)
	}
}

func TestZeroPinsAndUnreadableAreInputErrors(t *testing.T) {
	r, err := resolver.New(resolver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	os.WriteFile(filepath.Join(empty, "values.yaml"), []byte("replicaCount: 1\nimage:\n  repository: nginx\n  tag: \"1.27\"\n"), 0o644)
	for name, dir := range map[string]string{"no pins": empty, "no values.yaml": t.TempDir()} {
		_, err := drift.Check(context.Background(), r, []drift.Target{{Dir: dir}}, drift.Options{})
		if failure.Code(err) != 2 {
			t.Errorf("%s: err %v (exit %d), want exit 2", name, err, failure.Code(err))
		}
	}
	malformed := t.TempDir()
	os.WriteFile(filepath.Join(malformed, "values.yaml"), []byte("images:\n  app: [\n"), 0o644)
	if _, err := drift.Check(context.Background(), r, []drift.Target{{Dir: malformed}}, drift.Options{}); failure.Code(err) != 2 {
		t.Errorf("malformed YAML: %v, want exit 2", err)
	}
}

func TestShowTagsListsOncePerRepository(t *testing.T) {
	reg := registrytest.New(t)
	f := writeChart(t, &reg.Pusher, reg.Host)
	// A second pin drifting in the same repository.
	data, _ := os.ReadFile(filepath.Join(f.dir, "values.yaml"))
	data = append(data, []byte("sidecar:\n  repository: "+reg.Host+"/team/worker\n  tag: latest\n  digest: "+f.workerOld+"\n")...)
	os.WriteFile(filepath.Join(f.dir, "values.yaml"), data, 0o644)
	r, err := resolver.New(resolver.Options{InsecureRegistries: []string{reg.Host}})
	if err != nil {
		t.Fatal(err)
	}
	reg.Reset()
	rep, err := drift.Check(context.Background(), r, []drift.Target{{Dir: f.dir}}, drift.Options{ShowTags: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Count(drift.Drift) != 2 {
		t.Fatalf("want 2 drifted pins: %s", rep.Summary())
	}
	if len(rep.Shared) != 1 {
		t.Fatalf("shared tags listed %d times, want once per repository: %+v", len(rep.Shared), rep.Shared)
	}
	sh := rep.Shared[0]
	if strings.Join(sh.Tags, ",") != "2.0,2.0.7,latest" || sh.Total != 3 || sh.Digest != f.workerNew {
		t.Errorf("shared: %+v", sh)
	}
	if n := reg.CountPath(http.MethodGet, "/tags/list"); n != 1 {
		t.Errorf("%d tag listings, want 1", n)
	}
	// 6 floats (latest is new) + 2.0.7; 2.0 and latest were already asked.
	if n := reg.CountPath(http.MethodHead, "/manifests/"); n != 7 {
		t.Errorf("%d HEADs, want 7: %v", n, reg.Requests())
	}
}

func TestOfflineFromLock(t *testing.T) {
	reg := registrytest.New(t)
	f := writeChart(t, &reg.Pusher, reg.Host)
	lock, err := resolver.ParseLock("lock.yaml", []byte(reg.Host+"/team/app:1.0: "+f.appDigest+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	reg.Reset()
	rep, err := drift.Check(context.Background(), resolver.NewOffline(lock), []drift.Target{{Dir: f.dir}}, drift.Options{Offline: true})
	if err != nil {
		t.Fatal(err)
	}
	if reg.Count("") != 0 {
		t.Errorf("offline run sent %d requests", reg.Count(""))
	}
	got := byPath(t, rep)
	if got["images.app.digest"].Status != drift.OK || got["images.worker.digest"].Status != drift.Unresolved {
		t.Errorf("offline: %s", rep.Summary())
	}
	var b strings.Builder
	if err := drift.WriteText(&b, rep, func(s string) string { return s }); err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		if !strings.HasPrefix(line, "OFFLINE ") {
			t.Errorf("line %d lacks OFFLINE: %q", i+1, line)
		}
	}
	if !strings.Contains(drift.Markdown(rep, filepath.Base), "OFFLINE") {
		t.Error("markdown summary does not say OFFLINE")
	}
}

func TestConfigSettlesWhatDiscoveryRefuses(t *testing.T) {
	reg := registrytest.New(t)
	d := reg.PushIndex(t, "team/app", "1.0", "linux/amd64")
	dir := t.TempDir()
	values := "app:\n  repository: " + reg.Host + "/team/app\n  tag: \"1.0\"\n  digest: " + d + "\n  sha: " + strings.TrimPrefix(d, "sha256:") + "\n"
	os.WriteFile(filepath.Join(dir, "values.yaml"), []byte(values), 0o644)
	r, err := resolver.New(resolver.Options{InsecureRegistries: []string{reg.Host}})
	if err != nil {
		t.Fatal(err)
	}
	// Without a config the ambiguous block is a finding, not a silent pass.
	rep, err := drift.Check(context.Background(), r, []drift.Target{{Dir: dir}}, drift.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Items) != 1 || rep.Items[0].Status != drift.Unwatchable || !strings.Contains(rep.Items[0].Message, "ambiguous pin") || failure.Code(rep.Err()) != 1 {
		t.Fatalf("ambiguous pin without config: %+v, want one UNWATCHABLE item (exit 1)", rep.Items)
	}
	cfg, err := config.Parse(filepath.Join(dir, "chartpin.yaml"), []byte("charts:\n  - dir: .\n    images:\n      - at: app\n        pin: digest\n"))
	if err != nil {
		t.Fatal(err)
	}
	rep, err = drift.Check(context.Background(), r, []drift.Target{{Dir: dir, Config: &cfg.Charts[0]}}, drift.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Items) != 1 || rep.Items[0].Status != drift.OK || len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "ambiguous") {
		t.Errorf("items %+v notes %q", rep.Items, rep.Notes)
	}
}

// An acknowledge entry may also name the digest being kept: the pin holds
// until the date, whatever the float does.
func TestAcknowledgeThePinKept(t *testing.T) {
	reg := registrytest.New(t)
	f := writeChart(t, &reg.Pusher, reg.Host)
	cfg, err := config.Parse(filepath.Join(f.dir, "chartpin.yaml"), []byte("charts:\n  - dir: .\n    acknowledge:\n"+
		"      - at: images.worker\n        digest: "+f.workerOld+"\n        until: 2027-01-31\n        reason: keep until the migration\n"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := resolver.New(resolver.Options{InsecureRegistries: []string{reg.Host}})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := drift.Check(context.Background(), r, []drift.Target{{Dir: f.dir, Config: &cfg.Charts[0]}},
		drift.Options{Now: func() time.Time { return time.Date(2027, 1, 15, 0, 0, 0, 0, time.UTC) }})
	if err != nil {
		t.Fatal(err)
	}
	if w := byPath(t, rep)["images.worker.digest"]; w.Status != drift.Acknowledged {
		t.Errorf("worker: %s %q", w.Status, w.Message)
	}
	if rep.Findings() != 2 { // gone and orphan remain
		t.Errorf("findings %d: %s", rep.Findings(), rep.Summary())
	}
}

// A versions range is watched against the highest tag in range, not the
// float (the float 0.8 may move past the ceiling 0.8.4); a follower
// is watched against the image it follows.
func TestVersionsRangeAndFollows(t *testing.T) {
	reg := registrytest.New(t)
	reg.PushIndex(t, "team/ingestor", "0.8.3", "linux/amd64")
	d84 := reg.PushIndex(t, "team/ingestor", "0.8.4", "linux/amd64")
	d88 := reg.PushIndex(t, "team/ingestor", "0.8.8", "linux/amd64")
	reg.Tag(t, "team/ingestor", d88, "0.8")
	jm := reg.PushIndex(t, "team/jobs", "1.2", "linux/amd64")
	dir := t.TempDir()
	values := "images:\n  ingestor:\n    repository: " + reg.Host + "/team/ingestor\n    tag: \"0.8\"\n    prodDigest: " + d84 + "\n" +
		"  jobsManager:\n    repository: " + reg.Host + "/team/jobs\n    tag: \"1.2\"\n    digest: " + jm + "\n" +
		"  requestsProxy:\n    digest: " + jm + "\n"
	os.WriteFile(filepath.Join(dir, "values.yaml"), []byte(values), 0o644)
	cfg, err := config.Parse(filepath.Join(dir, "chartpin.yaml"), []byte("charts:\n  - dir: .\n    images:\n"+
		"      - at: images.ingestor\n        pin: prodDigest\n        versions: \">=0.8.0 <=0.8.4\"\n"+
		"      - at: images.jobsManager\n"+
		"      - at: images.requestsProxy\n        follows: images.jobsManager\n"))
	if err != nil {
		t.Fatal(err)
	}
	run := func() map[string]drift.Item {
		r, err := resolver.New(resolver.Options{InsecureRegistries: []string{reg.Host}})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := drift.Check(context.Background(), r, []drift.Target{{Dir: dir, Config: &cfg.Charts[0]}}, drift.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return byPath(t, rep)
	}
	got := run()
	if it := got["images.ingestor.prodDigest"]; it.Status != drift.OK || !strings.Contains(it.Float, "0.8.4 (highest in") {
		t.Errorf("ingestor inside its ceiling: %s %q %q", it.Status, it.Float, it.Message)
	}
	if it := got["images.requestsProxy.digest"]; it.Status != drift.OK {
		t.Errorf("follower: %s %q", it.Status, it.Message)
	}
	d84b := reg.PushIndex(t, "team/ingestor", "0.8.4", "linux/amd64", "linux/arm64") // re-pushed under the ceiling
	jm2 := reg.PushIndex(t, "team/jobs", "1.2", "linux/arm64")
	got = run()
	if it := got["images.ingestor.prodDigest"]; it.Status != drift.Drift || it.Current != d84b {
		t.Errorf("ingestor re-pushed: %s current %s, want DRIFT to %s", it.Status, it.Current, d84b)
	}
	if it := got["images.requestsProxy.digest"]; it.Status != drift.Drift || it.Current != jm2 || !strings.Contains(it.Message, "follows images.jobsManager") {
		t.Errorf("follower after the leader moved: %s %q", it.Status, it.Message)
	}
}

// A held pin is reported HELD with its reason and never asked about: its
// float moved (worker), yet no request names it and it is not a finding.
func TestHeldPinIsReportedNotResolved(t *testing.T) {
	reg := registrytest.New(t)
	f := writeChart(t, &reg.Pusher, reg.Host)
	cfg, err := config.Parse(filepath.Join(f.dir, "chartpin.yaml"), []byte("charts:\n  - dir: .\n    images:\n"+
		"      - at: images.worker\n        hold: \"frozen: 2.0 was re-published\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := resolver.New(resolver.Options{InsecureRegistries: []string{reg.Host}})
	if err != nil {
		t.Fatal(err)
	}
	reg.Reset()
	rep, err := drift.Check(context.Background(), r, []drift.Target{{Dir: f.dir, Config: &cfg.Charts[0]}}, drift.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := byPath(t, rep)["images.worker.digest"]
	if w.Status != drift.Held || w.Message != "held: frozen: 2.0 was re-published" || w.Status.Finding() {
		t.Errorf("worker: %s %q", w.Status, w.Message)
	}
	for _, q := range reg.Requests() {
		if strings.Contains(q.Path, "team/worker") {
			t.Errorf("a held pin was resolved: %s %s", q.Method, q.Path)
		}
	}
	if rep.Findings() != 2 || !strings.Contains(rep.Summary(), ", 1 HELD") { // gone and orphan remain
		t.Errorf("findings %d: %s", rep.Findings(), rep.Summary())
	}

	// An acknowledgement naming no pin is a config error naming its line.
	cfg, err = config.Parse(filepath.Join(f.dir, "chartpin.yaml"), []byte("charts:\n  - dir: .\n    acknowledge:\n"+
		"      - at: images.wroker\n        digest: "+f.workerOld+"\n        until: 2027-01-31\n        reason: typo\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = drift.Check(context.Background(), r, []drift.Target{{Dir: f.dir, Config: &cfg.Charts[0]}}, drift.Options{})
	if !failure.IsInput(err) || !strings.Contains(err.Error(), filepath.Join(f.dir, "chartpin.yaml")+":4: acknowledge at: images.wroker names no pin") {
		t.Errorf("err %v", err)
	}
}
