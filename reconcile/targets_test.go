package reconcile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chartpin/chartpin/internal/failure"
)

// The format the library chart renders (notes/targets-format.md).
const chartTargets = `# registry that serves the pulls on this edge ("" = none; images below already carry it)
mirror: ""
targets:
  - id: jobs-manager-api          # unique within the file
    kind: Deployment              # Deployment | DaemonSet | StatefulSet
    namespace: prod-ns
    name: rel-jobs-manager
    container: api
    image: docker.io/example/jobs-manager:dev   # registry/repository:tag as the pull will see it (mirror applied)
  - id: requests-proxy-proxy
    kind: Deployment
    namespace: prod-ns
    name: rel-requests-proxy
    container: proxy
    follows: jobs-manager-api     # same digest as that target, same tick, no second registry request
  - id: resource-monitor
    kind: DaemonSet
    namespace: node-agents
    name: rel-resource-monitor
    container: tracebloc-resource-monitor
    image: docker.io/example/resource-monitor:dev
`

func TestReadTargets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "targets.yaml")
	if err := os.WriteFile(path, []byte(chartTargets), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := ReadTargets(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Mirror != "" || len(f.Targets) != 3 {
		t.Fatalf("%+v", f)
	}
	want := Target{ID: "requests-proxy-proxy", Kind: "Deployment", Namespace: "prod-ns", Name: "rel-requests-proxy", Container: "proxy", Follows: "jobs-manager-api", Line: 10}
	if f.Targets[1] != want {
		t.Errorf("target 2 = %+v, want %+v", f.Targets[1], want)
	}
	if f.Targets[2].Line != 16 || f.Targets[2].Workload() != "DaemonSet node-agents/rel-resource-monitor" {
		t.Errorf("target 3 = %+v", f.Targets[2])
	}
	if _, err := ReadTargets(filepath.Join(t.TempDir(), "missing.yaml")); !failure.IsInput(err) || !strings.Contains(err.Error(), "; pass Targets with the file") {
		t.Errorf("missing file: %v, want an input error naming the option Targets", err)
	}
}

func TestParseTargetsRejects(t *testing.T) {
	entry := func(extra string) string {
		return "targets:\n  - id: a\n    kind: Deployment\n    namespace: ns\n    name: n\n    container: c\n" + extra
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"empty", "mirror: \"\"\n", "targets.yaml: no targets"},
		{"unknown key", entry("    image: r.io/x:1\n    tag: 1\n"), "field tag not found"},
		{"no image", entry(""), "targets.yaml:2: target \"a\": needs image"},
		{"pinned", entry("    image: r.io/x:1@sha256:" + strings.Repeat("a", 64) + "\n"), "already pinned by digest"},
		{"bad kind", strings.Replace(entry("    image: r.io/x:1\n"), "Deployment", "Job", 1), "kind \"Job\""},
		{"duplicate id", entry("    image: r.io/x:1\n  - {id: a, kind: Deployment, namespace: ns, name: m, container: c, image: r.io/x:1}\n"), "targets.yaml:8: target \"a\": duplicate id (first at line 2)"},
		{"same container twice", entry("    image: r.io/x:1\n  - {id: b, kind: Deployment, namespace: ns, name: n, container: c, image: r.io/x:1}\n"), "is already target \"a\""},
		{"unknown follows", entry("    follows: nope\n"), "follows \"nope\": no such target"},
		{"follows chain", entry("    image: r.io/x:1\n  - {id: b, kind: Deployment, namespace: ns, name: m, container: c, follows: a}\n  - {id: c, kind: Deployment, namespace: ns, name: o, container: c, follows: b}\n"), "follow \"a\" directly"},
		{"follows other repo", entry("    image: r.io/x:1\n  - {id: b, kind: Deployment, namespace: ns, name: m, container: c, follows: a, image: r.io/y:1}\n"), "differs from"},
		{"mirror not applied", "mirror: mirror.local:5000\n" + entry("    image: docker.io/x/y:1\n"), "does not carry the mirror \"mirror.local:5000\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseTargets("targets.yaml", []byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
			if !failure.IsInput(err) {
				t.Errorf("not an input error (exit 2): %v", err)
			}
		})
	}
}

// An empty mirror is no mirror; images need not carry any host.
func TestEmptyMirrorIsNoMirror(t *testing.T) {
	f, err := ParseTargets("t.yaml", []byte("mirror: \"\"\ntargets:\n  - {id: a, kind: Deployment, namespace: ns, name: n, container: c, image: \"nginx:1.27\"}\n"))
	if err != nil || f.Mirror != "" {
		t.Fatalf("%v %+v", err, f)
	}
}
