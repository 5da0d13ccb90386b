package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/chartpin/chartpin/internal/kubetest"
)

// apiProxy sits between the clients under test (Helm for upgrade, client-go
// for reconcile) and the real kube-apiserver, and records every request, so
// each step can say how many API calls it made and which of them edit.
type apiProxy struct {
	*httptest.Server

	mu       sync.Mutex
	requests []string
}

func startAPIProxy(t *testing.T, srv *kubetest.Server) *apiProxy {
	t.Helper()
	target, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(srv.CA) {
		t.Fatal("kubetest CA: no certificate")
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	rp.FlushInterval = -1 // watches stream
	p := &apiProxy{}
	// TLS like the real server: client-go does not send a bearer token to a
	// plain-HTTP server named in a kubeconfig.
	p.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.requests = append(p.requests, r.Method+" "+r.URL.Path)
		p.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

// reset forgets the recorded requests and returns them.
func (p *apiProxy) reset() []string {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.requests
	p.requests = nil
	return out
}

// seen returns the requests recorded so far.
func (p *apiProxy) seen() []string {
	if p == nil { // no API server: Helm's in-memory fallback
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.requests...)
}

// byMethod counts requests per HTTP method.
func byMethod(requests []string) map[string]int {
	out := map[string]int{}
	for _, r := range requests {
		m, _, _ := strings.Cut(r, " ")
		out[m]++
	}
	return out
}

// edits are the requests that change something.
func edits(requests []string) []string {
	var out []string
	for _, r := range requests {
		if !strings.HasPrefix(r, "GET ") {
			out = append(out, r)
		}
	}
	return out
}

// kubeconfig writes a kubeconfig for token that talks to the cluster through
// the proxy with namespace as its default.
func (p *apiProxy) kubeconfig(t *testing.T, name, token, namespace string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster: {server: %q, certificate-authority-data: %s}
users:
- name: %s
  user: {token: %q}
contexts:
- name: e2e
  context: {cluster: e2e, user: %s, namespace: %s}
current-context: e2e
`, p.URL, base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.Certificate().Raw})),
		name, token, name, namespace)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// controllers stands in for the Deployment, ReplicaSet and DaemonSet
// controllers and the kubelet, which this API server does not run: a
// workload whose generation is not observed yet gets a ReplicaSet for its
// pod template (Helm's wait looks for it), pods of that template that
// "pulled" their images (imageID = the digest the tag named at pull time, as
// a kubelet reports it), and a completed rollout status.
//
// reconcile/cluster_test.go keeps a smaller, synchronous stand-in
// (fakeControllers, no ReplicaSets); merging the two into internal/kubetest
// is open work.
type controllers struct {
	c          kubernetes.Interface
	namespaces []string
	// pull names the digest an image reference pulls now.
	pull func(image string) (string, error)

	mu     sync.Mutex
	errs   []error
	rolled int
}

func (fc *controllers) fail(err error) {
	fc.mu.Lock()
	fc.errs = append(fc.errs, err)
	fc.mu.Unlock()
}

// err is the first error the stand-in hit (nil when none).
func (fc *controllers) err() error {
	if fc == nil { // no API server: Helm's in-memory fallback
		return nil
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if len(fc.errs) == 0 {
		return nil
	}
	return fmt.Errorf("stand-in controllers: %w (and %d more)", fc.errs[0], len(fc.errs)-1)
}

// rollouts is how many rollouts the stand-in completed so far.
func (fc *controllers) rollouts() int {
	if fc == nil {
		return 0
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.rolled
}

// run polls until stop is called.
func (fc *controllers) run() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			// A pass is not cancelled by stop (a request cut mid-body makes
			// client-go log an error); stop waits for it instead.
			pctx, cancelPass := context.WithTimeout(context.Background(), 10*time.Second)
			for _, ns := range fc.namespaces {
				fc.pass(pctx, ns)
			}
			cancelPass()
			select {
			case <-ctx.Done():
			case <-time.After(25 * time.Millisecond):
			}
		}
	}()
	return func() { cancel(); <-done }
}

func (fc *controllers) pass(ctx context.Context, ns string) {
	deps, err := fc.c.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		if ctx.Err() == nil {
			fc.fail(err)
		}
		return
	}
	for i := range deps.Items {
		d := &deps.Items[i]
		if d.Status.ObservedGeneration < d.Generation {
			if err := fc.rollDeployment(ctx, d); err != nil && ctx.Err() == nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
				fc.fail(fmt.Errorf("deployment %s/%s: %w", ns, d.Name, err))
			}
		}
	}
	dss, err := fc.c.AppsV1().DaemonSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		if ctx.Err() == nil {
			fc.fail(err)
		}
		return
	}
	for i := range dss.Items {
		d := &dss.Items[i]
		if d.Status.ObservedGeneration < d.Generation {
			if err := fc.rollDaemonSet(ctx, d); err != nil && ctx.Err() == nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
				fc.fail(fmt.Errorf("daemonset %s/%s: %w", ns, d.Name, err))
			}
		}
	}
}

func templateHash(tpl corev1.PodTemplateSpec) string {
	b, _ := json.Marshal(tpl)
	h := fnv.New32a()
	h.Write(b)
	return fmt.Sprintf("%08x", h.Sum32())
}

func (fc *controllers) rollDeployment(ctx context.Context, d *appsv1.Deployment) error {
	hash := templateHash(d.Spec.Template)
	rsName := d.Name + "-" + hash
	replicas := int32(1)
	if d.Spec.Replicas != nil {
		replicas = *d.Spec.Replicas
	}
	rs, err := fc.c.AppsV1().ReplicaSets(d.Namespace).Get(ctx, rsName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		tpl := *d.Spec.Template.DeepCopy()
		tpl.Labels = withLabel(tpl.Labels, "pod-template-hash", hash)
		sel := d.Spec.Selector.DeepCopy()
		sel.MatchLabels = withLabel(sel.MatchLabels, "pod-template-hash", hash)
		rs, err = fc.c.AppsV1().ReplicaSets(d.Namespace).Create(ctx, &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: rsName, Namespace: d.Namespace, Labels: tpl.Labels,
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
			Spec: appsv1.ReplicaSetSpec{Replicas: &replicas, Selector: sel, Template: tpl},
		}, metav1.CreateOptions{})
	}
	if err != nil {
		return err
	}
	owner := metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))
	if err := fc.replacePods(ctx, d.Namespace, d.Spec.Selector, rsName, int(replicas), rs.Spec.Template, owner); err != nil {
		return err
	}
	rs.Status = appsv1.ReplicaSetStatus{Replicas: replicas, FullyLabeledReplicas: replicas, ReadyReplicas: replicas,
		AvailableReplicas: replicas, ObservedGeneration: rs.Generation}
	if _, err := fc.c.AppsV1().ReplicaSets(d.Namespace).UpdateStatus(ctx, rs, metav1.UpdateOptions{}); err != nil {
		return err
	}
	// Old ReplicaSets scale away.
	all, err := fc.c.AppsV1().ReplicaSets(d.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, old := range all.Items {
		if old.Name != rsName && metav1.IsControlledBy(&old, d) {
			if err := fc.c.AppsV1().ReplicaSets(d.Namespace).Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: replicas, UpdatedReplicas: replicas,
		ReadyReplicas: replicas, AvailableReplicas: replicas}
	if _, err := fc.c.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
		return err
	}
	fc.mu.Lock()
	fc.rolled++
	fc.mu.Unlock()
	return nil
}

func (fc *controllers) rollDaemonSet(ctx context.Context, d *appsv1.DaemonSet) error {
	const nodes = 2
	hash := templateHash(d.Spec.Template)
	tpl := *d.Spec.Template.DeepCopy()
	tpl.Labels = withLabel(tpl.Labels, "controller-revision-hash", hash)
	owner := metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("DaemonSet"))
	if err := fc.replacePods(ctx, d.Namespace, d.Spec.Selector, d.Name+"-"+hash, nodes, tpl, owner); err != nil {
		return err
	}
	d.Status = appsv1.DaemonSetStatus{ObservedGeneration: d.Generation, DesiredNumberScheduled: nodes, CurrentNumberScheduled: nodes,
		UpdatedNumberScheduled: nodes, NumberReady: nodes, NumberAvailable: nodes}
	if _, err := fc.c.AppsV1().DaemonSets(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
		return err
	}
	fc.mu.Lock()
	fc.rolled++
	fc.mu.Unlock()
	return nil
}

// replacePods deletes the workload's pods of other templates and creates n
// ready pods named prefix-i from tpl, each container reporting the digest
// its image pulled.
func (fc *controllers) replacePods(ctx context.Context, ns string, sel *metav1.LabelSelector, prefix string, n int, tpl corev1.PodTemplateSpec, owner *metav1.OwnerReference) error {
	pods, err := fc.c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(sel)})
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Name, prefix+"-") {
			have[p.Name] = true
			continue
		}
		if err := fc.c.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("%s-%d", prefix, i)
		if have[name] {
			continue
		}
		p, err := fc.c.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: tpl.Labels, OwnerReferences: []metav1.OwnerReference{*owner}},
			Spec:       *tpl.Spec.DeepCopy(),
		}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		for _, c := range tpl.Spec.Containers {
			digest, err := fc.pull(c.Image)
			if err != nil {
				return fmt.Errorf("pod %s/%s container %s: %w", ns, name, c.Name, err)
			}
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
				Name: c.Name, Image: c.Image, ImageID: repository(c.Image) + "@" + digest, Ready: true,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}},
			})
		}
		if _, err := fc.c.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// waitObserved waits until every workload in the namespaces has its last
// generation rolled out (as the minutes between two CronJob ticks would).
func (fc *controllers) waitObserved(ctx context.Context) error {
	if fc == nil {
		return nil
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		pending := []string{}
		for _, ns := range fc.namespaces {
			deps, err := fc.c.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			for _, d := range deps.Items {
				if d.Status.ObservedGeneration < d.Generation {
					pending = append(pending, "Deployment "+ns+"/"+d.Name)
				}
			}
			dss, err := fc.c.AppsV1().DaemonSets(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			for _, d := range dss.Items {
				if d.Status.ObservedGeneration < d.Generation {
					pending = append(pending, "DaemonSet "+ns+"/"+d.Name)
				}
			}
		}
		if len(pending) == 0 {
			return fc.err()
		}
		if time.Now().After(deadline) {
			sort.Strings(pending)
			return fmt.Errorf("not rolled out after 15s: %v (%v)", pending, fc.err())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func withLabel(m map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for key, val := range m {
		out[key] = val
	}
	return out
}

// repository is an image reference without tag or digest.
func repository(image string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		image = image[:i]
	}
	return image
}
