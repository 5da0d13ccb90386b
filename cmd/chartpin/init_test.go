package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// adoptValues is an edge chart as its maintainers keep it: a release-time
// prodDigest on a channel tag, a pin they froze (its release tag was
// re-published since), a latest tag, and a component shipped disabled
// whose digest nobody filled.
const adoptValues = `# edge chart
images:
  ingestor:
    repository: example.org/team/ingestor
    channelTags:
      prod: "0.8"
    prodDigest: ""   # written at release time
  mysqlClient:
    repository: example.org/team/mysql-client
    tag: 8.0.36
    digest: ` + dOld + `   # frozen on purpose
  debug:
    repository: example.org/team/debug
    tag: latest
    digest: ""
metrics:
  enabled: false
  image:
    repository: example.org/team/exporter
    tag: "1.2"
    digest: ""
`

// adoptLock is what every tag names today: each one has moved.
const adoptLock = "example.org/team/ingestor:0.8: {digest: " + dNew + ", platforms: [linux/amd64, linux/arm64]}\n" +
	"example.org/team/mysql-client:8.0.36: {digest: " + dOther + ", platforms: [linux/amd64, linux/arm64]}\n" +
	"example.org/team/mysql-client@" + dOld + ": {digest: " + dOld + ", platforms: [linux/amd64, linux/arm64]}\n" +
	"example.org/team/debug:latest: {digest: " + dOther + ", platforms: [linux/amd64]}\n" +
	"example.org/team/exporter:1.2: {digest: " + dOther + ", platforms: [linux/amd64, linux/arm64]}\n"

// TestInitThenPin adopts a chart as a new user would, comparing every
// file's bytes after each step: init writes only chartpin.yaml (never over
// an existing one), and pin right after it moves only the release-time pin.
func TestInitThenPin(t *testing.T) {
	t.Setenv("GITHUB_ACTIONS", "")
	root := t.TempDir()
	chart := filepath.Join(root, "chart")
	writeFiles(t, chart, map[string]string{"Chart.yaml": policyChart, "values.yaml": adoptValues})
	lock := filepath.Join(root, "digests.yaml")
	writeFiles(t, root, map[string]string{"digests.yaml": adoptLock})
	cfg := filepath.Join(root, "chartpin.yaml")

	before := hashDir(t, root)
	out, errOut, code := runCLI(t, "init", "--dry-run", "--digests", lock, "--config", cfg, chart)
	if code != 0 {
		t.Fatalf("init --dry-run: exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"# values.yaml:7 images.ingestor.prodDigest: floats on example.org/team/ingestor:0.8; not pinned\n      - at: images.ingestor\n        pin: prodDigest\n        tagFrom: channelTags.prod\n",
		"# values.yaml:11 images.mysqlClient.digest: floats on example.org/team/mysql-client:8.0.36; pinned sha256:111111111111… (linux/amd64, linux/arm64)\n      - at: images.mysqlClient\n        pin: digest\n        hold: \"the release tag 8.0.36 now names " + dOther + ", not the pinned " + dOld + ": a re-published tag or a deliberate freeze; drop the hold to move it\"\n",
		"      - at: images.debug\n        pin: digest\n        hold: \"the tag is latest, which names no release; set a versioned tag, then drop this hold\"\n",
		"      # left as it is: the chart leaves this pin empty; uncomment the entry to have chartpin pin it\n      # - at: metrics.image\n      #   pin: digest\n",
		"dry run: would write " + cfg + ": 1 to pin, 2 held, 1 left as they are (commented out)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("init --dry-run output lacks %q:\n%s", want, out)
		}
	}
	sameFiles(t, before, hashDir(t, root), "")

	if _, errOut, code := runCLI(t, "init", "--digests", lock, "--config", cfg, chart); code != 0 {
		t.Fatalf("init: exit %d: %s", code, errOut)
	}
	written := hashDir(t, root)
	sameFiles(t, before, written, cfg)
	if data, _ := os.ReadFile(cfg); !strings.HasPrefix(out, string(data)) {
		t.Errorf("init wrote something else than --dry-run printed:\n%s", data)
	}

	// A second init refuses to overwrite: exit 2, every byte kept.
	if _, errOut, code := runCLI(t, "init", "--digests", lock, "--config", cfg, chart); code != 2 || !strings.Contains(errOut, "--force replaces it, --dry-run prints") {
		t.Errorf("init over an existing config: exit %d: %s", code, errOut)
	}
	sameFiles(t, written, hashDir(t, root), "")

	// pin right after init: only the release-time prodDigest and the version move.
	out, errOut, code = runCLI(t, "pin", "--digests", lock, "--config", cfg)
	if code != 0 {
		t.Fatalf("pin: exit %d: %s\n%s", code, errOut, out)
	}
	wantValues := strings.Replace(adoptValues, `prodDigest: ""   # written`, `prodDigest: "`+dNew+`"   # written`, 1)
	if got, _ := os.ReadFile(filepath.Join(chart, "values.yaml")); string(got) != wantValues {
		t.Errorf("values.yaml after pin:\n%s", got)
	}
	if got, _ := os.ReadFile(filepath.Join(chart, "Chart.yaml")); string(got) != bumpedChart {
		t.Errorf("Chart.yaml after pin:\n%s", got)
	}
	for _, want := range []string{"HELD    ", "images.mysqlClient.digest", "images.debug.digest"} {
		if !strings.Contains(out, want) {
			t.Errorf("pin output lacks %q:\n%s", want, out)
		}
	}

	// drift reports the held pins as HELD, with their reasons, and passes.
	out, errOut, code = runCLI(t, "drift", "--digests", lock, "--config", cfg)
	if code != 0 || strings.Count(out, "HELD") < 2 || !strings.Contains(out, "held: the tag is latest") {
		t.Errorf("drift: exit %d\n%s%s", code, out, errOut)
	}
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// sameFiles checks that after holds every file of before with its bytes
// and mode, and no other file except added.
func sameFiles(t *testing.T, before, after map[string]string, added string) {
	t.Helper()
	for p, h := range before {
		if after[p] != h {
			t.Errorf("%s changed", p)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok && p != added {
			t.Errorf("%s appeared", p)
		}
	}
}
