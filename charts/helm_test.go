package charts_test

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/downloader"
	"helm.sh/helm/v3/pkg/getter"
	"sigs.k8s.io/yaml"
)

const (
	releaseName = "rel"
	releaseNs   = "prod-ns"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// TestMain removes the built chart copies after the run.
func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// builtCharts copies charts/chartpin-lib and charts/example (without any
// vendored charts/ or Chart.lock) to a temporary tree and resolves the
// example's file://../chartpin-lib dependency with Helm's dependency manager,
// as `helm dependency update` does. It returns the tree's root.
func builtCharts(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "chartpin-charts-")
		if buildErr != nil {
			return
		}
		for _, name := range []string{"chartpin-lib", "example"} {
			if buildErr = copyChart(name, filepath.Join(buildDir, name)); buildErr != nil {
				return
			}
		}
		m := &downloader.Manager{
			Out:              io.Discard,
			ChartPath:        filepath.Join(buildDir, "example"),
			SkipUpdate:       true,
			Getters:          getter.Getters(),
			RepositoryConfig: filepath.Join(buildDir, "repositories.yaml"),
			RepositoryCache:  filepath.Join(buildDir, "cache"),
		}
		if err := m.Update(); err != nil {
			buildErr = fmt.Errorf("resolving example's file:// dependency: %w", err)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildDir
}

// copyChart copies one chart directory, leaving out dependency build output.
func copyChart(name, dst string) error {
	src := name
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if rel == "charts" || rel == "Chart.lock" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}

// loadExample loads the built example chart, with its library dependency.
func loadExample(t testing.TB) *chart.Chart {
	t.Helper()
	c, err := loader.Load(filepath.Join(builtCharts(t), "example"))
	if err != nil {
		t.Fatalf("loading example chart: %v", err)
	}
	return c
}

// parseValues parses YAML overrides in the form a user passes with -f.
func parseValues(t testing.TB, docs ...string) map[string]any {
	t.Helper()
	out := map[string]any{}
	for _, d := range docs {
		v, err := chartutil.ReadValues([]byte(d))
		if err != nil {
			t.Fatalf("bad test values %q: %v", d, err)
		}
		out = chartutil.MergeTables(v.AsMap(), out)
	}
	return out
}

// installDryRun renders the chart as `helm install --dry-run` (client only),
// with schema validation.
func installDryRun(c *chart.Chart, ns string, vals map[string]any) (string, string, error) {
	cfg := &action.Configuration{}
	in := action.NewInstall(cfg)
	in.DryRun = true
	in.DryRunOption = "client"
	in.ClientOnly = true
	in.Replace = true
	in.ReleaseName = releaseName
	in.Namespace = ns
	rel, err := in.Run(c, vals)
	if err != nil {
		return "", "", err
	}
	return rel.Manifest, rel.Info.Notes, nil
}

// object is one rendered manifest.
type object struct {
	Kind, Namespace, Name string
	Doc                   []byte
	Map                   map[string]any
}

func (o object) key() string { return o.Kind + "/" + o.Namespace + "/" + o.Name }

// into decodes the object into a typed Kubernetes struct.
func (o object) into(t *testing.T, v any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(o.Doc, v); err != nil {
		t.Fatalf("%s does not decode strictly as %T: %v\n%s", o.key(), v, err, o.Doc)
	}
}

// parseManifest splits a rendered manifest into objects.
func parseManifest(t *testing.T, manifest string) []object {
	t.Helper()
	var objs []object
	for _, doc := range strings.Split(manifest, "\n---") {
		doc = strings.TrimPrefix(doc, "---")
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("rendered document does not parse: %v\n%s", err, doc)
		}
		md, _ := m["metadata"].(map[string]any)
		name, _ := md["name"].(string)
		ns, _ := md["namespace"].(string)
		kind, _ := m["kind"].(string)
		if kind == "" || name == "" {
			t.Fatalf("rendered document without kind or name:\n%s", doc)
		}
		objs = append(objs, object{Kind: kind, Namespace: ns, Name: name, Doc: []byte(doc), Map: m})
	}
	return objs
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// keys lists the objects' kind/namespace/name, sorted.
func keys(objs []object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.key())
	}
	sort.Strings(out)
	return out
}

// find returns the one object with that kind and name.
func find(objs []object, kind, ns, name string) (object, bool) {
	for _, o := range objs {
		if o.Kind == kind && o.Name == name && o.Namespace == ns {
			return o, true
		}
	}
	return object{}, false
}
