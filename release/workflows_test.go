package release

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The GitHub Actions files must keep three rules: least
// permissions per job, actions pinned by full commit SHA, and no ${{ }}
// expression inside a run: script (values pass through env:, so a branch
// name or PR title can never become shell code). Release and publish jobs
// also take one concurrency group per chart.

var (
	shaPinned = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+(/[^@]+)?@[0-9a-f]{40}$`)
	// writable scopes a chartpin job may need; anything else is a finding.
	allowedWrites = map[string]bool{"contents": true, "pull-requests": true, "packages": true}
)

// checkWorkflow returns every rule violation in a workflow file; perChart
// adds the concurrency rule for release and publish jobs.
func checkWorkflow(name string, data []byte, perChart bool) []string {
	var wf struct {
		Permissions yaml.Node            `yaml:"permissions"`
		Jobs        map[string]yaml.Node `yaml:"jobs"`
	}
	if err := yaml.Unmarshal(data, &wf); err != nil {
		return []string{fmt.Sprintf("%s: does not parse: %v", name, err)}
	}
	var out []string
	add := func(format string, args ...any) { out = append(out, name+": "+fmt.Sprintf(format, args...)) }
	// Top level: present, and read-only at most; writes are granted per job.
	if wf.Permissions.Kind != yaml.MappingNode {
		add("top-level permissions must be {} or read-only scopes (grant writes per job)")
	} else {
		for i := 0; i+1 < len(wf.Permissions.Content); i += 2 {
			if wf.Permissions.Content[i+1].Value != "read" && wf.Permissions.Content[i+1].Value != "none" {
				add("top-level permission %s: %s: grant writes per job", wf.Permissions.Content[i].Value, wf.Permissions.Content[i+1].Value)
			}
		}
	}
	if len(wf.Jobs) == 0 {
		add("no jobs")
	}
	jobs := make([]string, 0, len(wf.Jobs))
	for j := range wf.Jobs {
		jobs = append(jobs, j)
	}
	sort.Strings(jobs)
	for _, j := range jobs {
		node := wf.Jobs[j]
		var job struct {
			Permissions yaml.Node `yaml:"permissions"`
			Concurrency yaml.Node `yaml:"concurrency"`
			Strategy    struct {
				Matrix yaml.Node `yaml:"matrix"`
			} `yaml:"strategy"`
			Uses  string      `yaml:"uses"`
			Steps []yaml.Node `yaml:"steps"`
		}
		if err := node.Decode(&job); err != nil {
			add("job %s: %v", j, err)
			continue
		}
		switch job.Permissions.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(job.Permissions.Content); i += 2 {
				scope, level := job.Permissions.Content[i].Value, job.Permissions.Content[i+1].Value
				if level == "write" && !allowedWrites[scope] {
					add("job %s: permission %s: write is not needed by chartpin", j, scope)
				}
			}
		case yaml.ScalarNode:
			add("job %s: permissions %q: list the scopes the job needs", j, job.Permissions.Value)
		}
		var group string
		switch job.Concurrency.Kind {
		case yaml.ScalarNode:
			group = job.Concurrency.Value
		case yaml.MappingNode:
			var c struct {
				Group            string `yaml:"group"`
				CancelInProgress *bool  `yaml:"cancel-in-progress"`
			}
			job.Concurrency.Decode(&c)
			group = c.Group
			if perChart && (c.CancelInProgress == nil || *c.CancelInProgress) {
				add("job %s: cancel-in-progress must be false: a cancelled push or publish is a partial release", j)
			}
		}
		if perChart && !strings.Contains(group, "matrix.") {
			add("job %s: concurrency group %q is not per chart (use the chart's matrix value)", j, group)
		}
		if job.Uses != "" && !shaPinned.MatchString(job.Uses) && !strings.HasPrefix(job.Uses, "./") {
			add("job %s: uses %s: pin by full commit SHA", j, job.Uses)
		}
		out = append(out, checkSteps(name, "job "+j, job.Steps)...)
	}
	return out
}

// checkSteps applies the SHA and run: rules to steps (workflow or composite).
func checkSteps(file, where string, steps []yaml.Node) []string {
	var out []string
	for i, n := range steps {
		var s struct {
			Name string `yaml:"name"`
			Uses string `yaml:"uses"`
			Run  string `yaml:"run"`
		}
		if err := n.Decode(&s); err != nil {
			out = append(out, fmt.Sprintf("%s: %s step %d: %v", file, where, i+1, err))
			continue
		}
		label := fmt.Sprintf("%s: %s step %d (%s)", file, where, i+1, s.Name+s.Uses)
		if s.Uses != "" && !strings.HasPrefix(s.Uses, "./") && !strings.HasPrefix(s.Uses, "docker://") && !shaPinned.MatchString(s.Uses) {
			out = append(out, label+": uses "+s.Uses+": pin by full commit SHA")
		}
		if strings.Contains(s.Run, "${{") {
			out = append(out, label+": ${{ }} inside run: (pass the value through env:)")
		}
	}
	return out
}

// checkAction applies the rules to a composite action.yml.
func checkAction(name string, data []byte) []string {
	var a struct {
		Runs struct {
			Using string      `yaml:"using"`
			Steps []yaml.Node `yaml:"steps"`
		} `yaml:"runs"`
	}
	if err := yaml.Unmarshal(data, &a); err != nil {
		return []string{fmt.Sprintf("%s: does not parse: %v", name, err)}
	}
	if a.Runs.Using != "composite" {
		return []string{name + ": runs.using must be composite"}
	}
	return checkSteps(name, "runs", a.Runs.Steps)
}

func TestWorkflowRules(t *testing.T) {
	root := filepath.Join("..")
	files, _ := filepath.Glob(filepath.Join(root, ".github", "workflows", "*.y*ml"))
	var release bool
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(f) == "release.yml" {
			release = true
		}
		// The concurrency-per-chart rule is release.yml's; the others are for every workflow.
		for _, v := range checkWorkflow(filepath.Base(f), data, filepath.Base(f) == "release.yml") {
			t.Error(v)
		}
	}
	if !release {
		t.Fatal(".github/workflows/release.yml is missing")
	}
	data, err := os.ReadFile(filepath.Join(root, "action.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range checkAction("action.yml", data) {
		t.Error(v)
	}
}

// The checker itself must catch each violation.
func TestWorkflowRulesCatchViolations(t *testing.T) {
	good := `
permissions: {}
jobs:
  release:
    permissions: {contents: write}
    strategy: {matrix: {include: [{name: a}]}}
    concurrency: {group: "r-${{ matrix.name }}", cancel-in-progress: false}
    steps:
      - uses: actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683
      - run: echo "$X"
        env: {X: "${{ github.head_ref }}"}
`
	if v := checkWorkflow("good.yml", []byte(good), true); len(v) != 0 {
		t.Fatalf("good workflow flagged: %v", v)
	}
	for _, tc := range []struct{ name, from, to, want string }{
		{"top-level write-all", "permissions: {}\njobs", "permissions: write-all\njobs", "top-level permissions must be {} or read-only"},
		{"no top-level permissions", "permissions: {}\njobs", "jobs", "top-level permissions must be {} or read-only"},
		{"top-level write", "permissions: {}\njobs", "permissions: {contents: write}\njobs", "top-level permission contents: write"},
		{"job write-all", "permissions: {contents: write}", "permissions: write-all", `permissions "write-all"`},
		{"needless write", "{contents: write}", "{contents: write, id-token: write}", "id-token: write is not needed"},
		{"tag-pinned action", "@11bd71901bbe5b1630ceea73d27597364c9af683", "@v4", "pin by full commit SHA"},
		{"short sha", "@11bd71901bbe5b1630ceea73d27597364c9af683", "@11bd719", "pin by full commit SHA"},
		{"expression in run", `echo "$X"`, `echo "${{ github.head_ref }}"`, "${{ }} inside run:"},
		{"shared concurrency", `"r-${{ matrix.name }}"`, `release`, "not per chart"},
		{"no concurrency", "    concurrency: {group: \"r-${{ matrix.name }}\", cancel-in-progress: false}\n", "", "not per chart"},
		{"cancel in progress", "cancel-in-progress: false", "cancel-in-progress: true", "cancel-in-progress must be false"},
	} {
		bad := strings.Replace(good, tc.from, tc.to, 1)
		if bad == good {
			t.Fatalf("%s: replacement did not apply", tc.name)
		}
		v := checkWorkflow("bad.yml", []byte(bad), true)
		if !strings.Contains(strings.Join(v, "\n"), tc.want) {
			t.Errorf("%s: violations %v lack %q", tc.name, v, tc.want)
		}
	}
	action := "runs:\n  using: composite\n  steps:\n    - uses: actions/setup-go@v5\n    - run: echo ${{ inputs.args }}\n      shell: bash\n"
	v := strings.Join(checkAction("action.yml", []byte(action)), "\n")
	if !strings.Contains(v, "pin by full commit SHA") || !strings.Contains(v, "inside run:") {
		t.Errorf("action violations: %s", v)
	}
}
