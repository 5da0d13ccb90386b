package pin

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/chartpin/chartpin/internal/golden"
	"github.com/chartpin/chartpin/resolver"
)

// goldenCase is testdata/<case>/case.yaml: the flags of the run.
type goldenCase struct {
	Config        bool              `yaml:"config"` // use original/chartpin.yaml
	SetTags       map[string]string `yaml:"setTags"`
	RewriteCopies bool              `yaml:"rewriteCopies"`
	Bump          string            `yaml:"bump"`
	Version       string            `yaml:"version"`
	AppVersion    string            `yaml:"appVersion"`
}

func offline(t *testing.T, lockPath string) resolver.Interface {
	t.Helper()
	lock, err := resolver.ReadLock(lockPath)
	if err != nil {
		t.Fatal(err)
	}
	return resolver.NewOffline(lock)
}

// TestGolden runs every testdata/<case> with an original/ tree: the output
// tree must equal expected/ byte for byte (an extra or missing write fails),
// values.yaml keeps its mode, and a second run changes nothing.
func TestGolden(t *testing.T) {
	dirs, err := filepath.Glob("testdata/*/original")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no golden cases: %v", err)
	}
	for _, orig := range dirs {
		caseDir := filepath.Dir(orig)
		t.Run(filepath.Base(caseDir), func(t *testing.T) {
			var gc goldenCase
			data, err := os.ReadFile(filepath.Join(caseDir, "case.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			if err := yaml.Unmarshal(data, &gc); err != nil {
				t.Fatal(err)
			}
			work := t.TempDir()
			golden.WriteTree(t, work, golden.ReadTree(t, orig))
			values := filepath.Join(work, "values.yaml")
			if err := os.Chmod(values, 0o640); err != nil {
				t.Fatal(err)
			}
			opts := Options{ChartDirs: []string{work}, Resolver: offline(t, filepath.Join(caseDir, "digests.yaml")),
				SetTags: gc.SetTags, RewriteCopies: gc.RewriteCopies, Bump: gc.Bump, Version: gc.Version, AppVersion: gc.AppVersion}
			if gc.Config {
				opts.ConfigPath, opts.ChartDirs = filepath.Join(work, "chartpin.yaml"), nil
			}
			res, err := Plan(context.Background(), opts)
			if err != nil {
				t.Fatal(err)
			}
			if err := res.Apply(); err != nil {
				t.Fatal(err)
			}
			golden.Tree(t, work, filepath.Join(caseDir, "expected"))
			if fi, err := os.Stat(values); err != nil || fi.Mode().Perm() != 0o640 {
				t.Errorf("values.yaml mode %v, want 0640 kept", fi.Mode())
			}
			// Every byte outside the pins, tags and version fields is kept:
			// the changed lines are exactly the reported ones.
			checkChangedLines(t, res, orig, work)

			res2, err := Plan(context.Background(), opts)
			if err != nil {
				t.Fatalf("second run: %v", err)
			}
			if res2.Changed() {
				t.Errorf("second run is not a no-op:\n%s", res2.Diff())
			}
		})
	}
}

// checkChangedLines asserts that values.yaml changed only on lines of pins
// the result reports as changed (or their tag lines), and that the file has
// as many lines as before.
func checkChangedLines(t *testing.T, res *Result, orig, work string) {
	t.Helper()
	before, _ := os.ReadFile(filepath.Join(orig, "values.yaml"))
	after, _ := os.ReadFile(filepath.Join(work, "values.yaml"))
	bl, al := lines(before), lines(after)
	if len(bl) != len(al) {
		t.Errorf("values.yaml has %d lines, had %d", len(al), len(bl))
		return
	}
	allowed := map[int]bool{}
	for _, c := range res.Charts {
		for _, p := range c.Pins {
			if p.Changed {
				allowed[p.Line] = true
			}
			if p.TagLine > 0 {
				allowed[p.TagLine] = true
			}
		}
		for _, cp := range c.Copies {
			if strings.HasSuffix(cp.File, "values.yaml") {
				allowed[cp.Line] = true
			}
		}
	}
	for i := range bl {
		if bl[i] != al[i] && !allowed[i+1] {
			t.Errorf("values.yaml:%d changed but no pin there was reported:\n-%s+%s", i+1, bl[i], al[i])
		}
	}
}
