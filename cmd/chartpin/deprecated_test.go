package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/chartpin/chartpin/deprecation"
	"github.com/chartpin/chartpin/guard/guardtest"
	"github.com/chartpin/chartpin/internal/registrytest"
)

// indexServer serves index.yaml at /index.yaml and counts its requests.
func indexServer(t *testing.T, index string) (*httptest.Server, *int) {
	t.Helper()
	hits := new(int)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*hits++
		if r.URL.Path != "/index.yaml" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(index))
	}))
	t.Cleanup(srv.Close)
	return srv, hits
}

// chartWithDependency writes Chart.yaml naming lib at version from repository (line 8).
func chartWithDependency(r *guardtest.Repo, dir, version, dep, repository string) {
	r.Write(dir+"/Chart.yaml", "apiVersion: v2\nname: app\nversion: "+version+"\nappVersion: \""+version+"\"\ndescription: test chart\ndependencies:\n  - name: lib\n    version: "+dep+"\n    repository: "+repository+"\n")
}

const recallIndex = `apiVersion: v1
entries:
  app:
    - name: app
      version: 0.1.0
      deprecated: true
  lib:
    - name: lib
      version: 0.2.1
    - name: lib
      version: 0.2.0
      deprecated: true
`

func TestGuardRefusesARecalledDependency(t *testing.T) {
	srv, hits := indexServer(t, recallIndex)
	r := guardtest.New(t)
	chartWithDependency(r, "app", "0.1.0", "0.2.1", srv.URL)
	r.Base()
	chartWithDependency(r, "app", "0.1.1", "0.2.0", srv.URL+"/")
	r.Commit("move to a recalled lib")
	code, out := runCheck(t, "guard", "--base", "origin/main", "--index", srv.URL+"/index.yaml", r.Path("app"))
	wantExit(t, code, 1, out)
	want := "app/Chart.yaml:8: app 0.1.1 depends on lib 0.2.0, which is deprecated in " + srv.URL + "/index.yaml: depend on a version that is not deprecated"
	if !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
	if *hits != 1 {
		t.Errorf("index fetched %d times, want 1", *hits)
	}

	// The same dependency from another repository is not this index's to judge.
	chartWithDependency(r, "app", "0.1.1", "0.2.0", "https://elsewhere.example/charts")
	r.Commit("lib from elsewhere")
	code, out = runCheck(t, "guard", "--base", "origin/main", "--index", srv.URL+"/index.yaml", r.Path("app"))
	wantExit(t, code, 0, out)

	chartWithDependency(r, "app", "0.1.1", "0.2.1", srv.URL)
	r.Commit("lib 0.2.1")
	code, out = runCheck(t, "guard", "--base", "origin/main", "--index", srv.URL+"/index.yaml", r.Path("app"))
	wantExit(t, code, 0, out)
	if strings.Contains(out, "deprecated") {
		t.Errorf("a version that is not deprecated is reported:\n%s", out)
	}
}

func TestGuardListsARecalledVersionStillNamed(t *testing.T) {
	srv, _ := indexServer(t, recallIndex)
	r := guardtest.New(t)
	chartWithDependency(r, "app", "0.1.0", "0.2.0", srv.URL)
	r.Write("other/Chart.yaml", "apiVersion: v2\nname: other\nversion: 1.0.0\n")
	r.Base()
	r.Write("other/values.yaml", "a: 1\n")
	r.Write("other/Chart.yaml", "apiVersion: v2\nname: other\nversion: 1.0.1\n")
	r.Commit("unrelated change")
	// The change did not bring the recalled versions: listed, not refused.
	code, out := runCheck(t, "guard", "--base", "origin/main", "--index", srv.URL+"/index.yaml", r.Path("app"), r.Path("other"))
	wantExit(t, code, 0, out)
	for _, want := range []string{
		"app/Chart.yaml:3: still referenced: version app 0.1.0 is deprecated in " + srv.URL + "/index.yaml: edges are moved off it; ship the fix as a new version",
		"app/Chart.yaml:8: still referenced: dependency lib 0.2.0 is deprecated in",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, out = runCheck(t, "guard", "--base", "origin/main", "--index", srv.URL+"/index.yaml", "-o", "json", r.Path("app"), r.Path("other"))
	wantExit(t, code, 0, out)
	var res struct {
		Charts []struct {
			Dir        string `json:"dir"`
			Deprecated []struct {
				Line       int    `json:"line"`
				Chart      string `json:"chart"`
				Version    string `json:"version"`
				Dependency bool   `json:"dependency"`
			} `json:"deprecated"`
		} `json:"charts"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if len(res.Charts) != 2 || res.Charts[0].Dir != "app" || len(res.Charts[0].Deprecated) != 2 || !res.Charts[0].Deprecated[1].Dependency || res.Charts[0].Deprecated[1].Line != 8 {
		t.Errorf("json: %+v", res)
	}
}

// markDeprecated pushes a deprecation marker for repo:tag, as publish --deprecate does.
func markDeprecated(t *testing.T, host, repo, tag string) {
	t.Helper()
	ref, err := name.NewTag(host+"/"+repo+":"+tag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Head(ref)
	if err != nil {
		t.Fatal(err)
	}
	pusher, err := remote.NewPusher()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := deprecation.Mark(context.Background(), pusher, ref.Context().Digest(desc.Digest.String()), *desc, true, time.Now()); err != nil {
		t.Fatal(err)
	}
}

func TestDriftReportsARecalledVersionInOCI(t *testing.T) {
	reg := registrytest.New(t)
	digest := reg.PushIndex(t, "team/app", "1.0", "linux/amd64")
	reg.PushImage(t, "charts/app", "0.1.0")
	reg.PushImage(t, "charts/app", "0.1.1")
	dir := driftChart(t, "image:\n  repository: "+reg.Host+"/team/app\n  tag: \"1.0\"\n  digest: "+digest+"\n")
	chartFile := filepath.Join(dir, "Chart.yaml")
	if err := os.WriteFile(chartFile, []byte("apiVersion: v2\nname: app\nversion: 0.1.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	oci := "oci://" + reg.Host + "/charts"
	code, out := runCheck(t, "--insecure-registry", reg.Host, "drift", "--oci", oci, dir)
	wantExit(t, code, 0, out)

	markDeprecated(t, reg.Host, "charts/app", "0.1.0")
	code, out = runCheck(t, "--insecure-registry", reg.Host, "drift", "--oci", oci, dir)
	wantExit(t, code, 1, out)
	for _, want := range []string{
		"DEPRECATED  " + chartFile + ":3  version app 0.1.0 is deprecated in " + oci + "/app",
		"1 DEPRECATED chart version(s) still named",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// Another version of the chart is not recalled by that marker.
	if err := os.WriteFile(chartFile, []byte("apiVersion: v2\nname: app\nversion: 0.1.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out = runCheck(t, "--insecure-registry", reg.Host, "drift", "--oci", oci, dir)
	wantExit(t, code, 0, out)

	// guard lists it for an unchanged chart.
	r := guardtest.New(t)
	r.ChartYAML("app", "app", "0.1.0", "0.1.0")
	r.Base()
	code, out = runCheck(t, "--insecure-registry", reg.Host, "guard", "--base", "origin/main", "--oci", oci, r.Path("app"))
	wantExit(t, code, 0, out)
	if !strings.Contains(out, "still referenced: version app 0.1.0 is deprecated in "+oci+"/app") {
		t.Errorf("guard output:\n%s", out)
	}
}

func TestRepositoryURLsAreInputErrors(t *testing.T) {
	r := guardtest.New(t)
	r.Chart("app", "app", "0.1.0", "0.1.0")
	r.Base()
	dir := driftChart(t, "image:\n  repository: ghcr.io/example/app\n  tag: \"1.0\"\n  digest: \"\"\n")
	for _, bad := range []string{"http://127.0.0.1:99999/index.yaml", "https://user:s3cret@:8080/index.yaml", "http://[::1/index.yaml"} {
		for _, args := range [][]string{
			{"guard", "--base", "origin/main", "--index", bad, r.Path("app")},
			{"drift", "--index", bad, dir},
		} {
			code, out := runCheck(t, args...)
			wantExit(t, code, 2, out)
			if !strings.Contains(out, "--index") || strings.Contains(out, "s3cret") {
				t.Errorf("%s %s: output does not name --index, or shows the password:\n%s", args[0], bad, out)
			}
		}
	}
}
