package charts_test

import (
	"io"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/downloader"
	"helm.sh/helm/v3/pkg/getter"
	"helm.sh/helm/v3/pkg/lint/support"
)

// buildAdopter copies testdata/adopter (the adoption example of
// charts/README.md) next to the library and resolves its file:// dependency.
func buildAdopter(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if err := copyChart("chartpin-lib", filepath.Join(root, "chartpin-lib")); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "testdata", "adopter")
	if err := copyChart("testdata/adopter", dir); err != nil {
		t.Fatal(err)
	}
	m := &downloader.Manager{
		Out: io.Discard, ChartPath: dir, SkipUpdate: true, Getters: getter.Getters(),
		RepositoryConfig: filepath.Join(root, "repositories.yaml"), RepositoryCache: filepath.Join(root, "cache"),
	}
	if err := m.Update(); err != nil {
		t.Fatalf("resolving the adopter's file:// dependency: %v", err)
	}
	return dir
}

// TestAdopterChart: a chart that is not the example (other value paths, a
// StatefulSet, a Docker Hub library image, an OCI auto-upgrade) gets the same
// update paths by following charts/README.md, under the same invariants.
func TestAdopterChart(t *testing.T) {
	dir := buildAdopter(t)
	lint := action.NewLint()
	lint.Strict = true
	lint.Namespace = "default"
	for _, msg := range lint.Run([]string{dir}, map[string]any{}).Messages {
		if msg.Severity >= support.WarningSev || strings.Contains(msg.Err.Error(), "Fail") {
			t.Errorf("helm lint adopter: %s", msg)
		}
	}
	load := func() *chart.Chart {
		c, err := loader.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	const shopWeb = "ghcr.io/acme/shop-web"
	pg := "docker.io/library/postgres"

	t.Run("dev floats and reconciles", func(t *testing.T) {
		manifest, _, err := installDryRun(load(), "shop", nil)
		if err != nil {
			t.Fatal(err)
		}
		r := renderParsed(t, rendered{ns: "shop", base: "rel-shop"}, manifest)
		for name, w := range map[string]want{
			"web": {shopWeb + ":edge", ifnp}, "worker": {shopWeb + ":edge", ifnp}, "postgres": {pg + ":17.2", ifnp},
		} {
			if c := r.container(t, name); c.Image != w.image || c.Policy != w.policy {
				t.Errorf("%s: %s %s, want %s %s", name, c.Image, c.Policy, w.image, w.policy)
			}
		}
		if got := strings.Join(r.targetIDs(), ","); got != "web,worker,db" {
			t.Errorf("targets %s", got)
		}
		if r.targets.Targets[1].Follows != "web" {
			t.Errorf("worker target %+v, want follows web", r.targets.Targets[1])
		}
		checkInvariants(t, r, true)
		cj, _ := find(r.objs, "CronJob", "shop", "rel-shop-upgrade")
		if !strings.Contains(string(cj.Doc), "--oci=oci://ghcr.io/acme/charts") || !strings.Contains(string(cj.Doc), "--chart=shop") {
			t.Errorf("adopter auto-upgrade:\n%s", cj.Doc)
		}
		role, ok := find(r.objs, "Role", "shop", "rel-shop-reconcile-shop")
		if !ok || !strings.Contains(string(role.Doc), `resources: ["statefulsets"]`) {
			t.Errorf("no StatefulSet rule in the reconcile Role:\n%s", role.Doc)
		}
	})
	t.Run("prod pinned, mirrored", func(t *testing.T) {
		vals := parseValues(t, `
env: prod
global: {imageRegistry: mirror.acme:5000}
web: {image: {prodDigest: "`+dJMProd+`"}}
db: {image: {digest: "`+dRM+`"}}`)
		manifest, _, err := installDryRun(load(), "shop", vals)
		if err != nil {
			t.Fatal(err)
		}
		r := renderParsed(t, rendered{ns: "shop", base: "rel-shop"}, manifest)
		for name, w := range map[string]want{
			"web": {"mirror.acme:5000/acme/shop-web@" + dJMProd, ifnp}, "worker": {"mirror.acme:5000/acme/shop-web@" + dJMProd, ifnp},
			"postgres": {"mirror.acme:5000/library/postgres@" + dRM, ifnp}, "upgrade": {"mirror.acme:5000/chartpin/chartpin:0.1.0", always},
		} {
			if c := r.container(t, name); c.Image != w.image || c.Policy != w.policy {
				t.Errorf("%s: %s %s, want %s %s", name, c.Image, c.Policy, w.image, w.policy)
			}
		}
		if r.targets != nil {
			t.Errorf("all pinned, yet targets %v", r.targetIDs())
		}
		checkInvariants(t, r, true)
	})
	t.Run("missing declaration", func(t *testing.T) {
		c := load()
		var kept []*chart.File
		for _, f := range c.Templates {
			if f.Name != "templates/_chartpin.tpl" {
				kept = append(kept, f)
			}
		}
		c.Templates = kept
		_, _, err := installDryRun(c, "shop", nil)
		if err == nil || !strings.Contains(err.Error(), `"shop.chartpin"`) {
			t.Errorf("rendering without the declaration: %v, want an error naming shop.chartpin", err)
		}
	})
	t.Run("undeclared id", func(t *testing.T) {
		c := load()
		for _, f := range c.Templates {
			if f.Name == "templates/db.yaml" {
				f.Data = []byte(strings.Replace(string(f.Data), `"id" "db"`, `"id" "database"`, 1))
			}
		}
		_, _, err := installDryRun(c, "shop", nil)
		if err == nil || !strings.Contains(err.Error(), `chartpin: no workload with id "database" in shop.chartpin; declare it there`) {
			t.Errorf("an undeclared id: %v", err)
		}
	})
	t.Run("bad kind", func(t *testing.T) {
		c := load()
		for _, f := range c.Templates {
			if f.Name == "templates/_chartpin.tpl" {
				f.Data = []byte(strings.Replace(string(f.Data), "kind: StatefulSet", "kind: CronJob", 1))
			}
		}
		_, _, err := installDryRun(c, "shop", nil)
		if err == nil || !strings.Contains(err.Error(), `workload db has kind "CronJob"; the reconcile re-images Deployment, DaemonSet and StatefulSet only`) {
			t.Errorf("a CronJob workload: %v", err)
		}
	})
}
