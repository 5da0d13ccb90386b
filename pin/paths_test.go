package pin

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/chartpin/chartpin/internal/registrytest"
	"github.com/chartpin/chartpin/resolver"
	"github.com/chartpin/chartpin/yamledit"
)

// TestQuotedKeyPaths: an image block under a key holding dots is discovered
// and pinned, and the paths chartpin prints for it are yamledit paths: they
// name the written scalar again, and --set-tag takes the image path it lists.
func TestQuotedKeyPaths(t *testing.T) {
	reg := registrytest.New(t)
	d1 := reg.PushIndex(t, "team/app", "1.0", "linux/amd64", "linux/arm64")
	d2 := reg.PushIndex(t, "team/app", "2.0", "linux/amd64", "linux/arm64")
	r, err := resolver.New(resolver.Options{InsecureRegistries: []string{reg.Host}})
	if err != nil {
		t.Fatal(err)
	}
	block := "    image:\n      repository: " + reg.Host + "/team/app\n      tag: \"1.0\"\n      digest: \"\"\n"
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"Chart.yaml":  goodChart,
		"values.yaml": "podLabels:\n  \"app.kubernetes.io\":\n" + block + "plain:\n  web:\n" + block,
	})
	values := filepath.Join(dir, "values.yaml")
	opts := Options{ChartDirs: []string{dir}, Resolver: r, Bump: "none"}

	res, err := Plan(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Apply(); err != nil {
		t.Fatal(err)
	}
	pins := res.Charts[0].Pins
	want := []string{`podLabels."app.kubernetes.io".image.digest`, "plain.web.image.digest"}
	if len(pins) != len(want) {
		t.Fatalf("pins = %+v, want %v", pins, want)
	}
	text := res.Text()
	for i, p := range pins {
		if p.Path != want[i] || !p.Changed || p.NewDigest != d1 {
			t.Errorf("pin %d = %s changed=%v new=%s, want %s pinned to %s", i, p.Path, p.Changed, p.NewDigest, want[i], d1)
		}
		if !strings.Contains(text, " "+p.Path+" ") {
			t.Errorf("text output does not print %s:\n%s", p.Path, text)
		}
	}
	checkAt(t, values, map[string]string{want[0]: d1, want[1]: d1,
		`podLabels."app.kubernetes.io".image.tag`: "1.0", "plain.web.image.tag": "1.0"})

	// An unknown --set-tag path lists the image paths; each one listed moves its own tag.
	_, err = Plan(context.Background(), Options{ChartDirs: []string{dir}, Resolver: r, Bump: "none", SetTags: map[string]string{"nope": "2.0"}})
	m := regexp.MustCompile(`images with a tag: (.*)\)$`).FindStringSubmatch(errText(err))
	if m == nil {
		t.Fatalf("unknown --set-tag path: %v, want the image paths listed", err)
	}
	listed := strings.Split(m[1], ", ")
	if strings.Join(listed, " | ") != `plain.web.image | podLabels."app.kubernetes.io".image` {
		t.Fatalf("listed image paths %q", listed)
	}
	for _, at := range listed {
		before, _ := os.ReadFile(values)
		opts.SetTags = map[string]string{at: "2.0"}
		res, err := Plan(context.Background(), opts)
		if err != nil {
			t.Fatalf("--set-tag %s=2.0: %v", at, err)
		}
		if err := res.Apply(); err != nil {
			t.Fatal(err)
		}
		// Only the named block moved: its tag and digest, one line each.
		checkAt(t, values, map[string]string{at + ".tag": "2.0", at + ".digest": d2})
		after, _ := os.ReadFile(values)
		if n := changedLines(before, after); n != 2 {
			t.Errorf("--set-tag %s=2.0 changed %d lines, want 2:\n%s", at, n, after)
		}
	}
}

// checkAt reads values.yaml back and checks the scalar at each path.
func checkAt(t *testing.T, values string, want map[string]string) {
	t.Helper()
	data, err := os.ReadFile(values)
	if err != nil {
		t.Fatal(err)
	}
	f, err := yamledit.Parse(values, data)
	if err != nil {
		t.Fatal(err)
	}
	for path, v := range want {
		s, err := f.Get(path)
		if err != nil || s.Value != v {
			t.Errorf("%s = %q, %v; want %q", path, s.Value, err, v)
		}
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func changedLines(a, b []byte) int {
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	n := 0
	for i := range al {
		if i >= len(bl) || al[i] != bl[i] {
			n++
		}
	}
	return n + max(0, len(bl)-len(al))
}
