package pin

import (
	"context"
	"errors"
	"fmt"

	"github.com/chartpin/chartpin/internal/fanout"
	"github.com/chartpin/chartpin/resolver"
	"github.com/chartpin/chartpin/signature"
)

// checkSignatures refuses every digest about to be written for an image
// with verify: unless a signature under its policy verifies: one signature
// lookup per new digest, none for a pin that stays (it was checked when it
// was written). The key or trusted root is read only when a digest moves.
func checkSignatures(ctx context.Context, charts []*chart, checker *signature.Checker) {
	policies := map[signature.Spec]*signature.Policy{}
	policyErrs := map[signature.Spec]error{}
	var moving []*state
	for _, c := range charts {
		for _, s := range c.pins {
			if !s.Verifies() || s.refused != nil || s.held != "" || s.Problem != "" || s.newDigest == "" || s.newDigest == s.Digest {
				continue
			}
			moving = append(moving, s)
			if spec := specOf(s); policies[spec] == nil && policyErrs[spec] == nil {
				policies[spec], policyErrs[spec] = signature.Load(spec)
			}
		}
	}
	if len(moving) > 0 && checker == nil {
		for _, s := range moving {
			s.refuse(s.ref, fmt.Errorf("refusing to pin %s: %w: verify: needs the registry to read its signature; run online", s.newDigest, signature.ErrUnsigned))
		}
		return
	}
	type lookup struct {
		spec               signature.Spec
		repository, digest string
	}
	lookupOf := func(s *state) lookup { return lookup{specOf(s), resolver.RepositoryOf(s.img.Ref), s.newDigest} }
	seen := map[lookup]bool{}
	var lookups []lookup
	for _, s := range moving {
		if err := policyErrs[specOf(s)]; err != nil {
			what := "verify key"
			if s.VerifyKey == "" {
				what = "verify trusted root"
			}
			s.refuse(s.ref, fmt.Errorf("refusing to pin %s: %s (%s): %w", s.newDigest, what, s.cfg.At(s.ConfigLine), err))
			continue
		}
		if l := lookupOf(s); !seen[l] {
			seen[l] = true
			lookups = append(lookups, l)
		}
	}
	verified, errs := fanout.Map(lookups, func(l lookup) (signature.Verified, error) {
		return checker.Check(ctx, policies[l.spec], l.repository, l.digest)
	})
	for _, s := range moving {
		if s.refused != nil {
			continue
		}
		l := lookupOf(s)
		if err := errs[l]; err != nil {
			if errors.Is(err, signature.ErrUnsigned) {
				err = fmt.Errorf("refusing to pin %s: %w", s.newDigest, err)
			} else {
				err = fmt.Errorf("refusing to pin %s: checking its signature: %w", s.newDigest, err)
			}
			s.refuse(s.ref, err)
			continue
		}
		s.signature = verified[l].Signature
	}
}

// specOf is the verify: policy of a pin.
func specOf(s *state) signature.Spec {
	return signature.Spec{Key: s.VerifyKey, Identity: s.VerifyIdentity, Issuer: s.VerifyIssuer, TrustedRoot: s.VerifyTrustedRoot}
}
