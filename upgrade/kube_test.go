package upgrade

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"

	"github.com/chartpin/chartpin/internal/failure"
)

// writeKubeconfig points a kubeconfig at server, with namespace as the
// context's default.
func writeKubeconfig(t *testing.T, server, namespace string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := `apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: "` + server + `"}
users:
- name: test
  user: {token: test-token}
contexts:
- name: test
  context: {cluster: test, user: test, namespace: ` + namespace + `}
current-context: test
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// releaseSecrets are the Secrets Helm's secrets driver writes for a release
// installed at chart version, encoded exactly as in a cluster.
func releaseSecrets(t *testing.T, version string) []corev1.Secret {
	t.Helper()
	cs := k8sfake.NewSimpleClientset()
	cfg := &action.Configuration{
		Releases:     storage.Init(driver.NewSecrets(cs.CoreV1().Secrets(ns))),
		KubeClient:   (&recordingKube{}),
		Capabilities: chartutil.DefaultCapabilities,
		Log:          t.Logf,
	}
	install(t, cfg, demoChart(version, oldPin, false), userValues())
	list, err := cs.CoreV1().Secrets(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("release secrets: %v, %d items", err, len(list.Items))
	}
	return list.Items
}

// apiServer answers the one list Helm's secrets driver sends, and records
// every request.
type apiServer struct {
	*httptest.Server
	mu       sync.Mutex
	requests []string
}

func serveAPI(t *testing.T, secrets []corev1.Secret) *apiServer {
	a := &apiServer{}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.requests = append(a.requests, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
		a.mu.Unlock()
		if r.Method != http.MethodGet || r.URL.Path != "/api/v1/namespaces/"+ns+"/secrets" {
			http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(corev1.SecretList{TypeMeta: metav1.TypeMeta{Kind: "SecretList", APIVersion: "v1"}, Items: secrets})
	}))
	t.Cleanup(a.Close)
	return a
}

// The command's own configuration reads the release from the API server
// the kubeconfig names (KUBECONFIG honoured, its namespace the default).
func TestConfigurationReadsReleaseThroughKubeconfig(t *testing.T) {
	api := serveAPI(t, releaseSecrets(t, "1.1.0"))
	t.Setenv("KUBECONFIG", writeKubeconfig(t, api.URL, ns))
	cfg, gotNS, err := NewConfiguration(ClusterOptions{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if gotNS != ns {
		t.Errorf("namespace = %q, want the kubeconfig's %q", gotNS, ns)
	}
	srv := serveRepo(t, demoChart("1.0.0", oldPin, false), demoChart("1.1.0", newPin, true))
	opts := options(t, srv.URL)
	opts.Namespace = gotNS
	res, err := Run(context.Background(), cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Decision != DecisionUpToDate || res.Current != "1.1.0" || res.Latest != "1.1.0" {
		t.Fatalf("result %+v", res)
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	if len(api.requests) != 1 || !strings.Contains(api.requests[0], "GET /api/v1/namespaces/edge/secrets?labelSelector=name%3Ddemo%2Cowner%3Dhelm") {
		t.Errorf("API requests = %q, want one list of the release's secrets", api.requests)
	}
}

// An explicit kubeconfig wins over KUBECONFIG, and --namespace over the
// kubeconfig's namespace.
func TestConfigurationExplicitKubeconfigAndNamespace(t *testing.T) {
	api := serveAPI(t, nil)
	t.Setenv("KUBECONFIG", writeKubeconfig(t, closedPort(t), "elsewhere"))
	cfg, gotNS, err := NewConfiguration(ClusterOptions{Namespace: ns, Kubeconfig: writeKubeconfig(t, api.URL, "elsewhere")})
	if err != nil {
		t.Fatal(err)
	}
	if gotNS != ns {
		t.Errorf("namespace = %q, want %q", gotNS, ns)
	}
	opts := options(t, "http://127.0.0.1:1")
	opts.Namespace = gotNS
	_, err = Run(context.Background(), cfg, opts)
	if err == nil || failure.Code(err) != 1 || !strings.Contains(err.Error(), `release "demo" not found in namespace "edge"`) {
		t.Fatalf("err = %v", err)
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	if len(api.requests) != 1 {
		t.Errorf("API requests = %q", api.requests)
	}
}

// An API server that never answers fails the
// tick within the request timeout.
func TestHungAPIServerTimesOut(t *testing.T) {
	hung := strings.TrimSuffix(hungServer(t), "/charts")
	cfg, _, err := NewConfiguration(ClusterOptions{Namespace: ns, Kubeconfig: writeKubeconfig(t, hung, ns), RequestTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// A hang here is the bug; go test's own -timeout catches it.
	_, err = Run(context.Background(), cfg, options(t, "http://127.0.0.1:1"))
	if err == nil || failure.Code(err) != 1 || !strings.Contains(err.Error(), "reading release history") || !strings.Contains(err.Error(), "exceeded") {
		t.Fatalf("err = %v, want exit 1 from the history read timing out", err)
	}
}
