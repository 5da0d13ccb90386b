package kubetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// daemonSetNodes is how many nodes a DaemonSet runs a pod on.
const daemonSetNodes = 2

// Controllers stands in for the Deployment, ReplicaSet, DaemonSet and
// StatefulSet controllers and the kubelet, which this API server does not
// run. A workload whose generation is not observed yet gets a ReplicaSet for
// its pod template (Deployments: Helm's wait looks for it), ready pods of
// that template in place of the old ones, each container reporting the
// digest its image pulled (imageID, as a kubelet reports it), and a
// completed rollout status. A DaemonSet runs on two nodes.
//
// A nil *Controllers (no cluster) has no errors, no rollouts and nothing to wait for.
type Controllers struct {
	// Client acts as the controllers (usually the admin).
	Client kubernetes.Interface
	// Namespaces are the namespaces whose workloads roll.
	Namespaces []string
	// Pull names the digest a tagged image reference pulls now (called
	// concurrently); an image pinned by digest always pulls that digest.
	// Nil: a tag fails.
	Pull func(image string) (digest string, err error)
	// Stuck makes new generations observed but never rolled out (no pod
	// updated), as when new pods never start.
	Stuck atomic.Bool

	mu     sync.Mutex
	errs   []error
	rolled int
}

// rollout is a workload whose last generation is not observed yet.
type rollout struct {
	name string // "Deployment ns/name"
	roll func(context.Context) error
}

// Run rolls workloads in the background until stop is called.
func (c *Controllers) Run() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			// A pass is not cancelled by stop (a request cut mid-body makes
			// client-go log an error); stop waits for it instead.
			pctx, cancelPass := context.WithTimeout(context.Background(), 10*time.Second)
			c.record(c.pass(pctx))
			cancelPass()
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return func() { cancel(); <-done }
}

// Start settles the workloads (Settle) and rolls them in the background
// until tb ends.
func (c *Controllers) Start(tb testing.TB, ctx context.Context) {
	tb.Helper()
	if err := c.Settle(ctx); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Run())
}

// Settle is one synchronous pass: every workload not observed yet rolls
// out now. It fails when one did not.
func (c *Controllers) Settle(ctx context.Context) error {
	errs := c.pass(ctx)
	c.record(errs)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stand-in controllers: %w", err)
	}
	pending, err := c.pending(ctx)
	if err != nil {
		return err
	}
	if len(pending) > 0 {
		return fmt.Errorf("stand-in controllers: not rolled out after a pass: %v", pending)
	}
	return nil
}

// WaitObserved waits (up to 15s) until every workload has its last
// generation observed, as the minutes between two CronJob ticks would, and
// returns the first error the stand-in hit.
func (c *Controllers) WaitObserved(ctx context.Context) error {
	if c == nil {
		return nil
	}
	const limit = 15 * time.Second
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		pending, err := c.pending(ctx)
		if err != nil {
			return fmt.Errorf("%w (%v)", err, c.Err())
		}
		if len(pending) == 0 {
			return c.Err()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not rolled out after %s: %v (%v)", limit, pending, c.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Err is the first error the stand-in hit (nil when none).
func (c *Controllers) Err() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.errs) == 0 {
		return nil
	}
	return fmt.Errorf("stand-in controllers: %w (and %d more)", c.errs[0], len(c.errs)-1)
}

// Rollouts is how many rollouts the stand-in completed so far.
func (c *Controllers) Rollouts() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rolled
}

func (c *Controllers) record(errs []error) {
	if len(errs) == 0 {
		return
	}
	c.mu.Lock()
	c.errs = append(c.errs, errs...)
	c.mu.Unlock()
}

func (c *Controllers) done() {
	c.mu.Lock()
	c.rolled++
	c.mu.Unlock()
}

// pass rolls every workload not observed yet, five at a time (as
// kube-controller-manager's --concurrent-deployment-syncs). A conflict or a
// workload gone is a race with the client under test, retried on the next pass.
func (c *Controllers) pass(ctx context.Context) []error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	sem := make(chan struct{}, 5)
	for _, ns := range c.Namespaces {
		rs, err := c.unobserved(ctx, ns)
		if err != nil {
			if ctx.Err() == nil {
				fail(err)
			}
			continue
		}
		for _, r := range rs {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				if err := r.roll(ctx); err != nil && ctx.Err() == nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
					fail(fmt.Errorf("%s: %w", r.name, err))
				}
			}()
		}
	}
	wg.Wait()
	return errs
}

// pending names the workloads not observed yet, sorted.
func (c *Controllers) pending(ctx context.Context) ([]string, error) {
	var out []string
	for _, ns := range c.Namespaces {
		rs, err := c.unobserved(ctx, ns)
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			out = append(out, r.name)
		}
	}
	sort.Strings(out)
	return out, nil
}

func (c *Controllers) unobserved(ctx context.Context, ns string) ([]rollout, error) {
	var out []rollout
	deps, err := c.Client.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing deployments in %s: %w", ns, err)
	}
	for i := range deps.Items {
		if d := &deps.Items[i]; d.Status.ObservedGeneration < d.Generation {
			out = append(out, rollout{"Deployment " + ns + "/" + d.Name, func(ctx context.Context) error { return c.rollDeployment(ctx, d) }})
		}
	}
	dss, err := c.Client.AppsV1().DaemonSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing daemonsets in %s: %w", ns, err)
	}
	for i := range dss.Items {
		if d := &dss.Items[i]; d.Status.ObservedGeneration < d.Generation {
			out = append(out, rollout{"DaemonSet " + ns + "/" + d.Name, func(ctx context.Context) error { return c.rollDaemonSet(ctx, d) }})
		}
	}
	sts, err := c.Client.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing statefulsets in %s: %w", ns, err)
	}
	for i := range sts.Items {
		if s := &sts.Items[i]; s.Status.ObservedGeneration < s.Generation {
			out = append(out, rollout{"StatefulSet " + ns + "/" + s.Name, func(ctx context.Context) error { return c.rollStatefulSet(ctx, s) }})
		}
	}
	return out, nil
}

func (c *Controllers) rollDeployment(ctx context.Context, d *appsv1.Deployment) error {
	if c.Stuck.Load() {
		d.Status.ObservedGeneration, d.Status.UpdatedReplicas = d.Generation, 0
		_, err := c.Client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
		return err
	}
	hash := templateHash(d.Spec.Template)
	rsName := d.Name + "-" + hash
	replicas := replicasOf(d.Spec.Replicas)
	rs, err := c.Client.AppsV1().ReplicaSets(d.Namespace).Get(ctx, rsName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		tpl := *d.Spec.Template.DeepCopy()
		tpl.Labels = withLabel(tpl.Labels, "pod-template-hash", hash)
		sel := d.Spec.Selector.DeepCopy()
		sel.MatchLabels = withLabel(sel.MatchLabels, "pod-template-hash", hash)
		rs, err = c.Client.AppsV1().ReplicaSets(d.Namespace).Create(ctx, &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: rsName, Namespace: d.Namespace, Labels: tpl.Labels,
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
			Spec: appsv1.ReplicaSetSpec{Replicas: &replicas, Selector: sel, Template: tpl},
		}, metav1.CreateOptions{})
	}
	if err != nil {
		return err
	}
	owner := metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))
	if err := c.replacePods(ctx, d.Namespace, d.Spec.Selector, rsName, int(replicas), rs.Spec.Template, owner); err != nil {
		return err
	}
	rs.Status = appsv1.ReplicaSetStatus{Replicas: replicas, FullyLabeledReplicas: replicas, ReadyReplicas: replicas,
		AvailableReplicas: replicas, ObservedGeneration: rs.Generation}
	if _, err := c.Client.AppsV1().ReplicaSets(d.Namespace).UpdateStatus(ctx, rs, metav1.UpdateOptions{}); err != nil {
		return err
	}
	// Old ReplicaSets scale away.
	all, err := c.Client.AppsV1().ReplicaSets(d.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, old := range all.Items {
		if old.Name != rsName && metav1.IsControlledBy(&old, d) {
			if err := c.Client.AppsV1().ReplicaSets(d.Namespace).Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: replicas, UpdatedReplicas: replicas,
		ReadyReplicas: replicas, AvailableReplicas: replicas}
	if _, err := c.Client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
		return err
	}
	c.done()
	return nil
}

func (c *Controllers) rollDaemonSet(ctx context.Context, d *appsv1.DaemonSet) error {
	if c.Stuck.Load() {
		d.Status.ObservedGeneration, d.Status.UpdatedNumberScheduled = d.Generation, 0
		_, err := c.Client.AppsV1().DaemonSets(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
		return err
	}
	hash := templateHash(d.Spec.Template)
	tpl := *d.Spec.Template.DeepCopy()
	tpl.Labels = withLabel(tpl.Labels, "controller-revision-hash", hash)
	owner := metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("DaemonSet"))
	if err := c.replacePods(ctx, d.Namespace, d.Spec.Selector, d.Name+"-"+hash, daemonSetNodes, tpl, owner); err != nil {
		return err
	}
	const n = daemonSetNodes
	d.Status = appsv1.DaemonSetStatus{ObservedGeneration: d.Generation, DesiredNumberScheduled: n, CurrentNumberScheduled: n,
		UpdatedNumberScheduled: n, NumberReady: n, NumberAvailable: n}
	if _, err := c.Client.AppsV1().DaemonSets(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
		return err
	}
	c.done()
	return nil
}

func (c *Controllers) rollStatefulSet(ctx context.Context, s *appsv1.StatefulSet) error {
	if c.Stuck.Load() {
		s.Status.ObservedGeneration, s.Status.UpdatedReplicas = s.Generation, 0
		_, err := c.Client.AppsV1().StatefulSets(s.Namespace).UpdateStatus(ctx, s, metav1.UpdateOptions{})
		return err
	}
	rev := s.Name + "-" + templateHash(s.Spec.Template)
	replicas := replicasOf(s.Spec.Replicas)
	tpl := *s.Spec.Template.DeepCopy()
	tpl.Labels = withLabel(tpl.Labels, "controller-revision-hash", rev)
	owner := metav1.NewControllerRef(s, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))
	if err := c.replacePods(ctx, s.Namespace, s.Spec.Selector, rev, int(replicas), tpl, owner); err != nil {
		return err
	}
	s.Status = appsv1.StatefulSetStatus{ObservedGeneration: s.Generation, Replicas: replicas, ReadyReplicas: replicas,
		CurrentReplicas: replicas, UpdatedReplicas: replicas, AvailableReplicas: replicas, CurrentRevision: rev, UpdateRevision: rev}
	if _, err := c.Client.AppsV1().StatefulSets(s.Namespace).UpdateStatus(ctx, s, metav1.UpdateOptions{}); err != nil {
		return err
	}
	c.done()
	return nil
}

// replacePods deletes the workload's pods of other templates and creates n
// ready pods named prefix-i from tpl, each container reporting the digest
// its image pulled.
func (c *Controllers) replacePods(ctx context.Context, ns string, sel *metav1.LabelSelector, prefix string, n int, tpl corev1.PodTemplateSpec, owner *metav1.OwnerReference) error {
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(sel)})
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Name, prefix+"-") {
			have[p.Name] = true
			continue
		}
		if err := c.Client.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("%s-%d", prefix, i)
		if have[name] {
			continue
		}
		p, err := c.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: tpl.Labels, OwnerReferences: []metav1.OwnerReference{*owner}},
			Spec:       *tpl.Spec.DeepCopy(),
		}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		for _, ctr := range tpl.Spec.Containers {
			digest, err := c.pull(ctr.Image)
			if err != nil {
				return fmt.Errorf("pod %s/%s container %s: %w", ns, name, ctr.Name, err)
			}
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
				Name: ctr.Name, Image: ctr.Image, ImageID: repository(ctr.Image) + "@" + digest, Ready: true,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}},
			})
		}
		if _, err := c.Client.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

func (c *Controllers) pull(image string) (string, error) {
	if _, d, ok := strings.Cut(image, "@"); ok {
		return d, nil
	}
	if c.Pull != nil {
		return c.Pull(image)
	}
	return "", fmt.Errorf("image %s: no Pull to name the digest of a tag", image)
}

func replicasOf(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

func templateHash(tpl corev1.PodTemplateSpec) string {
	b, _ := json.Marshal(tpl)
	h := fnv.New32a()
	h.Write(b)
	return fmt.Sprintf("%08x", h.Sum32())
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
