// Package reconcile is one in-cluster digest-on-update tick: it resolves each
// target's floating tag through the resolver, compares the digest with what
// each workload actually runs (spec image and ready pods' imageID), and
// re-images by digest only when something older runs. It never compares with
// a recorded annotation, and every read error, stuck rollout, skip streak or
// lockout fails the tick (docs/design.md#in-cluster-reconcile).
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/chartpin/chartpin/resolver"

	"github.com/chartpin/chartpin/internal/failure"
)

// Annotations the reconcile keeps on each workload it manages.
const (
	// AttemptsAnnotation counts re-images without a completed rollout (for a
	// restart: until a tick sees the newest digest); at --max-attempts the
	// workload is locked out. Remove it to re-arm.
	AttemptsAnnotation = "chartpin.dev/reconcile-attempts"
	// SkipsAnnotation counts consecutive ticks the workload was not settled.
	SkipsAnnotation = "chartpin.dev/reconcile-skips"
	// RestartAnnotation (pod template) forces a rollout when the spec already
	// names the newest digest but pods still run another one.
	RestartAnnotation = "chartpin.dev/restarted-at"
)

// Action is what a tick did about one target.
type Action string

// Actions.
const (
	ActionNone    Action = "none"    // runs the newest digest
	ActionReimage Action = "reimage" // patched to registry/repository@digest
	ActionSkip    Action = "skip"    // mid-rollout or not Ready: looked at next tick
	ActionLockout Action = "lockout" // --max-attempts reached: re-arm by hand
	ActionRefuse  Action = "refuse"  // a new digest fails its verify: policy: not patched
)

// Decision is the outcome for one target (one container of one workload).
type Decision struct {
	Target    string `json:"target"`
	Workload  string `json:"workload"`
	Container string `json:"container"`
	// Spec is the container image in the workload spec before the tick.
	Spec string `json:"spec"`
	// Running lists the digests seen: the spec's (if pinned) and each ready
	// pod's imageID, deduplicated.
	Running []string `json:"running"`
	// Latest is the digest the tag names now.
	Latest string `json:"latest"`
	// Image is what the container should run: registry/repository@digest.
	Image  string `json:"image"`
	Action Action `json:"action"`
	Reason string `json:"reason"`
	// DryRun marks a decision that was not carried out.
	DryRun bool `json:"dry_run,omitempty"`
}

// Result is everything one tick decided and did.
type Result struct {
	Decisions []Decision `json:"decisions"`
	// Patched lists the workloads re-imaged (one patch each).
	Patched []string `json:"patched,omitempty"`
	// RolledOut lists the re-imaged workloads whose rollout completed.
	RolledOut []string `json:"rolled_out,omitempty"`
}

// Reconciler runs ticks against one cluster and one resolver.
type Reconciler struct {
	client kubernetes.Interface
	res    resolver.Interface
	o      Options
}

// New returns a Reconciler; client and res are required.
func New(client kubernetes.Interface, res resolver.Interface, o Options) (*Reconciler, error) {
	if client == nil || res == nil {
		return nil, errors.New("reconcile: a Kubernetes client and a resolver are both required")
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return &Reconciler{client: client, res: res, o: o.withDefaults()}, nil
}

// plan is what one workload needs this tick.
type plan struct {
	w        *workload
	targets  []*Target
	dec      []Decision
	ok       []bool // per target: already runs the newest digest
	action   Action
	attempts int
	skips    int
	restart  bool
	// refused says which new digests failed their verify: policy.
	refused string
}

// Tick runs one reconcile over f. Reads all happen before any write: a
// resolve or read error returns with nothing changed.
func (r *Reconciler) Tick(ctx context.Context, f *File) (*Result, error) {
	if r.o.Spread > 0 {
		r.o.Logger.Info("spread: waiting before the first request", "delay", r.o.Spread.String())
		if err := r.o.sleep(ctx, r.o.Spread); err != nil {
			return nil, failure.Optionf("waiting %s (spread) before the tick: %w; nothing was changed: the spread window must fit in {{Deadline}}", r.o.Spread, err)
		}
	}
	if err := r.loadPullSecrets(ctx, f); err != nil {
		return nil, err
	}
	images, err := r.resolve(ctx, f)
	if err != nil {
		return nil, err
	}
	plans, err := r.read(ctx, f)
	if err != nil {
		return nil, err
	}
	byID := map[string]resolver.Image{}
	for _, t := range f.Targets {
		if t.Follows == "" {
			byID[t.ID] = images[t.Image]
		}
	}
	for _, t := range f.Targets {
		if t.Follows != "" {
			byID[t.ID] = byID[t.Follows] // same digest, no second request
		}
	}
	children, err := r.indexChildren(ctx, plans, byID)
	if err != nil {
		return nil, err
	}
	res := &Result{}
	for _, p := range plans {
		r.decide(p, byID, children)
	}
	if err := r.verify(ctx, f, plans); err != nil {
		return nil, err
	}
	for _, p := range plans {
		res.Decisions = append(res.Decisions, p.dec...)
	}
	for _, d := range res.Decisions {
		r.o.Logger.Info("decision", "target", d.Target, "workload", d.Workload, "container", d.Container,
			"running", strings.Join(d.Running, ","), "latest", d.Latest, "action", string(d.Action), "reason", d.Reason, "dryRun", r.o.DryRun)
	}
	if r.o.DryRun {
		for i := range res.Decisions {
			res.Decisions[i].DryRun = true
		}
		return res, r.dryRunErrors(plans)
	}
	return res, r.act(ctx, plans, res)
}

// resolve asks the registry (or mirror) once per unique image.
func (r *Reconciler) resolve(ctx context.Context, f *File) (map[string]resolver.Image, error) {
	var refs []string
	for _, t := range f.Targets {
		if t.Follows == "" {
			refs = append(refs, t.Image)
		}
	}
	images, err := resolver.ResolveAll(ctx, r.res, refs)
	if err != nil {
		where := "the registry"
		if f.Mirror != "" {
			where = "the mirror " + f.Mirror
		}
		next := "check that " + where + " serves these tags, then re-run"
		if errors.Is(err, resolver.ErrUnauthorized) {
			next = "check the credentials in the pull secrets the chart names for " + where
		}
		err = fmt.Errorf("%s: resolving targets: %w; nothing was changed: %s", f.Path, err, next)
		return nil, errors.Join(err, r.resolveEvents(ctx, f, images, err))
	}
	return images, nil
}

// resolveEvents records a Warning on each workload whose image did not
// resolve, so that kubectl describe shows why it is not updated.
func (r *Reconciler) resolveEvents(ctx context.Context, f *File, resolved map[string]resolver.Image, err error) error {
	failed := map[string]bool{}
	for _, t := range f.Targets {
		if t.Follows == "" {
			if _, ok := resolved[t.Image]; !ok {
				failed[t.ID] = true
			}
		}
	}
	seen := map[workloadKey]bool{}
	var errs []error
	for _, t := range f.Targets {
		lead := t.ID
		if t.Follows != "" {
			lead = t.Follows
		}
		if !failed[lead] || seen[t.key()] {
			continue
		}
		seen[t.key()] = true
		w := &workload{key: t.key()}
		errs = append(errs, r.event(ctx, w, corev1.EventTypeWarning, "ResolveFailed", err.Error()))
	}
	return errors.Join(errs...)
}

// read gets every workload and its pods; any error fails the tick.
func (r *Reconciler) read(ctx context.Context, f *File) ([]*plan, error) {
	byKey := map[workloadKey]*plan{}
	var plans []*plan
	for i := range f.Targets {
		t := &f.Targets[i]
		p := byKey[t.key()]
		if p == nil {
			p = &plan{}
			byKey[t.key()] = p
			plans = append(plans, p)
		}
		p.targets = append(p.targets, t)
	}
	var errs []error
	for _, p := range plans {
		t := p.targets[0]
		k := t.key()
		rctx, cancel := context.WithTimeout(ctx, r.o.RequestTimeout)
		w, err := getWorkload(rctx, r.client, k)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: reading %s: %w; nothing was changed: check the workload exists and the reconcile Role grants get on it", f.Path, t.Line, k, err))
			continue
		}
		p.w = w
		for _, t := range p.targets {
			if c, _ := w.container(t.Container); c == nil {
				errs = append(errs, fmt.Errorf("%s:%d: target %q: %s has no container %q; nothing was changed: fix the chart's targets or the workload", f.Path, t.Line, t.ID, k, t.Container))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, p := range plans {
		if err := r.readPods(ctx, f, p); err != nil {
			return nil, err
		}
	}
	return plans, nil
}

// running[container] are the digests of the workload's ready pods.
func (r *Reconciler) readPods(ctx context.Context, f *File, p *plan) error {
	w := p.w
	t := p.targets[0]
	if w.selector == nil {
		return fmt.Errorf("%s:%d: %s has no selector; nothing was changed", f.Path, t.Line, w.key)
	}
	sel, err := metav1.LabelSelectorAsSelector(w.selector)
	if err != nil {
		return fmt.Errorf("%s:%d: %s selector: %w; nothing was changed", f.Path, t.Line, w.key, err)
	}
	rctx, cancel := context.WithTimeout(ctx, r.o.RequestTimeout)
	defer cancel()
	pods, err := r.client.CoreV1().Pods(w.key.namespace).List(rctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return fmt.Errorf("%s:%d: listing pods of %s: %w; nothing was changed: check the reconcile Role grants list on pods", f.Path, t.Line, w.key, err)
	}
	p.dec = make([]Decision, len(p.targets))
	for i, t := range p.targets {
		c, _ := w.container(t.Container)
		p.dec[i] = Decision{Target: t.ID, Workload: w.key.String(), Container: t.Container, Spec: c.Image}
	}
	podDigests := make([][]string, len(p.targets))
	for _, pod := range pods.Items {
		if pod.DeletionTimestamp != nil || !podReady(&pod) {
			continue
		}
		for i, t := range p.targets {
			podDigests[i] = append(podDigests[i], imageIDDigest(pod.Status, t.Container))
		}
	}
	for i := range p.dec {
		p.dec[i].Running = podDigests[i] // deduplicated in decide
	}
	return nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// imageIDDigest is the repo digest a container runs ("" when the runtime
// reports no repo digest, e.g. an image loaded by hand).
func imageIDDigest(s corev1.PodStatus, container string) string {
	for _, list := range [][]corev1.ContainerStatus{s.ContainerStatuses, s.InitContainerStatuses} {
		for _, c := range list {
			if c.Name != container {
				continue
			}
			if _, d, ok := strings.Cut(c.ImageID, "@"); ok && strings.HasPrefix(d, "sha256:") {
				return d
			}
			return ""
		}
	}
	return ""
}

// manifestReader is the part of resolver.Remote that reads an index.
type manifestReader interface {
	Manifest(ctx context.Context, ref string) (resolver.Manifest, error)
}

// indexChildren reads, for each newest digest that is an index and that some
// ready pod does not report, the index's child manifests: a runtime may
// report the per-platform manifest it pulled as the imageID. One GET per
// such digest per tick; none when every pod reports the index digest, or
// when the resolver cannot read manifests (offline).
func (r *Reconciler) indexChildren(ctx context.Context, plans []*plan, byID map[string]resolver.Image) (map[string][]string, error) {
	mr, ok := r.res.(manifestReader)
	if !ok {
		return nil, nil
	}
	out := map[string][]string{}
	for _, p := range plans {
		for i, t := range p.targets {
			img := byID[t.ID]
			if _, done := out[img.Digest]; done || (img.MediaType != "" && !img.IsIndex()) {
				continue
			}
			// A pod on the spec's own older pin runs that build: no GET needed.
			spec := specDigest(p.dec[i].Spec)
			if !slices.ContainsFunc(p.dec[i].Running, func(d string) bool { return d != "" && d != img.Digest && d != spec }) {
				continue
			}
			m, err := mr.Manifest(ctx, resolver.DigestRef(img.Ref, img.Digest))
			if err != nil {
				return nil, fmt.Errorf("reading the index %s to compare pods' per-platform imageIDs: %w; nothing was changed", resolver.DigestRef(img.Ref, img.Digest), err)
			}
			out[img.Digest] = m.Children
		}
	}
	return out, nil
}

// decide fills p.dec and p.action from the spec, the pods and the digests.
// A pod digest that is a child manifest of the newest index runs it.
func (r *Reconciler) decide(p *plan, byID map[string]resolver.Image, children map[string][]string) {
	w := p.w
	need := false
	p.ok = make([]bool, len(p.targets))
	for i, t := range p.targets {
		img := byID[t.ID]
		repo := repository(img.Ref)
		d := &p.dec[i]
		pods := slices.Clone(d.Running)
		for j, pd := range pods {
			if slices.Contains(children[img.Digest], pd) {
				pods[j] = img.Digest // the platform's manifest of the newest index
			}
		}
		d.Latest = img.Digest
		d.Image = repo + "@" + img.Digest
		d.Running = runningDigests(d.Spec, pods)
		ok, reason := compare(d.Spec, pods, repo, img.Digest)
		d.Reason = reason
		p.ok[i] = ok
		if !ok {
			need = true
			if d.Spec == d.Image {
				p.restart = true
			}
		}
	}
	p.attempts = atoi(w.annotations[AttemptsAnnotation])
	p.skips = atoi(w.annotations[SkipsAnnotation])
	prefix := ""
	switch {
	case w.settled != "" || w.failed != "":
		p.action = ActionSkip
		why := w.settled
		if w.failed != "" {
			why = w.failed
		}
		prefix = "not settled: " + why + "; "
	case !need:
		p.action = ActionNone
	case p.attempts >= r.o.MaxAttempts:
		p.action = ActionLockout
		prefix = fmt.Sprintf("locked out after %d attempts; ", p.attempts)
	default:
		p.action = ActionReimage
	}
	for i := range p.dec {
		d := &p.dec[i]
		d.Action = p.action
		d.Reason = prefix + d.Reason
		switch {
		case p.action != ActionReimage || !p.ok[i]:
		case d.Spec == d.Image:
			// This container is right; a sibling in the same workload is not.
			d.Action = ActionNone
		case specDigest(d.Spec) == "":
			// It runs the newest digest under the tag, but the workload rolls
			// anyway: pin it in the same patch.
			d.Reason += "; pinned in the same patch as a sibling container"
		}
	}
}

// compare reports whether a container runs latest, and why (not). A pod
// whose imageID carries no repo digest ("" here, e.g. an image config ID) is
// no evidence of an older build: under a spec pinned to latest it never
// forces a restart, which would repeat on every tick.
func compare(spec string, pods []string, repo, latest string) (bool, string) {
	specRepo, specDig := repository(spec), specDigest(spec)
	known, unknown := knownDigests(pods)
	switch {
	case specRepo != repo:
		return false, fmt.Sprintf("spec runs %s, the target is %s", specRepo, repo)
	case specDig != "" && specDig != latest:
		return false, "tag moved: spec pins " + short(specDig)
	case len(known) > 1:
		return false, fmt.Sprintf("skew: ready pods run %d different digests", len(known))
	case len(known) == 1 && known[0] != latest && specDig == "":
		return false, "spec names the tag and pods run an older digest (chart re-rendered the tag): re-pin"
	case len(known) == 1 && known[0] != latest:
		return false, "pods run " + short(known[0]) + " under a spec pinned to the newest digest: restart"
	case specDig == "" && len(known) == 0:
		return false, "spec names the tag and no ready pod shows a digest: pin"
	case specDig == "" && unknown > 0:
		return false, fmt.Sprintf("spec names the tag and %d ready pods show no repo digest: pin", unknown)
	case specDig == "":
		return true, "pods already run the newest digest under the tag (not rolled for identical content)"
	case unknown > 0:
		return true, fmt.Sprintf("spec pins the newest digest; %d ready pods report an imageID without a repo digest (no evidence of an older build): not restarted", unknown)
	}
	return true, "runs the newest digest"
}

// knownDigests splits pod digests into the distinct repo digests (sorted) and
// a count of pods that report none.
func knownDigests(pods []string) (known []string, unknown int) {
	var ds []string
	for _, d := range pods {
		if d == "" {
			unknown++
			continue
		}
		ds = append(ds, d)
	}
	return unique(ds), unknown
}

func runningDigests(spec string, pods []string) []string {
	all := append([]string(nil), pods...)
	if d := specDigest(spec); d != "" {
		all = append(all, d)
	}
	return unique(all)
}

func unique(list []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range list {
		if s == "" {
			s = "unknown"
		}
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// repository is registry/repository of ref, normalized (docker.io spelled out).
func repository(ref string) string {
	n, err := resolver.Normalize(ref)
	if err != nil {
		n = ref
	}
	return resolver.RepositoryOf(n)
}

func specDigest(ref string) string {
	_, _, d := resolver.SplitRef(ref)
	return d
}

func short(d string) string {
	if len(d) > 19 {
		return d[:19]
	}
	return d
}

func atoi(s string) int {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 {
		return 0
	}
	return n
}
