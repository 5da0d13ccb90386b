package charts_test

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/lint/support"
)

// TestSchemaRejects: values.schema.json refuses bad values before anything
// renders, naming the key.
func TestSchemaRejects(t *testing.T) {
	cases := []struct {
		name, values string
		want         []string // substrings of the error
	}{
		{"malformed digest", `images: {jobsManager: {digest: "sha256:abc"}}`,
			[]string{"/images/jobsManager/digest", "'sha256:abc' does not match pattern", "sha256:[a-f0-9]{64}"}},
		{"uppercase prodDigest", `images: {podsMonitor: {prodDigest: "sha256:` + strings.Repeat("A", 64) + `"}}`,
			[]string{"/images/podsMonitor/prodDigest", "does not match pattern"}},
		{"digest without algorithm", `images: {resourceMonitor: {digest: "` + strings.Repeat("a", 64) + `"}}`,
			[]string{"/images/resourceMonitor/digest"}},
		{"latest tag", `images: {jobsManager: {tag: latest}}`,
			[]string{"/images/jobsManager/tag", "'not' failed"}},
		{"latest channel tag", `images: {requestsProxy: {channelTags: {dev: latest}}}`,
			[]string{"/images/requestsProxy/channelTags/dev", "'not' failed"}},
		{"latest chartpin image", `reconcile: {image: {tag: latest}}`,
			[]string{"/reconcile/image/tag"}},
		{"unknown channelTags key", `images: {jobsManager: {channelTags: {qa: qa}}}`,
			[]string{"/images/jobsManager/channelTags", "additional properties 'qa' not allowed"}},
		{"unknown image key", `images: {jobsManager: {sha: x}}`,
			[]string{"/images/jobsManager", "additional properties 'sha' not allowed"}},
		{"tag in repository", `images: {jobsManager: {repository: "docker.io/chartpin/jobs-manager:dev"}}`,
			[]string{"/images/jobsManager/repository", "does not match pattern"}},
		{"unknown env", `env: production`,
			[]string{"/env", "value must be one of 'dev', 'stg', 'prod'"}},
		{"duration with words", `reconcile: {rolloutTimeout: "10 minutes"}`,
			[]string{"/reconcile/rolloutTimeout", "does not match pattern"}},
		{"zero duration", `autoUpgrade: {timeout: 0s}`,
			[]string{"/autoUpgrade/timeout", "does not match pattern"}},
		{"duration as a number", `reconcile: {rolloutTimeout: 600}`,
			[]string{"/reconcile/rolloutTimeout", "got number, want string"}},
		{"zero attempts", `reconcile: {maxAttempts: 0}`,
			[]string{"/reconcile/maxAttempts", "minimum"}},
		{"negative skips", `reconcile: {maxSkips: -1}`,
			[]string{"/reconcile/maxSkips", "minimum"}},
		{"bad schedule", `reconcile: {schedule: "every 15 minutes"}`,
			[]string{"/reconcile/schedule", "does not match pattern"}},
		{"mirror with scheme", `global: {imageRegistry: "https://mirror.local"}`,
			[]string{"/global/imageRegistry", "does not match pattern"}},
		{"repo without scheme", `autoUpgrade: {repo: "charts.example.com"}`,
			[]string{"/autoUpgrade/repo", "does not match pattern"}},
		{"prodPin as string", `images: {jobsManager: {prodPin: "yes"}}`,
			[]string{"/images/jobsManager/prodPin", "got string, want boolean"}},
		{"misspelt top-level key", `reconcil: {enabled: false}`,
			[]string{"additional properties 'reconcil' not allowed"}},
		{"bad namespace", `nodeAgents: {namespace: Node_Agents}`,
			[]string{"/nodeAgents/namespace", "does not match pattern"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := installDryRun(loadExample(t), releaseNs, parseValues(t, unpinned, tc.values))
			if err == nil {
				t.Fatalf("values %s were accepted", tc.values)
			}
			msg := err.Error()
			if !strings.Contains(msg, "values don't meet the specifications of the schema") {
				t.Errorf("error is not a schema rejection: %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestTemplateGuards: when a value slips past a schema (an adopting chart
// that did not copy the fragments, or --skip-schema-validation), the library
// itself refuses it with a message that names the key and the next step.
func TestTemplateGuards(t *testing.T) {
	c := loadExample(t)
	c.Schema = nil
	cases := []struct{ values, want string }{
		{`images: {jobsManager: {digest: "sha256:abc"}}`, `chartpin: images.jobsManager.digest "sha256:abc" is not sha256:<64 lowercase hex>; run chartpin pin or set it to ""`},
		{`images: {jobsManager: {tag: latest}}`, `chartpin: images.jobsManager uses the tag "latest"`},
		{`env: dev
images: {podsMonitor: {channelTags: {dev: ""}}}`, `chartpin: images.podsMonitor has no digest, no tag and no channelTags.dev; set one of them`},
		{`env: qa`, `chartpin: env "qa" is not one of dev, stg, prod`},
		{`reconcile: {rolloutTimeout: 10min}`, `chartpin: reconcile.rolloutTimeout "10min" is not a positive duration`},
		{`autoUpgrade: {repo: ""}`, `chartpin: autoUpgrade.repo "" is not an https:// chart repository or an oci:// reference`},
		{`global: {imageRegistry: "http://x"}`, `chartpin: global.imageRegistry "http://x" is not a registry host`},
	}
	for _, tc := range cases {
		_, _, err := installDryRun(c, releaseNs, parseValues(t, unpinned, tc.values))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("values %s: error %v, want one containing %q", tc.values, err, tc.want)
		}
	}
}

// TestSchemaFragmentsCopied: the example's schema carries the library's
// fragments verbatim, so the two cannot drift.
func TestSchemaFragmentsCopied(t *testing.T) {
	var lib, ex struct {
		Definitions map[string]any `json:"definitions"`
	}
	for path, v := range map[string]any{"chartpin-lib/schema/chartpin.defs.json": &lib, "example/values.schema.json": &ex} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	if len(lib.Definitions) == 0 {
		t.Fatal("the library ships no schema fragments")
	}
	for name, def := range lib.Definitions {
		if !reflect.DeepEqual(ex.Definitions[name], def) {
			t.Errorf("example/values.schema.json definitions.%s differs from chartpin-lib/schema/chartpin.defs.json; copy it again", name)
		}
	}
}

// TestLint runs Helm's linter (`helm lint`, strict) on both charts.
func TestLint(t *testing.T) {
	dir := builtCharts(t)
	for _, name := range []string{"chartpin-lib", "example"} {
		lint := action.NewLint()
		lint.Strict = true
		lint.Namespace = "default" // as `helm lint` outside a cluster context
		res := lint.Run([]string{filepath.Join(dir, name)}, map[string]any{})
		for _, m := range res.Messages {
			// Helm reports a template's fail() at INFO; it is a failure here.
			if m.Severity >= support.WarningSev || strings.Contains(m.Err.Error(), "Fail") {
				t.Errorf("helm lint %s: %s", name, m)
			} else {
				t.Logf("helm lint %s: %s", name, m)
			}
		}
		for _, err := range res.Errors {
			t.Errorf("helm lint %s: %v", name, err)
		}
		if res.TotalChartsLinted != 1 {
			t.Errorf("helm lint %s linted %d charts", name, res.TotalChartsLinted)
		}
	}
}

// TestPackage packages both charts (`helm package`) and renders the example
// from its archive, which must carry the library.
func TestPackage(t *testing.T) {
	dir := builtCharts(t)
	dest := t.TempDir()
	archives := map[string]string{}
	for _, name := range []string{"chartpin-lib", "example"} {
		p := action.NewPackage()
		p.Destination = dest
		path, err := p.Run(filepath.Join(dir, name), nil)
		if err != nil {
			t.Fatalf("helm package %s: %v", name, err)
		}
		archives[name] = path
	}
	c, err := loader.Load(archives["example"])
	if err != nil {
		t.Fatal(err)
	}
	deps := c.Dependencies()
	if len(deps) != 1 || deps[0].Name() != "chartpin-lib" || deps[0].Metadata.Type != "library" {
		t.Fatalf("packaged example carries %v, want the chartpin-lib library", deps)
	}
	if c.Lock == nil || len(c.Lock.Dependencies) != 1 || c.Lock.Dependencies[0].Repository != "file://../chartpin-lib" {
		t.Errorf("packaged Chart.lock %+v, want chartpin-lib from file://../chartpin-lib", c.Lock)
	}
	for _, f := range c.Raw {
		if strings.HasPrefix(f.Name, ".git") {
			t.Errorf("packaged chart carries %s", f.Name)
		}
	}
	lib, err := loader.Load(archives["chartpin-lib"])
	if err != nil {
		t.Fatal(err)
	}
	if len(lib.Templates) == 0 || !strings.HasPrefix(lib.Templates[0].Name, "templates/_") {
		t.Errorf("library archive templates %v: a library chart holds only _helpers", lib.Templates)
	}
	manifest, _, err := installDryRun(c, releaseNs, parseValues(t, unpinned))
	if err != nil {
		t.Fatalf("rendering the packaged example: %v", err)
	}
	if !strings.Contains(manifest, "kind: CronJob") || !strings.Contains(manifest, "targets.yaml") {
		t.Error("the packaged example renders no reconcile")
	}
}

// TestVendoredLibrary: charts/example/charts/chartpin-lib is a byte-exact copy
// of charts/chartpin-lib, so the example installs, packages and publishes from
// the repository tree without `helm dependency build`, and a library change
// shows up as a change of the example (which chartpin guard then requires to
// bump). The example loaded from the tree renders exactly as the one whose
// file:// dependency Helm resolved.
func TestVendoredLibrary(t *testing.T) {
	const fix = "copy it again: rm -r charts/example/charts/chartpin-lib && cp -r charts/chartpin-lib charts/example/charts/"
	src, dst := "chartpin-lib", "example/charts/chartpin-lib"
	files := map[string]bool{}
	for _, dir := range []string{src, dst} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(dir, path)
			files[rel] = true
			return nil
		})
		if err != nil {
			t.Fatalf("%v; %s", err, fix)
		}
	}
	for rel := range files {
		a, errA := os.ReadFile(filepath.Join(src, rel))
		b, errB := os.ReadFile(filepath.Join(dst, rel))
		if errA != nil || errB != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs between %s and %s; %s", rel, src, dst, fix)
		}
	}

	tree, err := loader.Load("example")
	if err != nil {
		t.Fatal(err)
	}
	for _, vals := range []string{unpinned, unpinned + "\nenv: dev\nglobal: {imageRegistry: mirror.local:5000}"} {
		fromTree, _, err := installDryRun(tree, releaseNs, parseValues(t, vals))
		if err != nil {
			t.Fatalf("rendering charts/example from the tree: %v", err)
		}
		built, _, err := installDryRun(loadExample(t), releaseNs, parseValues(t, vals))
		if err != nil {
			t.Fatal(err)
		}
		if fromTree != built {
			t.Errorf("charts/example renders differently from the tree and from its resolved file:// dependency")
		}
	}
}
