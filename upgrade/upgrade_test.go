package upgrade

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	helmregistry "helm.sh/helm/v3/pkg/registry"
	"helm.sh/helm/v3/pkg/release"

	"github.com/chartpin/chartpin/internal/failure"
)

func options(t *testing.T, repoURL string) Options {
	return Options{
		Release:        relName,
		Namespace:      ns,
		Chart:          "demo",
		RepoURL:        repoURL,
		Timeout:        time.Second,
		RequestTimeout: 5 * time.Second,
		Logger:         testLogger(t),
	}
}

// A newer stable chart is installed with reset-then-reuse-values: the new
// chart's defaults (the moved pin, a brand-new key) arrive, and what the
// operator supplied survives.
func TestUpgradesToNewestStableKeepingUserValues(t *testing.T) {
	onEachStore(t, "1.0.0", testUpgradesToNewestStable)
}

func testUpgradesToNewestStable(t *testing.T, cfg *action.Configuration, kc *recordingKube) {
	srv := serveRepo(t, demoChart("1.0.0", oldPin, false), demoChart("1.1.0", newPin, true), demoChart("1.2.0-rc.1", newPin, true))

	res, err := Run(context.Background(), cfg, options(t, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	want := Result{Release: relName, Namespace: ns, Current: "1.0.0", Latest: "1.1.0", Target: "1.1.0", Decision: DecisionUpgraded, Revision: 2}
	res.Now, res.Reason, res.Candidates = time.Time{}, "", nil // shown by the soak tests
	if !reflect.DeepEqual(res, want) {
		t.Fatalf("result\n got %+v\nwant %+v", res, want)
	}
	equalHistory(t, history(t, cfg), []revision{{1, release.StatusSuperseded, "1.0.0"}, {2, release.StatusDeployed, "1.1.0"}})

	rel := stored(t, cfg, 2)
	if !sameValues(rel.Config, userValues()) {
		t.Errorf("user-supplied values of revision 2 = %v, want exactly %v", rel.Config, userValues())
	}
	effective, err := chartutil.CoalesceValues(rel.Chart, rel.Config)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := effective.PathValue("image.prodDigest"); got != newPin {
		t.Errorf("effective image.prodDigest = %v, want the new chart default %s", got, newPin)
	}
	if got, _ := effective.PathValue("feature.enabled"); got != true {
		t.Errorf("effective feature.enabled = %v, want the new chart's default true", got)
	}
	for _, line := range []string{
		`image: "ghcr.io/example/app@` + newPin + `"`,
		`pullPolicy: Always`, // user-supplied, survives
		`replicas: "3"`,      // user-supplied, survives
		`chart: "1.1.0"`,
		`enabled: "true"`, // new key from the new defaults renders
	} {
		if !strings.Contains(rel.Manifest, line) {
			t.Errorf("revision 2 manifest lacks %q:\n%s", line, rel.Manifest)
		}
	}
	if got := srv.Requests(); !reflect.DeepEqual(got, []string{"GET /index.yaml", "GET /demo-1.1.0.tgz"}) {
		t.Errorf("repository requests = %v", got)
	}
	if got := kc.Calls(); !reflect.DeepEqual(got, []string{"update", "wait"}) {
		t.Errorf("cluster calls = %v, want one update and one wait (atomic implies wait)", got)
	}
}

// A killed upgrade leaves the release pending-upgrade; the tick
// rolls back to the last deployed revision, then upgrades.
func TestWedgedReleaseIsRolledBackThenUpgraded(t *testing.T) {
	for _, tc := range []struct {
		store  string
		config func(*testing.T) (*action.Configuration, *recordingKube)
		status release.Status
	}{
		{"memory", newConfig, release.StatusPendingUpgrade},
		{"memory", newConfig, release.StatusPendingRollback},
		{"secrets", newSecretsConfig, release.StatusPendingUpgrade},
	} {
		st := tc.status
		t.Run(tc.store+"/"+string(st), func(t *testing.T) {
			cfg, _ := tc.config(t)
			first := install(t, cfg, demoChart("1.0.0", oldPin, false), userValues())
			wedge(t, cfg, first, 2, st, demoChart("1.0.5", oldPin, false))
			srv := serveRepo(t, demoChart("1.0.0", oldPin, false), demoChart("1.1.0", newPin, true))

			res, err := Run(context.Background(), cfg, options(t, srv.URL))
			if err != nil {
				t.Fatal(err)
			}
			if res.Decision != DecisionUpgraded || res.Current != "1.0.0" || res.Latest != "1.1.0" || res.Revision != 4 {
				t.Fatalf("result %+v", res)
			}
			if !strings.Contains(res.Recovered, "revision 2 was "+string(st)+"; rolled back to revision 1") {
				t.Errorf("Recovered = %q", res.Recovered)
			}
			equalHistory(t, history(t, cfg), []revision{
				{1, release.StatusSuperseded, "1.0.0"},
				{2, release.StatusFailed, "1.0.5"}, // the interrupted one, no longer pending
				{3, release.StatusSuperseded, "1.0.0"},
				{4, release.StatusDeployed, "1.1.0"},
			})
			if d := stored(t, cfg, 3).Info.Description; d != "Rollback to 1" {
				t.Errorf("revision 3 description = %q, want Helm's rollback record", d)
			}
			if got := stored(t, cfg, 4).Config; !sameValues(got, userValues()) {
				t.Errorf("user values after rollback+upgrade = %v", got)
			}
		})
	}
}

// wedge stores revision v of the release in status st, as a killed helm
// process leaves it.
func wedge(t *testing.T, c *action.Configuration, base *release.Release, v int, st release.Status, ch *chart.Chart) {
	t.Helper()
	r := *base
	r.Version = v
	r.Chart = ch
	r.Info = &release.Info{FirstDeployed: base.Info.FirstDeployed, LastDeployed: base.Info.LastDeployed, Status: st, Description: "Preparing upgrade"}
	if err := c.Releases.Create(&r); err != nil {
		t.Fatal(err)
	}
}

func TestWedgedReleaseDryRunTouchesNothing(t *testing.T) {
	cfg, kc := newConfig(t)
	first := install(t, cfg, demoChart("1.0.0", oldPin, false), userValues())
	wedge(t, cfg, first, 2, release.StatusPendingUpgrade, demoChart("1.0.5", oldPin, false))
	srv := serveRepo(t, demoChart("1.1.0", newPin, true))
	before := history(t, cfg)

	opts := options(t, srv.URL)
	opts.DryRun = true
	res, err := Run(context.Background(), cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Decision != DecisionWouldUpgrade || !strings.Contains(res.Recovered, "would roll back to revision 1") {
		t.Fatalf("result %+v", res)
	}
	equalHistory(t, history(t, cfg), before)
	if got := kc.Calls(); len(got) != 0 {
		t.Errorf("dry run touched the cluster: %v", got)
	}
}

func TestPendingInstallWithNothingToRollBackToFails(t *testing.T) {
	cfg, _ := newConfig(t)
	first := install(t, cfg, demoChart("1.0.0", oldPin, false), nil)
	first.Info.Status = release.StatusPendingInstall
	if err := cfg.Releases.Update(first); err != nil {
		t.Fatal(err)
	}
	srv := serveRepo(t, demoChart("1.1.0", newPin, true))
	_, err := Run(context.Background(), cfg, options(t, srv.URL))
	if err == nil || failure.Code(err) != 1 || !strings.Contains(err.Error(), "nothing to roll back to") {
		t.Fatalf("err = %v, want exit 1 naming the missing rollback target", err)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("repository asked %d times for a release that cannot be upgraded", n)
	}
}

func TestUninstallingIsSkipped(t *testing.T) {
	cfg, kc := newConfig(t)
	first := install(t, cfg, demoChart("1.0.0", oldPin, false), nil)
	first.Info.Status = release.StatusUninstalling
	if err := cfg.Releases.Update(first); err != nil {
		t.Fatal(err)
	}
	srv := serveRepo(t, demoChart("1.1.0", newPin, true))

	res, err := Run(context.Background(), cfg, options(t, srv.URL))
	if err != nil {
		t.Fatalf("uninstalling must be exit 0, got %v", err)
	}
	if res.Decision != DecisionUninstalling || res.Current != "1.0.0" || res.Latest != "" {
		t.Fatalf("result %+v", res)
	}
	equalHistory(t, history(t, cfg), []revision{{1, release.StatusUninstalling, "1.0.0"}})
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("repository asked %d times while uninstalling", n)
	}
	if got := kc.Calls(); len(got) != 0 {
		t.Errorf("cluster calls while uninstalling: %v", got)
	}
}

func TestDeployedAheadOfRepositoryIsSkipped(t *testing.T) {
	cfg, _ := newConfig(t)
	install(t, cfg, demoChart("1.2.0", newPin, false), nil)
	srv := serveRepo(t, demoChart("1.0.0", oldPin, false), demoChart("1.1.0", newPin, true))

	res, err := Run(context.Background(), cfg, options(t, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	if res.Decision != DecisionAhead || res.Current != "1.2.0" || res.Latest != "1.1.0" {
		t.Fatalf("result %+v", res)
	}
	equalHistory(t, history(t, cfg), []revision{{1, release.StatusDeployed, "1.2.0"}})
	if got := srv.Requests(); !reflect.DeepEqual(got, []string{"GET /index.yaml"}) {
		t.Errorf("repository requests = %v, want the index only", got)
	}
}

func TestSameVersionIsNothingToDo(t *testing.T) {
	cfg, _ := newConfig(t)
	install(t, cfg, demoChart("1.1.0", newPin, true), nil)
	srv := serveRepo(t, demoChart("1.0.0", oldPin, false), demoChart("1.1.0", newPin, true))

	res, err := Run(context.Background(), cfg, options(t, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	if res.Decision != DecisionUpToDate || res.Latest != "1.1.0" || res.Revision != 1 {
		t.Fatalf("result %+v", res)
	}
	equalHistory(t, history(t, cfg), []revision{{1, release.StatusDeployed, "1.1.0"}})
	if got := srv.Requests(); !reflect.DeepEqual(got, []string{"GET /index.yaml"}) {
		t.Errorf("repository requests = %v, want the index only", got)
	}
}

// 1.9.63-rc.1 ranks below 1.9.63, and prereleases are never
// taken unless asked for.
func TestPrereleases(t *testing.T) {
	charts := func() []*chart.Chart {
		return []*chart.Chart{demoChart("1.9.62", oldPin, false), demoChart("1.9.63-rc.1", newPin, false), demoChart("1.9.64-rc.1", newPin, true)}
	}
	t.Run("ignored", func(t *testing.T) {
		cfg, _ := newConfig(t)
		install(t, cfg, demoChart("1.9.62", oldPin, false), nil)
		res, err := Run(context.Background(), cfg, options(t, serveRepo(t, charts()...).URL))
		if err != nil {
			t.Fatal(err)
		}
		if res.Decision != DecisionUpToDate || res.Latest != "1.9.62" {
			t.Fatalf("result %+v", res)
		}
		equalHistory(t, history(t, cfg), []revision{{1, release.StatusDeployed, "1.9.62"}})
	})
	t.Run("allowed", func(t *testing.T) {
		cfg, _ := newConfig(t)
		install(t, cfg, demoChart("1.9.62", oldPin, false), nil)
		opts := options(t, serveRepo(t, charts()...).URL)
		opts.AllowPrerelease = true
		res, err := Run(context.Background(), cfg, opts)
		if err != nil {
			t.Fatal(err)
		}
		if res.Decision != DecisionUpgraded || res.Latest != "1.9.64-rc.1" {
			t.Fatalf("result %+v", res)
		}
		equalHistory(t, history(t, cfg), []revision{{1, release.StatusSuperseded, "1.9.62"}, {2, release.StatusDeployed, "1.9.64-rc.1"}})
	})
	t.Run("stable after its rc", func(t *testing.T) {
		cfg, _ := newConfig(t)
		install(t, cfg, demoChart("1.9.63-rc.1", oldPin, false), nil)
		srv := serveRepo(t, demoChart("1.9.63-rc.1", oldPin, false), demoChart("1.9.63", newPin, false))
		res, err := Run(context.Background(), cfg, options(t, srv.URL))
		if err != nil {
			t.Fatal(err)
		}
		if res.Decision != DecisionUpgraded || res.Latest != "1.9.63" {
			t.Fatalf("result %+v", res)
		}
		equalHistory(t, history(t, cfg), []revision{{1, release.StatusSuperseded, "1.9.63-rc.1"}, {2, release.StatusDeployed, "1.9.63"}})
	})
	t.Run("only prereleases", func(t *testing.T) {
		cfg, _ := newConfig(t)
		install(t, cfg, demoChart("1.9.62", oldPin, false), nil)
		srv := serveRepo(t, demoChart("1.9.63-rc.1", newPin, false))
		_, err := Run(context.Background(), cfg, options(t, srv.URL))
		if err == nil || failure.Code(err) != 1 || !strings.Contains(err.Error(), "AllowPrerelease takes them") {
			t.Fatalf("err = %v, want exit 1 pointing at --allow-prerelease", err)
		}
	})
}

func TestOrderedNewestFirst(t *testing.T) {
	for _, tc := range []struct {
		in         []string
		prerelease bool
		want       string
	}{
		{[]string{"1.9.63-rc.1", "1.9.63", "1.9.9"}, false, "1.9.63"},
		{[]string{"1.9.63", "1.9.63-rc.1"}, true, "1.9.63"}, // sort -V would pick the rc
		{[]string{"1.10.0", "1.9.99", "not-a-version"}, false, "1.10.0"},
		{[]string{"2.0.0-rc.1", "1.0.0"}, false, "1.0.0"},
		{[]string{"2.0.0-rc.1", "1.0.0"}, true, "2.0.0-rc.1"},
		{[]string{"2.0.0-rc.2", "2.0.0-rc.10"}, true, "2.0.0-rc.10"},
	} {
		vs, err := ordered(tc.in, tc.prerelease)
		if err != nil || vs[0].Original() != tc.want {
			t.Errorf("ordered(%v, %v) = %v, %v; want %s first", tc.in, tc.prerelease, vs, err, tc.want)
		}
	}
}

// An upgrade whose rollout never becomes ready is rolled back (atomic) and
// the tick fails with exit 1.
func TestFailedUpgradeIsRolledBack(t *testing.T) {
	onEachStore(t, "1.0.0", testFailedUpgradeIsRolledBack)
}

func testFailedUpgradeIsRolledBack(t *testing.T, cfg *action.Configuration, kc *recordingKube) {
	kc.failWaits = 1
	srv := serveRepo(t, demoChart("1.1.0", newPin, true))

	res, err := Run(context.Background(), cfg, options(t, srv.URL))
	if err == nil {
		t.Fatal("a failed upgrade returned no error")
	}
	if failure.Code(err) != 1 || !strings.Contains(err.Error(), "timed out waiting for the condition") || !strings.Contains(err.Error(), "rolled back") {
		t.Fatalf("err = %v (exit %d)", err, failure.Code(err))
	}
	if res.Decision != DecisionRolledBack || res.Revision != 3 {
		t.Fatalf("result %+v", res)
	}
	equalHistory(t, history(t, cfg), []revision{
		{1, release.StatusSuperseded, "1.0.0"},
		{2, release.StatusFailed, "1.1.0"},
		{3, release.StatusDeployed, "1.0.0"},
	})
	if got := stored(t, cfg, 3).Config; !sameValues(got, userValues()) {
		t.Errorf("rolled-back values = %v", got)
	}
	if !strings.Contains(stored(t, cfg, 3).Manifest, oldPin) {
		t.Error("rolled-back revision does not render the old pin")
	}
	if got := kc.Calls(); !reflect.DeepEqual(got, []string{"update", "wait", "update", "wait"}) {
		t.Errorf("cluster calls = %v, want upgrade (update, failed wait) then rollback (update, wait)", got)
	}
}

// A pin in the operator's -f values is re-applied by every
// upgrade and shadows the chart's new pin; the tick says so.
func TestUserSuppliedPinIsReportedAsShadowing(t *testing.T) {
	cfg, _ := newConfig(t)
	vals := map[string]any{"image": map[string]any{"prodDigest": oldPin}, "replicas": 2}
	install(t, cfg, demoChart("1.0.0", oldPin, false), vals)
	srv := serveRepo(t, demoChart("1.1.0", newPin, true))

	res, err := Run(context.Background(), cfg, options(t, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	if res.Decision != DecisionUpgraded || !reflect.DeepEqual(res.Shadowed, []string{"image.prodDigest"}) {
		t.Fatalf("result %+v", res)
	}
	// The upgrade itself keeps the user's value, as Helm's semantics say.
	if m := stored(t, cfg, 2).Manifest; !strings.Contains(m, oldPin) || strings.Contains(m, newPin) {
		t.Errorf("manifest:\n%s", m)
	}
}

func TestShadowedPins(t *testing.T) {
	d := "sha256:" + strings.Repeat("ab", 32)
	user := map[string]any{
		"images": map[string]any{
			"app":    map[string]any{"digest": "sha256:aa", "tag": "2"}, // tag is not a pin
			"proxy":  map[string]any{"prodDigest": "sha256:bb"},
			"empty":  map[string]any{"digest": ""}, // "not pinned"
			"chroot": map[string]any{"digestChroot": d, "imageDigest": d},
			"edge":   map[string]any{"repository": "ghcr.io/x/edge", "tag": "v1@" + d},
			"helper": map[string]any{"image": "ghcr.io/x/helper:1.2@" + d},
			"bare":   map[string]any{"image": "ghcr.io/x/bare@" + d},
			"float":  map[string]any{"image": "ghcr.io/x/float:1.2"}, // no digest: not a pin
			"digest": map[string]any{"enabled": true},                // a key named digest holding a map
		},
		"sidecars": []any{map[string]any{"name": "s", "image": "ghcr.io/x/s@" + d}},
		"sha":      "y",
		"replica":  3,
		"note":     "see @sha256:short", // not a digest
	}
	want := []string{
		"images.app.digest", "images.bare.image", "images.chroot.digestChroot", "images.chroot.imageDigest",
		"images.edge.tag", "images.helper.image", "images.proxy.prodDigest", "sha", "sidecars[0].image",
	}
	if got := shadowedPins(user); !reflect.DeepEqual(got, want) {
		t.Errorf("shadowedPins = %v, want %v", got, want)
	}
	if got := shadowedPins(nil); len(got) != 0 {
		t.Errorf("no user values: %v", got)
	}
}

// When the atomic rollback fails too, the result does not claim a rollback.
func TestFailedRollbackIsReportedAsFailed(t *testing.T) {
	cfg, kc := newConfig(t)
	install(t, cfg, demoChart("1.0.0", oldPin, false), nil)
	kc.failWaits = 2 // the upgrade's wait and the rollback's wait
	srv := serveRepo(t, demoChart("1.1.0", newPin, true))

	res, err := Run(context.Background(), cfg, options(t, srv.URL))
	if err == nil || failure.Code(err) != 1 || !strings.Contains(err.Error(), "left at revision 3, failed, chart 1.0.0") {
		t.Fatalf("err = %v", err)
	}
	if res.Decision != DecisionFailed || res.Revision != 3 {
		t.Fatalf("result %+v", res)
	}
	h := history(t, cfg)
	if h[len(h)-1].Status != release.StatusFailed {
		t.Errorf("history %v", h)
	}
}

// A chart that cannot render fails before Helm records anything: nothing to
// roll back, and the result says so instead of claiming a rollback.
func TestUpgradeFailingBeforeAnyChangeIsReportedAsFailed(t *testing.T) {
	cfg, kc := newConfig(t)
	install(t, cfg, demoChart("1.0.0", oldPin, false), nil)
	broken := demoChart("1.1.0", newPin, false)
	broken.Templates = append(broken.Templates, &chart.File{Name: "templates/broken.yaml", Data: []byte(`{{ fail "image.registry is required" }}`)})
	srv := serveRepo(t, broken)

	res, err := Run(context.Background(), cfg, options(t, srv.URL))
	if err == nil || failure.Code(err) != 1 || !strings.Contains(err.Error(), "image.registry is required") || !strings.Contains(err.Error(), "nothing was changed") {
		t.Fatalf("err = %v", err)
	}
	if res.Decision != DecisionFailed || res.Revision != 1 {
		t.Fatalf("result %+v", res)
	}
	equalHistory(t, history(t, cfg), []revision{{1, release.StatusDeployed, "1.0.0"}})
	if got := kc.Calls(); len(got) != 0 {
		t.Errorf("cluster calls = %v", got)
	}
}

// How a release gets wedged: a tick interrupted mid-upgrade (SIGTERM cancels the
// command's context) rolls the release back instead of leaving it pending.
func TestInterruptedUpgradeIsRolledBackNotWedged(t *testing.T) {
	cfg, kc := newConfig(t)
	install(t, cfg, demoChart("1.0.0", oldPin, false), userValues())
	kc.hangFirstWait = make(chan struct{})
	srv := serveRepo(t, demoChart("1.1.0", newPin, true))
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-kc.hangFirstWait
		cancel()
	}()

	res, err := Run(ctx, cfg, options(t, srv.URL))
	if !errors.Is(err, context.Canceled) || failure.Code(err) != 1 {
		t.Fatalf("err = %v, want exit 1 wrapping context.Canceled", err)
	}
	if res.Decision != DecisionRolledBack {
		t.Fatalf("result %+v", res)
	}
	got := history(t, cfg)
	equalHistory(t, got, []revision{
		{1, release.StatusSuperseded, "1.0.0"},
		{2, release.StatusFailed, "1.1.0"},
		{3, release.StatusDeployed, "1.0.0"},
	})
	for _, r := range got {
		if r.Status.IsPending() {
			t.Errorf("revision %d left %s", r.Version, r.Status)
		}
	}
}

// An unreachable repository is exit 1 naming the URL.
func TestUnreachableRepository(t *testing.T) {
	cfg, _ := newConfig(t)
	install(t, cfg, demoChart("1.0.0", oldPin, false), nil)
	url := closedPort(t)
	_, err := Run(context.Background(), cfg, options(t, url))
	if err == nil || failure.Code(err) != 1 || !strings.Contains(err.Error(), url+"/index.yaml") {
		t.Fatalf("err = %v, want exit 1 naming %s/index.yaml", err, url)
	}
	equalHistory(t, history(t, cfg), []revision{{1, release.StatusDeployed, "1.0.0"}})
}

// A repository that accepts the connection and never answers
// ends in the request timeout, not a hang.
func TestHungRepositoryTimesOut(t *testing.T) {
	cfg, _ := newConfig(t)
	install(t, cfg, demoChart("1.0.0", oldPin, false), nil)
	url := hungServer(t)
	opts := options(t, url)
	opts.RequestTimeout = 200 * time.Millisecond
	_, err := Run(context.Background(), cfg, opts)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a deadline exceeded", err)
	}
	if failure.Code(err) != 1 || !strings.Contains(err.Error(), url+"/index.yaml") || !strings.Contains(err.Error(), "200ms request timeout") {
		t.Fatalf("err = %v", err)
	}
	equalHistory(t, history(t, cfg), []revision{{1, release.StatusDeployed, "1.0.0"}})
}

func TestHungOCIRegistryTimesOut(t *testing.T) {
	cfg, _ := newConfig(t)
	install(t, cfg, demoChart("1.0.0", oldPin, false), nil)
	url := hungServer(t)
	opts := options(t, "")
	opts.OCI = "oci://" + strings.TrimPrefix(strings.TrimSuffix(url, "/charts"), "http://") + "/charts"
	opts.PlainHTTP = true
	opts.RequestTimeout = 200 * time.Millisecond
	_, err := Run(context.Background(), cfg, opts)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), opts.OCI+"/demo") {
		t.Fatalf("err = %v, want a deadline exceeded naming %s/demo", err, opts.OCI)
	}
}

func TestDryRunChangesNothing(t *testing.T) {
	cfg, kc := newConfig(t)
	install(t, cfg, demoChart("1.0.0", oldPin, false), userValues())
	srv := serveRepo(t, demoChart("1.1.0", newPin, true))
	opts := options(t, srv.URL)
	opts.DryRun = true
	res, err := Run(context.Background(), cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Decision != DecisionWouldUpgrade || res.Latest != "1.1.0" || res.Revision != 1 {
		t.Fatalf("result %+v", res)
	}
	equalHistory(t, history(t, cfg), []revision{{1, release.StatusDeployed, "1.0.0"}})
	if got := kc.Calls(); len(got) != 0 {
		t.Errorf("dry run touched the cluster: %v", got)
	}
}

// A command deadline shorter than the work is refused up front.
func TestDeadlineUndercuttingTheUpgradeIsRefused(t *testing.T) {
	cfg, _ := newConfig(t)
	install(t, cfg, demoChart("1.0.0", oldPin, false), nil)
	srv := serveRepo(t, demoChart("1.1.0", newPin, true))
	opts := options(t, srv.URL)
	opts.Timeout = time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := Run(ctx, cfg, opts)
	if !failure.IsInput(err) || !strings.Contains(err.Error(), "at least "+MinDeadline(opts).String()) {
		t.Fatalf("err = %v, want exit 2 naming the minimum %s", err, MinDeadline(opts))
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("repository asked %d times before the deadline check", n)
	}
	if got, want := MinDeadline(opts), 3*time.Minute+2*opts.RequestTimeout+deadlineSlack; got != want {
		t.Errorf("MinDeadline = %s, want %s", got, want)
	}
}

func TestCommandDeadlineNeverUndercutsTheUpgrade(t *testing.T) {
	opts := Options{Timeout: 5 * time.Minute, RequestTimeout: 30 * time.Second}
	need := 15*time.Minute + time.Minute + deadlineSlack
	for _, tc := range []struct {
		requested time.Duration
		want      time.Duration
		extended  bool
	}{
		{5 * time.Minute, need, true},  // the default global --timeout equals the Helm timeout: zero headroom
		{15 * time.Minute, need, true}, // exactly 3x: still no room for the requests
		{need, need, false},
		{time.Hour, time.Hour, false},
	} {
		got, ext := CommandDeadline(tc.requested, opts)
		if got != tc.want || ext != tc.extended {
			t.Errorf("CommandDeadline(%s) = %s, %v; want %s, %v", tc.requested, got, ext, tc.want, tc.extended)
		}
	}
	// The deadline it returns is one Run accepts.
	cfg, _ := newConfig(t)
	d, ext := CommandDeadline(time.Second, Options{Timeout: time.Second, RequestTimeout: time.Second})
	if !ext {
		t.Fatal("a 1s deadline was not extended")
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	o := options(t, "http://127.0.0.1:1")
	o.Timeout, o.RequestTimeout = time.Second, time.Second
	if _, err := Run(ctx, cfg, o); failure.IsInput(err) {
		t.Errorf("Run refused the deadline CommandDeadline chose: %v", err)
	}
}

func TestBadOptionsAreInputErrors(t *testing.T) {
	cfg, _ := newConfig(t)
	for name, mutate := range map[string]func(*Options){
		"no release":   func(o *Options) { o.Release = "" },
		"no chart":     func(o *Options) { o.Chart = "" },
		"no source":    func(o *Options) { o.RepoURL = "" },
		"both sources": func(o *Options) { o.OCI = "oci://r/x" },
		"bad repo":     func(o *Options) { o.RepoURL = "ftp://x" },
		"bad oci":      func(o *Options) { o.RepoURL, o.OCI = "", "r/x" },
	} {
		opts := options(t, "http://127.0.0.1:1")
		mutate(&opts)
		if _, err := Run(context.Background(), cfg, opts); !failure.IsInput(err) {
			t.Errorf("%s: err = %v, want an input error", name, err)
		}
	}
}

func TestMissingReleaseFails(t *testing.T) {
	cfg, _ := newConfig(t)
	_, err := Run(context.Background(), cfg, options(t, "http://127.0.0.1:1"))
	if err == nil || failure.Code(err) != 1 || !strings.Contains(err.Error(), `release "demo" not found in namespace "edge"`) {
		t.Fatalf("err = %v", err)
	}
}

func TestChartMissingFromIndex(t *testing.T) {
	cfg, _ := newConfig(t)
	install(t, cfg, demoChart("1.0.0", oldPin, false), nil)
	srv := serveRepo(t, demoChart("1.1.0", newPin, true))
	opts := options(t, srv.URL)
	opts.Chart = "other"
	_, err := Run(context.Background(), cfg, opts)
	if err == nil || !strings.Contains(err.Error(), `has no chart "other"`) {
		t.Fatalf("err = %v", err)
	}
}

// An archive that does not match the index's digest is never installed.
func TestArchiveNotMatchingIndexDigestIsRefused(t *testing.T) {
	cfg, kc := newConfig(t)
	install(t, cfg, demoChart("1.0.0", oldPin, false), nil)
	srv := serveRepo(t, demoChart("1.1.0", newPin, true))
	// Republished in place under the same version: other bytes.
	if _, err := chartutil.Save(demoChart("1.1.0", oldPin, true), srv.dir); err != nil {
		t.Fatal(err)
	}
	_, err := Run(context.Background(), cfg, options(t, srv.URL))
	if err == nil || failure.Code(err) != 1 || !strings.Contains(err.Error(), srv.URL+"/demo-1.1.0.tgz: sha256") {
		t.Fatalf("err = %v, want exit 1 naming the archive and its digest", err)
	}
	equalHistory(t, history(t, cfg), []revision{{1, release.StatusDeployed, "1.0.0"}})
	if got := kc.Calls(); len(got) != 0 {
		t.Errorf("cluster calls = %v", got)
	}
}

// The OCI path: tags from the registry, newest stable pulled and installed.
func TestUpgradeFromOCI(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	regHandler := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	reg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path)
		mu.Unlock()
		regHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(reg.Close)
	host := strings.TrimPrefix(reg.URL, "http://")
	rc, err := helmregistry.NewClient(helmregistry.ClientOptPlainHTTP())
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range []*chart.Chart{demoChart("1.0.0", oldPin, false), demoChart("1.1.0", newPin, true), demoChart("1.2.0-rc.1", newPin, true)} {
		pushChart(t, rc, host, ch)
	}

	mu.Lock()
	seen = nil // count only what the tick asks
	mu.Unlock()

	cfg, _ := newConfig(t)
	install(t, cfg, demoChart("1.0.0", oldPin, false), userValues())
	opts := options(t, "")
	opts.OCI = "oci://" + host + "/charts"
	opts.PlainHTTP = true
	res, err := Run(context.Background(), cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Decision != DecisionUpgraded || res.Latest != "1.1.0" {
		t.Fatalf("result %+v", res)
	}
	equalHistory(t, history(t, cfg), []revision{{1, release.StatusSuperseded, "1.0.0"}, {2, release.StatusDeployed, "1.1.0"}})
	rel := stored(t, cfg, 2)
	if !strings.Contains(rel.Manifest, newPin) || !sameValues(rel.Config, userValues()) {
		t.Errorf("revision 2: config %v, manifest:\n%s", rel.Config, rel.Manifest)
	}
	mu.Lock()
	defer mu.Unlock()
	joined := strings.Join(seen, "\n")
	if !strings.Contains(joined, "GET /v2/charts/demo/tags/list") || !strings.Contains(joined, "GET /v2/charts/demo/manifests/1.1.0") {
		t.Errorf("registry requests lack the tag list or the 1.1.0 manifest:\n%s", joined)
	}
	// The deployed 1.0.0 is looked at (its manifest and what refers to it,
	// to know whether it was recalled) but never pulled.
	if strings.Contains(joined, "1.2.0-rc.1") || strings.Count(joined, "/blobs/") != 2 || strings.Contains(joined, "PUT ") ||
		!strings.Contains(joined, "GET /v2/charts/demo/manifests/1.0.0") {
		t.Errorf("the tick touched another version, pulled more than one chart or wrote:\n%s", joined)
	}
	t.Logf("registry requests for one tick: %d", len(seen))
}
