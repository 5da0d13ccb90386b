package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/chartpin/chartpin/guard/guardtest"
	"github.com/chartpin/chartpin/internal/registrytest"
)

// A URL with credentials that would be published or printed, and a URL that
// is no URL, are input errors (exit 2) that write nothing, contact nothing and
// never echo the secret; a file --index is printed masked too.
func TestURLsWithCredentialsOrBadPorts(t *testing.T) {
	const secret = "s3cretPW"
	reg := registrytest.New(t)
	work, _, _ := releaseRepo(t)
	chart := filepath.Join(work, "charts/app")
	repo := filepath.Join(t.TempDir(), "repo")
	if code, out := runCombined(t, "publish", "--index-dir", repo, "--base-url", "https://charts.example.com", chart); code != 0 {
		t.Fatalf("publish: exit %d\n%s", code, out)
	}
	g := guardtest.New(t)
	g.Chart("app", "app", "0.1.0", "0.1.0")
	g.Base()
	g.ChartYAML("app", "app", "0.1.1", "0.1.1")
	g.Commit("bump")
	before := treeBytes(t, repo, chart, g.Path("."))
	reg.Reset()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"publish", "--index-dir", repo, "--base-url", "https://bob:" + secret + "@charts.example.com/repo", chart}, 2, "--base-url https://bob:xxxxx@charts.example.com/repo: a URL with credentials"},
		{[]string{"publish", "--index-dir", repo, "--base-url", "https://" + secret + "@charts.example.com", chart}, 2, "remove USER:PASSWORD@"},
		{[]string{"publish", "--index-dir", repo, "--prerelease-index", repo + "/pre", "--prerelease-base-url", "https://bob:" + secret + "@charts.example.com/pre", chart}, 2, "--prerelease-base-url https://bob:xxxxx@"},
		{[]string{"publish", "--index-dir", repo, "--base-url", "https://charts.example.com:99999/repo", chart}, 2, `port "99999"`},
		{[]string{"--insecure-registry", reg.Host, "publish", "--oci", "oci://bob:" + secret + "@" + reg.Host + "/charts", chart}, 2, "--oci oci://bob:xxxxx@" + reg.Host + "/charts"},
		{[]string{"--insecure-registry", reg.Host, "publish", "--oci", "oci://127.0.0.1:99999/charts", chart}, 2, `port "99999"`},
		{[]string{"--insecure-registry", reg.Host, "publish", "--oci", "oci://bob:" + secret + "@127.0.0.1:x/charts", chart}, 2, `invalid port ":x"`},
		{[]string{"--insecure-registry", reg.Host, "guard", "--base", "origin/main", "--oci", "oci://bob:" + secret + "@" + reg.Host + "/charts", g.Path("app")}, 2, "--oci oci://bob:xxxxx@"},
		{[]string{"--insecure-registry", reg.Host, "guard", "--base", "origin/main", "--oci", "oci://" + reg.Host + ":0/charts", g.Path("app")}, 2, `port "0"`},
		{[]string{"guard", "--base", "origin/main", "--index", "ftp://bob:" + secret + "@charts.example.com/index.yaml", g.Path("app")}, 1, "ftp://bob:xxxxx@charts.example.com/index.yaml"},
	} {
		code, out := runCheck(t, tc.args...)
		if code != tc.code || !strings.Contains(out, tc.want) || strings.Contains(out, secret) {
			t.Errorf("%v: exit %d (want %d and %q, no secret)\n%s", tc.args, code, tc.code, tc.want, out)
		}
	}
	if after := treeBytes(t, repo, chart, g.Path(".")); after != before {
		t.Errorf("files changed:\nbefore %s\nafter %s", before, after)
	}
	if n := reg.Count(""); n != 0 {
		t.Errorf("registry saw %d requests: %v", n, reg.Requests())
	}
}
