package pin

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/internal/registrytest"
	"github.com/chartpin/chartpin/resolver"
)

const goodChart = "apiVersion: v2\nname: bad\nversion: 1.0.0\nappVersion: \"1.0.0\"\n"

// TestBadInput: every case fails Plan with its message and exit class.
// Plan never writes, so "nothing written" is asserted where a write could
// happen: TestPinBadInput in cmd/chartpin runs these inputs through the
// command (plan, then apply) and compares every file's bytes and mode.
func TestBadInput(t *testing.T) {
	reg := registrytest.New(t)
	reg.PushIndex(t, "team/app", "1.0", "linux/amd64", "linux/arm64")
	down := registrytest.New(t)
	downHost := down.Host
	down.Server.Close()

	block := func(host, tag, digest string) string {
		return "app:\n  image:\n    repository: " + host + "/team/app\n    tag: \"" + tag + "\"\n    digest: " + digest + "\n"
	}
	online := func(hosts ...string) resolver.Interface {
		r, err := resolver.New(resolver.Options{InsecureRegistries: hosts})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	lock := func(body string) resolver.Interface {
		l, err := resolver.ParseLock("digests.yaml", []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return resolver.NewOffline(l)
	}
	const d1 = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	cases := []struct {
		name   string
		files  map[string]string
		r      resolver.Interface
		opts   Options
		config bool
		want   []string
		code   int
	}{
		{
			name:  "malformed YAML",
			files: map[string]string{"Chart.yaml": goodChart, "values.yaml": "app:\n  image:\n    tag: [1.0\n"},
			r:     lock(""),
			want:  []string{"values.yaml:2: parsing yaml: did not find expected", "fix the file and retry"},
			code:  2,
		},
		{
			name:  "duplicate keys",
			files: map[string]string{"Chart.yaml": goodChart, "values.yaml": block(reg.Host, "1.0", `""`) + "    digest: \"\"\n"},
			r:     lock(""),
			want:  []string{"values.yaml:6: mapping key \"digest\" already defined at line 5"},
			code:  2,
		},
		{
			name: "two candidate locations for one pin",
			files: map[string]string{"Chart.yaml": goodChart, "values.yaml": "app:\n  image:\n    repository: " + reg.Host + "/team/app\n" +
				"    tag: \"1.0@" + d1 + "\"\n    digest: \"\"\n"},
			r:    lock(""),
			want: []string{"values.yaml:3: ambiguous pin: app.image.tag (line 4) and app.image.digest (line 5) hold the same image's digest"},
			code: 2,
		},
		{
			name:  "missing Chart.yaml",
			files: map[string]string{"values.yaml": block(reg.Host, "1.0", `""`)},
			r:     lock(""),
			want:  []string{"no Chart.yaml; pass a chart directory"},
			code:  2,
		},
		{
			name:  "missing values.yaml",
			files: map[string]string{"Chart.yaml": goodChart},
			r:     lock(""),
			want:  []string{"reading values:", "values.yaml"},
			code:  2,
		},
		{
			name:  "non-semver version",
			files: map[string]string{"Chart.yaml": "apiVersion: v2\nname: bad\nversion: 1.0\n", "values.yaml": block(reg.Host, "1.0", `""`)},
			r:     lock(""),
			want:  []string{"Chart.yaml:3: version \"1.0\" is not a semantic version"},
			code:  2,
		},
		{
			name:   "lockstep chart whose version and appVersion differ",
			files:  map[string]string{"Chart.yaml": "apiVersion: v2\nname: bad\nversion: 1.0.1\nappVersion: 1.0.0\n", "values.yaml": block(reg.Host, "1.0", `""`), "chartpin.yaml": "charts:\n  - dir: .\n    appVersion: lockstep\n    images:\n      - at: app.image\n"},
			config: true,
			r:      lock(""),
			want:   []string{"lockstep chart has version 1.0.1 but appVersion 1.0.0"},
			code:   2,
		},
		{
			name:  "unknown tag",
			files: map[string]string{"Chart.yaml": goodChart, "values.yaml": block(reg.Host, "9.9", `""`)},
			r:     online(reg.Host),
			want:  []string{"values.yaml:5 (app.image.digest): image " + reg.Host + "/team/app:9.9:", "image not found"},
			code:  1,
		},
		{
			name:  "registry down",
			files: map[string]string{"Chart.yaml": goodChart, "values.yaml": block(downHost, "1.0", `""`)},
			r:     online(downHost),
			want:  []string{"values.yaml:5 (app.image.digest): image " + downHost + "/team/app:1.0:"},
			code:  1,
		},
		{
			name:  "not in the lock file",
			files: map[string]string{"Chart.yaml": goodChart, "values.yaml": block("example.org", "1.0", `""`)},
			r:     lock("example.org/team/other:1.0: " + d1 + "\n"),
			want:  []string{"values.yaml:5 (app.image.digest): image example.org/team/app:1.0:", "not in digest lock file"},
			code:  1,
		},
		{
			name: "platforms required, lock entry without platforms",
			files: map[string]string{"Chart.yaml": goodChart, "values.yaml": block("example.org", "1.0", `""`),
				"chartpin.yaml": "charts:\n  - dir: .\n    images:\n      - at: app.image\n        platforms: [linux/amd64, linux/arm64]\n"},
			config: true,
			r:      lock("example.org/team/app:1.0: " + d1 + "\n"),
			want:   []string{"values.yaml:5 (app.image.digest): image example.org/team/app:1.0: refusing to pin " + d1, "the lock entry has no platforms"},
			code:   1,
		},
		{
			name: "versions offline",
			files: map[string]string{"Chart.yaml": goodChart, "values.yaml": block("example.org", "1.0", `""`),
				"chartpin.yaml": "charts:\n  - dir: .\n    images:\n      - at: app.image\n        versions: \"<2\"\n"},
			config: true,
			r:      lock("example.org/team/app:1.0: " + d1 + "\n"),
			want:   []string{"values.yaml:5 (app.image.digest): image example.org/team/app: listing tags for versions \"<2\"", "not supported"},
			code:   1,
		},
		{
			name:  "unknown --set-tag path",
			files: map[string]string{"Chart.yaml": goodChart, "values.yaml": block("example.org", "1.0", `""`)},
			r:     lock(""),
			opts:  Options{SetTags: map[string]string{"app.nope": "2.0"}},
			want:  []string{"SetTags app.nope=2.0: no image at app.nope (images with a tag: app.image)"},
			code:  2,
		},
		{
			name: "configured path missing from values",
			files: map[string]string{"Chart.yaml": goodChart, "values.yaml": block("example.org", "1.0", `""`),
				"chartpin.yaml": "charts:\n  - dir: .\n    images:\n      - at: app.sidecar\n"},
			config: true,
			r:      lock(""),
			want:   []string{"chartpin.yaml:4: image app.sidecar:", "no key \"sidecar\" under app"},
			code:   2,
		},
		{
			name: "stale variant pin beside a moving digest",
			files: map[string]string{"Chart.yaml": goodChart, "values.yaml": "app:\n  image:\n    repository: example.org/team/app\n    tag: \"1.0\"\n" +
				"    digest: " + d1 + "\n    digestChroot: " + d1 + "\n"},
			r: lock("example.org/team/app:1.0: {digest: sha256:2222222222222222222222222222222222222222222222222222222222222222, platforms: [linux/amd64]}\n" +
				"example.org/team/app@" + d1 + ": {digest: " + d1 + ", platforms: [linux/amd64]}\n"),
			want: []string{"values.yaml:6 (app.image.digestChroot): image app.image: its block moves but this pin cannot follow it", "configure it in chartpin.yaml"},
			code: 1,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, tc.files)
			o := tc.opts
			o.Resolver = tc.r
			if tc.config {
				o.ConfigPath = filepath.Join(dir, "chartpin.yaml")
			} else {
				o.ChartDirs = []string{dir}
			}
			res, err := Plan(context.Background(), o)
			if err == nil {
				t.Fatalf("no error; result:\n%s", res.Text())
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error:\n%v\nwant it to contain %q", err, w)
				}
			}
			if !strings.Contains(err.Error(), dir) && tc.name != "unknown --set-tag path" {
				t.Errorf("error %q does not name the file", err)
			}
			if got := failure.Code(err); got != tc.code {
				t.Errorf("exit class %d, want %d", got, tc.code)
			}
			// A refusal (exit 1) comes with the plan, to show it; it can
			// never be applied. Bad input (exit 2) has no plan at all.
			switch {
			case tc.code == 2 && res != nil:
				t.Errorf("bad input returned a plan: %+v", res)
			case tc.code == 1 && (res == nil || !res.Refused()):
				t.Errorf("a refusal returned no plan that lists it: %+v", res)
			case res != nil && res.Apply() == nil:
				t.Errorf("a refused plan could be applied")
			}
		})
	}
}
