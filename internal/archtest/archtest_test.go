// Package archtest checks the import graph that the folder names promise.
package archtest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

type pkg struct {
	ImportPath string
	Deps       []string
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps=false", "-json=ImportPath,Deps", "github.com/chartpin/chartpin/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatal("go list found no packages")
	}
	return pkgs
}

// resolverMayImport lists the chartpin packages the resolver may use: leaves only.
var resolverMayImport = map[string]bool{
	"github.com/chartpin/chartpin/internal/failure":    true,
	"github.com/chartpin/chartpin/internal/atomicfile": true,
	"github.com/chartpin/chartpin/internal/fanout":     true,
}

// The resolver serves both update paths, so it must not drag in Helm, git or
// Kubernetes; pinrule, the rules pin and drift share, is a leaf that config
// can check chartpin.yaml with; only cmd speaks urfave/cli; nothing imports cmd.
func TestImportGraph(t *testing.T) {
	forbidden := map[string][]string{
		"github.com/chartpin/chartpin/resolver": {"helm.sh/", "k8s.io/", "github.com/go-git/", "github.com/google/go-github/", "github.com/urfave/cli", "github.com/chartpin/chartpin/"},
		"github.com/chartpin/chartpin/pinrule":  {"github.com/chartpin/chartpin/"},
	}
	found := map[string]bool{}
	for _, p := range listPackages(t) {
		found[p.ImportPath] = true
		for _, d := range p.Deps {
			for _, bad := range forbidden[p.ImportPath] {
				if strings.HasPrefix(d, bad) && !resolverMayImport[d] {
					t.Errorf("%s depends on %s", p.ImportPath, d)
				}
			}
			if strings.HasPrefix(d, "github.com/urfave/cli") && !strings.HasPrefix(p.ImportPath, "github.com/chartpin/chartpin/cmd/") {
				t.Errorf("%s depends on %s: only cmd/ may parse flags", p.ImportPath, d)
			}
			if strings.HasPrefix(d, "github.com/chartpin/chartpin/cmd") {
				t.Errorf("%s imports the command layer %s", p.ImportPath, d)
			}
		}
	}
	for p := range forbidden {
		if !found[p] {
			t.Errorf("%s package not found", p)
		}
	}
}

// registryClients are the packages that may speak to a registry themselves:
// the resolver for every lookup; the writers (publish pushes charts,
// deprecation pushes recall markers, imagebuild pushes chartpin's image,
// demo seeds its embedded registry); upgrade pulls charts through Helm's
// client; the test registries and signers, and hack/cosign (it exports
// the cosign CLI's signatures for the tests). Everything else, cmd
// included, reads a registry through the resolver, so every lookup is
// counted, mirrored, authenticated and bounded in one place.
var registryClients = map[string]bool{
	"github.com/chartpin/chartpin/resolver":                  true,
	"github.com/chartpin/chartpin/publish":                   true,
	"github.com/chartpin/chartpin/deprecation":               true,
	"github.com/chartpin/chartpin/internal/imagebuild":       true,
	"github.com/chartpin/chartpin/demo":                      true,
	"github.com/chartpin/chartpin/upgrade":                   true,
	"github.com/chartpin/chartpin/internal/registrytest":     true,
	"github.com/chartpin/chartpin/internal/cosigned":         true,
	"github.com/chartpin/chartpin/internal/cosigned/keyless": true,
	"github.com/chartpin/chartpin/hack/cosign":               true,
}

// registryImports are the client libraries that send registry requests.
var registryImports = []string{
	"github.com/google/go-containerregistry/pkg/v1/remote",
	"github.com/google/go-containerregistry/pkg/crane",
	"helm.sh/helm/v3/pkg/registry",
	"oras.land/",
}

// No package outside registryClients imports a registry client directly
// (its own imports, not its dependencies': those go through the resolver).
func TestRegistryCallsGoThroughTheResolver(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "github.com/chartpin/chartpin/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if registryClients[f[0]] {
			continue
		}
		for _, d := range f[1:] {
			for _, bad := range registryImports {
				if strings.HasPrefix(d, bad) {
					t.Errorf("%s imports %s: read the registry through resolver (or add the package to registryClients with the reason)", f[0], d)
				}
			}
		}
	}
}

// standsAlone matches references to documents outside this repository:
// numbered notes and paths of the machine the code was written on mean
// nothing to a reader of the repository. Reasons belong in a sentence or in
// docs/design.md.
// (The pattern is split so that this file does not match itself.)
var standsAlone = regexp.MustCompile(`(?i)\blessons?[ -]?[0-9]+|/work/` + `shared|\.\./` + `shared|\.\./` + `seeds`)

// Every tracked file stands alone: no comment, message, doc or test data
// cites a document that is not in the repository.
func TestNoOutsideReferences(t *testing.T) {
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	dir := strings.TrimSpace(string(root))
	out, err := exec.Command("git", "-C", dir, "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	files := strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
	if len(files) < 50 {
		t.Fatalf("git ls-files listed %d files", len(files))
	}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			continue // deleted in the work tree
		}
		for i, line := range strings.Split(string(data), "\n") {
			if m := standsAlone.FindString(line); m != "" {
				t.Errorf("%s:%d: %q cites a document outside the repository; say the reason instead", f, i+1, m)
			}
		}
	}
}

// graphLine is one "pkg ──> a, b" line of docs/architecture.md's graph.
var graphLine = regexp.MustCompile(`^(\S+) ─*> (.+)$`)

// The import graph in docs/architecture.md is the real one: each line lists
// exactly the chartpin packages (internal/ left out) that package imports.
func TestArchitectureDocIsTrue(t *testing.T) {
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	doc, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(root)), "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "github.com/chartpin/chartpin/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const mod = "github.com/chartpin/chartpin/"
	imports := map[string]map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], mod)
		imports[pkg] = map[string]bool{}
		for _, d := range f[1:] {
			if strings.HasPrefix(d, mod) && !strings.HasPrefix(d, mod+"internal/") {
				imports[pkg][strings.TrimPrefix(d, mod)] = true
			}
		}
	}
	checked := 0
	for _, line := range strings.Split(string(doc), "\n") {
		m := graphLine.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil || m[1] == "cmd/chartpin" {
			continue
		}
		checked++
		got, ok := imports[m[1]]
		if !ok {
			t.Errorf("docs/architecture.md names %s, which is no package", m[1])
			continue
		}
		want := map[string]bool{}
		for _, d := range strings.Split(m[2], ",") {
			want[strings.TrimSpace(d)] = true
		}
		for d := range got {
			if !want[d] {
				t.Errorf("docs/architecture.md: %s imports %s; add it to its line", m[1], d)
			}
		}
		for d := range want {
			if !got[d] {
				t.Errorf("docs/architecture.md: %s does not import %s; drop it from its line", m[1], d)
			}
		}
	}
	if checked < 10 {
		t.Errorf("docs/architecture.md: read %d graph lines, want the whole graph", checked)
	}
}
