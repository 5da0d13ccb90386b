package reconcile

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

type workloadKey struct{ kind, namespace, name string }

func (k workloadKey) String() string { return k.kind + " " + k.namespace + "/" + k.name }

// kubectl spells the workload as kind/name.
func (k workloadKey) ref() string {
	switch k.kind {
	case KindDeployment:
		return "deployment/" + k.name
	case KindDaemonSet:
		return "daemonset/" + k.name
	default:
		return "statefulset/" + k.name
	}
}

// workload is the part of a Deployment, DaemonSet or StatefulSet the reconcile reads.
type workload struct {
	key         workloadKey
	uid         types.UID
	version     string
	generation  int64
	observed    int64
	annotations map[string]string
	selector    *metav1.LabelSelector
	pod         corev1.PodSpec
	// settled is empty when the rollout is complete and every replica is
	// available; otherwise it says what is still pending.
	settled string
	// failed is set when the controller gave up (ProgressDeadlineExceeded).
	failed string
}

func getWorkload(ctx context.Context, c kubernetes.Interface, k workloadKey) (*workload, error) {
	switch k.kind {
	case KindDeployment:
		d, err := c.AppsV1().Deployments(k.namespace).Get(ctx, k.name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return fromDeployment(d), nil
	case KindDaemonSet:
		d, err := c.AppsV1().DaemonSets(k.namespace).Get(ctx, k.name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return fromDaemonSet(d), nil
	case KindStatefulSet:
		s, err := c.AppsV1().StatefulSets(k.namespace).Get(ctx, k.name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return fromStatefulSet(s), nil
	}
	return nil, fmt.Errorf("kind %q is not supported", k.kind)
}

func patchWorkload(ctx context.Context, c kubernetes.Interface, k workloadKey, patch []byte) (*workload, error) {
	opts := metav1.PatchOptions{FieldManager: "chartpin-reconcile"}
	switch k.kind {
	case KindDeployment:
		d, err := c.AppsV1().Deployments(k.namespace).Patch(ctx, k.name, types.StrategicMergePatchType, patch, opts)
		if err != nil {
			return nil, err
		}
		return fromDeployment(d), nil
	case KindDaemonSet:
		d, err := c.AppsV1().DaemonSets(k.namespace).Patch(ctx, k.name, types.StrategicMergePatchType, patch, opts)
		if err != nil {
			return nil, err
		}
		return fromDaemonSet(d), nil
	case KindStatefulSet:
		s, err := c.AppsV1().StatefulSets(k.namespace).Patch(ctx, k.name, types.StrategicMergePatchType, patch, opts)
		if err != nil {
			return nil, err
		}
		return fromStatefulSet(s), nil
	}
	return nil, fmt.Errorf("kind %q is not supported", k.kind)
}

func base(kind string, m metav1.ObjectMeta, sel *metav1.LabelSelector, pod corev1.PodSpec) *workload {
	return &workload{
		key:         workloadKey{kind, m.Namespace, m.Name},
		uid:         m.UID,
		version:     m.ResourceVersion,
		generation:  m.Generation,
		annotations: m.Annotations,
		selector:    sel,
		pod:         pod,
	}
}

// The readiness rules follow kubectl rollout status.
func fromDeployment(d *appsv1.Deployment) *workload {
	w := base(KindDeployment, d.ObjectMeta, d.Spec.Selector, d.Spec.Template.Spec)
	w.observed = d.Status.ObservedGeneration
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	for _, c := range s.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Reason == "ProgressDeadlineExceeded" {
			w.failed = "progress deadline exceeded: " + c.Message
		}
	}
	switch {
	case s.ObservedGeneration < d.Generation:
		w.settled = fmt.Sprintf("controller has not observed generation %d yet (at %d)", d.Generation, s.ObservedGeneration)
	case s.UpdatedReplicas < want:
		w.settled = fmt.Sprintf("%d of %d replicas updated", s.UpdatedReplicas, want)
	case s.Replicas > s.UpdatedReplicas:
		w.settled = fmt.Sprintf("%d old replicas pending termination", s.Replicas-s.UpdatedReplicas)
	case s.AvailableReplicas < want:
		w.settled = fmt.Sprintf("%d of %d replicas available", s.AvailableReplicas, want)
	}
	return w
}

func fromDaemonSet(d *appsv1.DaemonSet) *workload {
	w := base(KindDaemonSet, d.ObjectMeta, d.Spec.Selector, d.Spec.Template.Spec)
	w.observed = d.Status.ObservedGeneration
	s := d.Status
	switch {
	case s.ObservedGeneration < d.Generation:
		w.settled = fmt.Sprintf("controller has not observed generation %d yet (at %d)", d.Generation, s.ObservedGeneration)
	case s.UpdatedNumberScheduled < s.DesiredNumberScheduled:
		w.settled = fmt.Sprintf("%d of %d pods updated", s.UpdatedNumberScheduled, s.DesiredNumberScheduled)
	case s.NumberAvailable < s.DesiredNumberScheduled:
		w.settled = fmt.Sprintf("%d of %d updated pods available", s.NumberAvailable, s.DesiredNumberScheduled)
	}
	return w
}

func fromStatefulSet(st *appsv1.StatefulSet) *workload {
	w := base(KindStatefulSet, st.ObjectMeta, st.Spec.Selector, st.Spec.Template.Spec)
	w.observed = st.Status.ObservedGeneration
	want := int32(1)
	if st.Spec.Replicas != nil {
		want = *st.Spec.Replicas
	}
	s := st.Status
	switch {
	case s.ObservedGeneration < st.Generation:
		w.settled = fmt.Sprintf("controller has not observed generation %d yet (at %d)", st.Generation, s.ObservedGeneration)
	case s.ReadyReplicas < want:
		w.settled = fmt.Sprintf("%d of %d replicas ready", s.ReadyReplicas, want)
	case s.UpdatedReplicas < want:
		w.settled = fmt.Sprintf("%d of %d replicas updated", s.UpdatedReplicas, want)
	case s.UpdateRevision != "" && s.CurrentRevision != s.UpdateRevision:
		w.settled = fmt.Sprintf("revision %s not yet current (at %s)", s.UpdateRevision, s.CurrentRevision)
	}
	return w
}

// container finds a container (or init container) by name.
func (w *workload) container(name string) (*corev1.Container, bool) {
	for i := range w.pod.Containers {
		if w.pod.Containers[i].Name == name {
			return &w.pod.Containers[i], false
		}
	}
	for i := range w.pod.InitContainers {
		if w.pod.InitContainers[i].Name == name {
			return &w.pod.InitContainers[i], true
		}
	}
	return nil, false
}
