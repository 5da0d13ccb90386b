package chartbump

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chartpin/chartpin/internal/failure"
)

// replaced returns before with each old line replaced by its new line,
// failing unless each old line occurs exactly once.
func replaced(t *testing.T, before string, pairs ...string) string {
	t.Helper()
	for i := 0; i+1 < len(pairs); i += 2 {
		if n := strings.Count(before, pairs[i]); n != 1 {
			t.Fatalf("%q occurs %d times", pairs[i], n)
		}
		before = strings.Replace(before, pairs[i], pairs[i+1], 1)
	}
	return before
}

func TestCorpus(t *testing.T) {
	cases := []struct {
		file string
		opts Options
		// old/new line pairs: the only bytes that may change
		lines []string
	}{
		{"argo-helm-argo-cd", Options{Bump: BumpPatch}, // appVersion v3.4.4 != 10.1.1: auto keeps it; redis-ha's version untouched
			[]string{"\nversion: 10.1.1\n", "\nversion: 10.1.2\n"}},
		{"bitnami-nginx", Options{Bump: BumpMinor}, // dependency `version: 2.x.x` and the annotations' image list untouched
			[]string{"\nversion: 22.1.1\n", "\nversion: 22.2.0\n"}},
		{"cert-manager-cert-manager", Options{Bump: BumpPatch}, // v0.0.0 placeholders in lockstep
			[]string{"\nversion: v0.0.0\nappVersion: v0.0.0\n", "\nversion: v0.0.1\nappVersion: v0.0.1\n"}},
		{"cert-manager-cert-manager", Options{Version: "1.19.0"}, // explicit, spelled with the chart's v
			[]string{"\nversion: v0.0.0\nappVersion: v0.0.0\n", "\nversion: v1.19.0\nappVersion: v1.19.0\n"}},
		{"external-secrets-external-secrets", Options{Bump: BumpPatch}, // quoted, appVersion with v: still lockstep
			[]string{"version: \"2.9.0\"\nappVersion: \"v2.9.0\"\n", "version: \"2.9.1\"\nappVersion: \"v2.9.1\"\n"}},
		{"ingress-nginx-ingress-nginx", Options{Bump: BumpPatch, AppVersion: "1.15.2"},
			[]string{"appVersion: 1.15.1\n", "appVersion: 1.15.2\n", "\nversion: 4.15.1\n", "\nversion: 4.15.2\n"}},
		{"karpenter-karpenter", Options{Bump: BumpMinor},
			[]string{"version: 1.14.1\nappVersion: 1.14.1\n", "version: 1.15.0\nappVersion: 1.15.0\n"}},
		{"kedacore-keda", Options{Bump: BumpMajor}, // comments around both keys kept
			[]string{"\nversion: 2.20.2\n", "\nversion: 3.0.0\n", "\nappVersion: 2.20.2\n", "\nappVersion: 3.0.0\n"}},
		{"prometheus-community-kube-prometheus-stack", Options{Bump: BumpPatch}, // quoted dependency versions untouched
			[]string{"\nversion: 88.5.3\n", "\nversion: 88.5.4\n"}},
		{"prometheus-community-prometheus-node-exporter", Options{Bump: BumpPatch, AppVersionPolicy: "from:v1.13.0"},
			[]string{"\nversion: 4.56.1\n", "\nversion: 4.56.2\n", "\nappVersion: 1.12.1\n", "\nappVersion: 1.13.0\n"}},
		{"sigstore-fulcio", Options{Bump: BumpPatch, AppVersionPolicy: "from:1.8.9"},
			[]string{"\nversion: 2.11.0\nappVersion: 1.8.8\n", "\nversion: 2.11.1\nappVersion: 1.8.9\n"}},
		{"sigstore-trillian", Options{Version: "0.3.17"},
			[]string{"\nversion: 0.3.16\n", "\nversion: 0.3.17\n"}},
		{"truecharts-jellyfin", Options{Bump: BumpPatch}, // trailing blank line kept
			[]string{"\nversion: 23.9.1\n\n", "\nversion: 23.9.2\n\n"}},
		{"vmware-tanzu-velero", Options{Bump: BumpPatch, AppVersionPolicy: PolicyKeep},
			[]string{"\nversion: 12.1.0\n", "\nversion: 12.1.1\n"}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			path := filepath.Join("testdata/corpus", c.file+".Chart.yaml")
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			ch, err := Parse(path, data)
			if err != nil {
				t.Fatal(err)
			}
			change, err := Plan(ch, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			want := replaced(t, string(data), c.lines...)
			if string(change.After) != want {
				t.Fatalf("got\n%s\nwant\n%s", change.After, want)
			}
			if string(change.Before) != string(data) {
				t.Fatal("Before is not the original")
			}
			// Planning again on the result with the new version is a no-op.
			again, err := Parse(path, change.After)
			if err != nil {
				t.Fatal(err)
			}
			c2, err := Plan(again, Options{Version: change.NewVersion, AppVersionPolicy: c.opts.AppVersionPolicy})
			if err != nil || c2.Changed() {
				t.Fatalf("second plan: changed=%v err=%v", c2.Changed(), err)
			}
		})
	}
}

// The release oracles: the real release commits, reproduced byte for byte
// from their parents with explicit versions.
func TestOracles(t *testing.T) {
	cases := []struct {
		chart string
		opts  Options
		// Lines the real release also changed by hand (1-based), excluded.
		handEdited []int
	}{
		// ingress-nginx's release also rewrote the artifacthub.io/changes
		// annotation (line 3: "controller-v1.15.0" → "controller-v1.15.1"),
		// which is release notes, not chartbump's business.
		{"ingress-nginx", Options{Version: "4.15.1", AppVersion: "1.15.1"}, []int{3}},
		{"karpenter", Options{Version: "1.14.0", AppVersion: "1.14.0"}, nil},
		// karpenter is lockstep: --version alone moves both.
		{"karpenter", Options{Version: "1.14.0"}, nil},
	}
	for _, c := range cases {
		t.Run(c.chart, func(t *testing.T) {
			dir := filepath.Join("testdata/oracle", c.chart)
			ch, err := Read(filepath.Join(dir, "before"))
			if err != nil {
				t.Fatal(err)
			}
			change, err := Plan(ch, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join(dir, "after", "Chart.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			got := strings.SplitAfter(string(change.After), "\n")
			exp := strings.SplitAfter(string(want), "\n")
			if len(got) != len(exp) {
				t.Fatalf("%d lines, want %d", len(got), len(exp))
			}
			hand := map[int]bool{}
			for _, l := range c.handEdited {
				hand[l] = true
				if got[l-1] == exp[l-1] {
					t.Errorf("line %d is listed as hand-edited but matches", l)
				}
			}
			for i := range got {
				if !hand[i+1] && got[i] != exp[i] {
					t.Errorf("line %d: got %q, want %q", i+1, got[i], exp[i])
				}
			}
		})
	}
}

func plan(t *testing.T, chart string, opts Options) (Change, error) {
	t.Helper()
	ch, err := Parse("charts/x/Chart.yaml", []byte(chart))
	if err != nil {
		t.Fatal(err)
	}
	return Plan(ch, opts)
}

func TestPlanRules(t *testing.T) {
	cases := []struct {
		name, chart string
		opts        Options
		version     string // new version, "" for unchanged
		appVersion  string
	}{
		{"nothing asked, nothing changes", "version: 1.2.3\nappVersion: 1.2.3\n", Options{}, "", ""},
		{"bump none", "version: 1.2.3\nappVersion: 1.2.3\n", Options{Bump: BumpNone}, "", ""},
		{"v prefix kept on appVersion", "version: 1.2.3\nappVersion: v1.2.3\n", Options{Bump: BumpPatch}, "1.2.4", "v1.2.4"},
		{"v prefix kept on version", "version: v1.2.3\nappVersion: 1.2.3\n", Options{Bump: BumpPatch}, "v1.2.4", "1.2.4"},
		{"quotes and comments kept", "version: '1.2.3' # chart\nappVersion: \"1.2.3\" # app\n", Options{Bump: BumpPatch}, "1.2.4", "1.2.4"},
		{"explicit equal is idempotent", "version: 1.2.3\nappVersion: 1.2.3\n", Options{Version: "1.2.3"}, "", ""},
		{"explicit with a v on an unprefixed chart is the same version", "version: 1.2.3\nappVersion: 1.2.3\n", Options{Version: "v1.2.3"}, "", ""},
		{"explicit beats bump", "version: 1.2.3\nappVersion: 1.2.3\n", Options{Bump: BumpMajor, Version: "1.2.5"}, "1.2.5", "1.2.5"},
		{"prerelease + patch finalises", "version: 1.2.3-rc.1\nappVersion: 0.1.0\n", Options{Bump: BumpPatch}, "1.2.3", ""},
		{"prerelease + minor finalises x.y.0", "version: 1.3.0-rc.1\n", Options{Bump: BumpMinor}, "1.3.0", ""},
		{"prerelease + minor past a patch", "version: 1.3.1-rc.1\n", Options{Bump: BumpMinor}, "1.4.0", ""},
		{"prerelease + major finalises x.0.0", "version: 2.0.0-rc.1\n", Options{Bump: BumpMajor}, "2.0.0", ""},
		{"build metadata dropped", "version: 1.2.3+build.5\n", Options{Bump: BumpPatch}, "1.2.4", ""},
		{"rc to its release is forward", "version: 1.9.63-rc.1\nappVersion: 1.9.63-rc.1\n", Options{Version: "1.9.63"}, "1.9.63", "1.9.63"},
		{"lockstep told by --version", "version: 1.2.3\nappVersion: 1.0.0\n", Options{AppVersionPolicy: PolicyLockstep, Version: "1.2.4"}, "1.2.4", "1.2.4"},
		{"lockstep told by --app-version", "version: 1.2.3\nappVersion: 1.0.0\n", Options{AppVersionPolicy: PolicyLockstep, AppVersion: "v1.3.0"}, "1.3.0", "v1.3.0"},
		{"keep with explicit appVersion and a bump", "version: 1.2.3\nappVersion: 7.0\n", Options{Bump: BumpPatch, AppVersion: "7.1"}, "1.2.4", "7.1"},
		{"auto keeps a non-semver appVersion", "version: 1.2.3\nappVersion: latest\n", Options{Bump: BumpPatch}, "1.2.4", ""},
		{"no appVersion at all", "version: 1.2.3\n", Options{Bump: BumpPatch}, "1.2.4", ""},
		{"from: with the tag's v stripped", "version: 1.2.3\nappVersion: 0.8.3\n", Options{Bump: BumpPatch, AppVersionPolicy: "from:v0.8.4"}, "1.2.4", "0.8.4"},
		{"from: unchanged", "version: 1.2.3\nappVersion: 0.8.3\n", Options{AppVersionPolicy: "from:0.8.3"}, "", ""},
		{"dependencies untouched", "dependencies:\n- name: a\n  version: 1.2.3\nversion: 1.2.3\nappVersion: 1.2.3\n", Options{Bump: BumpPatch}, "1.2.4", "1.2.4"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ch, err := plan(t, c.chart, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			wantV, wantA := c.version, c.appVersion
			if wantV == "" {
				wantV = ch.OldVersion
			}
			if wantA == "" {
				wantA = ch.OldAppVersion
			}
			if ch.NewVersion != wantV || ch.NewAppVersion != wantA {
				t.Fatalf("got %s/%s, want %s/%s", ch.NewVersion, ch.NewAppVersion, wantV, wantA)
			}
			if ch.Changed() != (c.version != "" || c.appVersion != "") {
				t.Fatalf("Changed() = %v", ch.Changed())
			}
			// The file reads back with the new values.
			re, err := Parse("x", ch.After)
			if err != nil {
				t.Fatal(err)
			}
			if re.Version.Value != wantV || (re.AppVersion != nil && re.AppVersion.Value != wantA) {
				t.Fatalf("reads back %s", ch.After)
			}
			if strings.Contains(c.chart, "dependencies") && !strings.Contains(string(ch.After), "  version: 1.2.3\n") {
				t.Fatalf("dependency version moved:\n%s", ch.After)
			}
		})
	}
}

func TestPlanRefuses(t *testing.T) {
	cases := []struct {
		name, chart string
		opts        Options
		msg         string
	}{
		{"non-semver version", "name: x\nversion: 1.2\n", Options{Bump: BumpPatch}, `charts/x/Chart.yaml:2: version "1.2" is not a semantic version`},
		{"non-semver explicit", "version: 1.2.3\n", Options{Version: "next"}, `new version "next" is not a semantic version`},
		{"lockstep differs", "version: 1.2.3\nappVersion: 1.0.0\n", Options{Bump: BumpPatch, AppVersionPolicy: PolicyLockstep}, "charts/x/Chart.yaml:2: lockstep chart has version 1.2.3 but appVersion 1.0.0; say which wins with Version or AppVersion"},
		{"lockstep both explicit and different", "version: 1.2.3\nappVersion: 1.2.3\n", Options{Version: "1.2.4", AppVersion: "1.2.5"}, "version 1.2.4 and appVersion 1.2.5 differ"},
		{"lockstep non-semver appVersion", "version: 1.2.3\nappVersion: latest\n", Options{Bump: BumpPatch, AppVersionPolicy: PolicyLockstep}, "lockstep chart has version 1.2.3 but appVersion latest"},
		{"downgrade", "version: 1.2.3\n", Options{Version: "1.2.2"}, "charts/x/Chart.yaml:1: new version 1.2.2 is lower than the current 1.2.3"},
		{"release to its rc", "version: 1.9.63\n", Options{Version: "1.9.63-rc.1"}, "new version 1.9.63-rc.1 is lower than the current 1.9.63"},
		{"appVersion moves without a version", "version: 1.2.3\nappVersion: 7.0\n", Options{AppVersion: "7.1"}, "charts/x/Chart.yaml:2: appVersion moves from 7.0 to 7.1 but version stays 1.2.3"},
		{"no appVersion to set", "version: 1.2.3\n", Options{Bump: BumpPatch, AppVersionPolicy: PolicyLockstep}, "the chart has no appVersion to set"},
		{"unknown bump", "version: 1.2.3\n", Options{Bump: "huge"}, `unknown bump "huge"`},
		{"unknown policy", "version: 1.2.3\n", Options{AppVersionPolicy: "sometimes"}, `unknown appVersion policy "sometimes"`},
		{"empty from", "version: 1.2.3\nappVersion: 1.0.0\n", Options{AppVersionPolicy: "from:"}, "has no value after from:"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ch, err := plan(t, c.chart, c.opts)
			if err == nil || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("err = %v, want %q", err, c.msg)
			}
			if !failure.IsInput(err) {
				t.Fatalf("%v: not an input error (exit 2)", err)
			}
			if ch.Changed() {
				t.Fatal("a refused plan carries changed bytes")
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	cases := []struct{ name, chart, msg string }{
		{"no version", "name: x\n", "chart version"},
		{"two documents", "version: 1.0.0\n---\nversion: 1.0.0\n", "one YAML mapping; found 2 documents"},
		{"duplicate version", "version: 1.0.0\nversion: 1.0.1\n", "Chart.yaml:2: mapping key \"version\" already defined at line 1"},
		{"block version", "version: |\n  1.0.0\n", "block scalar"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("Chart.yaml", []byte(c.chart))
			if err == nil || !strings.Contains(err.Error(), c.msg) || !failure.IsInput(err) {
				t.Fatalf("err = %v, want input error with %q", err, c.msg)
			}
		})
	}
	_, err := Read(t.TempDir())
	if err == nil || !failure.IsInput(err) || !strings.Contains(err.Error(), "no Chart.yaml") {
		t.Fatalf("missing Chart.yaml: %v", err)
	}
}

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "Chart.yaml")
	orig := "name: x\nversion: 1.2.3 # keep me\r\nappVersion: \"1.2.3\"\r\n"
	if err := os.WriteFile(path, []byte(orig), 0o640); err != nil {
		t.Fatal(err)
	}
	ch, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	change, err := Plan(ch, Options{Bump: BumpPatch})
	if err != nil {
		t.Fatal(err)
	}
	if err := Write(change); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if want := "name: x\nversion: 1.2.4 # keep me\r\nappVersion: \"1.2.4\"\r\n"; string(got) != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v, want 0640 kept", fi.Mode().Perm())
	}
	// The same plan again: the file moved on, so it refuses.
	if err := Write(change); err == nil || !strings.Contains(err.Error(), "changed on disk since it was read") {
		t.Fatalf("stale write: %v", err)
	}
	// Idempotent: the release version again changes nothing and writes nothing.
	ch, _ = Read(dir)
	again, err := Plan(ch, Options{Version: "1.2.4"})
	if err != nil || again.Changed() {
		t.Fatalf("second run: changed=%v err=%v", again.Changed(), err)
	}
	os.Chmod(path, 0o440) // a write would now fail
	if err := Write(again); err != nil {
		t.Fatalf("unchanged plan wrote: %v", err)
	}
	if err := Write(Change{Path: filepath.Join(dir, "gone.yaml"), Before: []byte("a"), After: []byte("b")}); err == nil {
		t.Fatal("write to a missing file succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, "gone.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a file appeared")
	}
}

// ParseVersion is the one rule guard and publish share with bump.
func TestParseVersion(t *testing.T) {
	for s, want := range map[string]string{"1.2.3": "1.2.3", "v1.2.4": "1.2.4", "1.3.0-rc.1+b.7": "1.3.0-rc.1+b.7", "v0.1.0-alpha": "0.1.0-alpha"} {
		if v, err := ParseVersion(s); err != nil || v.String() != want {
			t.Errorf("ParseVersion(%q) = %v, %v; want %s", s, v, err, want)
		}
	}
	for _, s := range []string{"1.3", "1", "01.2.3", "vv1.2.3", "V1.2.3", "1.2.3.4", "", "latest", " 1.2.3"} {
		if v, err := ParseVersion(s); err == nil {
			t.Errorf("ParseVersion(%q) = %v, want an error", s, v)
		}
	}
}
