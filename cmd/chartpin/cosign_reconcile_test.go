package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chartpin/chartpin/internal/kubetest"
	"github.com/chartpin/chartpin/internal/registrytest"
)

// reconcile on a real API server re-images only to digests the cosign CLI
// signed: two workloads whose tags moved to the fixture's image (one repo
// gets the .sig tag, the other the OCI 1.1 referrer) are refused while
// unsigned, exit 1 and nothing patched, and rolled out once signed.
func TestReconcileCosignCLISignature(t *testing.T) {
	const ns = "edge-dev"
	digest := fixtureDigest(t)
	tag := strings.Replace(digest, ":", "-", 1)
	layout := filepath.Join(cosignFixture, "layout")
	reg := registrytest.StartDistribution(t, registrytest.DistributionOptions{})
	signatureOf := map[string]string{"team/app": tag + ".sig", "team/ref": tag}
	previous := map[string]string{}
	for repo := range signatureOf {
		previous[reg.Host+"/"+repo] = reg.PushIndex(t, repo, "previous", "linux/amd64", "linux/arm64")
		reg.PushLayout(t, layout, repo, "1.0")
	}

	srv := kubetest.Start(t)
	admin := srv.Client(t, kubetest.AdminToken)
	ctx := context.Background()
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pub, err := os.ReadFile(filepath.Join(cosignFixture, "cosign.pub"))
	if err != nil {
		t.Fatal(err)
	}
	key := strings.ReplaceAll(strings.TrimSpace(string(pub)), "\n", "\n        ")
	var targets strings.Builder
	targets.WriteString("targets:\n")
	for _, name := range []string{"app", "ref"} {
		image := reg.Host + "/team/" + name + ":1.0"
		one := int32(1)
		labels := map[string]string{"app": name}
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: appsv1.DeploymentSpec{
				Replicas: &one,
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: name, Image: image}}},
				},
			},
		}
		if _, err := admin.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&targets, "  - id: %[1]s\n    kind: Deployment\n    namespace: %[2]s\n    name: %[1]s\n    container: %[1]s\n    image: %[3]q\n    verify:\n      key: |\n        %[4]s\n",
			name, ns, image, key)
	}
	targetsFile := filepath.Join(t.TempDir(), "targets.yaml")
	if err := os.WriteFile(targetsFile, []byte(targets.String()), 0o644); err != nil {
		t.Fatal(err)
	}

	// The pods run the previous build; the test stands in for the controllers and kubelet.
	ctl := &kubetest.Controllers{Client: admin, Namespaces: []string{ns}, Pull: func(image string) (string, error) {
		if d, ok := previous[image[:strings.LastIndex(image, ":")]]; ok {
			return d, nil
		}
		return "", fmt.Errorf("image %s: not in the registry", image)
	}}
	ctl.Start(t, ctx)
	images := func() map[string]string {
		t.Helper()
		out := map[string]string{}
		for _, name := range []string{"app", "ref"} {
			d, err := admin.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			out[name] = d.Spec.Template.Spec.Containers[0].Image
		}
		return out
	}
	tick := []string{"--insecure-registry", reg.Host, "reconcile", "--targets", targetsFile,
		"--kubeconfig", srv.Kubeconfig(t, kubetest.AdminToken), "--rollout-timeout", "30s", "--deadline", "1m"}

	out, errOut, code := runCLI(t, tick...)
	if code != 1 {
		t.Errorf("unsigned: exit %d, want 1\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"Deployment " + ns + "/app was not re-imaged", "Deployment " + ns + "/ref was not re-imaged", "has no signature"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("unsigned: stderr does not say %q:\n%s", want, errOut)
		}
	}
	for name, image := range images() {
		if want := reg.Host + "/team/" + name + ":1.0"; image != want {
			t.Errorf("unsigned: %s runs %s, want %s untouched", name, image, want)
		}
	}

	for repo, sig := range signatureOf {
		reg.PushLayout(t, layout, repo, sig)
	}
	out, errOut, code = runCLI(t, tick...)
	if code != 0 {
		t.Fatalf("signed: exit %d\n%s%s", code, out, errOut)
	}
	for name, image := range images() {
		if want := reg.Host + "/team/" + name + "@" + digest; image != want {
			t.Errorf("signed: %s runs %s, want %s", name, image, want)
		}
	}
	if err := ctl.Err(); err != nil {
		t.Error(err)
	}
}
