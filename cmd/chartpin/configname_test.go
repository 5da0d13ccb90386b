package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/chartpin/chartpin/internal/registrytest"
)

// Messages that cite the configuration name the file given with --config
// and the line, never the default chartpin.yaml: an acknowledgement in drift's
// report, a held pin refusing --set-tag, a verify key that cannot be read.
func TestMessagesNameTheConfigGiven(t *testing.T) {
	t.Setenv("GITHUB_ACTIONS", "")
	reg := registrytest.New(t)
	moved := reg.PushIndex(t, "team/cache", "3", "linux/amd64")
	reg.PushIndex(t, "team/worker", "1.0", "linux/amd64")
	dir := t.TempDir()
	t.Chdir(dir)
	block := func(key, repo, tag, digest string) string {
		return key + ":\n  repository: " + reg.Host + "/" + repo + "\n  tag: \"" + tag + "\"\n  digest: \"" + digest + "\"\n"
	}
	old := "sha256:" + strings.Repeat("cd", 32)
	writeFiles(t, dir, map[string]string{
		"charts/app/Chart.yaml": "apiVersion: v2\nname: app\nversion: 0.3.0\nappVersion: \"0.3.0\"\n",
		"charts/app/values.yaml": block("api", "team/api", "2.1", old) + block("cache", "team/cache", "3", old) +
			block("worker", "team/worker", "1.0", ""),
		"other.yaml": "charts:\n" +
			"  - dir: charts/app\n" +
			"    images:\n" +
			"      - at: api\n" +
			"        hold: frozen for the audit\n" +
			"      - at: cache\n" +
			"      - at: worker\n" +
			"        verify:\n" +
			"          key: keys/garbled.pub\n" +
			"    acknowledge:\n" +
			"      - at: cache\n" +
			"        digest: " + moved + "\n" +
			"        until: 2999-12-31\n" +
			"        reason: known\n",
		"keys/garbled.pub": "not a key\n",
	})
	other, _ := filepath.Abs("other.yaml")
	insecure := []string{"--insecure-registry", reg.Host}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"drift", "--config", "other.yaml"}, 0, "acknowledged until 2999-12-31 (" + other + ":11): known"},
		{[]string{"pin", "--config", "other.yaml", "--set-tag", "api=2.2", "--dry-run"}, 2, "is held (" + other + ":4: \"frozen for the audit\")"},
		{[]string{"pin", "--config", "other.yaml", "--dry-run"}, 1, "verify key (" + other + ":7): "},
	} {
		code, out := runCombined(t, append(tc.args, insecure...)...)
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("%v: exit %d, want %d and %q:\n%s", tc.args, code, tc.code, tc.want, out)
		}
		if strings.Contains(out, "chartpin.yaml") {
			t.Errorf("%v: names chartpin.yaml, not other.yaml:\n%s", tc.args, out)
		}
	}
}
