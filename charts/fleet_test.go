package charts_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chartpin/chartpin/chartbump"
	"github.com/chartpin/chartpin/internal/kubetest"
	"github.com/chartpin/chartpin/publish"
	"github.com/chartpin/chartpin/upgrade"
)

// fleetValues are what each edge is installed with: every workload pinned in
// the chart's defaults (so the stand-in controllers can roll them), no
// reconcile and no node agents, and the edge's ring.
func fleetValues(ring string) string {
	return `
reconcile: {enabled: false}
resourceMonitor: {enabled: false}
autoUpgrade: {ring: ` + ring + `, image: {digest: "", tag: "0.1.0"}}
`
}

// versionChart writes the example at version into dir, its jobs-manager pin
// (a chart default) set to pin, so the running image tells versions apart.
func versionChart(t *testing.T, dir, version, pin string) {
	t.Helper()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(builtCharts(t), "example"))); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "values.yaml")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for block, d := range map[string]string{"  jobsManager:\n": pin, "  podsMonitor:\n": digest('b'), "  requestsProxy:\n": digest('c')} {
		i := strings.Index(s, block)
		j := strings.Index(s[i:], "    digest: \"\"\n")
		if i < 0 || j < 0 {
			t.Fatalf("example/values.yaml: no %q with an empty digest", block)
		}
		s = s[:i+j] + "    digest: \"" + d + "\"\n" + s[i+j+len("    digest: \"\"\n"):]
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := chartbump.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := chartbump.Plan(c, chartbump.Options{Version: version, AppVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	if err := chartbump.Write(ch); err != nil {
		t.Fatal(err)
	}
}

// TestFleetRingsAndRecall runs a three-ring fleet of the example chart on a
// real API server, each edge's tick as its own auto-upgrade ServiceAccount
// with the --min-age its CronJob renders. A new version reaches ring 0 at
// once, ring 1 after a day and ring 2 after two (the clock is an option: no
// sleeping); a deprecated version is recalled from every ring to the newest
// good one with the operator's values kept, a fresh edge skips it, and its
// tarball keeps its bytes.
func TestFleetRingsAndRecall(t *testing.T) {
	rings := []string{"ring0", "ring1", "ring2"}
	var users []kubetest.User
	for _, ns := range append(rings, "fresh") {
		users = append(users, kubetest.ServiceAccountUser(ns+"-token", ns, releaseName+"-example-upgrade"))
	}
	srv := kubetest.Start(t, users...)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	admin := srv.Client(t, kubetest.AdminToken)
	ctl := &kubetest.Controllers{Client: admin, Namespaces: append(rings, "fresh")}
	defer ctl.Run()()

	// The chart repository: an index directory served over HTTP.
	repoDir, work := t.TempDir(), t.TempDir()
	charts := httptest.NewServer(http.FileServer(http.Dir(repoDir)))
	defer charts.Close()
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	pins := map[string]string{"0.1.0": digest('1'), "0.2.0": digest('2'), "0.3.0": digest('3')}
	publishAt := func(version string, at time.Time) {
		t.Helper()
		dir := filepath.Join(work, version)
		versionChart(t, dir, version, pins[version])
		if _, err := publish.Publish(ctx, dir, publish.Options{IndexDir: repoDir, BaseURL: charts.URL, Now: func() time.Time { return at }}); err != nil {
			t.Fatal(err)
		}
	}
	publishAt("0.1.0", t0.Add(-30*24*time.Hour))

	userValues := map[string]map[string]any{}
	install := func(ns, ring string) {
		t.Helper()
		if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		ch := loadChartDir(t, filepath.Join(work, "0.1.0"))
		in := action.NewInstall(helmConfig(t, srv, kubetest.AdminToken, ns))
		in.ReleaseName, in.Namespace, in.Wait, in.Timeout = releaseName, ns, true, time.Minute
		vals := parseValues(t, fleetValues(ring))
		userValues[ns] = vals
		if _, err := in.RunWithContext(ctx, ch, vals); err != nil {
			t.Fatalf("installing ring %s in %s: %v", ring, ns, err)
		}
	}
	for i, ns := range rings {
		install(ns, string(rune('0'+i)))
	}

	// tick is one CronJob run of an edge at now, with the --min-age its
	// CronJob carries in the cluster.
	tick := func(ns string, now time.Time) upgrade.Result {
		t.Helper()
		cj, err := admin.BatchV1().CronJobs(ns).Get(ctx, releaseName+"-example-upgrade", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var minAge time.Duration
		for _, a := range cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args {
			if v, ok := strings.CutPrefix(a, "--min-age="); ok {
				if minAge, err = time.ParseDuration(v); err != nil {
					t.Fatal(err)
				}
			}
		}
		cfg, _, err := upgrade.NewConfiguration(upgrade.ClusterOptions{Namespace: ns, Kubeconfig: srv.Kubeconfig(t, ns+"-token")})
		if err != nil {
			t.Fatal(err)
		}
		o := upgrade.Options{Release: releaseName, Namespace: ns, Chart: "example", RepoURL: charts.URL,
			Timeout: 20 * time.Second, RequestTimeout: 5 * time.Second, MinAge: minAge, Now: func() time.Time { return now }}
		deadline, _ := upgrade.CommandDeadline(0, o)
		tctx, tcancel := context.WithTimeout(t.Context(), deadline)
		defer tcancel()
		res, err := upgrade.Run(tctx, cfg, o)
		if err != nil {
			t.Fatalf("tick of %s at %s: %v (result %+v)", ns, now, err, res)
		}
		return res
	}
	runs := func(ns string) string {
		t.Helper()
		d, err := admin.AppsV1().Deployments(ns).Get(ctx, releaseName+"-jobs-manager", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		img := d.Spec.Template.Spec.Containers[0].Image
		return img[strings.LastIndex(img, "@")+1:]
	}
	expect := func(step string, ns string, res upgrade.Result, decision, version string) {
		t.Helper()
		if res.Decision != decision {
			t.Fatalf("%s: %s decided %s (%s), want %s", step, ns, res.Decision, res.Reason, decision)
		}
		if got := runs(ns); got != pins[version] {
			t.Fatalf("%s: %s runs jobs-manager %s, want chart %s's %s", step, ns, got, version, pins[version])
		}
		t.Logf("%s: %s %s (%s)", step, ns, res.Decision, res.Reason)
	}

	// 0.2.0 is published: the rings take it in order.
	publishAt("0.2.0", t0)
	expect("+1h", "ring0", tick("ring0", t0.Add(time.Hour)), upgrade.DecisionUpgraded, "0.2.0")
	r1 := tick("ring1", t0.Add(time.Hour))
	expect("+1h", "ring1", r1, upgrade.DecisionWaiting, "0.1.0")
	if r1.Reason != "0.2.0 waits 23h more" {
		t.Errorf("ring1 at +1h says %q", r1.Reason)
	}
	expect("+1h", "ring2", tick("ring2", t0.Add(time.Hour)), upgrade.DecisionWaiting, "0.1.0")
	expect("+25h", "ring1", tick("ring1", t0.Add(25*time.Hour)), upgrade.DecisionUpgraded, "0.2.0")
	expect("+25h", "ring2", tick("ring2", t0.Add(25*time.Hour)), upgrade.DecisionWaiting, "0.1.0")
	expect("+49h", "ring2", tick("ring2", t0.Add(49*time.Hour)), upgrade.DecisionUpgraded, "0.2.0")

	// 0.3.0 is bad, but every ring takes it before anyone notices.
	t1 := t0.Add(72 * time.Hour)
	publishAt("0.3.0", t1)
	for i, ns := range rings {
		expect("0.3.0", ns, tick(ns, t1.Add(time.Duration(i)*24*time.Hour+time.Hour)), upgrade.DecisionUpgraded, "0.3.0")
	}

	// Recall: deprecate 0.3.0. Its tarball keeps its bytes.
	tgz := filepath.Join(repoDir, "example-0.3.0.tgz")
	before := fileSum(t, tgz)
	if _, err := publish.Deprecate(ctx, filepath.Join(work, "0.3.0"), "0.3.0", true, publish.Options{IndexDir: repoDir, BaseURL: charts.URL}); err != nil {
		t.Fatal(err)
	}
	if after := fileSum(t, tgz); after != before {
		t.Fatalf("deprecating changed the 0.3.0 tarball: sha256 %s -> %s", before, after)
	}
	t2 := t1.Add(96 * time.Hour)
	for _, ns := range rings {
		res := tick(ns, t2)
		expect("recall", ns, res, upgrade.DecisionRecalled, "0.2.0")
		rel, err := helmConfig(t, srv, kubetest.AdminToken, ns).Releases.Last(releaseName)
		if err != nil {
			t.Fatal(err)
		}
		if rel.Chart.Metadata.Version != "0.2.0" || !sameJSON(t, rel.Config, userValues[ns]) {
			t.Fatalf("%s after the recall: chart %s, user values %v, want 0.2.0 with %v", ns, rel.Chart.Metadata.Version, rel.Config, userValues[ns])
		}
		expect("after recall", ns, tick(ns, t2.Add(time.Hour)), upgrade.DecisionUpToDate, "0.2.0")
	}

	// A fresh canary edge skips the deprecated version.
	install("fresh", "0")
	expect("fresh", "fresh", tick("fresh", t2), upgrade.DecisionUpgraded, "0.2.0")
	if err := ctl.Err(); err != nil {
		t.Fatal(err)
	}
}

func fileSum(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func loadChartDir(t *testing.T, dir string) *chart.Chart {
	t.Helper()
	c, err := loader.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// sameJSON compares values as JSON: the release store decodes numbers as float64.
func sameJSON(t *testing.T, a, b map[string]any) bool {
	t.Helper()
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	return string(ja) == string(jb)
}
