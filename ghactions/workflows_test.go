package ghactions_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

var pinned = regexp.MustCompile(`^[\w.-]+/[\w./-]+@[0-9a-f]{40}$`)

// readOnly are the workflows that only check: their token may not write.
var readOnly = map[string]bool{"ci.yml": true, "drift.yml": true}

// TestWorkflowsHardened checks this repository's own workflows: explicit
// permissions for every job (read-only for the checks), every action pinned
// by full commit SHA with a version comment, and no ${{ }} expression inside
// a run: script (script injection).
func TestWorkflowsHardened(t *testing.T) {
	files, err := filepath.Glob("../.github/workflows/*.yml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no workflows found (%v)", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var wf struct {
			Permissions map[string]string `yaml:"permissions"`
			Jobs        map[string]struct {
				Permissions map[string]string `yaml:"permissions"`
				Steps       []struct {
					Uses string `yaml:"uses"`
					Run  string `yaml:"run"`
				} `yaml:"steps"`
			} `yaml:"jobs"`
		}
		if err := yaml.Unmarshal(data, &wf); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		ro := readOnly[filepath.Base(f)]
		if ro && len(wf.Permissions) == 0 {
			t.Errorf("%s: no top-level permissions: (the default token may be read-write)", f)
		}
		for scope, p := range wf.Permissions {
			if ro && p != "read" && p != "none" {
				t.Errorf("%s: permissions %s: %s, want read-only", f, scope, p)
			}
		}
		for name, job := range wf.Jobs {
			if len(wf.Permissions) == 0 && len(job.Permissions) == 0 {
				t.Errorf("%s: job %s has no permissions: at any level (the default token may be read-write)", f, name)
			}
			for scope, p := range job.Permissions {
				if ro && p != "read" && p != "none" {
					t.Errorf("%s: job %s: permissions %s: %s, want read-only", f, name, scope, p)
				}
			}
			for _, s := range job.Steps {
				if strings.Contains(s.Run, "${{") {
					t.Errorf("%s: job %s: ${{ }} inside run: %q; pass it through env:", f, name, s.Run)
				}
				if s.Uses == "" {
					continue
				}
				if !pinned.MatchString(s.Uses) {
					t.Errorf("%s: job %s: %s is not pinned by full commit SHA", f, name, s.Uses)
				}
				if !regexp.MustCompile(regexp.QuoteMeta(s.Uses) + ` # v\d+\.\d+\.\d+`).Match(data) {
					t.Errorf("%s: job %s: %s has no version comment (# vX.Y.Z)", f, name, s.Uses)
				}
			}
		}
	}
}
