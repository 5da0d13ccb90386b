package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

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

// The edge whose only registry needs a password: Debian's docker-registry
// behind htpasswd (over TLS, as basic auth must be) serves every image; the
// chart renders the workloads' imagePullSecrets and the reconcile CronJob;
// the Secret exists as `kubectl create secret docker-registry` makes it. The
// reconcile runs as the CronJob runs it (its args, env and mounts, as its
// ServiceAccount) against a real API server: it moves every workload to the
// new digest. A wrong password is a failed tick with a Warning on each
// workload, and no credential reaches the output, the logs or an Event.
func TestReconcileCronJobOnAPasswordOnlyRegistry(t *testing.T) {
	const (
		ns, agents = "prod-ns", "node-agents"
		token      = "edge-reconcile-token"
		user, pass = "edge", "s3cret-edge-pw"
		wrong      = "wr0ng-edge-pw"
	)
	reg := registrytest.StartDistribution(t, registrytest.DistributionOptions{Htpasswd: map[string]string{user: pass}, TLS: true})
	repos := []string{"chartpin/jobs-manager", "chartpin/pods-monitor", "chartpin/resource-monitor"}
	previous, latest := map[string]string{}, map[string]string{}
	for _, r := range repos {
		previous[reg.Host+"/"+r] = reg.PushIndex(t, r, "previous", "linux/amd64", "linux/arm64")
		latest[reg.Host+"/"+r] = reg.PushIndex(t, r, "dev", "linux/amd64", "linux/arm64")
	}

	srv := kubetest.Start(t, kubetest.ServiceAccountUser(token, ns, "rel-example-reconcile"))
	admin := srv.Client(t, kubetest.AdminToken)
	ctx := context.Background()
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	srv.Apply(t, renderExample(t, ns, "env: dev", "imagePullSecrets: [regcred]", "autoUpgrade: {enabled: false}",
		"reconcile: {rolloutTimeout: 30s, spread: {window: 2s, key: edge-1}}",
		fmt.Sprintf("images: {jobsManager: {repository: %[1]s/chartpin/jobs-manager}, podsMonitor: {repository: %[1]s/chartpin/pods-monitor}, "+
			"requestsProxy: {repository: %[1]s/chartpin/jobs-manager}, resourceMonitor: {repository: %[1]s/chartpin/resource-monitor}}", reg.Host)))
	setPassword := func(pw string) {
		t.Helper()
		auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + pw))
		cfg := fmt.Sprintf(`{"auths":{%q:{"username":%q,"password":%q,"auth":%q}}}`, reg.Host, user, pw, auth)
		for _, n := range []string{ns, agents} {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "regcred", Namespace: n}, Type: corev1.SecretTypeDockerConfigJson,
				Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(cfg)}}
			if _, err := admin.CoreV1().Secrets(n).Update(ctx, s, metav1.UpdateOptions{}); apierrors.IsNotFound(err) {
				_, err = admin.CoreV1().Secrets(n).Create(ctx, s, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
		}
	}
	setPassword(pass)

	// Pods run the previous build; the test stands in for the controllers and kubelet.
	ctl := &kubetest.Controllers{Client: admin, Namespaces: []string{ns, agents}, Pull: previousBuild(previous)}
	ctl.Start(t, ctx)

	pod := readCronJob(t, admin, ns, "rel-example-reconcile")
	// KUBECONFIG stands in for the in-cluster config; SSL_CERT_FILE (which
	// the chartpin image sets to the system bundle) trusts the registry's CA.
	extra := []string{"KUBECONFIG=" + srv.Kubeconfig(t, token), "SSL_CERT_FILE=" + reg.CAFile}
	secrets := []string{pass, wrong,
		base64.StdEncoding.EncodeToString([]byte(user + ":" + pass)), base64.StdEncoding.EncodeToString([]byte(user + ":" + wrong))}
	noCredential := func(where, text string) {
		t.Helper()
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s shows a credential:\n%s", where, text)
			}
		}
	}
	images := func() map[string]string { return exampleImages(t, ctx, admin, ns, agents) }
	want := func(tags map[string]string) map[string]string {
		jm, pm, rm := reg.Host+"/chartpin/jobs-manager", reg.Host+"/chartpin/pods-monitor", reg.Host+"/chartpin/resource-monitor"
		return map[string]string{"api": jm + "@" + tags[jm], "pods-monitor": pm + "@" + tags[pm], "proxy": jm + "@" + tags[jm], "resource-monitor": rm + "@" + tags[rm]}
	}

	// -v adds every request and decision to stderr: the most a log can show.
	out, errOut, code := pod.run(t, extra, "-v")
	noCredential("stdout", out)
	noCredential("stderr (-v)", errOut)
	if code != 0 {
		t.Fatalf("tick with the right password: exit %d\n%s\n%s", code, out, errOut)
	}
	if got := images(); !reflect.DeepEqual(got, want(latest)) {
		t.Fatalf("after the tick the workloads run\n%v\nwant\n%v", got, want(latest))
	}
	if !strings.Contains(errOut, "spread: waiting before the first request") || strings.Count(out, "action=reimage") != 4 {
		t.Errorf("tick output:\n%s\nstderr:\n%s", out, errOut)
	}

	// A new build, and the Secret now holds a wrong password: exit 1, a
	// Warning on each workload, nothing moved.
	moved := map[string]string{}
	for _, r := range repos {
		moved[reg.Host+"/"+r] = reg.PushIndex(t, r, "dev", "linux/amd64", "linux/arm64")
	}
	setPassword(wrong)
	if err := ctl.WaitObserved(ctx); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = pod.run(t, extra, "-v")
	noCredential("stdout", out)
	noCredential("stderr (-v)", errOut)
	if code != 1 || !strings.Contains(errOut, "check the credentials in the pull secrets the chart names") {
		t.Errorf("tick with a wrong password: exit %d, want 1 naming the credentials\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if got := images(); !reflect.DeepEqual(got, want(latest)) {
		t.Errorf("a refused tick changed the workloads:\n%v", got)
	}
	warned := map[string]bool{}
	for _, n := range []string{ns, agents} {
		evs, err := admin.CoreV1().Events(n).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs.Items {
			b, _ := json.Marshal(ev)
			noCredential("Event "+ev.Name, string(b))
			if ev.Type == corev1.EventTypeWarning && ev.Reason == "ResolveFailed" {
				warned[ev.InvolvedObject.Kind+" "+ev.InvolvedObject.Name] = true
			}
		}
	}
	for _, w := range []string{"Deployment rel-jobs-manager", "Deployment rel-requests-proxy", "DaemonSet rel-resource-monitor"} {
		if !warned[w] {
			t.Errorf("no ResolveFailed Warning on %s (got %v)", w, warned)
		}
	}
	if err := ctl.Err(); err != nil {
		t.Error(err)
	}
}

// previousBuild is a Pull for stand-in controllers: a tag pulls the digest
// previous holds for its repository (the build before the one under test).
func previousBuild(previous map[string]string) func(image string) (string, error) {
	return func(image string) (string, error) {
		if d, ok := previous[image[:strings.LastIndex(image, ":")]]; ok {
			return d, nil
		}
		return "", fmt.Errorf("image %s: not in the registry", image)
	}
}

// exampleImages is what the example chart's workloads run by spec: each
// jobs-manager container by name, the requests proxy and the resource
// monitor (a DaemonSet in agents) by workload.
func exampleImages(t *testing.T, ctx context.Context, admin kubernetes.Interface, ns, agents string) map[string]string {
	t.Helper()
	out := map[string]string{}
	jm, err := admin.AppsV1().Deployments(ns).Get(ctx, "rel-jobs-manager", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range jm.Spec.Template.Spec.Containers {
		out[c.Name] = c.Image
	}
	rp, err := admin.AppsV1().Deployments(ns).Get(ctx, "rel-requests-proxy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out["proxy"] = rp.Spec.Template.Spec.Containers[0].Image
	ds, err := admin.AppsV1().DaemonSets(agents).Get(ctx, "rel-resource-monitor", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out["resource-monitor"] = ds.Spec.Template.Spec.Containers[0].Image
	return out
}
