package charts_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/chartpin/chartpin/internal/golden"
	"github.com/chartpin/chartpin/internal/kubetest"
)

// helmConfig is a Helm action configuration authenticating with token.
func helmConfig(t *testing.T, srv *kubetest.Server, token, ns string) *action.Configuration {
	t.Helper()
	kubeconfig := srv.Kubeconfig(t, token)
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &kubeconfig
	flags.Namespace = &ns
	cfg := new(action.Configuration)
	if err := cfg.Init(flags, ns, "secret", func(string, ...any) {}); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestRBACOnRealAPIServer installs the example chart into a real
// kube-apiserver (RBAC authorizer, no kubelet), then acts as the two
// ServiceAccounts the chart renders: the reconcile may do exactly what
// `chartpin reconcile` does to exactly its targets, and the auto-upgrade may
// `helm upgrade` this release — re-creating the reconcile's Roles, which RBAC
// allows only when it holds every permission they grant — and nothing more.
func TestRBACOnRealAPIServer(t *testing.T) {
	const (
		ns, nodeNs = "prod-ns", "node-agents"
		recToken   = "reconcile-sa-token"
		upToken    = "upgrade-sa-token"
	)
	srv := kubetest.Start(t,
		kubetest.ServiceAccountUser(recToken, ns, "rel-example-reconcile"),
		kubetest.ServiceAccountUser(upToken, ns, "rel-example-upgrade"))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	admin := srv.Client(t, kubetest.AdminToken)
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	in := action.NewInstall(helmConfig(t, srv, kubetest.AdminToken, ns))
	in.ReleaseName, in.Namespace = releaseName, ns
	if _, err := in.RunWithContext(ctx, loadExample(t), parseValues(t, unpinned, "env: dev")); err != nil {
		t.Fatalf("helm install as admin: %v", err)
	}

	// Something the reconcile must not touch, next to its targets.
	other := []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"other"},"spec":{"selector":{"matchLabels":{"app":"other"}},"template":{"metadata":{"labels":{"app":"other"}},"spec":{"containers":[{"name":"c","image":"docker.io/library/nginx:1.27"}]}}}}`)
	if err := admin.AppsV1().RESTClient().Post().Namespace(ns).Resource("deployments").Body(other).Do(ctx).Error(); err != nil {
		t.Fatal(err)
	}

	rec := srv.Client(t, recToken)
	setImage := func(container, image string) []byte {
		return fmt.Appendf(nil, `{"spec":{"template":{"spec":{"containers":[{"name":%q,"image":%q}]}}}}`, container, image)
	}
	allowed := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("reconcile: %s: %v", what, err)
		}
	}
	forbidden := func(who, what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: %s: want Forbidden, got %v", who, what, err)
		}
	}
	_, err := rec.AppsV1().Deployments(ns).Get(ctx, "rel-jobs-manager", metav1.GetOptions{})
	allowed("get its Deployment", err)
	_, err = rec.AppsV1().Deployments(ns).Patch(ctx, "rel-jobs-manager", types.StrategicMergePatchType, setImage("api", jm+"@"+dJM), metav1.PatchOptions{})
	allowed("set image on its Deployment", err)
	_, err = rec.AppsV1().Deployments(ns).Patch(ctx, "rel-requests-proxy", types.StrategicMergePatchType, setImage("proxy", jm+"@"+dJM), metav1.PatchOptions{})
	allowed("set image on the follower", err)
	_, err = rec.AppsV1().DaemonSets(nodeNs).Patch(ctx, "rel-resource-monitor", types.StrategicMergePatchType, setImage("resource-monitor", rm+"@"+dRM), metav1.PatchOptions{})
	allowed("set image on its DaemonSet in the node-agents namespace", err)
	// The tick reads its workloads by name: no list, no watch.
	_, err = rec.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	forbidden("reconcile", "list Deployments", err)
	_, err = rec.AppsV1().DaemonSets(nodeNs).Watch(ctx, metav1.ListOptions{})
	forbidden("reconcile", "watch DaemonSets", err)
	_, err = rec.CoreV1().Pods(nodeNs).List(ctx, metav1.ListOptions{})
	allowed("list pods", err)
	_, err = rec.CoreV1().Events(ns).Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: "rel-jobs-manager."},
		InvolvedObject: corev1.ObjectReference{Kind: "Deployment", Namespace: ns, Name: "rel-jobs-manager"},
		Reason:         "Reimaged", Message: "test", Type: "Normal",
	}, metav1.CreateOptions{})
	allowed("record an Event", err)

	_, err = rec.AppsV1().Deployments(ns).Patch(ctx, "other", types.StrategicMergePatchType, setImage("c", "docker.io/library/nginx:1.28"), metav1.PatchOptions{})
	forbidden("reconcile", "patch a Deployment it does not target", err)
	_, err = rec.AppsV1().Deployments(ns).Get(ctx, "other", metav1.GetOptions{})
	forbidden("reconcile", "get a Deployment it does not target", err)
	err = rec.AppsV1().Deployments(ns).Delete(ctx, "rel-jobs-manager", metav1.DeleteOptions{})
	forbidden("reconcile", "delete its Deployment", err)
	_, err = rec.AppsV1().Deployments(nodeNs).Patch(ctx, "rel-jobs-manager", types.StrategicMergePatchType, setImage("api", "x"), metav1.PatchOptions{})
	forbidden("reconcile", "patch a Deployment name in the wrong namespace", err)
	_, err = rec.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	forbidden("reconcile", "list Secrets", err)
	_, err = rec.CoreV1().Pods(ns).Get(ctx, "any", metav1.GetOptions{})
	forbidden("reconcile", "get a pod (list is all it needs)", err)

	// The auto-upgrade ServiceAccount upgrades the release, as chartpin
	// upgrade does (--reset-then-reuse-values): first a pin that changes a
	// workload, then pins on everything, which retires the reconcile (Helm
	// deletes its objects, the node-agents Role included).
	upCfg := helmConfig(t, srv, upToken, ns)
	upgrade := func(values ...string) {
		t.Helper()
		up := action.NewUpgrade(upCfg)
		up.Namespace = ns
		up.ResetThenReuseValues = true
		if _, err := up.RunWithContext(ctx, releaseName, loadExample(t), parseValues(t, append([]string{unpinned, "env: dev"}, values...)...)); err != nil {
			t.Fatalf("helm upgrade as the auto-upgrade ServiceAccount: %v", err)
		}
	}
	upgrade(fmt.Sprintf(`images: {podsMonitor: {digest: %q}}`, dPM))
	d, err := admin.AppsV1().Deployments(ns).Get(ctx, "rel-jobs-manager", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Spec.Template.Spec.Containers[1].Image; got != pm+"@"+dPM {
		t.Errorf("after the upgrade pods-monitor runs %s", got)
	}
	upgrade(fmt.Sprintf(`images: {jobsManager: {digest: %q}, podsMonitor: {digest: %q}, resourceMonitor: {digest: %q}}`, dJM, dPM, dRM))
	if _, err := admin.RbacV1().Roles(nodeNs).Get(ctx, "rel-example-reconcile-node-agents", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the retired reconcile's Role in %s: %v, want NotFound", nodeNs, err)
	}
	if _, err := admin.BatchV1().CronJobs(ns).Get(ctx, "rel-example-reconcile", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the retired reconcile's CronJob: %v, want NotFound", err)
	}
	// And back: un-pinning re-creates the reconcile and its Roles, which
	// RBAC allows only if the auto-upgrade holds every permission in them.
	upgrade()
	if _, err := admin.RbacV1().Roles(nodeNs).Get(ctx, "rel-example-reconcile-node-agents", metav1.GetOptions{}); err != nil {
		t.Errorf("the reconcile's Role was not re-created by the auto-upgrade: %v", err)
	}

	up := srv.Client(t, upToken)
	_, err = up.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "escalate"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "rel-example-upgrade", Namespace: ns}},
	}, metav1.CreateOptions{})
	forbidden("auto-upgrade", "bind cluster-admin", err)
	_, err = up.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{})
	forbidden("auto-upgrade", "list Secrets outside the release namespace", err)
	_, err = up.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"}}, metav1.CreateOptions{})
	forbidden("auto-upgrade", "create a Namespace", err)
	err = up.CoreV1().Namespaces().Delete(ctx, nodeNs, metav1.DeleteOptions{})
	forbidden("auto-upgrade", "delete the node-agents Namespace", err)
	_, err = up.AppsV1().Deployments("kube-system").List(ctx, metav1.ListOptions{})
	forbidden("auto-upgrade", "list Deployments in another namespace", err)
}

// The real-API-server tests of the reconcile (package reconcile and the CLI)
// apply this chart as rendered for a dev edge with a private registry; the
// file must follow the chart. go test ./charts/ -run TestAPIServerManifest -update rewrites it.
func TestAPIServerManifest(t *testing.T) {
	const path = "../reconcile/testdata/example-chart-dev.yaml"
	vals := parseValues(t, "env: dev", "registryAuth: {secret: chartpin-registry}", "imagePullSecrets: [regcred]")
	manifest, _, err := installDryRun(loadExample(t), releaseNs, vals)
	if err != nil {
		t.Fatal(err)
	}
	got := []byte(`# The example chart (charts/example with charts/chartpin-lib) rendered by the Helm SDK as
# 'helm install rel charts/example -n prod-ns --set env=dev --set registryAuth.secret=chartpin-registry
# --set imagePullSecrets={regcred} --dry-run=client'. The real-API-server tests apply it whole and run the
# reconcile as the ServiceAccount it binds. Rewritten by: go test ./charts/ -run TestAPIServerManifest -update
` + manifest)
	if *golden.Update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is stale: the chart renders differently now; run go test ./charts/ -run TestAPIServerManifest -update", path)
	}
}
