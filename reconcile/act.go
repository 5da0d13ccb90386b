package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/internal/fanout"
)

// act carries out the plans: annotations, patches, Events, rollout waits.
func (r *Reconciler) act(ctx context.Context, plans []*plan, res *Result) error {
	var errs []error
	var waits []*plan
	for _, p := range plans {
		k := p.w.key
		switch p.action {
		case ActionSkip:
			n := p.skips + 1
			if err := r.annotate(ctx, k, map[string]any{SkipsAnnotation: strconv.Itoa(n)}); err != nil {
				errs = append(errs, err)
				continue
			}
			if n > r.o.MaxSkips {
				err := r.skipStreakError(p, n)
				errs = append(errs, err, r.event(ctx, p.w, corev1.EventTypeWarning, "ReimageSkipStreak", err.Error()))
			}
		case ActionNone:
			// Success re-arms: a workload that runs the newest digest and is
			// settled has nothing pending.
			clear := map[string]any{}
			for _, a := range []string{AttemptsAnnotation, SkipsAnnotation} {
				if _, ok := p.w.annotations[a]; ok {
					clear[a] = nil
				}
			}
			if len(clear) > 0 {
				errs = append(errs, r.annotate(ctx, k, clear))
			}
		case ActionLockout:
			err := r.lockoutError(p)
			errs = append(errs, err, r.event(ctx, p.w, corev1.EventTypeWarning, "ReimageLockedOut", err.Error()))
		case ActionRefuse:
			err := r.refuseError(p)
			errs = append(errs, err, r.event(ctx, p.w, corev1.EventTypeWarning, "ReimageRefused", err.Error()))
		case ActionReimage:
			landed, perrs := r.reimage(ctx, p, res)
			errs = append(errs, perrs...)
			if landed {
				waits = append(waits, p)
			}
		}
	}
	errs = append(errs, r.waitAll(ctx, waits, res)...)
	return errors.Join(errs...)
}

// reimage patches p's workload to the newest digests and records the
// Event; landed says the patch reached the spec as sent, so its rollout is
// waited for.
func (r *Reconciler) reimage(ctx context.Context, p *plan, res *Result) (landed bool, errs []error) {
	k := p.w.key
	patch, err := r.reimagePatch(p)
	if err != nil {
		return false, []error{err}
	}
	rctx, cancel := context.WithTimeout(ctx, r.o.RequestTimeout)
	w, err := patchWorkload(rctx, r.client, k, patch)
	cancel()
	if err != nil {
		return false, []error{fmt.Errorf("re-imaging %s: %w; check the reconcile Role grants patch on it", k, err)}
	}
	p.w.generation = w.generation
	res.Patched = append(res.Patched, k.String())
	errs = append(errs, r.event(ctx, p.w, corev1.EventTypeNormal, "Reimaged", r.reimageMessage(p)))
	if err := r.landed(p, w); err != nil {
		// Rewritten on the way in (e.g. a mutating webhook): every tick
		// would patch again. The attempt stays counted.
		return false, append(errs, err, r.event(ctx, p.w, corev1.EventTypeWarning, "ReimageNotApplied", err.Error()))
	}
	return true, errs
}

// waitAll waits for the re-imaged workloads' rollouts and re-arms those
// that completed.
func (r *Reconciler) waitAll(ctx context.Context, waits []*plan, res *Result) []error {
	var errs []error
	// Rollouts run in parallel, so the tick needs one --rollout-timeout, not
	// one per workload (docs/design.md#deadlines-with-slack).
	_, waitErrs := fanout.Map(waits, func(p *plan) (struct{}, error) { return struct{}{}, r.wait(ctx, p) })
	for _, p := range waits {
		if err := waitErrs[p]; err != nil {
			errs = append(errs, err, r.event(ctx, p.w, corev1.EventTypeWarning, "ReimageRolloutFailed", err.Error()))
			continue
		}
		if p.restart {
			// A completed restart proves nothing: only a later tick that sees
			// the pods on the newest digest re-arms (ActionNone). Otherwise a
			// restart that never changes what pods report would roll on every
			// tick and never reach the lockout.
			r.o.Logger.Info("restart rolled out; attempt counter kept until a tick sees the newest digest",
				"workload", p.w.key.String(), "attempts", p.attempts+1)
			res.RolledOut = append(res.RolledOut, p.w.key.String())
			continue
		}
		if err := r.annotate(ctx, p.w.key, map[string]any{AttemptsAnnotation: nil}); err != nil {
			errs = append(errs, err)
			continue
		}
		res.RolledOut = append(res.RolledOut, p.w.key.String())
	}
	return errs
}

// landed checks that the API server stored the images the patch named.
func (r *Reconciler) landed(p *plan, stored *workload) error {
	var wrong []string
	for i, t := range p.targets {
		d := p.dec[i]
		if d.Action != ActionReimage {
			continue
		}
		if c, _ := stored.container(t.Container); c == nil || c.Image != d.Image {
			got := "nothing"
			if c != nil {
				got = c.Image
			}
			wrong = append(wrong, fmt.Sprintf("container %s holds %s, not %s", t.Container, got, d.Image))
		}
	}
	if len(wrong) == 0 {
		return nil
	}
	k := p.w.key
	return fmt.Errorf("re-imaging %s did not land: %s (rewritten by a mutating admission webhook?); attempt %d of %d counted (lockout at %d); if the cluster rewrites images to a mirror, set mirror: in the chart's reconcile targets; look with: kubectl -n %s get %s -o yaml",
		k, strings.Join(wrong, "; "), p.attempts+1, r.o.MaxAttempts, r.o.MaxAttempts, k.namespace, k.ref())
}

// dryRunErrors are the failures a real tick would report for these plans.
func (r *Reconciler) dryRunErrors(plans []*plan) error {
	var errs []error
	for _, p := range plans {
		switch {
		case p.action == ActionLockout:
			errs = append(errs, r.lockoutError(p))
		case p.action == ActionRefuse:
			errs = append(errs, r.refuseError(p))
		case p.action == ActionSkip && p.skips+1 > r.o.MaxSkips:
			errs = append(errs, r.skipStreakError(p, p.skips+1))
		}
	}
	return errors.Join(errs...)
}

// reimagePatch is one strategic-merge patch: every container of the workload
// that needs it, plus the attempt counter, incremented before acting.
func (r *Reconciler) reimagePatch(p *plan) ([]byte, error) {
	type container struct {
		Name  string `json:"name"`
		Image string `json:"image"`
	}
	var containers, inits []container
	for i, t := range p.targets {
		d := p.dec[i]
		if d.Action != ActionReimage {
			continue
		}
		if _, init := p.w.container(t.Container); init {
			inits = append(inits, container{t.Container, d.Image})
		} else {
			containers = append(containers, container{t.Container, d.Image})
		}
	}
	podSpec := map[string]any{}
	if len(containers) > 0 {
		podSpec["containers"] = containers
	}
	if len(inits) > 0 {
		podSpec["initContainers"] = inits
	}
	template := map[string]any{"spec": podSpec}
	if p.restart {
		template["metadata"] = map[string]any{"annotations": map[string]string{RestartAnnotation: r.o.Now().UTC().Format(time.RFC3339)}}
	}
	ann := map[string]any{AttemptsAnnotation: strconv.Itoa(p.attempts + 1)}
	if _, ok := p.w.annotations[SkipsAnnotation]; ok {
		ann[SkipsAnnotation] = nil
	}
	return json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": ann},
		"spec":     map[string]any{"template": template},
	})
}

// annotate sets (string) or removes (nil) workload annotations.
func (r *Reconciler) annotate(ctx context.Context, k workloadKey, ann map[string]any) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, r.o.RequestTimeout)
	defer cancel()
	if _, err := patchWorkload(rctx, r.client, k, patch); err != nil {
		return fmt.Errorf("annotating %s: %w; check the reconcile Role grants patch on it", k, err)
	}
	return nil
}

// wait polls the workload until the patched generation is rolled out and
// available. A read error ends the wait as a failure, never as a skip.
func (r *Reconciler) wait(ctx context.Context, p *plan) error {
	k, gen := p.w.key, p.w.generation
	ctx, cancel := context.WithTimeout(ctx, r.o.RolloutTimeout)
	defer cancel()
	tick := time.NewTicker(r.o.PollInterval)
	defer tick.Stop()
	last := "not read yet"
	for {
		rctx, rcancel := context.WithTimeout(ctx, r.o.RequestTimeout)
		w, err := getWorkload(rctx, r.client, k)
		rcancel()
		switch {
		case err != nil && ctx.Err() == nil:
			return fmt.Errorf("waiting for the rollout of %s: %w; attempt %d of %d counted; check the reconcile Role grants get on it",
				k, err, p.attempts+1, r.o.MaxAttempts)
		case err == nil && w.observed >= gen && w.failed != "":
			return r.rolloutError(p, w.failed)
		case err == nil && w.observed >= gen && w.settled == "":
			r.o.Logger.Info("rolled out", "workload", k.String(), "generation", gen)
			return nil
		case err == nil:
			last = w.settled
		}
		select {
		case <-ctx.Done():
			return r.rolloutError(p, fmt.Sprintf("not complete within %s: %s", r.o.RolloutTimeout, last))
		case <-tick.C:
		}
	}
}

func (r *Reconciler) rolloutError(p *plan, why string) error {
	k := p.w.key
	return fmt.Errorf("rollout of %s %s; attempt %d of %d counted (lockout at %d); look with: kubectl -n %s rollout status %s; kubectl -n %s describe %s",
		k, why, p.attempts+1, r.o.MaxAttempts, r.o.MaxAttempts, k.namespace, k.ref(), k.namespace, k.ref())
}

func (r *Reconciler) lockoutError(p *plan) error {
	k := p.w.key
	return failure.Optionf("%s is locked out: %d re-images without a completed rollout ({{MaxAttempts}} %d), so it was not patched; it runs %s, the tag names %s; find out why its rollout fails (kubectl -n %s rollout status %s), then re-arm it: kubectl -n %s annotate %s %s-",
		k, p.attempts, r.o.MaxAttempts, joinRunning(p), p.dec[0].Latest, k.namespace, k.ref(), k.namespace, k.ref(), AttemptsAnnotation)
}

func (r *Reconciler) skipStreakError(p *plan, n int) error {
	k := p.w.key
	sel := ""
	if s, err := metav1.LabelSelectorAsSelector(p.w.selector); err == nil {
		sel = s.String()
	}
	why := p.w.settled
	if p.w.failed != "" {
		why = p.w.failed
	}
	return failure.Optionf("%s was skipped %d ticks in a row ({{MaxSkips}} %d) because it is not settled (%s): its update path is frozen; look with: kubectl -n %s rollout status %s; kubectl -n %s get pods -l %s; kubectl -n %s describe %s",
		k, n, r.o.MaxSkips, why, k.namespace, k.ref(), k.namespace, sel, k.namespace, k.ref())
}

func joinRunning(p *plan) string {
	var all []string
	for _, d := range p.dec {
		all = append(all, d.Running...)
	}
	u := unique(all)
	if len(u) == 0 {
		return "an unknown digest"
	}
	s := u[0]
	for _, x := range u[1:] {
		s += "," + x
	}
	return s
}

func (r *Reconciler) reimageMessage(p *plan) string {
	msg := fmt.Sprintf("chartpin re-imaged by digest (attempt %d of %d):", p.attempts+1, r.o.MaxAttempts)
	for _, d := range p.dec {
		if d.Action == ActionReimage {
			msg += fmt.Sprintf(" %s=%s (%s);", d.Container, d.Image, d.Reason)
		}
	}
	return msg
}

// event records a core/v1 Event on the workload. Failing to record one fails
// the tick: a missing Role rule must not go unnoticed.
func (r *Reconciler) event(ctx context.Context, w *workload, typ, reason, msg string) error {
	now := metav1.NewTime(r.o.Now())
	if len(msg) > 1000 {
		msg = msg[:1000]
	}
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s.%x.%s", w.key.name, now.UnixNano(), utilrand.String(5)),
			Namespace: w.key.namespace,
		},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: "apps/v1", Kind: w.key.kind, Namespace: w.key.namespace, Name: w.key.name,
			UID: w.uid, ResourceVersion: w.version,
		},
		Reason:              reason,
		Message:             msg,
		Type:                typ,
		Source:              corev1.EventSource{Component: "chartpin-reconcile"},
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		ReportingController: "chartpin.dev/reconcile",
		ReportingInstance:   r.o.Instance,
		Action:              reason,
	}
	rctx, cancel := context.WithTimeout(ctx, r.o.RequestTimeout)
	defer cancel()
	if _, err := r.client.CoreV1().Events(w.key.namespace).Create(rctx, ev, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("recording event %s on %s: %w; check the reconcile Role grants create on events", reason, w.key, err)
	}
	r.o.Logger.Debug("event", "workload", w.key.String(), "reason", reason)
	return nil
}
