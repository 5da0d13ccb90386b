package drift

import (
	"context"
	"errors"
	"fmt"

	"github.com/chartpin/chartpin/internal/fanout"
	"github.com/chartpin/chartpin/signature"
)

// checkSignatures turns an OK, DRIFT or ACKNOWLEDGED item whose pinned
// digest, or a DRIFT item whose new digest, has no valid signature into
// UNSIGNED; a registry error while reading signatures is UNRESOLVED. An
// acknowledged drift keeps its pin, so only the pinned digest is checked.
// Offline, a digest the lock records no signature of is noted, not judged.
func (c *checker) checkSignatures(ctx context.Context) {
	var items []*Item
	for i := range c.rep.Items {
		it := &c.rep.Items[i]
		if it.Pin.Verifies() && (it.Status == OK || it.Status == Drift || it.Status == Acknowledged) {
			items = append(items, it)
		}
	}
	if len(items) == 0 {
		return
	}
	if c.o.Signatures == nil {
		c.rep.Notes = append(c.rep.Notes, fmt.Sprintf("%d pin(s) with verify: were not checked for signatures: the registry was not asked", len(items)))
		return
	}
	policies := map[signature.Spec]*signature.Policy{}
	policyErrs := map[signature.Spec]error{}
	var keys []sigLookup
	for _, it := range items {
		k := specOf(it)
		if _, ok := policies[k]; !ok && policyErrs[k] == nil {
			policies[k], policyErrs[k] = signature.Load(k)
		}
		if policyErrs[k] == nil {
			for _, d := range digestsToVerify(it) {
				keys = append(keys, sigLookup{k, it.repo, d})
			}
		}
	}
	// One lookup per policy, repository and digest in the whole run.
	_, errs := fanout.Map(keys, func(k sigLookup) (struct{}, error) {
		_, err := c.o.Signatures.Check(ctx, policies[k.spec], k.repo, k.digest)
		return struct{}{}, err
	})
	unrecorded := 0
	for _, it := range items {
		if c.judgeSignatures(it, policyErrs[specOf(it)], errs) {
			unrecorded++
		}
	}
	if unrecorded > 0 {
		c.rep.Notes = append(c.rep.Notes, fmt.Sprintf("%d pin(s) with verify: were not checked for signatures: the digest lock file records no signature for them; run drift online to check them", unrecorded))
	}
}

// sigLookup is one signature check: a policy, a repository and a digest.
type sigLookup struct {
	spec         signature.Spec
	repo, digest string
}

// digestsToVerify is the pinned digest, and a drifted float's new one.
func digestsToVerify(it *Item) []string {
	ds := []string{it.Pinned}
	if it.Status == Drift && it.Current != it.Pinned {
		ds = append(ds, it.Current)
	}
	return ds
}

// judgeSignatures sets the item's status from its policy's load error and
// its lookups' errors; it reports whether the lock recorded no signature
// for a digest the item needs (an offline run notes those, not judges).
func (c *checker) judgeSignatures(it *Item, policyErr error, errs map[sigLookup]error) (unrecorded bool) {
	if policyErr != nil {
		what := "verify key"
		if it.Pin.VerifyKey == "" {
			what = "verify trusted root"
		}
		it.Status = Unsigned
		it.Message = fmt.Sprintf("%s (%s): %v", what, c.at(it), policyErr)
		return false
	}
	missing := false
	for i, d := range digestsToVerify(it) {
		err := errs[sigLookup{specOf(it), it.repo, d}]
		if errors.Is(err, signature.ErrNotRecorded) {
			missing = true
			continue
		}
		if err == nil {
			continue
		}
		which := "the pinned digest"
		if i > 0 {
			which = fmt.Sprintf("%s now resolves to %s (pinned %s); the new digest", it.Float, d, it.Pinned)
		}
		it.Status, it.Message = Unsigned, fmt.Sprintf("%s (verify: at %s): %v", which, c.at(it), err)
		if !errors.Is(err, signature.ErrUnsigned) {
			it.Status, it.Message = Unresolved, fmt.Sprintf("%s: checking its signature: %v", which, err)
		}
		return false
	}
	return missing
}

// at is where the item's verify: is configured.
func (c *checker) at(it *Item) string {
	if cfg := c.configs[it.Chart]; cfg != nil {
		return cfg.At(it.Pin.ConfigLine)
	}
	return "verify:"
}

// specOf is the verify: policy of an item's pin.
func specOf(it *Item) signature.Spec {
	p := it.Pin
	return signature.Spec{Key: p.VerifyKey, Identity: p.VerifyIdentity, Issuer: p.VerifyIssuer, TrustedRoot: p.VerifyTrustedRoot}
}
