package main

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chartpin/chartpin/internal/cosigned"
	"github.com/chartpin/chartpin/internal/kubetest"
	"github.com/chartpin/chartpin/internal/registrytest"
)

// The chain from the chart to the cluster: the example chart, given
// images.jobsManager.verify.key, renders it into targets.yaml; the reconcile
// run as its CronJob runs it (args, mounts, ServiceAccount) against a real
// API server re-images the unverified resource-monitor but refuses the
// unsigned jobs-manager build, on its Deployment and on requests-proxy that
// follows it (exit 1, a ReimageRefused Warning on each, no patch). Once the
// build is signed by that key, the next tick rolls both out.
func TestReconcileCronJobRollsOutOnlySigned(t *testing.T) {
	const ns, agents, token = "prod-ns", "node-agents", "edge-reconcile-token"
	reg := registrytest.New(t)
	key, err := cosigned.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	jm, pm, rm := reg.Host+"/chartpin/jobs-manager", reg.Host+"/chartpin/pods-monitor", reg.Host+"/chartpin/resource-monitor"
	previous, latest := map[string]string{}, map[string]string{}
	for _, r := range []string{jm, pm, rm} {
		repo := strings.TrimPrefix(r, reg.Host+"/")
		previous[r] = reg.PushIndex(t, repo, "previous", "linux/amd64")
		latest[r] = reg.PushIndex(t, repo, "dev", "linux/amd64")
	}

	srv := kubetest.Start(t, kubetest.ServiceAccountUser(token, ns, "rel-example-reconcile"))
	admin := srv.Client(t, kubetest.AdminToken)
	ctx := context.Background()
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	srv.Apply(t, renderExample(t, ns, "env: dev", "autoUpgrade: {enabled: false}",
		"reconcile: {rolloutTimeout: 30s, spread: {window: 1s, key: edge-1}}",
		fmt.Sprintf("images: {jobsManager: {repository: %s, verify: {key: %q}}, podsMonitor: {repository: %s}, requestsProxy: {repository: %s}, resourceMonitor: {repository: %s}}",
			jm, key.PublicPEM(), pm, jm, rm)))
	ctl := &kubetest.Controllers{Client: admin, Namespaces: []string{ns, agents}, Pull: previousBuild(previous)}
	ctl.Start(t, ctx)
	pod := readCronJob(t, admin, ns, "rel-example-reconcile")
	extra := []string{"KUBECONFIG=" + srv.Kubeconfig(t, token)}
	images := func() map[string]string { return exampleImages(t, ctx, admin, ns, agents) }

	out, errOut, code := pod.run(t, extra, "--insecure-registry", reg.Host)
	if code != 1 || !strings.Contains(errOut, "Deployment "+ns+"/rel-jobs-manager was not re-imaged") ||
		!strings.Contains(errOut, "Deployment "+ns+"/rel-requests-proxy was not re-imaged") || !strings.Contains(errOut, jm+"@"+latest[jm]+" has no signature") {
		t.Errorf("unsigned jobs-manager build: exit %d, want 1 naming both refused workloads and why\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	want := map[string]string{"api": jm + ":dev", "pods-monitor": pm + ":dev", "proxy": jm + ":dev", "resource-monitor": rm + "@" + latest[rm]}
	if got := images(); !reflect.DeepEqual(got, want) {
		t.Errorf("after the refusing tick the workloads run\n%v\nwant\n%v", got, want)
	}
	evs, err := admin.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=ReimageRefused"})
	if err != nil {
		t.Fatal(err)
	}
	refused := map[string]bool{}
	for _, ev := range evs.Items {
		if ev.Type == corev1.EventTypeWarning {
			refused[ev.InvolvedObject.Name] = true
		}
	}
	if !refused["rel-jobs-manager"] || !refused["rel-requests-proxy"] || len(refused) != 2 {
		t.Errorf("ReimageRefused Warnings on %v, want rel-jobs-manager and rel-requests-proxy", refused)
	}

	if _, err := key.Push(jm, latest[jm], []name.Option{name.Insecure}); err != nil {
		t.Fatal(err)
	}
	if err := ctl.WaitObserved(ctx); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = pod.run(t, extra, "--insecure-registry", reg.Host)
	if code != 0 {
		t.Fatalf("signed jobs-manager build: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	want = map[string]string{"api": jm + "@" + latest[jm], "pods-monitor": pm + "@" + latest[pm], "proxy": jm + "@" + latest[jm], "resource-monitor": rm + "@" + latest[rm]}
	if got := images(); !reflect.DeepEqual(got, want) {
		t.Errorf("after the signed tick the workloads run\n%v\nwant\n%v", got, want)
	}
	if err := ctl.Err(); err != nil {
		t.Error(err)
	}
}
