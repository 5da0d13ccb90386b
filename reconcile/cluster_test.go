package reconcile

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/chartpin/chartpin/internal/kubetest"
	"github.com/chartpin/chartpin/internal/registrytest"
	"github.com/chartpin/chartpin/resolver"
)

const (
	saToken   = "reconcile-sa-token"
	saName    = "rel-example-reconcile" // as the example chart renders it for release "rel"
	agentsNs  = "node-agents"
	chartFile = "testdata/example-chart-dev.yaml"
)

// The example chart, applied whole to a real kube-apiserver: its reconcile
// Roles let the ServiceAccount do exactly what a tick does, and nothing else.
func TestRealAPIServer(t *testing.T) {
	srv := kubetest.Start(t, kubetest.ServiceAccountUser(saToken, ns, saName))
	t.Logf("kube-apiserver ready in %s", srv.Startup.Round(time.Millisecond))
	ctx := context.Background()
	admin := srv.Client(t, kubetest.AdminToken)
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	manifest, err := os.ReadFile(chartFile)
	if err != nil {
		t.Fatal(err)
	}
	srv.Apply(t, manifest)
	// The registry credentials the chart names (registryAuth.secret), and
	// Secrets its Roles must not reach.
	for _, s := range []*corev1.Secret{
		dockerConfigSecret(ns, "chartpin-registry", map[string][2]string{"registry.example.com": {"edge", "unused"}}),
		dockerConfigSecret(ns, "other-cred", map[string][2]string{"registry.example.com": {"other", "unused"}}),
		dockerConfigSecret(agentsNs, "chartpin-registry", map[string][2]string{"registry.example.com": {"edge", "unused"}}),
	} {
		if _, err := admin.CoreV1().Secrets(s.Namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Workloads the chart's Roles must not reach.
	mustCreate(t, admin, deployment(ns, "rel-other", 1, containers("app", "docker.io/library/nginx:1.27")))
	mustCreate(t, admin, deployment(agentsNs, "other-deploy", 1, containers("app", "docker.io/library/nginx:1.27")))
	mustCreate(t, admin, daemonSet(agentsNs, "other-agent", 1, containers("app", "docker.io/library/nginx:1.27")))
	mustCreate(t, admin, statefulSet(ns, "rel-db", 1, containers("db", "docker.io/library/postgres:17")))

	sa := srv.Client(t, saToken)
	t.Run("rbac", func(t *testing.T) { testRBAC(t, sa) })
	t.Run("tick", func(t *testing.T) { testTickOnRealServer(t, srv, admin) })
}

func mustCreate(t *testing.T, c kubernetes.Interface, obj any) {
	t.Helper()
	ctx := context.Background()
	var err error
	switch o := obj.(type) {
	case *appsv1.Deployment:
		o.Generation, o.UID, o.Status = 0, "", appsv1.DeploymentStatus{}
		_, err = c.AppsV1().Deployments(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *appsv1.DaemonSet:
		o.Generation, o.UID, o.Status = 0, "", appsv1.DaemonSetStatus{}
		_, err = c.AppsV1().DaemonSets(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *appsv1.StatefulSet:
		o.Generation, o.UID, o.Status = 0, "", appsv1.StatefulSetStatus{}
		_, err = c.AppsV1().StatefulSets(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}

func testRBAC(t *testing.T, sa kubernetes.Interface) {
	ctx := context.Background()
	probe := []byte(`{"metadata":{"annotations":{"chartpin.dev/rbac-probe":"1"}}}`)
	smp := types.StrategicMergePatchType
	po := metav1.PatchOptions{}
	checks := []struct {
		name    string
		allowed bool
		do      func() error
	}{
		{"patch deployment prod-ns/rel-jobs-manager", true, func() error {
			_, err := sa.AppsV1().Deployments(ns).Patch(ctx, "rel-jobs-manager", smp, probe, po)
			return err
		}},
		{"patch deployment prod-ns/rel-requests-proxy", true, func() error {
			_, err := sa.AppsV1().Deployments(ns).Patch(ctx, "rel-requests-proxy", smp, probe, po)
			return err
		}},
		{"patch daemonset node-agents/rel-resource-monitor", true, func() error {
			_, err := sa.AppsV1().DaemonSets(agentsNs).Patch(ctx, "rel-resource-monitor", smp, probe, po)
			return err
		}},
		{"get deployment prod-ns/rel-jobs-manager", true, func() error {
			_, err := sa.AppsV1().Deployments(ns).Get(ctx, "rel-jobs-manager", metav1.GetOptions{})
			return err
		}},
		{"list pods prod-ns", true, func() error { _, err := sa.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); return err }},
		{"list pods node-agents", true, func() error { _, err := sa.CoreV1().Pods(agentsNs).List(ctx, metav1.ListOptions{}); return err }},
		{"create event prod-ns", true, func() error {
			_, err := sa.CoreV1().Events(ns).Create(ctx, &corev1.Event{
				ObjectMeta:     metav1.ObjectMeta{Name: "rbac-probe"},
				InvolvedObject: corev1.ObjectReference{Kind: "Deployment", Namespace: ns, Name: "rel-jobs-manager", APIVersion: "apps/v1"},
				Reason:         "Probe", Message: "probe", Type: "Normal",
			}, metav1.CreateOptions{})
			return err
		}},

		{"patch deployment prod-ns/rel-other", false, func() error {
			_, err := sa.AppsV1().Deployments(ns).Patch(ctx, "rel-other", smp, probe, po)
			return err
		}},
		{"patch statefulset prod-ns/rel-db", false, func() error {
			_, err := sa.AppsV1().StatefulSets(ns).Patch(ctx, "rel-db", smp, probe, po)
			return err
		}},
		{"patch daemonset node-agents/other-agent", false, func() error {
			_, err := sa.AppsV1().DaemonSets(agentsNs).Patch(ctx, "other-agent", smp, probe, po)
			return err
		}},
		{"patch deployment node-agents/other-deploy", false, func() error {
			_, err := sa.AppsV1().Deployments(agentsNs).Patch(ctx, "other-deploy", smp, probe, po)
			return err
		}},
		{"patch deployment node-agents/rel-jobs-manager (name scoped per namespace)", false, func() error {
			_, err := sa.AppsV1().Deployments(agentsNs).Patch(ctx, "rel-jobs-manager", smp, probe, po)
			return err
		}},
		{"update (PUT) deployment prod-ns/rel-jobs-manager", false, func() error {
			d, err := sa.AppsV1().Deployments(ns).Get(ctx, "rel-jobs-manager", metav1.GetOptions{})
			if err != nil {
				return err
			}
			_, err = sa.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
			return err
		}},
		{"delete deployment prod-ns/rel-jobs-manager", false, func() error {
			return sa.AppsV1().Deployments(ns).Delete(ctx, "rel-jobs-manager", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		}},
		{"create deployment prod-ns", false, func() error {
			d := deployment(ns, "rogue", 1, containers("app", "docker.io/library/nginx:1.27"))
			d.Generation, d.UID = 0, ""
			_, err := sa.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}},
		{"patch deployment status prod-ns/rel-jobs-manager", false, func() error {
			_, err := sa.AppsV1().Deployments(ns).Patch(ctx, "rel-jobs-manager", smp, []byte(`{"status":{"replicas":0}}`), po, "status")
			return err
		}},
		{"get secret prod-ns/chartpin-registry (registryAuth.secret)", true, func() error {
			_, err := sa.CoreV1().Secrets(ns).Get(ctx, "chartpin-registry", metav1.GetOptions{})
			return err
		}},
		{"get secret prod-ns/regcred (imagePullSecrets; absent, so NotFound once allowed)", true, func() error {
			_, err := sa.CoreV1().Secrets(ns).Get(ctx, "regcred", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}},
		{"list secrets prod-ns", false, func() error { _, err := sa.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); return err }},
		{"get secret prod-ns/other-cred", false, func() error {
			_, err := sa.CoreV1().Secrets(ns).Get(ctx, "other-cred", metav1.GetOptions{})
			return err
		}},
		{"get secret node-agents/chartpin-registry (only prod-ns's is named)", false, func() error {
			_, err := sa.CoreV1().Secrets(agentsNs).Get(ctx, "chartpin-registry", metav1.GetOptions{})
			return err
		}},
		{"list deployments prod-ns (the tick reads workloads by name)", false, func() error {
			_, err := sa.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
			return err
		}},
		{"watch daemonsets node-agents", false, func() error {
			w, err := sa.AppsV1().DaemonSets(agentsNs).Watch(ctx, metav1.ListOptions{})
			if err == nil {
				w.Stop()
			}
			return err
		}},
		{"get pods prod-ns/any (only list)", false, func() error {
			_, err := sa.CoreV1().Pods(ns).Get(ctx, "any", metav1.GetOptions{})
			return err
		}},
		{"patch event prod-ns/rbac-probe (only create)", false, func() error {
			_, err := sa.CoreV1().Events(ns).Patch(ctx, "rbac-probe", smp, probe, po)
			return err
		}},
		{"delete pods prod-ns", false, func() error {
			return sa.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		}},
		{"patch configmap prod-ns/rel-example-reconcile (its own targets)", false, func() error {
			_, err := sa.CoreV1().ConfigMaps(ns).Patch(ctx, saName, smp, probe, po)
			return err
		}},
	}
	for _, c := range checks {
		err := c.do()
		switch {
		case c.allowed && err != nil:
			t.Errorf("%s: want allowed, got %v", c.name, err)
		case !c.allowed && !apierrors.IsForbidden(err):
			t.Errorf("%s: want Forbidden, got %v", c.name, err)
		}
	}
}

// testTickOnRealServer runs reconcile ticks as the ServiceAccount against
// the chart's workloads; the test stands in for the controllers and kubelet.
func testTickOnRealServer(t *testing.T, srv *kubetest.Server, admin kubernetes.Interface) {
	ctx := context.Background()
	reg := registrytest.New(t)
	old := map[string]string{}
	latest := map[string]string{}
	for _, repo := range []string{"chartpin/jobs-manager", "chartpin/pods-monitor", "chartpin/resource-monitor"} {
		old[repo] = reg.PushIndex(t, repo, "previous", "linux/amd64", "linux/arm64")
		latest[repo] = reg.PushIndex(t, repo, "dev", "linux/amd64", "linux/arm64")
	}
	cm, err := admin.CoreV1().ConfigMaps(ns).Get(ctx, saName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := ParseTargets("configmap/"+saName+":targets.yaml", []byte(cm.Data["targets.yaml"]))
	if err != nil {
		t.Fatal(err)
	}
	// The other workloads' images are in the registry too.
	old["library/nginx"] = reg.PushIndex(t, "library/nginx", "1.27", "linux/amd64")
	old["library/postgres"] = reg.PushIndex(t, "library/postgres", "17", "linux/amd64")
	// Pods run the previous build (a tag pulls it); every workload is settled.
	ctl := &kubetest.Controllers{Client: admin, Namespaces: []string{ns, agentsNs}, Pull: func(image string) (string, error) {
		if d, ok := old[strings.TrimPrefix(repository(image), "docker.io/")]; ok {
			return d, nil
		}
		return "", fmt.Errorf("image %s: not in the registry", image)
	}}
	ctl.Start(t, ctx)

	api := srv.Proxy(t)
	sa, err := kubernetes.NewForConfig(api.Config(saToken))
	if err != nil {
		t.Fatal(err)
	}
	tick := func() (*Result, error) {
		// As the CLI wires it: the pull secrets the chart names answer first.
		kc := NewPullSecrets()
		res, err := resolver.New(resolver.Options{InsecureRegistries: []string{reg.Host}, Mirrors: map[string]string{"docker.io": reg.Host}, Keychain: kc})
		if err != nil {
			t.Fatal(err)
		}
		r, err := New(sa, res, options(func(o *Options) {
			o.PullSecrets, o.PollInterval, o.RolloutTimeout, o.RequestTimeout = kc, 20*time.Millisecond, 30*time.Second, 10*time.Second
		}))
		if err != nil {
			t.Fatal(err)
		}
		reg.Reset()
		api.Reset()
		return r.Tick(ctx, f)
	}

	start := time.Now()
	res, err := tick()
	if err != nil {
		t.Fatal(err)
	}
	calls := kubetest.ByMethod(api.Reset())
	t.Logf("first tick on a real API server: %s, API requests %v, registry HEADs %d", time.Since(start).Round(time.Millisecond), calls, reg.Count("HEAD"))
	if len(res.Patched) != 3 || len(res.RolledOut) != 3 {
		t.Fatalf("patched %v, rolled out %v; want all three workloads", res.Patched, res.RolledOut)
	}
	if reg.Count("HEAD") != 3 {
		t.Errorf("registry HEADs %d, want 3 (requests-proxy follows)", reg.Count("HEAD"))
	}
	// re-image + clear counter per workload: 6 patches.
	if calls["PATCH"] != 6 {
		t.Errorf("PATCH requests %d, want 6", calls["PATCH"])
	}
	jm, err := admin.AppsV1().Deployments(ns).Get(ctx, "rel-jobs-manager", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range jm.Spec.Template.Spec.Containers {
		got[c.Name] = c.Image
	}
	want := map[string]string{
		"api":          "docker.io/chartpin/jobs-manager@" + latest["chartpin/jobs-manager"],
		"pods-monitor": "docker.io/chartpin/pods-monitor@" + latest["chartpin/pods-monitor"],
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("jobs-manager runs %v, want %v", got, want)
	}
	if _, ok := jm.Annotations[AttemptsAnnotation]; ok {
		t.Errorf("attempt counter left: %v", jm.Annotations)
	}
	ds, err := admin.AppsV1().DaemonSets(agentsNs).Get(ctx, "rel-resource-monitor", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if img := ds.Spec.Template.Spec.Containers[0].Image; img != "docker.io/chartpin/resource-monitor@"+latest["chartpin/resource-monitor"] {
		t.Errorf("resource-monitor runs %s", img)
	}
	for _, n := range []string{ns, agentsNs} {
		evs, err := admin.CoreV1().Events(n).List(ctx, metav1.ListOptions{FieldSelector: "reason=Reimaged"})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs.Items) == 0 {
			t.Errorf("no Reimaged event in %s", n)
		}
	}
	// Everything is on the newest digest now: the next tick only reads.
	// (Clearing the counter bumped each Deployment's generation, as any
	// annotation change does; wait for the controller to observe it, as the
	// 15 minutes between two CronJob ticks would.)
	if err := ctl.WaitObserved(ctx); err != nil {
		t.Fatal(err)
	}
	res, err = tick()
	if err != nil {
		t.Fatal(err)
	}
	calls = kubetest.ByMethod(api.Reset())
	if len(res.Patched) != 0 || calls["PATCH"] != 0 || calls["POST"] != 0 {
		t.Errorf("second tick: patched %v, requests %v; want reads only", res.Patched, calls)
	}
	t.Logf("second tick: API requests %v", calls)
	for _, d := range res.Decisions {
		t.Logf("second tick: %s %s %s", d.Target, d.Action, d.Reason)
	}

	// Every verb the Roles grant is needed: without it, a tick that moves
	// every workload fails. A scoped rule loses one name at a time.
	t.Run("each verb is needed", func(t *testing.T) {
		for _, n := range []string{ns, agentsNs} {
			roleName := saName + "-" + n
			role, err := admin.RbacV1().Roles(n).Get(ctx, roleName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for i, rule := range role.Rules {
				for _, cut := range cuts(rule) {
					reduced := role.DeepCopy()
					reduced.Rules[i] = cut.rule
					if len(cut.rule.Verbs) == 0 || (len(rule.ResourceNames) > 0 && len(cut.rule.ResourceNames) == 0) {
						reduced.Rules = slices.Delete(slices.Clone(reduced.Rules), i, i+1)
					}
					setRole(t, admin, sa, reduced, cut.check)
					for _, repo := range []string{"chartpin/jobs-manager", "chartpin/pods-monitor", "chartpin/resource-monitor"} {
						reg.PushIndex(t, repo, "dev", "linux/amd64", "linux/arm64")
					}
					if err := ctl.WaitObserved(ctx); err != nil {
						t.Fatal(err)
					}
					_, err := tick()
					if !apierrors.IsForbidden(err) {
						t.Errorf("Role %s without %s: tick error %v, want a failed tick naming the refusal", roleName, cut.name, err)
					}
					setRole(t, admin, sa, role, cut.check)
					// Leave no workload counting attempts for the next cut.
					if _, err := tick(); err != nil {
						t.Fatalf("tick with the full Role again: %v", err)
					}
					if err := ctl.WaitObserved(ctx); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	})

	// A new build whose rollout never completes: attempt counted, exit 1.
	latest["chartpin/resource-monitor"] = reg.PushIndex(t, "chartpin/resource-monitor", "dev", "linux/amd64", "linux/arm64")
	ctl.Stuck.Store(true)
	r, _ := resolver.New(resolver.Options{InsecureRegistries: []string{reg.Host}, Mirrors: map[string]string{"docker.io": reg.Host}})
	rc, _ := New(sa, r, options(func(o *Options) { o.PollInterval, o.RolloutTimeout = 20*time.Millisecond, 300*time.Millisecond }))
	_, err = rc.Tick(ctx, f)
	if err == nil || !strings.Contains(err.Error(), "rollout of DaemonSet node-agents/rel-resource-monitor") {
		t.Fatalf("stuck rollout: %v", err)
	}
	ds, _ = admin.AppsV1().DaemonSets(agentsNs).Get(ctx, "rel-resource-monitor", metav1.GetOptions{})
	if ds.Annotations[AttemptsAnnotation] != "1" {
		t.Errorf("attempt counter %q after a stuck rollout, want 1", ds.Annotations[AttemptsAnnotation])
	}
	if err := ctl.Err(); err != nil {
		t.Error(err)
	}
}

// BenchmarkTick50RealAPIServer is one 50-target tick against a real
// kube-apiserver (started once, not timed): steady state, and every tag moved
// with the test's stand-in controllers completing each rollout.
func BenchmarkTick50RealAPIServer(b *testing.B) {
	srv := kubetest.Start(b)
	ctx := context.Background()
	admin := srv.Client(b, kubetest.AdminToken)
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	reg := registrytest.New(b)
	var sb strings.Builder
	sb.WriteString("targets:\n")
	for i := 0; i < 50; i++ {
		repo := fmt.Sprintf("example/app-%02d", i/2)
		if i%2 == 0 {
			reg.PushIndex(b, repo, "dev", "linux/amd64", "linux/arm64")
		}
		name := fmt.Sprintf("w%02d", i)
		d := deployment(ns, name, 1, containers("app", reg.Host+"/"+repo+":dev"))
		d.Generation, d.UID, d.Status = 0, "", appsv1.DeploymentStatus{}
		if _, err := admin.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(&sb, "  - {id: t%02d, kind: Deployment, namespace: %s, name: %s, container: app, image: %q}\n", i, ns, name, reg.Host+"/"+repo+":dev")
	}
	f, err := ParseTargets("targets.yaml", []byte(sb.String()))
	if err != nil {
		b.Fatal(err)
	}
	ctl := &kubetest.Controllers{Client: admin, Namespaces: []string{ns}, Pull: func(image string) (string, error) {
		return "sha256:" + strings.Repeat("0", 64), nil // an older build
	}}
	ctl.Start(b, ctx)
	api := srv.Proxy(b)
	client, err := kubernetes.NewForConfig(api.Config(kubetest.AdminToken))
	if err != nil {
		b.Fatal(err)
	}
	tick := func(b *testing.B) *Result {
		res, err := resolver.New(resolver.Options{InsecureRegistries: []string{reg.Host}})
		if err != nil {
			b.Fatal(err)
		}
		r, err := New(client, res, options(func(o *Options) { o.PollInterval = 20 * time.Millisecond }))
		if err != nil {
			b.Fatal(err)
		}
		out, err := r.Tick(ctx, f)
		if err != nil {
			b.Fatal(err)
		}
		return out
	}
	report := func(b *testing.B, calls map[string]int, heads int) {
		n := 0
		for _, v := range calls {
			n += v
		}
		b.ReportMetric(float64(n)/float64(b.N), "api-calls/op")
		b.ReportMetric(float64(calls["PATCH"])/float64(b.N), "patches/op")
		b.ReportMetric(float64(heads)/float64(b.N), "registry-HEAD/op")
	}
	b.Run("all-moved", func(b *testing.B) {
		calls, heads := map[string]int{}, 0
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			for j := 0; j < 25; j++ { // move every tag
				reg.PushIndex(b, fmt.Sprintf("example/app-%02d", j), "dev", "linux/amd64")
			}
			if err := ctl.WaitObserved(ctx); err != nil {
				b.Fatal(err)
			}
			api.Reset()
			reg.Reset()
			b.StartTimer()
			out := tick(b)
			b.StopTimer()
			if len(out.RolledOut) != 50 {
				b.Fatalf("rolled out %d of 50", len(out.RolledOut))
			}
			for k, v := range kubetest.ByMethod(api.Reset()) {
				calls[k] += v
			}
			heads += reg.Count("HEAD")
			b.StartTimer()
		}
		report(b, calls, heads)
	})
	b.Run("steady", func(b *testing.B) {
		tick(b) // on the newest digest first (when run alone)
		if err := ctl.WaitObserved(ctx); err != nil {
			b.Fatal(err)
		}
		calls, heads := map[string]int{}, 0
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			api.Reset()
			reg.Reset()
			b.StartTimer()
			out := tick(b)
			b.StopTimer()
			if len(out.Patched) != 0 {
				b.Fatalf("steady tick patched %v", out.Patched)
			}
			for k, v := range kubetest.ByMethod(api.Reset()) {
				calls[k] += v
			}
			heads += reg.Count("HEAD")
			b.StartTimer()
		}
		report(b, calls, heads)
	})
}

// cut is a Role rule with one verb, or one resource name, taken away; check
// is an access review that is refused exactly when the cut is in force.
type cut struct {
	name  string
	rule  rbacv1.PolicyRule
	check authorizationv1.ResourceAttributes
}

func cuts(rule rbacv1.PolicyRule) []cut {
	var out []cut
	for _, v := range rule.Verbs {
		r := *rule.DeepCopy()
		r.Verbs = slices.DeleteFunc(slices.Clone(r.Verbs), func(x string) bool { return x == v })
		name := ""
		if len(rule.ResourceNames) > 0 {
			name = rule.ResourceNames[0]
		}
		out = append(out, cut{name: v + " on " + rule.Resources[0], rule: r,
			check: authorizationv1.ResourceAttributes{Group: rule.APIGroups[0], Resource: rule.Resources[0], Verb: v, Name: name}})
	}
	if len(rule.ResourceNames) > 1 {
		for _, n := range rule.ResourceNames {
			r := *rule.DeepCopy()
			r.ResourceNames = slices.DeleteFunc(slices.Clone(r.ResourceNames), func(x string) bool { return x == n })
			out = append(out, cut{name: rule.Verbs[0] + " on " + rule.Resources[0] + "/" + n, rule: r,
				check: authorizationv1.ResourceAttributes{Group: rule.APIGroups[0], Resource: rule.Resources[0], Verb: rule.Verbs[0], Name: n}})
		}
	}
	return out
}

// setRole replaces a Role and waits until the authorizer has seen it (the
// ServiceAccount's own access review for check flips accordingly).
func setRole(t *testing.T, admin, sa kubernetes.Interface, role *rbacv1.Role, check authorizationv1.ResourceAttributes) {
	t.Helper()
	ctx := context.Background()
	cur, err := admin.RbacV1().Roles(role.Namespace).Get(ctx, role.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	next := cur.DeepCopy()
	next.Rules = role.Rules
	if _, err := admin.RbacV1().Roles(role.Namespace).Update(ctx, next, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	check.Namespace = role.Namespace
	want := grantsAttrs(role.Rules, check)
	for start := time.Now(); time.Since(start) < 10*time.Second; time.Sleep(20 * time.Millisecond) {
		r, err := sa.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &check}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Allowed == want {
			return
		}
	}
	t.Fatalf("the authorizer did not pick up Role %s/%s within 10s", role.Namespace, role.Name)
}

func grantsAttrs(rules []rbacv1.PolicyRule, a authorizationv1.ResourceAttributes) bool {
	for _, r := range rules {
		if slices.Contains(r.APIGroups, a.Group) && slices.Contains(r.Resources, a.Resource) && slices.Contains(r.Verbs, a.Verb) &&
			(len(r.ResourceNames) == 0 || slices.Contains(r.ResourceNames, a.Name)) {
			return true
		}
	}
	return false
}
