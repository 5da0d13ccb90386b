package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/chartpin/chartpin/signature"
)

// verify refuses, before any write, every re-image to a digest without a
// valid signature under its target's verify: policy (a follower's is its
// leader's): the whole workload keeps what it runs. Each repository, digest
// and key is looked up once per tick; a registry error fails the tick with
// nothing changed, as a resolve error does.
func (r *Reconciler) verify(ctx context.Context, f *File, plans []*plan) error {
	byID := map[string]*Target{}
	for i := range f.Targets {
		byID[f.Targets[i].ID] = &f.Targets[i]
	}
	for _, p := range plans {
		if p.action != ActionReimage {
			continue
		}
		var refused []string
		for i, t := range p.targets {
			d := &p.dec[i]
			lead := t
			if t.Follows != "" {
				lead = byID[t.Follows]
			}
			if d.Action != ActionReimage || lead.Verify == nil {
				continue
			}
			if r.o.Signatures == nil {
				refused = append(refused, fmt.Sprintf("container %s: %s: %v: verify: needs the registry to read its signature", t.Container, d.Image, signature.ErrUnsigned))
				continue
			}
			_, err := r.o.Signatures.Check(ctx, lead.Verify.policy, repository(d.Image), d.Latest)
			switch {
			case errors.Is(err, signature.ErrUnsigned):
				refused = append(refused, fmt.Sprintf("container %s: %v", t.Container, err))
			case err != nil:
				return fmt.Errorf("%s:%d: target %q: checking the signature of %s: %w; nothing was changed: check that the registry serves its signatures, then re-run",
					f.Path, lead.Line, lead.ID, d.Image, err)
			}
		}
		if len(refused) == 0 {
			continue
		}
		p.action, p.refused = ActionRefuse, strings.Join(refused, "; ")
		for i := range p.dec {
			p.dec[i].Action = ActionRefuse
			p.dec[i].Reason = "not re-imaged: a new digest is not signed; " + p.dec[i].Reason
		}
	}
	return nil
}

func (r *Reconciler) refuseError(p *plan) error {
	k := p.w.key
	return fmt.Errorf("%s was not re-imaged, it keeps running %s: %s", k, joinRunning(p), p.refused)
}
