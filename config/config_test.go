package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chartpin/chartpin/internal/failure"
)

const full = `charts:
  - dir: charts/example
    bump: minor
    appVersion: from:images.ingestor
    images:
      - at: images.ingestor
        repository: ghcr.io/example/ingestor
        tagFrom: channelTags.prod
        pin: prodDigest
        format: digest
        platforms: [linux/amd64, linux/arm64]
        versions: ">=0.8.0 <=0.8.4"
        when: serviceDbAccountsByEnv.prod == true
        verify: {key: keys/cosign.pub}
      - at: images.jobsManager
      - at: images.requestsProxy
        follows: images.jobsManager
    acknowledge:
      - at: images.ingestor
        digest: sha256:0000000000000000000000000000000000000000000000000000000000000001
        until: 2027-01-31
        reason: ordering ceiling
  - dir: ../other
`

func write(t *testing.T, body string) string {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "chartpin.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	// The key files the configs name exist (config checks that, not their PEM).
	for _, k := range []string{"keys/cosign.pub", "k.pub"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, k)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, k), []byte("a key\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func TestLoadFull(t *testing.T) {
	p := write(t, full)
	f, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Charts) != 2 {
		t.Fatalf("charts = %d", len(f.Charts))
	}
	c := f.Charts[0]
	if want := filepath.Join(filepath.Dir(p), "charts/example"); c.Dir != want {
		t.Errorf("dir = %s, want %s (relative to the config file)", c.Dir, want)
	}
	if want := filepath.Join(filepath.Dir(filepath.Dir(p)), "other"); f.Charts[1].Dir != want {
		t.Errorf("dir = %s, want %s", f.Charts[1].Dir, want)
	}
	if c.Bump != "minor" || c.AppVersion != "from:images.ingestor" {
		t.Errorf("bump/appVersion = %q/%q", c.Bump, c.AppVersion)
	}
	in := c.Images[0]
	if in.At != "images.ingestor" || in.Repository != "ghcr.io/example/ingestor" || in.TagFrom != "channelTags.prod" ||
		in.Pin != "prodDigest" || in.Format != "digest" || strings.Join(in.Platforms, ",") != "linux/amd64,linux/arm64" ||
		in.Versions != ">=0.8.0 <=0.8.4" || in.When != "serviceDbAccountsByEnv.prod == true" || in.Line != 6 {
		t.Errorf("image = %+v", in)
	}
	if want := filepath.Join(filepath.Dir(p), "keys/cosign.pub"); in.VerifyKey != want {
		t.Errorf("verify key = %q, want %s (relative to the config file)", in.VerifyKey, want)
	}
	if c.Images[2].Follows != "images.jobsManager" {
		t.Errorf("follows = %q", c.Images[2].Follows)
	}
	a := c.Acknowledge[0]
	if a.Until != time.Date(2027, 1, 31, 0, 0, 0, 0, time.UTC) || a.Reason != "ordering ceiling" {
		t.Errorf("ack = %+v", a)
	}
}

func TestLoadErrors(t *testing.T) {
	cases := []struct {
		name, body, want string
	}{
		{"unknown top key", "charts: [{dir: a}]\nchart: x\n", ":2: unknown key \"chart\""},
		{"unknown image key", "charts:\n  - dir: a\n    images:\n      - at: x\n        tagfrom: y\n", ":5: unknown key \"tagfrom\""},
		{"bad format", "charts:\n  - dir: a\n    images:\n      - at: x\n        format: sha\n", ":5: format: \"sha\" is not one of digest, hex, tag@digest, ref@digest"},
		{"bad versions", "charts:\n  - dir: a\n    images:\n      - at: x\n        versions: \">=0.8.x.y\"\n", ":5: versions: \">=0.8.x.y\" is not a semver range"},
		{"bad when", "charts:\n  - dir: a\n    images:\n      - at: x\n        when: a.b >= 3\n", ":5: when: \"a.b >= 3\": unsupported operator"},
		{"empty when", "charts:\n  - dir: a\n    images:\n      - at: x\n        when: \"\"\n", ":5: when: is empty"},
		{"when missing value", "charts:\n  - dir: a\n    images:\n      - at: x\n        when: a.b ==\n", ":5: when: \"a.b ==\": missing value"},
		{"bad bump", "charts:\n  - dir: a\n    bump: huge\n", ":3: bump: \"huge\" is not one of patch, minor, major, none"},
		{"bad appVersion", "charts:\n  - dir: a\n    appVersion: newest\n", ":3: appVersion: \"newest\" is not one of"},
		{"from unknown image", "charts:\n  - dir: a\n    appVersion: from:images.b\n    images:\n      - at: images.a\n", ":3: appVersion: from:images.b names no configured image"},
		{"no dir", "charts:\n  - bump: patch\n", ":2: chart entry without dir:"},
		{"no charts", "foo: 1\n", "unknown key \"foo\""},
		{"empty charts", "charts: []\n", ":1: charts: must be a non-empty list"},
		{"duplicate key", "charts:\n  - dir: a\n    dir: b\n", ":3: mapping key \"dir\" already defined at line 2"},
		{"duplicate image key", "charts:\n  - dir: a\n    images:\n      - at: x\n        at: y\n", ":5: mapping key \"at\" already defined at line 4"},
		{"duplicate unknown key", "charts:\n  - dir: a\n    foo: 1\n    foo: 2\n", ":4: mapping key \"foo\" already defined at line 3"},
		{"duplicate image", "charts:\n  - dir: a\n    images:\n      - at: x\n      - at: x\n", ":5: image x with pin \"\" is already configured at line 4"},
		{"same image, two pins", "charts:\n  - dir: a\n    images:\n      - at: x\n        pin: digest\n      - at: x\n        pin: digestChroot\n      - at: x\n        pin: digest\n", ":8: image x with pin \"digest\" is already configured at line 4"},
		{"follows unknown", "charts:\n  - dir: a\n    images:\n      - at: x\n        follows: y\n", ":4: image x: follows y: no image is configured"},
		{"follows loop", "charts:\n  - dir: a\n    images:\n      - at: x\n        follows: y\n      - at: y\n        follows: x\n", "loops back"},
		{"follows with repository", "charts:\n  - dir: a\n    images:\n      - at: x\n        follows: y\n        repository: r/s\n", ":6: repository: has no effect with follows:"},
		{"verify unknown key", "charts:\n  - dir: a\n    images:\n      - at: x\n        verify: {subject: me}\n", ":5: unknown key \"subject\" (allowed: key, identity, issuer, trustedRoot)"},
		{"verify empty", "charts:\n  - dir: a\n    images:\n      - at: x\n        verify: {}\n", ":5: verify: needs key:"},
		{"identity without issuer", "charts:\n  - dir: a\n    images:\n      - at: x\n        verify:\n          identity: me@example.com\n          trustedRoot: root.json\n", ":6: verify: a keyless policy needs issuer:"},
		{"identity without trusted root", "charts:\n  - dir: a\n    images:\n      - at: x\n        verify: {identity: me, issuer: https://accounts.google.com}\n", ":5: verify: a keyless policy needs trustedRoot:"},
		{"key and identity", "charts:\n  - dir: a\n    images:\n      - at: x\n        verify:\n          key: cosign.pub\n          identity: me\n", ":6: verify: key: and identity: are two policies"},
		{"missing key", "charts:\n  - dir: a\n    images:\n      - at: x\n        verify:\n          key: keys/absent.pub\n", ":6: verify.key: "},
		{"missing trusted root", "charts:\n  - dir: a\n    images:\n      - at: x\n        verify:\n          identity: me\n          issuer: https://accounts.google.com\n          trustedRoot: sigstore/trusted_root.json\n", ":8: verify.trustedRoot: "},
		{"empty issuer", "charts:\n  - dir: a\n    images:\n      - at: x\n        verify: {identity: me, issuer: \" \", trustedRoot: r.json}\n", ":5: verify.issuer: is empty"},
		{"verify empty key", "charts:\n  - dir: a\n    images:\n      - at: x\n        verify: {key: \"\"}\n", ":5: verify.key: is empty"},
		{"verify not a mapping", "charts:\n  - dir: a\n    images:\n      - at: x\n        verify: cosign.pub\n", ":5: expected a mapping with keys key, identity, issuer, trustedRoot"},
		{"follows with verify", "charts:\n  - dir: a\n    images:\n      - at: y\n      - at: x\n        follows: y\n        verify: {key: k.pub}\n", ":7: verify: has no effect with follows:"},
		{"bad platform", "charts:\n  - dir: a\n    images:\n      - at: x\n        platforms: [amd64]\n", ":5: platforms: \"amd64\" is not os/arch"},
		{"bad path", "charts:\n  - dir: a\n    images:\n      - at: \"images..x\"\n", ":4: at: \"images..x\" is not a dotted values path"},
		{"ack without reason", "charts:\n  - dir: a\n    acknowledge:\n      - at: x\n        digest: sha256:0000000000000000000000000000000000000000000000000000000000000001\n        until: 2027-01-31\n", ":4: acknowledge entry without reason:"},
		{"ack bad date", "charts:\n  - dir: a\n    acknowledge:\n      - at: x\n        digest: sha256:0000000000000000000000000000000000000000000000000000000000000001\n        until: soon\n        reason: r\n", ":6: until: \"soon\" is not a date"},
		{"malformed", "charts:\n  - dir: a\n   bad: [\n", ":1: parsing yaml: did not find expected '-' indicator"},
		{"empty", "", ": empty config; it needs a charts: list"},
		{"comments only", "# nothing yet\n", ": empty config; it needs a charts: list"},
		{"second document", "charts:\n  - dir: a\n---\ncharts:\n  - dir: b\n", ":3: a second YAML document"},
		{"empty second document", "charts:\n  - dir: a\n---\n", ":3: a second YAML document"},
		// yaml.v3 alone read only the first document and let this one by.
		{"malformed second document", "charts:\n  - dir: a\n---\n  bad: [\n", ":4: parsing yaml:"},
		{"invalid UTF-8", "charts:\n  - dir: a\xff\n", ":2: not valid UTF-8"},
		{"UTF-16", "\xff\xfec\x00h\x00a\x00r\x00t\x00s\x00:\x00 \x00[\x00]\x00\n\x00", ":1: not valid UTF-8"},
		{"two dirs", "charts:\n  - dir: a\n  - dir: ./a\n", ":3: chart dir"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := write(t, tc.body)
			_, err := Load(p)
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q\nwant it to contain %q", err, tc.want)
			}
			if !strings.Contains(err.Error(), p) {
				t.Errorf("error %q does not name the file %s", err, p)
			}
			if failure.Code(err) != 2 {
				t.Errorf("exit class %d, want 2", failure.Code(err))
			}
		})
	}
}

func TestSelectAndFind(t *testing.T) {
	p := write(t, "charts:\n  - dir: charts/a\n  - dir: charts/b\n")
	f, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Dir(p)
	all, _ := Select(f, nil)
	if len(all) != 2 || all[0].Config != &f.Charts[0] || all[1].Dir != filepath.Join(base, "charts/b") {
		t.Errorf("Select(f, nil) = %+v; want both configured charts", all)
	}
	b := filepath.Join(base, "charts/b/")
	got, err := Select(f, []string{b, filepath.Join(base, "charts/b")})
	if err != nil || len(got) != 1 || got[0].Dir != b || got[0].Config != &f.Charts[1] {
		t.Errorf("Select(f, b, b) = %+v, %v; want b once, as named, with its entry", got, err)
	}
	_, err = Select(f, []string{filepath.Join(base, "charts/c")})
	if err == nil || failure.Code(err) != 2 || !strings.Contains(err.Error(), "charts/c is not configured") || !strings.HasSuffix(err.Error(), "add it under charts: there, or name a configured chart") {
		t.Errorf("Select(f, c) err = %v; want exit 2 with the next step", err)
	}
	// Without a config: every argument is a chart, none means the current directory.
	if got, err := Select(nil, nil); err != nil || len(got) != 1 || got[0].Dir != "." || got[0].Config != nil {
		t.Errorf("Select(nil, nil) = %+v, %v; want .", got, err)
	}
	if got, err := Select(nil, []string{"charts/c", "charts/c/", "charts/d"}); err != nil || len(got) != 2 || got[0].Dir != "charts/c" || got[1].Dir != "charts/d" {
		t.Errorf("Select(nil, c, c/, d) = %+v, %v; want c and d", got, err)
	}
	if _, err := Load(filepath.Join(base, "missing.yaml")); failure.Code(err) != 2 || !strings.Contains(err.Error(), "pass ConfigPath FILE") {
		t.Errorf("Load(missing) err = %v; want exit 2 naming the option ConfigPath", err)
	}
	if found, err := Find(base); err != nil || found != p {
		t.Errorf("Find = %q, %v", found, err)
	}
	if found, err := Find(t.TempDir()); err != nil || found != "" {
		t.Errorf("Find(empty) = %q, %v", found, err)
	}
}

// An images: with every entry commented out (as chartpin init writes for a
// chart whose pins are all left to its maintainers) configures no image.
func TestEmptyImagesList(t *testing.T) {
	f, err := Parse("/x/chartpin.yaml", []byte("charts:\n  - dir: .\n    images:\n      # - at: image\n"))
	if err != nil || len(f.Charts) != 1 || len(f.Charts[0].Images) != 0 {
		t.Errorf("%+v, %v", f, err)
	}
	if _, err := Parse("/x/chartpin.yaml", []byte("charts:\n  - dir: .\n    images: nope\n")); err == nil {
		t.Error("images: nope accepted")
	}
}

func TestVerifyKeyless(t *testing.T) {
	p := write(t, "charts:\n  - dir: a\n    images:\n      - at: x\n        verify:\n          identity: https://github.com/acme/app/.github/workflows/release.yaml@refs/heads/main\n          issuer: https://token.actions.githubusercontent.com\n          trustedRoot: sigstore/trusted_root.json\n")
	root := filepath.Join(filepath.Dir(p), "sigstore/trusted_root.json")
	if err := os.MkdirAll(filepath.Dir(root), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(root, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	img := f.Charts[0].Images[0]
	if img.VerifyIdentity != "https://github.com/acme/app/.github/workflows/release.yaml@refs/heads/main" ||
		img.VerifyIssuer != "https://token.actions.githubusercontent.com" || img.VerifyTrustedRoot != root || img.VerifyKey != "" {
		t.Errorf("image = %+v, want the identity, the issuer and the trusted root relative to the config file", img)
	}
}
