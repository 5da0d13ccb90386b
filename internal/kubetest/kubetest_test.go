package kubetest

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
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func TestBinaryLookup(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("KUBE_APISERVER", "")
	t.Setenv("CHARTPIN_CACHE", cache)
	if _, err := Binary(); err == nil || !strings.Contains(err.Error(), "hack/kube-apiserver/build.sh") {
		t.Errorf("empty cache: %v, want a hint to build.sh", err)
	}
	bin := filepath.Join(cache, "kube-apiserver-"+Version)
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := Binary(); err != nil || got != bin {
		t.Errorf("Binary() = %q, %v; want %q", got, err, bin)
	}
	t.Setenv("KUBE_APISERVER", filepath.Join(cache, "missing"))
	if _, err := Binary(); err == nil {
		t.Error("a missing KUBE_APISERVER was accepted")
	}
}

// The harness itself: the admin is system:masters, a plain token user is
// authenticated but authorized for nothing, and Apply creates objects.
func TestServer(t *testing.T) {
	srv := Start(t, User{Token: "nobody-token", Name: "nobody", Groups: []string{"system:authenticated"}})
	ctx := context.Background()
	admin := srv.Client(t, AdminToken)
	v, err := admin.Discovery().ServerVersion()
	if err != nil || v.GitVersion != Version {
		t.Fatalf("server version %v, %v; want %s", v, err, Version)
	}
	srv.Apply(t, []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: applied}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: applied}\ndata: {k: v}\n"))
	if _, err := admin.CoreV1().ConfigMaps("applied").Get(ctx, "c", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Client(t, "nobody-token").CoreV1().ConfigMaps("applied").Get(ctx, "c", metav1.GetOptions{}); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("unprivileged user: %v, want forbidden", err)
	}
	if _, err := srv.Client(t, "wrong-token").CoreV1().ConfigMaps("applied").Get(ctx, "c", metav1.GetOptions{}); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Errorf("unknown token: %v, want Unauthorized", err)
	}
	t.Run("controllers", func(t *testing.T) { testControllers(t, admin) })
	t.Run("proxy", func(t *testing.T) { testProxy(t, srv) })
}

// The proxy forwards with the caller's token, from a rest.Config or a
// kubeconfig, and records every request.
func testProxy(t *testing.T, srv *Server) {
	ctx := context.Background()
	p := srv.Proxy(t)
	c, err := kubernetes.NewForConfig(p.Config(AdminToken))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().ConfigMaps("applied").Get(ctx, "c", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().ConfigMaps("applied").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "via-proxy"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", p.Kubeconfig(t, "nobody-token", "applied"))
	if err != nil {
		t.Fatal(err)
	}
	nobody, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nobody.CoreV1().ConfigMaps("applied").Get(ctx, "c", metav1.GetOptions{}); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("unprivileged user through the proxy: %v, want forbidden (its own token)", err)
	}
	got := p.Reset()
	want := []string{"GET /api/v1/namespaces/applied/configmaps/c", "POST /api/v1/namespaces/applied/configmaps", "GET /api/v1/namespaces/applied/configmaps/c"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("recorded %q, want %q", got, want)
	}
	if m, e := ByMethod(got), Edits(got); m["GET"] != 2 || m["POST"] != 1 || len(e) != 1 {
		t.Errorf("ByMethod %v, Edits %v", m, e)
	}
	if again := p.Reset(); len(again) != 0 {
		t.Errorf("after Reset: %v", again)
	}
}

// The stand-in controllers roll each workload kind to ready pods reporting
// the digest their tag named at pull time, replace a changed template's
// pods, stay stuck when told to, and report what they could not pull.
func testControllers(t *testing.T, c kubernetes.Interface) {
	ctx := context.Background()
	const ns = "workloads"
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	digests := map[string]string{"reg.example/app:1": "sha256:" + strings.Repeat("1", 64), "reg.example/app:2": "sha256:" + strings.Repeat("2", 64)}
	ctl := &Controllers{Client: c, Namespaces: []string{ns}, Pull: func(image string) (string, error) {
		if d, ok := digests[image]; ok {
			return d, nil
		}
		return "", fmt.Errorf("image %s: not in the registry", image)
	}}
	two := int32(2)
	tpl := func(name, image string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: image}}}}
	}
	sel := func(name string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}
	}
	mustNil := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	mustNil(c.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d"},
		Spec: appsv1.DeploymentSpec{Replicas: &two, Selector: sel("d"), Template: tpl("d", "reg.example/app:1")}}, metav1.CreateOptions{}))
	mustNil(c.AppsV1().DaemonSets(ns).Create(ctx, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "ds"},
		Spec: appsv1.DaemonSetSpec{Selector: sel("ds"), Template: tpl("ds", "reg.example/app:1")}}, metav1.CreateOptions{}))
	mustNil(c.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "st"},
		Spec: appsv1.StatefulSetSpec{Selector: sel("st"), Template: tpl("st", "reg.example/app:1")}}, metav1.CreateOptions{}))
	if err := ctl.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	if n := ctl.Rollouts(); n != 3 {
		t.Errorf("rollouts %d, want 3", n)
	}
	// imageIDs of the ready pods of app, sorted by pod name.
	running := func(app string) []string {
		t.Helper()
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range pods.Items {
			if len(p.Status.ContainerStatuses) != 1 || p.Status.Conditions[0].Status != corev1.ConditionTrue {
				t.Fatalf("pod %s status %+v, want ready with one container", p.Name, p.Status)
			}
			out = append(out, p.Status.ContainerStatuses[0].ImageID)
		}
		return out
	}
	v1 := "reg.example/app@" + digests["reg.example/app:1"]
	for app, n := range map[string]int{"d": 2, "ds": 2, "st": 1} {
		if got := running(app); fmt.Sprint(got) != fmt.Sprint(repeat(v1, n)) {
			t.Errorf("%s pods run %v, want %d× %s", app, got, n, v1)
		}
	}
	d, err := c.AppsV1().Deployments(ns).Get(ctx, "d", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s := d.Status; s.ObservedGeneration != d.Generation || s.UpdatedReplicas != 2 || s.ReadyReplicas != 2 || s.AvailableReplicas != 2 {
		t.Errorf("deployment status %+v, want generation %d rolled out to 2", s, d.Generation)
	}
	rss, err := c.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(rss.Items) != 1 || !metav1.IsControlledBy(&rss.Items[0], d) || rss.Items[0].Status.ReadyReplicas != 2 {
		t.Fatalf("replicasets %+v, %v; want one of d with 2 ready", rss, err)
	}
	firstRS := rss.Items[0].Name
	st, err := c.AppsV1().StatefulSets(ns).Get(ctx, "st", metav1.GetOptions{})
	if err != nil || st.Status.ObservedGeneration != st.Generation || st.Status.ReadyReplicas != 1 || st.Status.CurrentRevision != st.Status.UpdateRevision {
		t.Errorf("statefulset %+v, %v; want rolled out", st.Status, err)
	}

	// A new tag: the background controllers replace the pods and the ReplicaSet.
	stop := ctl.Run()
	defer stop()
	d.Spec.Template.Spec.Containers[0].Image = "reg.example/app:2"
	mustNil(c.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{}))
	if err := ctl.WaitObserved(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := running("d"), repeat("reg.example/app@"+digests["reg.example/app:2"], 2); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after the update d runs %v, want %v", got, want)
	}
	rss, err = c.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(rss.Items) != 1 || rss.Items[0].Name == firstRS {
		t.Errorf("replicasets after the update %+v, %v; want only a new one", rss, err)
	}

	// Stuck: observed, no pod updated.
	ctl.Stuck.Store(true)
	ds, err := c.AppsV1().DaemonSets(ns).Get(ctx, "ds", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ds.Spec.Template.Spec.Containers[0].Image = "reg.example/app:2"
	mustNil(c.AppsV1().DaemonSets(ns).Update(ctx, ds, metav1.UpdateOptions{}))
	if err := ctl.WaitObserved(ctx); err != nil {
		t.Fatal(err)
	}
	ds, err = c.AppsV1().DaemonSets(ns).Get(ctx, "ds", metav1.GetOptions{})
	if err != nil || ds.Status.UpdatedNumberScheduled != 0 || ds.Status.ObservedGeneration != ds.Generation {
		t.Errorf("stuck daemonset status %+v, %v; want observed with no pod updated", ds.Status, err)
	}
	if got := running("ds"); fmt.Sprint(got) != fmt.Sprint(repeat(v1, 2)) {
		t.Errorf("stuck daemonset pods run %v, want the old %s", got, v1)
	}
	ctl.Stuck.Store(false)

	// An image nothing can pull is an error, not a silent pass.
	st.Spec.Template.Spec.Containers[0].Image = "reg.example/app:missing"
	mustNil(c.AppsV1().StatefulSets(ns).Update(ctx, st, metav1.UpdateOptions{}))
	stop()
	// The background loop may have met the update before stop(): then the
	// failure is recorded there and Settle finds nothing left to do.
	err = ctl.Settle(ctx)
	if err == nil {
		err = ctl.Err()
	}
	if err == nil || !strings.Contains(err.Error(), "reg.example/app:missing") {
		t.Errorf("settling an unpullable image: %v", err)
	}
	if err := ctl.Err(); err == nil {
		t.Error("Err() is nil after a failed pull")
	}
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}
