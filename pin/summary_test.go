package pin

import (
	"strings"
	"testing"
)

// The step summary and PR body are Markdown: platform strings (from a
// registry or a lock file) are escaped there, so none can start a workflow
// command line, open HTML, or break the table.
func TestMarkdownEscapesPlatforms(t *testing.T) {
	r := &Result{Charts: []ChartResult{{Name: "app", Dir: "/c", Pins: []Change{{
		File: "/c/values.yaml", Line: 4, Path: "image.digest", Image: "ghcr.io/a/app:1.0", Tag: "1.0", Changed: true,
		NewDigest: "sha256:" + strings.Repeat("ab", 32),
		Platforms: []string{"linux/amd64\n::error::x", "<img src=x onerror=alert(1)>", "a|b", "[x](javascript:y)"},
	}}}}}
	md := r.Markdown()
	for _, bad := range []string{"\n::error::x", "<img", "a|b", "[x]"} {
		if strings.Contains(md, bad) {
			t.Errorf("summary holds %q unescaped:\n%s", bad, md)
		}
	}
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "| `ghcr.io/a/app`") && strings.Count(strings.ReplaceAll(line, `\|`, ""), "|") != 5 {
			t.Errorf("table row split by a platform: %q", line)
		}
	}
	if !strings.Contains(md, `linux/amd64 ::error::x, &lt;img src=x onerror=alert(1)&gt;, a\|b, \[x\](javascript:y)`) {
		t.Errorf("platforms cell:\n%s", md)
	}
}
