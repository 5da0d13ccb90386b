package pin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/chartpin/chartpin/discover"
	"github.com/chartpin/chartpin/resolver"
)

var valueText = regexp.MustCompile(`^ ?["']?[A-Za-z0-9_.:/@~-]*["']? ?$`)

// FuzzPin feeds arbitrary values.yaml bytes through discovery and a pin
// write (offline, from a lock built for whatever was discovered). Either
// Plan fails and nothing is written, or every byte outside the pins and
// tags it reports is unchanged, and a second run is a no-op.
func FuzzPin(f *testing.F) {
	inputs := []string{
		edgeValues,
		"image:\n  repository: a/b\n  tag: \"1\"\n  digest: \"\"\n",
		"a: {repository: x/y, tag: '2', digest: ''}\n",
		"x:\n  image: nginx:1.27@sha256:0000000000000000000000000000000000000000000000000000000000000001\n",
		"x:\n  repository: r/s\n  tag: 1.0@sha256:0000000000000000000000000000000000000000000000000000000000000001\n",
		"x:\r\n  repository: r/s\r\n  tag: v1\r\n  sha: \"\"\r\n",
		"b: &a\n  repository: r/s\n  tag: \"1\"\n  digest: &d ''\nc: *a\nd:\n  repository: r/t\n  tag: \"1\"\n  digest: *d\n",
		"---\n# c\nx:\n  repository: r/s # c\n  tag: \"1\"   # c\n  digest:   # c\n---\ny: 1\n",
	}
	for _, name := range []string{"quoting", "jellyfin"} {
		if data, err := os.ReadFile(filepath.Join("testdata", name, "original", "values.yaml")); err == nil {
			inputs = append(inputs, string(data))
		}
	}
	for _, s := range inputs {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, values []byte) {
		dir := t.TempDir()
		chart := []byte("apiVersion: v2\nname: fuzz\nversion: 1.0.0\nappVersion: 1.0.0\n")
		if err := os.WriteFile(filepath.Join(dir, "Chart.yaml"), chart, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "values.yaml"), values, 0o644); err != nil {
			t.Fatal(err)
		}
		pins, err := discover.Chart(dir, nil)
		if err != nil {
			return // bad input is refused before anything else happens
		}
		var lock bytes.Buffer
		seen := map[string]bool{}
		for _, p := range pins {
			if p.Problem != "" || seen[p.Ref()] {
				continue
			}
			seen[p.Ref()] = true
			norm, err := resolver.Normalize(p.Ref())
			if err != nil {
				continue
			}
			sum := sha256.Sum256([]byte(norm))
			fmt.Fprintf(&lock, "%q: sha256:%s\n", norm, hex.EncodeToString(sum[:]))
		}
		l, err := resolver.ParseLock("fuzz.lock", lock.Bytes())
		if err != nil {
			t.Fatalf("lock built from discovery does not parse: %v\n%s", err, lock.String())
		}
		opts := Options{ChartDirs: []string{dir}, Resolver: resolver.NewOffline(l), RewriteCopies: true}
		res, err := Plan(context.Background(), opts)
		if err != nil {
			after, _ := os.ReadFile(filepath.Join(dir, "values.yaml"))
			if !bytes.Equal(after, values) {
				t.Fatalf("Plan failed (%v) and values.yaml changed", err)
			}
			return
		}
		if err := res.Apply(); err != nil {
			t.Fatal(err)
		}
		after, err := os.ReadFile(filepath.Join(dir, "values.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		allowed := map[int]int{} // line → column of the value written there
		for _, c := range res.Charts {
			for _, p := range c.Pins {
				if p.Changed {
					allowed[p.Line] = 1
				}
				if p.TagLine > 0 {
					allowed[p.TagLine] = 1
				}
			}
			for _, cp := range c.Copies {
				allowed[cp.Line] = 1
			}
		}
		for _, p := range pins {
			if c, ok := allowed[p.Line]; ok && p.Column > 0 && (c == 1 || p.Column < c) {
				allowed[p.Line] = p.Column
			}
		}
		bl, al := lines(values), lines(after)
		if len(bl) != len(al) {
			t.Fatalf("line count %d -> %d\nbefore:\n%q\nafter:\n%q", len(bl), len(al), values, after)
		}
		for i := range bl {
			if bl[i] == al[i] {
				continue
			}
			col, ok := allowed[i+1]
			if !ok {
				t.Fatalf("line %d changed but no pin there was reported:\n-%q\n+%q", i+1, bl[i], al[i])
			}
			// yaml.v3 columns count characters; compare the bytes of the
			// characters before the value.
			pre := []rune(bl[i])
			if col-1 <= len(pre) && !strings.HasPrefix(al[i], string(pre[:col-1])) {
				t.Fatalf("line %d changed before the pin's column %d:\n-%q\n+%q", i+1, col, bl[i], al[i])
			}
			// What changed between the common prefix and suffix is value text
			// only (a digest, a tag, quotes, the blank before a new value).
			a, b := bl[i], al[i]
			for len(a) > 0 && len(b) > 0 && a[0] == b[0] {
				a, b = a[1:], b[1:]
			}
			for len(a) > 0 && len(b) > 0 && a[len(a)-1] == b[len(b)-1] {
				a, b = a[:len(a)-1], b[:len(b)-1]
			}
			if !valueText.MatchString(a) || !valueText.MatchString(b) {
				t.Fatalf("line %d: %q replaced by %q, which is more than a value:\n-%q\n+%q", i+1, a, b, bl[i], al[i])
			}
		}
		res2, err := Plan(context.Background(), opts)
		if err != nil {
			t.Fatalf("second run failed: %v\nafter:\n%s", err, after)
		}
		if res2.Changed() {
			t.Fatalf("second run is not a no-op:\n%s", res2.Diff())
		}
	})
}
