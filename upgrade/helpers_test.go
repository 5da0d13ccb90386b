package upgrade

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/kube"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	"helm.sh/helm/v3/pkg/provenance"
	helmregistry "helm.sh/helm/v3/pkg/registry"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/repo"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	k8sfake "k8s.io/client-go/kubernetes/fake"
)

const (
	ns      = "edge"
	relName = "demo"
	// Pins each chart version carries in its defaults.
	oldPin = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	newPin = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
)

// recordingKube is Helm's printing fake cluster client that records every
// Update and Wait, and fails the first failWaits waits like a rollout that
// never becomes ready.
type recordingKube struct {
	kubefake.PrintingKubeClient
	mu        sync.Mutex
	calls     []string
	failWaits int
	// hangFirstWait, when set, is closed as the first Wait starts, and that
	// Wait then never returns: a rollout still in progress when the tick is
	// interrupted.
	hangFirstWait chan struct{}
}

func (k *recordingKube) record(call string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls = append(k.calls, call)
	n := 0
	for _, c := range k.calls {
		if c == call {
			n++
		}
	}
	return n
}

func (k *recordingKube) Update(original, target kube.ResourceList, force bool) (*kube.Result, error) {
	k.record("update")
	return k.PrintingKubeClient.Update(original, target, force)
}

func (k *recordingKube) Wait(rs kube.ResourceList, d time.Duration) error {
	n := k.record("wait")
	if n == 1 && k.hangFirstWait != nil {
		close(k.hangFirstWait)
		select {}
	}
	if n <= k.failWaits {
		return &waitError{}
	}
	return k.PrintingKubeClient.Wait(rs, d)
}

type waitError struct{}

func (*waitError) Error() string { return "timed out waiting for the condition" }

func (k *recordingKube) Calls() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.calls...)
}

// newConfig is an action.Configuration on Helm's in-memory release store.
func newConfig(t *testing.T) (*action.Configuration, *recordingKube) {
	t.Helper()
	mem := driver.NewMemory()
	mem.SetNamespace(ns)
	return configOn(t, mem)
}

// newSecretsConfig keeps releases the way a cluster does: Helm's secrets
// driver (gzip+base64 encoded Secrets) over client-go's fake clientset, so a
// status change that is not written back through the store is lost.
func newSecretsConfig(t *testing.T) (*action.Configuration, *recordingKube) {
	t.Helper()
	return configOn(t, driver.NewSecrets(k8sfake.NewSimpleClientset().CoreV1().Secrets(ns)))
}

// onEachStore runs test on Helm's in-memory release store and on the
// secrets store a cluster uses, each with version of the demo chart
// installed with the operator's values.
func onEachStore(t *testing.T, version string, test func(t *testing.T, cfg *action.Configuration, kc *recordingKube)) {
	for _, store := range []struct {
		name   string
		config func(*testing.T) (*action.Configuration, *recordingKube)
	}{{"memory", newConfig}, {"secrets", newSecretsConfig}} {
		t.Run(store.name, func(t *testing.T) {
			cfg, kc := store.config(t)
			install(t, cfg, demoChart(version, oldPin, false), userValues())
			test(t, cfg, kc)
		})
	}
}

// pushChart pushes ch to host/charts/demo:VERSION with Helm's client, as
// publish does.
func pushChart(t *testing.T, rc *helmregistry.Client, host string, ch *chart.Chart, opts ...helmregistry.PushOption) {
	t.Helper()
	tgz, err := chartutil.Save(ch, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(tgz)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Push(data, host+"/charts/demo:"+ch.Metadata.Version, opts...); err != nil {
		t.Fatalf("pushing %s: %v", ch.Metadata.Version, err)
	}
}

func configOn(t *testing.T, d driver.Driver) (*action.Configuration, *recordingKube) {
	kc := &recordingKube{PrintingKubeClient: kubefake.PrintingKubeClient{Out: &bytes.Buffer{}}}
	return &action.Configuration{
		Releases:     storage.Init(d),
		KubeClient:   kc,
		Capabilities: chartutil.DefaultCapabilities,
		Log:          func(format string, v ...any) { t.Logf("helm: "+format, v...) },
	}, kc
}

// testLogger sends the library's log lines to t.Log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, nil))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

const manifest = `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-app
data:
  image: "{{ .Values.image.repository }}@{{ .Values.image.prodDigest }}"
  pullPolicy: {{ .Values.image.pullPolicy }}
  replicas: "{{ .Values.replicas }}"
  chart: "{{ .Chart.Version }}"
`

// newKeyManifest reads a key that only the newer chart's defaults have: under
// --reuse-values it would fail with a nil pointer.
const newKeyManifest = `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-feature
data:
  enabled: "{{ .Values.feature.enabled }}"
`

// demoChart is chart "demo" at version; pin is its default prodDigest, and
// withNewKey adds a values key and a template that reads it.
func demoChart(version, pin string, withNewKey bool) *chart.Chart {
	values := map[string]any{
		"image":    map[string]any{"repository": "ghcr.io/example/app", "prodDigest": pin, "pullPolicy": "IfNotPresent"},
		"replicas": 1,
	}
	raw := "image:\n  repository: ghcr.io/example/app\n  prodDigest: " + pin + "\n  pullPolicy: IfNotPresent\nreplicas: 1\n"
	templates := []*chart.File{{Name: "templates/app.yaml", Data: []byte(manifest)}}
	if withNewKey {
		values["feature"] = map[string]any{"enabled": true}
		raw += "feature:\n  enabled: true\n"
		templates = append(templates, &chart.File{Name: "templates/feature.yaml", Data: []byte(newKeyManifest)})
	}
	return &chart.Chart{
		Metadata:  &chart.Metadata{APIVersion: chart.APIVersionV2, Name: "demo", Version: version, AppVersion: version, Type: "application"},
		Templates: templates,
		Values:    values,
		Raw:       []*chart.File{{Name: "values.yaml", Data: []byte(raw)}},
	}
}

// userValues are what an operator supplied with -f at install time.
func userValues() map[string]any {
	return map[string]any{"replicas": 3, "image": map[string]any{"pullPolicy": "Always"}}
}

// install puts revision 1 of the release in the store.
func install(t *testing.T, cfg *action.Configuration, ch *chart.Chart, vals map[string]any) *release.Release {
	t.Helper()
	in := action.NewInstall(cfg)
	in.ReleaseName = relName
	in.Namespace = ns
	rel, err := in.Run(ch, vals)
	if err != nil {
		t.Fatalf("installing %s %s: %v", ch.Name(), ch.Metadata.Version, err)
	}
	return rel
}

// chartRepo is an index.yaml repository on httptest that records requests.
type chartRepo struct {
	*httptest.Server
	dir      string
	mu       sync.Mutex
	requests []string
}

func (r *chartRepo) Requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.requests...)
}

// serveRepo packages charts with the Helm SDK and serves them with an index.
func serveRepo(t *testing.T, charts ...*chart.Chart) *chartRepo {
	t.Helper()
	dir := t.TempDir()
	r := &chartRepo{dir: dir}
	files := http.FileServer(http.Dir(dir))
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.requests = append(r.requests, req.Method+" "+req.URL.Path)
		r.mu.Unlock()
		files.ServeHTTP(w, req)
	}))
	t.Cleanup(r.Close)
	idx := repo.NewIndexFile()
	for _, ch := range charts {
		tgz, err := chartutil.Save(ch, dir)
		if err != nil {
			t.Fatal(err)
		}
		digest, err := provenance.DigestFile(tgz)
		if err != nil {
			t.Fatal(err)
		}
		if err := idx.MustAdd(ch.Metadata, filepath.Base(tgz), r.URL, digest); err != nil {
			t.Fatal(err)
		}
	}
	idx.SortEntries()
	if err := idx.WriteFile(filepath.Join(dir, "index.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	return r
}

// revision is one stored revision, reduced to what the tests compare.
type revision struct {
	Version int
	Status  release.Status
	Chart   string
}

func history(t *testing.T, cfg *action.Configuration) []revision {
	t.Helper()
	h, err := cfg.Releases.History(relName)
	if err != nil {
		t.Fatalf("reading history: %v", err)
	}
	var out []revision
	for _, r := range h {
		out = append(out, revision{r.Version, r.Info.Status, r.Chart.Metadata.Version})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out
}

func equalHistory(t *testing.T, got, want []revision) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("history:\n got %v\nwant %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("history:\n got %v\nwant %v", got, want)
		}
	}
}

func stored(t *testing.T, cfg *action.Configuration, version int) *release.Release {
	t.Helper()
	r, err := cfg.Releases.Get(relName, version)
	if err != nil {
		t.Fatalf("reading revision %d: %v", version, err)
	}
	return r
}

// hungServer accepts connections and never answers a byte.
func hungServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String() + "/charts"
}

// closedPort is a loopback URL nobody listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr + "/charts"
}

func TestMain(m *testing.M) {
	// Keep Helm's registry client away from the developer's credentials.
	dir, err := os.MkdirTemp("", "upgrade-test-")
	if err != nil {
		panic(err)
	}
	os.Setenv("HELM_CONFIG_HOME", dir)
	os.Setenv("HELM_CACHE_HOME", dir)
	os.Setenv("DOCKER_CONFIG", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// sameValues compares values as JSON: the secrets store decodes numbers as float64.
func sameValues(a, b map[string]any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}
