package upgrade

import "sort"

// pinKeys are the values keys that carry a digest pin.
var pinKeys = map[string]bool{"digest": true, "prodDigest": true, "sha": true}

// shadowedPins lists the pins (dotted paths) set in user-supplied values.
// Reset-then-reuse re-applies them on every upgrade, so the chart's own pin
// at that path never reaches the release, even when the two agree today
// (lesson 2: pins live in chart defaults).
func shadowedPins(user map[string]any) []string {
	var out []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			path := k
			if prefix != "" {
				path = prefix + "." + k
			}
			switch v := v.(type) {
			case map[string]any:
				walk(path, v)
			case string:
				if pinKeys[k] && v != "" {
					out = append(out, path)
				}
			}
		}
	}
	walk("", user)
	sort.Strings(out)
	return out
}
