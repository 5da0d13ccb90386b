package drift_test

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/chartpin/chartpin/config"
	"github.com/chartpin/chartpin/drift"
	"github.com/chartpin/chartpin/internal/cosigned"
	"github.com/chartpin/chartpin/internal/cosigned/keyless"
	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/internal/registrytest"
	"github.com/chartpin/chartpin/signature"
)

// signedFixture pushes one image per signature case to reg and writes a
// chart pinning each, every image with verify: {key: cosign.pub}.
type signedFixture struct {
	dir, cfg                  string
	signed, moved, movedTo    string
	signedMoveFrom, signedNew string
}

func writeSignedChart(t *testing.T, reg *registrytest.Registry) signedFixture {
	t.Helper()
	repo := reg.Host + "/team/app"
	insecure := []name.Option{name.Insecure}
	c, err := cosigned.PushCases(repo, func(tag string) string { return reg.PushIndex(t, "team/app", tag, "linux/amd64") }, insecure)
	if err != nil {
		t.Fatal(err)
	}
	unsigned, otherKey, tampered := c.Unsigned, c.OtherKey, c.Tampered
	sign := func(digest string) {
		t.Helper()
		if _, err := c.Key.Push(repo, digest, insecure); err != nil {
			t.Fatal(err)
		}
	}
	f := signedFixture{dir: t.TempDir(), signed: c.Signed}
	// A signed pin whose tag now names an unsigned digest, and one whose
	// tag now names a signed digest (plain DRIFT).
	f.moved = reg.PushIndex(t, "team/app", "moved", "linux/amd64")
	sign(f.moved)
	f.movedTo = reg.PushIndex(t, "team/app", "moved", "linux/arm64")
	f.signedMoveFrom = reg.PushIndex(t, "team/app", "next", "linux/amd64")
	sign(f.signedMoveFrom)
	f.signedNew = reg.PushIndex(t, "team/app", "next", "linux/arm64")
	sign(f.signedNew)

	values := ""
	cfg := "charts:\n  - dir: .\n    images:\n"
	for _, p := range []struct{ at, tag, digest string }{
		{"signed", "signed", f.signed},
		{"signedCopy", "signed", f.signed},
		{"unsigned", "unsigned", unsigned},
		{"otherkey", "otherkey", otherKey},
		{"tampered", "tampered", tampered},
		{"moved", "moved", f.moved},
		{"next", "next", f.signedMoveFrom},
	} {
		values += p.at + ":\n  repository: " + repo + "\n  tag: " + p.tag + "\n  digest: " + p.digest + "\n"
		cfg += "      - at: " + p.at + "\n        verify: {key: cosign.pub}\n"
	}
	writeFiles(t, f.dir, map[string]string{
		"Chart.yaml":    "apiVersion: v2\nname: edge\nversion: 1.0.0\n",
		"values.yaml":   values,
		"chartpin.yaml": cfg,
		"cosign.pub":    string(c.Key.PublicPEM()),
	})
	f.cfg = filepath.Join(f.dir, "chartpin.yaml")
	return f
}

// checkSigned runs drift over writeSignedChart's chart, with a signature
// checker or without (offline); reg's requests are those of the run.
func checkSigned(t *testing.T, reg *registrytest.Registry, checker bool) (signedFixture, *drift.Report) {
	t.Helper()
	f := writeSignedChart(t, reg)
	cfg, err := config.Load(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := newResolver(t, reg.Host)
	reg.Reset()
	var opts drift.Options
	if checker {
		opts.Signatures = signature.NewChecker(r)
	}
	rep, err := drift.Check(context.Background(), r, []drift.Target{{Dir: f.dir, Config: &cfg.Charts[0]}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return f, rep
}

// drift with verify: reports a pinned digest without a valid signature by
// the configured key (none, another key's, a tampered payload) as UNSIGNED,
// and a drifted float naming an unsigned digest too; each digest's
// signature is looked up once per run, however many pins share it.
func TestUnsignedPinsAreFindings(t *testing.T) {
	reg := registrytest.New(t)
	f, rep := checkSigned(t, reg, true)
	got := byPath(t, rep)
	for path, want := range map[string]struct {
		st  drift.Status
		why string
	}{
		"signed.digest":     {drift.OK, ""},
		"signedCopy.digest": {drift.OK, ""},
		"unsigned.digest":   {drift.Unsigned, "has no signature"},
		"otherkey.digest":   {drift.Unsigned, "signature does not verify"},
		"tampered.digest":   {drift.Unsigned, "signature does not verify"},
		"moved.digest":      {drift.Unsigned, "now resolves to " + f.movedTo + " (pinned " + f.moved + "); the new digest"},
		"next.digest":       {drift.Drift, ""},
	} {
		it := got[path]
		if it.Status != want.st || !strings.Contains(it.Message, want.why) {
			t.Errorf("%s: %s %q, want %s saying %q", path, it.Status, it.Message, want.st, want.why)
		}
		if want.st == drift.Unsigned && !strings.Contains(it.Message, "verify: at "+f.cfg+":") {
			t.Errorf("%s: %q does not name the verify: entry", path, it.Message)
		}
	}
	if m := got["moved.digest"]; m.Current != f.movedTo || m.Pinned != f.moved {
		t.Errorf("moved: pinned %s current %s", m.Pinned, m.Current)
	}
	if !errors.Is(rep.Err(), failure.ErrFindings) || !strings.Contains(rep.Err().Error(), "4 UNSIGNED") || rep.Findings() != 5 {
		t.Errorf("err %v, findings %d; want 4 UNSIGNED and 5 findings", rep.Err(), rep.Findings())
	}
	if s := rep.Summary(); !strings.Contains(s, ", 4 UNSIGNED") {
		t.Errorf("summary %q does not count UNSIGNED", s)
	}
	// Eight digests (signed twice, moved and next with their new digests):
	// one signature tag GET each; the four without a valid tag signature
	// then ask for referrers, once each.
	sigTags := 0
	for _, q := range reg.Requests() {
		if q.Method == http.MethodGet && strings.Contains(q.Path, "/manifests/sha256-") && strings.HasSuffix(q.Path, ".sig") {
			sigTags++
		}
	}
	if sigTags != 8 {
		t.Errorf("%d signature tag GETs, want 8 (one per digest): %v", sigTags, reg.Requests())
	}
	if n := reg.CountPath(http.MethodGet, "/referrers/"); n != 4 {
		t.Errorf("%d referrers GETs, want 4 (one per digest without a tag signature): %v", n, reg.Requests())
	}
}

// Without a checker (offline), verify: pins are named in a note, never
// passed as checked and never failed for want of the registry.
func TestVerifyWithoutCheckerIsANote(t *testing.T) {
	reg := registrytest.New(t)
	_, rep := checkSigned(t, reg, false)
	if n := rep.Count(drift.Unsigned); n != 0 {
		t.Errorf("%d UNSIGNED without a checker", n)
	}
	if len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "7 pin(s) with verify: were not checked") {
		t.Errorf("notes %q, want one naming the 7 unchecked pins", rep.Notes)
	}
	if n := reg.CountPath(http.MethodGet, ".sig"); n != 0 {
		t.Errorf("%d signature reads without a checker", n)
	}
}

// A keyless verify: is checked too: a pin signed by the configured identity
// is OK, one signed by another identity is UNSIGNED.
func TestKeylessPinsAreChecked(t *testing.T) {
	identity, issuer := keyless.Identity, keyless.Issuer
	reg := registrytest.New(t)
	ss, trustedRoot, err := keyless.NewWithRoot()
	if err != nil {
		t.Fatal(err)
	}
	repo := reg.Host + "/team/app"
	values, cfgText := "", "charts:\n  - dir: .\n    images:\n"
	for _, p := range []struct{ at, identity string }{{"ours", identity}, {"theirs", "https://github.com/evil/app/.github/workflows/x.yaml@refs/heads/main"}} {
		d := reg.PushIndex(t, "team/app", p.at, "linux/amd64")
		if _, err := ss.Push(p.identity, issuer, repo, d, []name.Option{name.Insecure}); err != nil {
			t.Fatal(err)
		}
		values += p.at + ":\n  repository: " + repo + "\n  tag: " + p.at + "\n  digest: " + d + "\n"
		cfgText += "      - at: " + p.at + "\n        verify: {identity: \"" + identity + "\", issuer: \"" + issuer + "\", trustedRoot: trusted_root.json}\n"
	}
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"Chart.yaml":        "apiVersion: v2\nname: edge\nversion: 1.0.0\n",
		"values.yaml":       values,
		"chartpin.yaml":     cfgText,
		"trusted_root.json": string(trustedRoot),
	})
	cfg, err := config.Load(filepath.Join(dir, "chartpin.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	r := newResolver(t, reg.Host)
	rep, err := drift.Check(context.Background(), r, []drift.Target{{Dir: dir, Config: &cfg.Charts[0]}}, drift.Options{Signatures: signature.NewChecker(r)})
	if err != nil {
		t.Fatal(err)
	}
	got := byPath(t, rep)
	if it := got["ours.digest"]; it.Status != drift.OK {
		t.Errorf("ours: %s %q, want OK", it.Status, it.Message)
	}
	if it := got["theirs.digest"]; it.Status != drift.Unsigned || !strings.Contains(it.Message, `expected SAN value "`+identity+`"`) {
		t.Errorf("theirs: %s %q, want UNSIGNED naming the identity", it.Status, it.Message)
	}
}
