package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chartpin/chartpin/internal/kubetest"
	"github.com/chartpin/chartpin/internal/registrytest"
	"github.com/chartpin/chartpin/reconcile"
)

func TestReconcileUsage(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	good := filepath.Join(t.TempDir(), "targets.yaml")
	if err := os.WriteFile(good, []byte("targets:\n  - {id: a, kind: Deployment, namespace: ns, name: n, container: c, image: \"r.io/x:1\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("targets:\n  - {id: a, kind: Job, namespace: ns, name: n, container: c, image: \"r.io/x:1\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no targets", []string{"reconcile"}, "targets"},
		{"deadline under rollout", []string{"reconcile", "--targets", good, "--rollout-timeout", "10m", "--deadline", "10m"}, "--deadline 10m0s must exceed --rollout-timeout"},
		{"bad targets", []string{"reconcile", "--targets", bad}, "bad.yaml:2: target \"a\": kind \"Job\""},
		{"no cluster", []string{"reconcile", "--targets", good}, "no in-cluster config"},
		{"bad output", []string{"reconcile", "--targets", good, "-o", "yaml"}, "--output"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := runCLI(t, tc.args...)
			if code != 2 || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, errOut, tc.want)
			}
		})
	}
}

// The command against a real API server, authenticated as the chart's
// reconcile ServiceAccount through --kubeconfig, resolving through
// --registry-mirror. No controller runs, so the chart's workloads never
// settle: the tick skips them, counts the streak, and fails past --max-skips.
func TestReconcileAgainstRealAPIServer(t *testing.T) {
	const token = "cli-reconcile-token"
	srv := kubetest.Start(t, kubetest.ServiceAccountUser(token, "prod-ns", "rel-example-reconcile"))
	admin := srv.Client(t, kubetest.AdminToken)
	ctx := context.Background()
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prod-ns"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	manifest, err := os.ReadFile("../../reconcile/testdata/example-chart-dev.yaml")
	if err != nil {
		t.Fatal(err)
	}
	srv.Apply(t, manifest)
	// The chart names a credentials Secret (registryAuth.secret); the mirror needs none.
	if _, err := admin.CoreV1().Secrets("prod-ns").Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "chartpin-registry"},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm, err := admin.CoreV1().ConfigMaps("prod-ns").Get(ctx, "rel-example-reconcile", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	targets := filepath.Join(t.TempDir(), "targets.yaml")
	if err := os.WriteFile(targets, []byte(cm.Data["targets.yaml"]), 0o644); err != nil {
		t.Fatal(err)
	}
	reg := registrytest.New(t)
	for _, repo := range []string{"chartpin/jobs-manager", "chartpin/pods-monitor", "chartpin/resource-monitor"} {
		reg.PushIndex(t, repo, "dev", "linux/amd64", "linux/arm64")
	}
	reg.Reset()
	api := srv.Proxy(t) // counts what reaches the API server
	kubeconfig := api.Kubeconfig(t, token, "prod-ns")
	base := []string{"--registry-mirror", "docker.io=" + reg.Host, "--insecure-registry", reg.Host,
		"reconcile", "--targets", targets, "--kubeconfig", kubeconfig}

	// --dry-run: decisions printed, nothing written.
	out, errOut, code := runCLI(t, append(base, "--dry-run")...)
	if code != 0 {
		t.Fatalf("dry run: exit %d: %s", code, errOut)
	}
	if n := strings.Count(out, "msg=decision"); n != 4 || !strings.Contains(out, "action=skip") || !strings.Contains(out, "dryRun=true") {
		t.Errorf("dry run output:\n%s", out)
	}
	if reg.Count("HEAD") != 3 {
		t.Errorf("registry HEADs %d, want 3 (one per unique image, through the mirror)", reg.Count("HEAD"))
	}
	calls := api.Reset()
	if edits := kubetest.Edits(calls); len(edits) != 0 || len(calls) == 0 {
		t.Errorf("dry run sent %d API requests, edits %v; want reads only", len(calls), edits)
	}

	// A real tick: skips are counted on the workloads (patch allowed by the chart's Roles).
	out, errOut, code = runCLI(t, append(base, "-o", "json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var res reconcileOutput
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if len(res.Decisions) != 4 || res.Requests.HEAD != 3 {
		t.Errorf("json %+v", res)
	}
	ds, _ := admin.AppsV1().DaemonSets("node-agents").Get(ctx, "rel-resource-monitor", metav1.GetOptions{})
	if ds.Annotations[reconcile.SkipsAnnotation] != "1" {
		t.Errorf("daemonset annotations %v, want the skip counted", ds.Annotations)
	}

	// Past --max-skips the tick fails (exit 1) and tells the operator what to run.
	_, errOut, code = runCLI(t, append(base, "--max-skips", "1")...)
	if code != 1 || !strings.Contains(errOut, "skipped 2 ticks in a row (--max-skips 1)") || !strings.Contains(errOut, "kubectl -n node-agents rollout status daemonset/rel-resource-monitor") {
		t.Errorf("exit %d, stderr:\n%s", code, errOut)
	}
	evs, err := admin.CoreV1().Events("node-agents").List(ctx, metav1.ListOptions{FieldSelector: "reason=ReimageSkipStreak"})
	if err != nil || len(evs.Items) != 1 {
		t.Errorf("skip-streak events in node-agents: %v %v", evs, err)
	}
}
