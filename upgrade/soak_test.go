package upgrade

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	helmregistry "helm.sh/helm/v3/pkg/registry"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/repo"

	"github.com/chartpin/chartpin/deprecation"
	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/internal/registrytest"
)

// testNow is the clock of the soak and recall tests.
var testNow = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

// publishedAs rewrites the repository's index: created and deprecated per version.
func (r *chartRepo) publishedAs(t *testing.T, created map[string]time.Time, deprecated ...string) {
	t.Helper()
	path := filepath.Join(r.dir, "index.yaml")
	idx, err := repo.LoadIndexFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, cv := range idx.Entries["demo"] {
		if c, ok := created[cv.Version]; ok {
			cv.Created = c
		}
		cv.Deprecated = false
		for _, d := range deprecated {
			if cv.Version == d {
				cv.Deprecated = true
			}
		}
	}
	if err := idx.WriteFile(path, 0o644); err != nil {
		t.Fatal(err)
	}
}

func clockAt(t time.Time) func() time.Time { return func() time.Time { return t } }

func versionsOf(cs []Candidate) map[string]string {
	out := map[string]string{}
	for _, c := range cs {
		out[c.Version] = c.Verdict
	}
	return out
}

// A version younger than --min-age is reported with how long it still has
// to soak, not taken and not an error; once the clock passes the soak, the
// same repository upgrades the release. No sleeping: the clock is an option.
func TestMinAgeWaitsThenUpgrades(t *testing.T) {
	cfg, kc := newConfig(t)
	install(t, cfg, demoChart("1.0.0", oldPin, false), userValues())
	srv := serveRepo(t, demoChart("1.0.0", oldPin, false), demoChart("1.1.0", newPin, true))
	srv.publishedAs(t, map[string]time.Time{"1.0.0": testNow.Add(-30 * 24 * time.Hour), "1.1.0": testNow.Add(-7 * time.Hour)})

	opts := options(t, srv.URL)
	opts.MinAge, opts.Now = 24*time.Hour, clockAt(testNow)
	res, err := Run(context.Background(), cfg, opts)
	if err != nil {
		t.Fatalf("a young version is not an error: %v", err)
	}
	if res.Decision != DecisionWaiting || res.Reason != "1.1.0 waits 17h more" || res.Target != "" || res.Latest != "1.1.0" || res.MinAge != "24h" {
		t.Fatalf("result %+v, want waiting with reason %q", res, "1.1.0 waits 17h more")
	}
	if got := kc.Calls(); len(got) != 0 {
		t.Fatalf("a waiting tick touched the cluster: %v", got)
	}
	equalHistory(t, history(t, cfg), []revision{{1, release.StatusDeployed, "1.0.0"}})
	if got := srv.Requests(); !reflect.DeepEqual(got, []string{"GET /index.yaml"}) {
		t.Errorf("a waiting tick fetched %v, want only the index", got)
	}

	// The JSON view shows every input of the decision, in snake_case.
	data, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var view map[string]any
	if err := json.Unmarshal(data, &view); err != nil {
		t.Fatal(err)
	}
	cands, _ := view["candidates"].([]any)
	if view["current"] != "1.0.0" || view["latest"] != "1.1.0" || view["decision"] != "waiting" || view["min_age"] != "24h" || view["now"] != "2026-12-02T12:00:00Z" || len(cands) != 2 {
		t.Fatalf("JSON view %s", data)
	}
	young := cands[1].(map[string]any)
	if young["version"] != "1.1.0" || young["age_seconds"] != float64(7*3600) || young["age"] != "7h" || young["verdict"] != "too-young" || young["wait"] != "17h" || young["created"] != "2026-12-02T05:00:00Z" {
		t.Fatalf("candidate 1.1.0 in JSON: %v", young)
	}

	opts.Now = clockAt(testNow.Add(17 * time.Hour))
	res, err = Run(context.Background(), cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Decision != DecisionUpgraded || res.Target != "1.1.0" {
		t.Fatalf("after the soak: %+v, want upgraded to 1.1.0", res)
	}
	equalHistory(t, history(t, cfg), []revision{{1, release.StatusSuperseded, "1.0.0"}, {2, release.StatusDeployed, "1.1.0"}})
}

// With two newer versions, the soaked one is taken while the younger waits.
func TestMinAgeTakesTheNewestSoakedVersion(t *testing.T) {
	cfg, _ := newConfig(t)
	install(t, cfg, demoChart("1.0.0", oldPin, false), nil)
	srv := serveRepo(t, demoChart("1.0.0", oldPin, false), demoChart("1.1.0", newPin, false), demoChart("1.2.0", newPin, false))
	srv.publishedAs(t, map[string]time.Time{"1.0.0": testNow.Add(-90 * time.Hour), "1.1.0": testNow.Add(-48 * time.Hour), "1.2.0": testNow.Add(-90 * time.Minute)})
	opts := options(t, srv.URL)
	opts.MinAge, opts.Now = 24*time.Hour, clockAt(testNow)
	res, err := Run(context.Background(), cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Decision != DecisionUpgraded || res.Target != "1.1.0" || res.Latest != "1.2.0" || !strings.Contains(res.Reason, "1.2.0 waits 22h30m more") {
		t.Fatalf("result %+v", res)
	}
	if got, want := versionsOf(res.Candidates), map[string]string{"1.0.0": VerdictCurrent, "1.1.0": VerdictTarget, "1.2.0": VerdictTooYoung}; !reflect.DeepEqual(got, want) {
		t.Errorf("candidates %v, want %v", got, want)
	}
}

// A deprecated version is never moved to; the next lower version above the
// deployed one is.
func TestDeprecatedVersionIsSkipped(t *testing.T) {
	cfg, _ := newConfig(t)
	install(t, cfg, demoChart("1.0.0", oldPin, false), userValues())
	srv := serveRepo(t, demoChart("1.0.0", oldPin, false), demoChart("1.1.0", newPin, false), demoChart("1.2.0", newPin, true))
	srv.publishedAs(t, nil, "1.2.0")
	opts := options(t, srv.URL)
	res, err := Run(context.Background(), cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Decision != DecisionUpgraded || res.Target != "1.1.0" || res.Latest != "1.2.0" || !strings.Contains(res.Reason, "skipped deprecated 1.2.0") {
		t.Fatalf("result %+v, want upgraded to 1.1.0 past the deprecated 1.2.0", res)
	}
	if got := srv.Requests(); !reflect.DeepEqual(got, []string{"GET /index.yaml", "GET /demo-1.1.0.tgz"}) {
		t.Errorf("requests %v: the deprecated archive must not even be fetched", got)
	}
	// Only deprecated versions above: nothing to do, and it says why.
	res, err = Run(context.Background(), cfg, opts)
	if err != nil || res.Decision != DecisionUpToDate || res.Reason != "no version above 1.1.0 to move to; skipped deprecated 1.2.0" {
		t.Fatalf("second tick %+v, %v", res, err)
	}
}

// An edge running a deprecated version moves to the newest non-deprecated
// one even though it is lower: a deliberate downgrade that keeps the
// operator's values as an upgrade does, and brings the lower chart's defaults.
func TestDeprecatedCurrentIsRecalled(t *testing.T) {
	onEachStore(t, "1.1.0", testRecall)
}

func testRecall(t *testing.T, cfg *action.Configuration, kc *recordingKube) {
	opts := options(t, "")
	srv := serveRepo(t, demoChart("1.1.0", oldPin, false), demoChart("1.2.0", newPin, true))
	opts.RepoURL = srv.URL
	if res, err := Run(context.Background(), cfg, opts); err != nil || res.Decision != DecisionUpgraded {
		t.Fatalf("upgrade to 1.2.0: %+v, %v", res, err)
	}

	srv.publishedAs(t, map[string]time.Time{"1.1.0": testNow.Add(-72 * time.Hour), "1.2.0": testNow.Add(-time.Hour)}, "1.2.0")
	opts.MinAge, opts.Now = 24*time.Hour, clockAt(testNow)
	opts.DryRun = true
	dry, err := Run(context.Background(), cfg, opts)
	if err != nil || dry.Decision != DecisionWouldRecall || dry.Target != "1.1.0" {
		t.Fatalf("dry run: %+v, %v; want would-recall to 1.1.0", dry, err)
	}
	opts.DryRun = false
	before := len(kc.Calls())
	res, err := Run(context.Background(), cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Decision != DecisionRecalled || res.Current != "1.2.0" || res.Target != "1.1.0" || res.Revision != 3 || !strings.HasPrefix(res.Reason, "1.2.0 is deprecated") {
		t.Fatalf("result %+v, want recalled 1.2.0 -> 1.1.0 at revision 3", res)
	}
	if got := kc.Calls()[before:]; !reflect.DeepEqual(got, []string{"update", "wait"}) {
		t.Errorf("cluster calls of the recall %v, want one update and its wait", got)
	}
	equalHistory(t, history(t, cfg), []revision{{1, release.StatusSuperseded, "1.1.0"}, {2, release.StatusSuperseded, "1.2.0"}, {3, release.StatusDeployed, "1.1.0"}})
	rel := stored(t, cfg, 3)
	if !sameValues(rel.Config, userValues()) {
		t.Errorf("user-supplied values after the recall = %v, want %v", rel.Config, userValues())
	}
	if !strings.Contains(rel.Manifest, oldPin) || strings.Contains(rel.Manifest, "-feature") || rel.Info.Description != "chartpin recall 1.2.0 -> 1.1.0" {
		t.Errorf("revision 3 (%q) does not run chart 1.1.0's defaults:\n%s", rel.Info.Description, rel.Manifest)
	}

	// Recalled: the next tick stays, the deprecated version is not taken again.
	again, err := Run(context.Background(), cfg, opts)
	if err != nil || again.Decision != DecisionUpToDate || again.Revision != 3 {
		t.Fatalf("tick after the recall: %+v, %v", again, err)
	}
}

// A recall prefers a soaked version, and takes a young one rather than stay
// on a deprecated version when nothing has soaked.
func TestRecallTarget(t *testing.T) {
	for _, tc := range []struct {
		name    string
		created map[string]time.Time
		want    string
	}{
		{"newest soaked", map[string]time.Time{"1.0.0": testNow.Add(-72 * time.Hour), "1.1.0": testNow.Add(-2 * time.Hour)}, "1.0.0"},
		{"nothing soaked", map[string]time.Time{"1.0.0": testNow.Add(-2 * time.Hour), "1.1.0": testNow.Add(-2 * time.Hour)}, "1.1.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _ := newConfig(t)
			install(t, cfg, demoChart("1.2.0", newPin, false), nil)
			srv := serveRepo(t, demoChart("1.0.0", oldPin, false), demoChart("1.1.0", oldPin, false), demoChart("1.2.0", newPin, false))
			srv.publishedAs(t, tc.created, "1.2.0")
			opts := options(t, srv.URL)
			opts.MinAge, opts.Now = 24*time.Hour, clockAt(testNow)
			res, err := Run(context.Background(), cfg, opts)
			if err != nil || res.Decision != DecisionRecalled || res.Target != tc.want {
				t.Fatalf("%+v, %v; want recalled to %s", res, err, tc.want)
			}
		})
	}
}

// Nothing left to recall to is a failure the operator must see (exit 1).
func TestEveryVersionDeprecatedFails(t *testing.T) {
	cfg, kc := newConfig(t)
	install(t, cfg, demoChart("1.1.0", oldPin, false), nil)
	srv := serveRepo(t, demoChart("1.0.0", oldPin, false), demoChart("1.1.0", oldPin, false))
	srv.publishedAs(t, nil, "1.0.0", "1.1.0")
	_, err := Run(context.Background(), cfg, options(t, srv.URL))
	if err == nil || failure.Code(err) != 1 || !strings.Contains(err.Error(), "every other version") {
		t.Fatalf("err = %v, want exit 1 saying every version is deprecated", err)
	}
	if len(kc.Calls()) != 0 {
		t.Errorf("cluster touched: %v", kc.Calls())
	}
}

// OCI: the creation time is the chart manifest's annotation (as publish
// writes it), and a deprecation is a marker artifact referring to the chart
// manifest, read through the referrers API or its tag fallback.
func TestOCISoakAndRecall(t *testing.T) {
	for _, referrersAPI := range []bool{true, false} {
		label := map[bool]string{true: "referrers API", false: "tag fallback"}[referrersAPI]
		t.Run(label, func(t *testing.T) {
			reg := registrytest.New(t, registry.WithReferrersSupport(referrersAPI))
			rc, err := helmregistry.NewClient(helmregistry.ClientOptPlainHTTP())
			if err != nil {
				t.Fatal(err)
			}
			push := func(ch *chart.Chart, created time.Time) {
				pushChart(t, rc, reg.Host, ch, helmregistry.PushOptCreationTime(created.Format(time.RFC3339)))
			}
			push(demoChart("1.0.0", oldPin, false), testNow.Add(-72*time.Hour))
			push(demoChart("1.1.0", newPin, false), testNow.Add(-7*time.Hour))

			cfg, _ := newConfig(t)
			install(t, cfg, demoChart("1.0.0", oldPin, false), userValues())
			opts := options(t, "")
			opts.OCI, opts.PlainHTTP = "oci://"+reg.Host+"/charts", true
			opts.MinAge, opts.Now = 24*time.Hour, clockAt(testNow)
			res, err := Run(context.Background(), cfg, opts)
			if err != nil || res.Decision != DecisionWaiting || res.Reason != "1.1.0 waits 17h more" {
				t.Fatalf("%+v, %v; want 1.1.0 waiting 17h", res, err)
			}

			opts.MinAge = 0
			if res, err := Run(context.Background(), cfg, opts); err != nil || res.Decision != DecisionUpgraded || res.Target != "1.1.0" {
				t.Fatalf("ring 0: %+v, %v", res, err)
			}

			// Deprecate 1.1.0 with a marker; the chart's tag and manifest stay.
			ref, err := name.NewTag(reg.Host+"/charts/demo:1.1.0", name.Insecure)
			if err != nil {
				t.Fatal(err)
			}
			desc, err := remote.Head(ref)
			if err != nil {
				t.Fatal(err)
			}
			p, err := remote.NewPusher()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := deprecation.Mark(context.Background(), p, ref.Context().Digest(desc.Digest.String()), *desc, true, testNow); err != nil {
				t.Fatal(err)
			}
			after, err := remote.Head(ref)
			if err != nil || after.Digest != desc.Digest {
				t.Fatalf("the chart tag moved: %v -> %v (%v)", desc.Digest, after, err)
			}
			res, err = Run(context.Background(), cfg, opts)
			if err != nil || res.Decision != DecisionRecalled || res.Target != "1.0.0" || res.Revision != 3 {
				t.Fatalf("recall: %+v, %v", res, err)
			}
			if !sameValues(stored(t, cfg, 3).Config, userValues()) {
				t.Errorf("values after the recall: %v", stored(t, cfg, 3).Config)
			}
		})
	}
}
