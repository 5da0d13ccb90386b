package adopt_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chartpin/chartpin/adopt"
	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/internal/golden"
	"github.com/chartpin/chartpin/internal/registrytest"
	"github.com/chartpin/chartpin/pin"
	"github.com/chartpin/chartpin/resolver"
)

func offline(t *testing.T, path string) resolver.Interface {
	t.Helper()
	lock, err := resolver.ReadLock(path)
	if err != nil {
		t.Fatal(err)
	}
	return resolver.NewOffline(lock)
}

// TestAdoptionGolden adopts each testdata/<case>/original/chart: init
// writes chartpin.yaml beside it, then pin runs with that config and the
// case's lock. The whole tree must equal expected/ byte for byte: the
// config init wrote, and exactly the lines a maintainer expects pin to
// move (release-time pins only; held, empty and unresolvable pins stay).
// A second pin run changes nothing.
func TestAdoptionGolden(t *testing.T) {
	cases, err := filepath.Glob("testdata/*/original")
	if err != nil || len(cases) < 4 {
		t.Fatalf("golden cases %v: %v", cases, err)
	}
	for _, orig := range cases {
		caseDir := filepath.Dir(orig)
		t.Run(filepath.Base(caseDir), func(t *testing.T) {
			work := t.TempDir()
			golden.WriteTree(t, work, golden.ReadTree(t, orig))
			cfg := filepath.Join(work, "chartpin.yaml")
			r := offline(t, filepath.Join(caseDir, "digests.yaml"))
			ctx := context.Background()
			res, err := adopt.Plan(ctx, adopt.Options{ConfigPath: cfg, ChartDirs: []string{filepath.Join(work, "chart")}, Resolver: r})
			if err != nil {
				t.Fatal(err)
			}
			if err := res.Write(false); err != nil {
				t.Fatal(err)
			}
			plan, err := pin.Plan(ctx, pin.Options{ConfigPath: cfg, Resolver: r})
			if err != nil {
				t.Fatal(err)
			}
			if err := plan.Apply(); err != nil {
				t.Fatal(err)
			}
			golden.Tree(t, work, filepath.Join(caseDir, "expected"))
			// Every pin that moved was an entry init wrote to pin: never a
			// held one, never one it commented out.
			moves := map[string]adopt.Decision{}
			for _, c := range res.Charts {
				for _, e := range c.Entries {
					moves[e.Pin.Path] = e.Decision
				}
			}
			for _, c := range plan.Charts {
				for _, p := range c.Pins {
					if p.Changed && moves[p.Path] != adopt.Pin {
						t.Errorf("pin moved %s, which init decided to %s", p.Path, moves[p.Path])
					}
				}
			}
			again, err := pin.Plan(ctx, pin.Options{ConfigPath: cfg, Resolver: r})
			if err != nil || again.Changed() {
				t.Errorf("second pin run: %v\n%s", err, again.Diff())
			}
		})
	}
}

// init never overwrites a config: an existing file is an input error and
// keeps its bytes; force replaces it.
func TestWriteNeverOverwrites(t *testing.T) {
	work := t.TempDir()
	golden.WriteTree(t, work, golden.ReadTree(t, "testdata/fulcio/original"))
	cfg := filepath.Join(work, "chartpin.yaml")
	if err := os.WriteFile(cfg, []byte("# mine\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := adopt.Plan(context.Background(), adopt.Options{ConfigPath: cfg, ChartDirs: []string{filepath.Join(work, "chart")},
		Resolver: offline(t, "testdata/fulcio/digests.yaml")})
	if err != nil {
		t.Fatal(err)
	}
	err = res.Write(false)
	if failure.Code(err) != 2 || !strings.Contains(err.Error(), "Force replaces it, DryRun prints") {
		t.Errorf("write over an existing file: %v", err)
	}
	if b, _ := os.ReadFile(cfg); string(b) != "# mine\n" {
		t.Errorf("existing config changed: %q", b)
	}
	if err := res.Write(true); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(cfg); !bytes.Equal(b, res.Data) {
		t.Errorf("--force did not replace the file: %q", b)
	}
}

// Online, init costs one HEAD per set pin's float and one GET per pinned
// digest (its platforms, for the comment); an empty pin, a latest tag and
// a pin it cannot resolve cost nothing.
func TestRequestsOnline(t *testing.T) {
	reg := registrytest.New(t)
	api := reg.PushIndex(t, "team/api", "1.0", "linux/amd64", "linux/arm64")
	reg.PushIndex(t, "team/debug", "latest", "linux/amd64")
	reg.PushIndex(t, "team/worker", "2.0", "linux/amd64")
	work := t.TempDir()
	golden.WriteTree(t, work, map[string][]byte{
		"chart/Chart.yaml": []byte("apiVersion: v2\nname: x\nversion: 1.0.0\n"),
		"chart/values.yaml": []byte("api:\n  repository: " + reg.Host + "/team/api\n  tag: \"1.0\"\n  digest: " + api + "\n" +
			"apiCopy:\n  repository: " + reg.Host + "/team/api\n  tag: \"1.0\"\n  digest: " + api + "\n" +
			"debug:\n  repository: " + reg.Host + "/team/debug\n  tag: latest\n  digest: " + api + "\n" +
			"worker:\n  repository: " + reg.Host + "/team/worker\n  tag: \"2.0\"\n  digest: \"\"\n" +
			"orphan:\n  tag: \"3.0\"\n  digest: " + api + "\n"),
	})
	r, err := resolver.New(resolver.Options{InsecureRegistries: []string{reg.Host}})
	if err != nil {
		t.Fatal(err)
	}
	reg.Reset()
	res, err := adopt.Plan(context.Background(), adopt.Options{ConfigPath: filepath.Join(work, "chartpin.yaml"),
		ChartDirs: []string{filepath.Join(work, "chart")}, Resolver: r})
	if err != nil {
		t.Fatal(err)
	}
	if heads, gets := reg.Count("HEAD"), reg.CountPath("GET", "/manifests/"); heads != 1 || gets != 1 {
		t.Errorf("HEAD %d, manifest GET %d; want 1 and 1: %v", heads, gets, reg.Requests())
	}
	if p, h, l := res.Count(adopt.Pin), res.Count(adopt.Hold), res.Count(adopt.Leave); p != 2 || h != 1 || l != 2 {
		t.Errorf("pin %d, hold %d, leave %d; want 2, 1, 2:\n%s", p, h, l, res.Data)
	}
	if !strings.Contains(string(res.Data), "pinned "+api[:19]+"… (linux/amd64, linux/arm64)") {
		t.Errorf("the comment lacks the pin's platforms:\n%s", res.Data)
	}
}
