package upgrade

import (
	"fmt"
	"regexp"
	"sort"

	"github.com/chartpin/chartpin/discover"
)

// digestSuffixRe is a value that carries its pin: tag@sha256:… or an image
// reference repo[:tag]@sha256:….
var digestSuffixRe = regexp.MustCompile(`@sha256:[0-9a-f]{64}$`)

// shadowedPins lists the pins (dotted paths) set in user-supplied values: a
// non-empty pin key by discover's rule (digest, sha, prodDigest,
// digestChroot, …), or any value holding tag@digest or image@digest.
// Reset-then-reuse re-applies them on every upgrade, so the chart's own pin
// at that path never reaches the release, even when the two agree today
// (docs/design.md#pins-live-in-chart-defaults).
func shadowedPins(user map[string]any) []string {
	var out []string
	var walk func(path string, key string, v any)
	walk = func(path, key string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				p := k
				if path != "" {
					p = path + "." + k
				}
				walk(p, k, x)
			}
		case []any:
			for i, x := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), "", x)
			}
		case string:
			if v != "" && (discover.IsPinKey(key) || digestSuffixRe.MatchString(v)) {
				out = append(out, path)
			}
		}
	}
	walk("", "", user)
	sort.Strings(out)
	return out
}
