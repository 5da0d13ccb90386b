package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chartpin/chartpin/internal/kubetest"
	"github.com/chartpin/chartpin/internal/registrytest"
)

// reconcile on a real API server re-images only to digests the cosign CLI
// signed. The example chart, rendered with verify: {key: cosign.pub's PEM}
// on its three images, writes the key into the targets it renders; the dev
// tags move to the fixture's image. While unsigned, the tick refuses (exit
// 1) and no workload changes; once the signatures are pushed (.sig tags for
// jobs-manager and pods-monitor, the OCI 1.1 referrer for resource-monitor),
// every workload rolls out to the signed digest.
func TestReconcileCosignCLISignature(t *testing.T) {
	const ns, agents = "edge-dev", "node-agents"
	digest := fixtureDigest(t)
	tag := strings.Replace(digest, ":", "-", 1)
	layout := filepath.Join(cosignFixture, "layout")
	reg := registrytest.StartDistribution(t, registrytest.DistributionOptions{})
	signatureOf := map[string]string{"chartpin/jobs-manager": tag + ".sig", "chartpin/pods-monitor": tag + ".sig", "chartpin/resource-monitor": tag}
	previous := map[string]string{}
	for repo := range signatureOf {
		previous[reg.Host+"/"+repo] = reg.PushIndex(t, repo, "previous", "linux/amd64", "linux/arm64")
		reg.PushLayout(t, layout, repo, "1.0")
		reg.Tag(t, repo, digest, "dev")
	}
	pub, err := os.ReadFile(filepath.Join(cosignFixture, "cosign.pub"))
	if err != nil {
		t.Fatal(err)
	}

	srv := kubetest.Start(t)
	admin := srv.Client(t, kubetest.AdminToken)
	ctx := context.Background()
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	srv.Apply(t, renderExample(t, ns, "env: dev", "autoUpgrade: {enabled: false}", "reconcile: {rolloutTimeout: 30s}",
		fmt.Sprintf("images: {jobsManager: {repository: %[1]s/chartpin/jobs-manager, verify: {key: %[2]q}}, "+
			"podsMonitor: {repository: %[1]s/chartpin/pods-monitor, verify: {key: %[2]q}}, "+
			"requestsProxy: {repository: %[1]s/chartpin/jobs-manager}, "+
			"resourceMonitor: {repository: %[1]s/chartpin/resource-monitor, verify: {key: %[2]q}}}", reg.Host, pub)))
	cm, err := admin.CoreV1().ConfigMaps(ns).Get(ctx, "rel-example-reconcile", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(cm.Data["targets.yaml"], "BEGIN PUBLIC KEY"); n != 3 {
		t.Fatalf("the rendered targets carry the key %d times, want 3 (one per verified image):\n%s", n, cm.Data["targets.yaml"])
	}
	targets := filepath.Join(t.TempDir(), "targets.yaml")
	if err := os.WriteFile(targets, []byte(cm.Data["targets.yaml"]), 0o644); err != nil {
		t.Fatal(err)
	}

	// The pods run the previous build; the test stands in for the controllers and kubelet.
	ctl := &kubetest.Controllers{Client: admin, Namespaces: []string{ns, agents}, Pull: previousBuild(previous)}
	ctl.Start(t, ctx)
	images := func() map[string]string { return exampleImages(t, ctx, admin, ns, agents) }
	before := images()
	tick := []string{"--insecure-registry", reg.Host, "reconcile", "--targets", targets,
		"--kubeconfig", srv.Kubeconfig(t, kubetest.AdminToken), "--rollout-timeout", "30s", "--deadline", "1m"}

	out, errOut, code := runCLI(t, tick...)
	if code != 1 {
		t.Errorf("unsigned: exit %d, want 1\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"Deployment " + ns + "/rel-jobs-manager was not re-imaged", "DaemonSet " + agents + "/rel-resource-monitor was not re-imaged", "has no signature"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("unsigned: stderr does not say %q:\n%s", want, errOut)
		}
	}
	if got := images(); !maps.Equal(got, before) {
		t.Errorf("unsigned: the workloads run\n%v\nwant them untouched\n%v", got, before)
	}

	for repo, sig := range signatureOf {
		reg.PushLayout(t, layout, repo, sig)
	}
	out, errOut, code = runCLI(t, tick...)
	if code != 0 {
		t.Fatalf("signed: exit %d\n%s%s", code, out, errOut)
	}
	jm, pm, rm := reg.Host+"/chartpin/jobs-manager@"+digest, reg.Host+"/chartpin/pods-monitor@"+digest, reg.Host+"/chartpin/resource-monitor@"+digest
	if got, want := images(), map[string]string{"api": jm, "pods-monitor": pm, "proxy": jm, "resource-monitor": rm}; !maps.Equal(got, want) {
		t.Errorf("signed: the workloads run\n%v\nwant\n%v", got, want)
	}
	if err := ctl.Err(); err != nil {
		t.Error(err)
	}
}
