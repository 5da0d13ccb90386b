package drift_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chartpin/chartpin/config"
	"github.com/chartpin/chartpin/discover"
	"github.com/chartpin/chartpin/drift"
	"github.com/chartpin/chartpin/ghactions"
	"github.com/chartpin/chartpin/internal/golden"
	"github.com/chartpin/chartpin/resolver"
)

const (
	dA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	dB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// sampleReport has one item of every status, and a tag that tries to inject
// workflow commands (YAML "\n" in a double-quoted scalar is a real newline).
func sampleReport() *drift.Report {
	file := "/work/repo/charts/app/values.yaml"
	pin := func(line int, path string) discover.Pin {
		return discover.Pin{File: file, Line: line, Path: path}
	}
	until := time.Date(2027, 1, 31, 0, 0, 0, 0, time.UTC)
	return &drift.Report{
		Items: []drift.Item{
			{Pin: pin(5, "images.app.digest"), Status: drift.OK, Float: "ghcr.io/x/app:1.0", Pinned: dA, Current: dA},
			{Pin: pin(9, "images.worker.digest"), Status: drift.Drift, Float: "ghcr.io/x/worker:2.0", Pinned: dA, Current: dB,
				Message: "ghcr.io/x/worker:2.0 now resolves to " + dB + "; pinned " + dA},
			{Pin: pin(13, "images.evil.digest"), Status: drift.Drift, Float: "ghcr.io/x/evil:1%0A::set-output name=findings::0\n::error::pwned",
				Pinned: dA, Current: dB, Note: "; acknowledgement expired on 2027-01-31 (chartpin.yaml:7, \"a, b: c\"): DRIFT again; re-pin or extend until:",
				Ack: &config.Ack{At: "images.evil", Digest: dB, Until: until, Reason: "a, b: c", Line: 7}},
			{Pin: pin(17, "images.gone.digest"), Status: drift.Unresolved, Float: "ghcr.io/x/gone:9",
				Message: "resolving ghcr.io/x/gone:9: ghcr.io/x/gone:9: image not found"},
			{Pin: pin(20, "images.orphan.digest"), Status: drift.Unwatchable, Message: "block images.orphan has no repository or image key (configure repository: in chartpin.yaml)"},
			{Pin: pin(24, "images.ceiling.digest"), Status: drift.Acknowledged, Float: "ghcr.io/x/ceiling:0.8", Pinned: dA, Current: dB,
				Note: "; acknowledged until 2027-01-31 (chartpin.yaml:12): ordering ceiling"},
			{Pin: pin(28, "images.fresh.digest"), Status: drift.NotPinned, Float: "ghcr.io/x/app:1.0", Message: "not pinned (empty pin key): listed, not watched"},
		},
		Shared:   []drift.Shared{{Repository: "ghcr.io/x/worker", Digest: dB, Tags: []string{"2.0", "2.0.7", "latest"}, Checked: 3, Total: 3}},
		Requests: &resolver.Stats{HEAD: 5},
	}
}

func counter() func() (string, error) {
	n := 0
	return func() (string, error) { n++; return fmt.Sprintf("token%d", n), nil }
}

func TestActionsGolden(t *testing.T) {
	for _, offline := range []bool{false, true} {
		name := "live"
		if offline {
			name = "offline"
		}
		t.Run(name, func(t *testing.T) {
			rep := sampleReport()
			rep.Offline = offline
			if offline {
				rep.Requests = nil
			}
			dir := t.TempDir()
			vars := map[string]string{"GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": "/work/repo",
				"GITHUB_STEP_SUMMARY": filepath.Join(dir, "summary"), "GITHUB_OUTPUT": filepath.Join(dir, "output")}
			gh := ghactions.FromEnv(func(k string) string { return vars[k] }, ghactions.Options{Token: counter()})
			var log bytes.Buffer
			rel := gh.RelPath
			if err := gh.Untrusted(&log, func(w io.Writer) error { return drift.WriteText(w, rep, rel) }); err != nil {
				t.Fatal(err)
			}
			if err := gh.Emit(&log, drift.Actions(rep, rel)); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, name+".log.golden", log.Bytes())
			for _, f := range []string{"summary", "output"} {
				data, err := os.ReadFile(vars["GITHUB_"+map[string]string{"summary": "STEP_SUMMARY", "output": "OUTPUT"}[f]])
				if err != nil {
					t.Fatal(err)
				}
				golden.Check(t, name+"."+f+".golden", data)
			}
		})
	}
}
