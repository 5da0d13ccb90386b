package pin

import (
	"context"
	"errors"
	"fmt"

	"github.com/chartpin/chartpin/resolver"
	"github.com/chartpin/chartpin/signature"
)

// checkSignatures refuses every digest about to be written for an image
// with verify: unless a signature by its key verifies: one signature
// lookup per new digest, none for a pin that stays (it was checked when it
// was written). The key is read only when a digest moves.
func checkSignatures(ctx context.Context, charts []*chart, checker *signature.Checker) {
	keys := map[string]*signature.Policy{}
	keyErrs := map[string]error{}
	var moving []*state
	for _, c := range charts {
		for _, s := range c.pins {
			if s.VerifyKey == "" || s.refused != nil || s.held != "" || s.Problem != "" || s.newDigest == "" || s.newDigest == s.Digest {
				continue
			}
			moving = append(moving, s)
			if _, ok := keys[s.VerifyKey]; !ok && keyErrs[s.VerifyKey] == nil {
				keys[s.VerifyKey], keyErrs[s.VerifyKey] = signature.LoadKey(s.VerifyKey)
			}
		}
	}
	if len(moving) > 0 && checker == nil {
		for _, s := range moving {
			s.refuse(s.ref, fmt.Errorf("refusing to pin %s: %w: verify: needs the registry to read its signature; run online", s.newDigest, signature.ErrUnsigned))
		}
		return
	}
	byKey := map[string]*state{}
	var lookups []string
	for _, s := range moving {
		if keyErrs[s.VerifyKey] != nil {
			s.refuse(s.ref, fmt.Errorf("refusing to pin %s: verify key (%s): %w", s.newDigest, s.cfg.At(s.ConfigLine), keyErrs[s.VerifyKey]))
			continue
		}
		k := resolver.RepositoryOf(s.img.Ref) + "\x00" + s.newDigest + "\x00" + s.VerifyKey
		if byKey[k] == nil {
			byKey[k] = s
			lookups = append(lookups, k)
		}
	}
	verified, errs := parallel(lookups, func(k string) (signature.Verified, error) {
		s := byKey[k]
		return checker.Check(ctx, keys[s.VerifyKey], resolver.RepositoryOf(s.img.Ref), s.newDigest)
	})
	for _, s := range moving {
		if s.refused != nil {
			continue
		}
		k := resolver.RepositoryOf(s.img.Ref) + "\x00" + s.newDigest + "\x00" + s.VerifyKey
		if err := errs[k]; err != nil {
			if errors.Is(err, signature.ErrUnsigned) {
				err = fmt.Errorf("refusing to pin %s: %w", s.newDigest, err)
			} else {
				err = fmt.Errorf("refusing to pin %s: checking its signature: %w", s.newDigest, err)
			}
			s.refuse(s.ref, err)
			continue
		}
		s.signature = verified[k].Signature
	}
}
