package reconcile

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/chartpin/chartpin/internal/registrytest"
	"github.com/chartpin/chartpin/resolver"
)

var (
	deploymentsGVR  = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	daemonSetsGVR   = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}
	statefulSetsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}
	podsGVR         = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
)

// env is one test cluster (fake clientset) and one registry.
type env struct {
	t      testing.TB
	reg    *registrytest.Registry
	client *fake.Clientset
	logs   *bytes.Buffer

	mu sync.Mutex
	// progress decides, per workload name, whether the fake controller rolls
	// a patched spec out (default true).
	stuck map[string]bool
	// reports, per workload name, the imageID the fake kubelet reports for
	// every container after a rollout, whatever the spec says (e.g. an image
	// config ID "sha256:cfg1", or a stale repo digest).
	reports map[string]string
}

func newEnv(t testing.TB, objs ...runtime.Object) *env {
	t.Helper()
	e := &env{t: t, reg: registrytest.New(t), client: fake.NewSimpleClientset(objs...), logs: &bytes.Buffer{}, stuck: map[string]bool{}, reports: map[string]string{}}
	e.controller()
	return e
}

func (e *env) add(objs ...runtime.Object) {
	e.t.Helper()
	for _, o := range objs {
		if err := e.client.Tracker().Add(o); err != nil {
			e.t.Fatal(err)
		}
	}
}

// resolver is a fresh Remote (one tick's worth of dedup) for the env's registry.
func (e *env) resolver() *resolver.Remote {
	e.t.Helper()
	return e.resolverWith(resolver.Options{})
}

// resolverWith is resolver with o, speaking plain HTTP to the env's registry too.
func (e *env) resolverWith(o resolver.Options) *resolver.Remote {
	e.t.Helper()
	o.InsecureRegistries = append(o.InsecureRegistries, e.reg.Host)
	r, err := resolver.New(o)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// reconciler is a Reconciler on the env's cluster with fast polls, a fixed
// clock and the env's log; each set adjusts the options after that.
func (e *env) reconciler(res resolver.Interface, set ...func(*Options)) *Reconciler {
	e.t.Helper()
	o := DefaultOptions()
	o.Logger = slog.New(slog.NewTextHandler(e.logs, nil))
	o.PollInterval, o.RolloutTimeout, o.RequestTimeout = time.Millisecond, 2*time.Second, 5*time.Second
	o.Now = func() time.Time { return time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC) }
	for _, s := range set {
		s(&o)
	}
	r, err := New(e.client, res, o)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// options is DefaultOptions adjusted by set.
func options(set func(*Options)) Options {
	o := DefaultOptions()
	set(&o)
	return o
}

// tick runs one tick with a fresh resolver and clears the recorded actions
// and registry requests first.
func (e *env) tick(f *File, set ...func(*Options)) (*Result, error) {
	e.t.Helper()
	e.client.ClearActions()
	e.reg.Reset()
	return e.reconciler(e.resolver(), set...).Tick(context.Background(), f)
}

func (e *env) setStuck(name string, stuck bool) {
	e.mu.Lock()
	e.stuck[name] = stuck
	e.mu.Unlock()
}

func (e *env) setReports(name, imageID string) {
	e.mu.Lock()
	e.reports[name] = imageID
	e.mu.Unlock()
}

// controller stands in for the Deployment/DaemonSet/StatefulSet controllers
// and the kubelet: a patch that changes the pod template bumps the
// generation and, unless the workload is stuck, completes the rollout and
// points the pods' imageIDs at the new spec images.
func (e *env) controller() {
	for _, res := range []string{"deployments", "daemonsets", "statefulsets"} {
		e.client.PrependReactor("patch", res, func(a k8stesting.Action) (bool, runtime.Object, error) {
			pa := a.(k8stesting.PatchAction)
			before, err := e.client.Tracker().Get(a.GetResource(), a.GetNamespace(), pa.GetName())
			if err != nil {
				return true, nil, err
			}
			handled, obj, err := k8stesting.ObjectReaction(e.client.Tracker())(a)
			if err != nil || !handled {
				return handled, obj, err
			}
			e.mu.Lock()
			stuck := e.stuck[pa.GetName()]
			e.mu.Unlock()
			obj, err = e.rollout(before, obj, stuck)
			return true, obj, err
		})
	}
}

func (e *env) rollout(before, after runtime.Object, stuck bool) (runtime.Object, error) {
	tr := e.client.Tracker()
	switch a := after.(type) {
	case *appsv1.Deployment:
		b := before.(*appsv1.Deployment)
		if equalJSON(b.Spec.Template, a.Spec.Template) {
			return a, nil
		}
		a.Generation = b.Generation + 1
		if stuck {
			a.Status.ObservedGeneration = a.Generation
			a.Status.UpdatedReplicas = 0
		} else {
			a.Status.ObservedGeneration = a.Generation
			n := *a.Spec.Replicas
			a.Status.Replicas, a.Status.UpdatedReplicas, a.Status.AvailableReplicas, a.Status.ReadyReplicas = n, n, n, n
			e.repod(a.Namespace, a.Name, a.Spec.Template.Spec)
		}
		return a, tr.Update(deploymentsGVR, a, a.Namespace)
	case *appsv1.DaemonSet:
		b := before.(*appsv1.DaemonSet)
		if equalJSON(b.Spec.Template, a.Spec.Template) {
			return a, nil
		}
		a.Generation = b.Generation + 1
		a.Status.ObservedGeneration = a.Generation
		if stuck {
			a.Status.UpdatedNumberScheduled = 0
		} else {
			n := a.Status.DesiredNumberScheduled
			a.Status.UpdatedNumberScheduled, a.Status.NumberAvailable, a.Status.NumberReady = n, n, n
			e.repod(a.Namespace, a.Name, a.Spec.Template.Spec)
		}
		return a, tr.Update(daemonSetsGVR, a, a.Namespace)
	case *appsv1.StatefulSet:
		b := before.(*appsv1.StatefulSet)
		if equalJSON(b.Spec.Template, a.Spec.Template) {
			return a, nil
		}
		a.Generation = b.Generation + 1
		a.Status.ObservedGeneration = a.Generation
		if stuck {
			a.Status.UpdatedReplicas = 0
			a.Status.UpdateRevision = "rev2"
		} else {
			n := *a.Spec.Replicas
			a.Status.Replicas, a.Status.UpdatedReplicas, a.Status.ReadyReplicas, a.Status.AvailableReplicas = n, n, n, n
			a.Status.CurrentRevision, a.Status.UpdateRevision = "rev2", "rev2"
			e.repod(a.Namespace, a.Name, a.Spec.Template.Spec)
		}
		return a, tr.Update(statefulSetsGVR, a, a.Namespace)
	}
	return after, nil
}

// repod makes the workload's pods run the spec images (pulled by digest).
func (e *env) repod(ns, app string, spec corev1.PodSpec) {
	list, err := e.client.Tracker().List(podsGVR, schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, ns)
	if err != nil {
		e.t.Error(err)
		return
	}
	e.mu.Lock()
	reports := e.reports[app]
	e.mu.Unlock()
	for _, p := range list.(*corev1.PodList).Items {
		if p.Labels["app"] != app {
			continue
		}
		for i, cs := range p.Status.ContainerStatuses {
			if reports != "" {
				p.Status.ContainerStatuses[i].ImageID = reports
				continue
			}
			for _, c := range spec.Containers {
				if c.Name == cs.Name && strings.Contains(c.Image, "@") {
					p.Status.ContainerStatuses[i].ImageID = c.Image
					p.Status.ContainerStatuses[i].Image = c.Image
				}
			}
		}
		if err := e.client.Tracker().Update(podsGVR, &p, ns); err != nil {
			e.t.Error(err)
		}
	}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// --- fixtures ---

func ptr[T any](v T) *T { return &v }

func containers(pairs ...string) []corev1.Container {
	var out []corev1.Container
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, corev1.Container{Name: pairs[i], Image: pairs[i+1]})
	}
	return out
}

func meta(ns, name string, ann map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 1, UID: types.UID("uid-" + ns + "-" + name), Annotations: ann}
}

func template(name string, cs []corev1.Container) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
		Spec:       corev1.PodSpec{Containers: cs},
	}
}

// deployment is settled: every replica updated and available.
func deployment(ns, name string, replicas int32, cs []corev1.Container) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: meta(ns, name, nil),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: template(name, cs),
		},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: replicas, UpdatedReplicas: replicas, ReadyReplicas: replicas, AvailableReplicas: replicas},
	}
}

func daemonSet(ns, name string, nodes int32, cs []corev1.Container) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		ObjectMeta: meta(ns, name, nil),
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: template(name, cs),
		},
		Status: appsv1.DaemonSetStatus{ObservedGeneration: 1, DesiredNumberScheduled: nodes, CurrentNumberScheduled: nodes, UpdatedNumberScheduled: nodes, NumberAvailable: nodes, NumberReady: nodes},
	}
}

func statefulSet(ns, name string, replicas int32, cs []corev1.Container) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: meta(ns, name, nil),
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: template(name, cs),
		},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: 1, Replicas: replicas, UpdatedReplicas: replicas, ReadyReplicas: replicas, AvailableReplicas: replicas, CurrentRevision: "rev1", UpdateRevision: "rev1"},
	}
}

// pod is a ready pod of app whose containers run imageIDs (container=imageID pairs).
func pod(ns, app string, i int, pairs ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", app, i), Labels: map[string]string{"app": app}},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		},
	}
	for j := 0; j+1 < len(pairs); j += 2 {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: pairs[j]})
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: pairs[j], Ready: true, ImageID: pairs[j+1]})
	}
	return p
}

// --- assertions on what the API received ---

type call struct{ verb, resource, name string }

func (c call) String() string { return c.verb + " " + c.resource + " " + c.name }

func (e *env) calls() []call {
	var out []call
	for _, a := range e.client.Actions() {
		c := call{verb: a.GetVerb(), resource: a.GetResource().Resource}
		switch a := a.(type) {
		case k8stesting.GetAction:
			c.name = a.GetName()
		case k8stesting.PatchAction:
			c.name = a.GetName()
		}
		out = append(out, c)
	}
	return out
}

func (e *env) count(verb, resource string) int {
	n := 0
	for _, c := range e.calls() {
		if c.verb == verb && (resource == "" || c.resource == resource) {
			n++
		}
	}
	return n
}

// patches returns the patch bodies sent for one workload, in order.
func (e *env) patches(name string) []map[string]any {
	var out []map[string]any
	for _, a := range e.client.Actions() {
		if pa, ok := a.(k8stesting.PatchAction); ok && pa.GetName() == name {
			var m map[string]any
			if err := json.Unmarshal(pa.GetPatch(), &m); err != nil {
				e.t.Fatal(err)
			}
			out = append(out, m)
		}
	}
	return out
}

// patchContainers lists name=image of the containers in a re-image patch.
func patchContainers(p map[string]any) []string {
	spec, _ := p["spec"].(map[string]any)
	tmpl, _ := spec["template"].(map[string]any)
	ps, _ := tmpl["spec"].(map[string]any)
	list, _ := ps["containers"].([]any)
	var out []string
	for _, c := range list {
		m := c.(map[string]any)
		out = append(out, fmt.Sprint(m["name"], "=", m["image"]))
	}
	return out
}

func (e *env) events() []corev1.Event {
	var out []corev1.Event
	for _, a := range e.client.Actions() {
		if ca, ok := a.(k8stesting.CreateAction); ok && a.GetResource().Resource == "events" {
			out = append(out, *ca.GetObject().(*corev1.Event))
		}
	}
	return out
}

func (e *env) deployment(ns, name string) *appsv1.Deployment {
	e.t.Helper()
	obj, err := e.client.Tracker().Get(deploymentsGVR, ns, name)
	if err != nil {
		e.t.Fatal(err)
	}
	return obj.(*appsv1.Deployment)
}

func targetsFile(t *testing.T, yaml string) *File {
	t.Helper()
	f, err := ParseTargets("targets.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return f
}
