package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	sigyaml "sigs.k8s.io/yaml"

	"github.com/chartpin/chartpin"
	"github.com/chartpin/chartpin/chartbump"
	"github.com/chartpin/chartpin/gitops"
	"github.com/chartpin/chartpin/internal/gittest"
	"github.com/chartpin/chartpin/internal/kubetest"
	"github.com/chartpin/chartpin/internal/registrytest"
	"github.com/chartpin/chartpin/pin"
	"github.com/chartpin/chartpin/publish"
	"github.com/chartpin/chartpin/pullrequest"
	"github.com/chartpin/chartpin/pullrequest/fakegithub"
	"github.com/chartpin/chartpin/reconcile"
	chartrelease "github.com/chartpin/chartpin/release"
	"github.com/chartpin/chartpin/resolver"
	"github.com/chartpin/chartpin/upgrade"
)

const (
	owner, repoName = "acme", "edge"
	ghToken         = "ghs_e2e-test-token"
	relName         = "edge"
	chartName       = "example"
	prodNS, devNS   = "edge-prod", "edge-dev"
	releaseBranch   = "chartpin/pins"
	// ServiceAccounts as the example chart renders them for release "edge".
	upgradeSA, reconcileSA           = "edge-example-upgrade", "edge-example-reconcile"
	prodUpgradeToken, devUpgradeTkn  = "e2e-prod-upgrade-token", "e2e-dev-upgrade-token"
	reconcileToken                   = "e2e-dev-reconcile-token"
	workloadTimeout, requestTimeout  = 30 * time.Second, 10 * time.Second
	previousVersion, releasedVersion = "0.1.0", "0.1.1"
	prereleaseVersion                = "0.1.2-rc.1"
)

// workloadImages are the example chart's workload repositories (docker.io in
// values.yaml), each with prod, stg and dev channel tags.
var workloadImages = []string{"chartpin/jobs-manager", "chartpin/pods-monitor", "chartpin/resource-monitor"}

// world is everything the path runs on.
type world struct {
	t     *testing.T
	ctx   context.Context
	dist  *registrytest.Distribution // Debian's docker-registry
	proxy *registrytest.Proxy        // counts every request to it
	host  string                     // proxy host: the mirror every edge pulls from
	push  registrytest.Pusher        // pushes straight to the registry (fixtures, not counted)

	tagsMu sync.Mutex
	tags   map[string]string // "repo:tag" -> index digest, as pushed

	git  *gittest.Server
	bare string
	gh   *fakegithub.Server

	charts    *httptest.Server // serves stableDir and preDir
	chartReqs atomic.Int64
	repoRoot  string
	stableDir string
	preDir    string

	kube      *kubetest.Server
	noCluster string                           // why kube is nil: the in-memory fallback
	memory    map[string]*action.Configuration // fallback release stores per namespace
	api       *kubetest.Proxy
	ctl       *kubetest.Controllers
	admin     kubernetes.Interface
}

// step runs one link of the path, logs its figures, and names itself in the
// first failure.
type step struct {
	*testing.T
	name string
}

func (s *step) fatalf(format string, args ...any) {
	s.Helper()
	s.Fatalf("step %s: "+format, append([]any{s.name}, args...)...)
}

func (w *world) step(name string, fn func(s *step) string) {
	w.t.Helper()
	w.proxy.Reset()
	w.git.Reset()
	w.gh.Reset()
	w.chartReqs.Store(0)
	w.api.Reset()
	start := time.Now()
	s := &step{T: w.t, name: name}
	w.t.Logf("── step %s", name)
	extra := fn(s)
	figures := fmt.Sprintf("registry %d requests (HEAD %d, GET %d, PUT %d), git %d requests (%d pushes), GitHub %d calls, chart repo %d requests",
		w.proxy.Count(""), w.proxy.Count("HEAD"), w.proxy.Count("GET"), w.proxy.Count("PUT"),
		len(w.git.Requests()), w.git.Pushes(), len(w.gh.Calls()), w.chartReqs.Load())
	w.t.Logf("   step %s done in %s: %s", name, time.Since(start).Round(time.Millisecond), figures)
	if extra != "" {
		w.t.Logf("   %s", extra)
	}
}

// TestReleasePath proves the whole release path on loopback: a release job
// pins and bumps the example chart and opens a pull request; the merged
// chart is published; an edge's auto-upgrade moves an installed release to
// it; a dev edge's reconcile re-images a moved tag by digest; and a second
// release run is a no-op.
func TestReleasePath(t *testing.T) {
	total := time.Now()
	w := &world{t: t, ctx: context.Background(), tags: map[string]string{}}
	w.setup()
	t.Logf("setup in %s: docker-registry, 10 image indexes, bare repository, git http-backend, GitHub fake, chart repository, %s published",
		time.Since(total).Round(time.Millisecond), previousVersion)

	var (
		releaseCommit string
		prodDigests   = map[string]string{} // repo -> prod index digest
		toolDigest    string                // ghcr.io/chartpin/chartpin:0.1.0
	)
	for _, repo := range workloadImages {
		prodDigests[repo] = w.digest(repo + ":prod")
	}
	toolDigest = w.digest("chartpin/chartpin:0.1.0")

	w.step("1 registry", func(s *step) string {
		// Every image the chart declares resolves through the mirror, multi-arch.
		for ref := range w.snapshotTags() {
			desc, err := remote.Index(mustRef(s, w.host+"/"+ref), remote.WithContext(w.ctx))
			if err != nil {
				s.fatalf("%s via the mirror: %v", ref, err)
			}
			im, err := desc.IndexManifest()
			if err != nil || len(im.Manifests) != 2 {
				s.fatalf("%s: want a two-platform index, got %v (%v)", ref, im, err)
			}
		}
		return fmt.Sprintf("docker-registry %s behind counting proxy %s, %d tags, previous chart %s published to index and OCI", w.dist.Host, w.host, len(w.tags), previousVersion)
	})

	w.step("2 release", func(s *step) string {
		ci := filepath.Join(t.TempDir(), "ci-release")
		clone(t, w.git, "edge.git", ghToken, ci)
		w.git.Reset() // the CI checkout is not the job's traffic
		mainBefore := gittest.Git(t, w.bare, "rev-parse", "main")
		valuesBefore, err := os.ReadFile(filepath.Join(ci, "charts/example/values.yaml"))
		if err != nil {
			s.fatalf("%v", err)
		}
		rep, err := w.runRelease(ci)
		if err != nil {
			s.fatalf("release: %v", err)
		}
		if rep.Nothing || !rep.CommitCreated || !rep.Pushed || rep.PR == nil || rep.PR.Action != pullrequest.Created {
			s.fatalf("want a new commit pushed and a PR created, got nothing=%v created=%v pushed=%v pr=%+v", rep.Nothing, rep.CommitCreated, rep.Pushed, rep.PR)
		}
		releaseCommit = rep.Commit
		if got := gittest.Git(t, w.bare, "rev-parse", releaseBranch); got != rep.Commit {
			s.fatalf("remote %s is %s, want the release commit %s", releaseBranch, got, rep.Commit)
		}
		if got := gittest.Git(t, w.bare, "rev-parse", releaseCommit+"^"); got != mainBefore {
			s.fatalf("release commit's parent %s, want main %s", got, mainBefore)
		}
		files := strings.Fields(gittest.Git(t, w.bare, "diff", "--name-only", "main", releaseCommit))
		if want := []string{"charts/example/Chart.yaml", "charts/example/values.yaml"}; !reflect.DeepEqual(files, want) {
			s.fatalf("release commit changes %v, want %v", files, want)
		}
		// Byte-exact: the new values.yaml is the old one with the pins filled in.
		valuesAfter := gittest.Git(t, w.bare, "show", releaseCommit+":charts/example/values.yaml") + "\n"
		unpinned := valuesAfter
		for _, d := range prodDigests {
			unpinned = strings.ReplaceAll(unpinned, `"`+d+`"`, `""`)
		}
		unpinned = strings.ReplaceAll(unpinned, `"`+toolDigest+`"`, `""`)
		if unpinned != string(valuesBefore) {
			s.fatalf("values.yaml changed beyond the pins:\n%s", gittest.Git(t, w.bare, "diff", "main", releaseCommit, "--", "charts/example/values.yaml"))
		}
		for repo, d := range prodDigests {
			if !strings.Contains(valuesAfter, d) {
				s.fatalf("values.yaml lacks the prod pin of %s (%s)", repo, d)
			}
		}
		// requests-proxy follows jobs-manager: its digest appears twice.
		if n := strings.Count(valuesAfter, prodDigests["chartpin/jobs-manager"]); n != 2 {
			s.fatalf("jobs-manager digest appears %d times, want 2 (jobsManager and requestsProxy)", n)
		}
		chartYAML := gittest.Git(t, w.bare, "show", releaseCommit+":charts/example/Chart.yaml")
		if !strings.Contains(chartYAML, "\nversion: "+releasedVersion+"\n") || !strings.Contains(chartYAML, `appVersion: "`+releasedVersion+`"`) {
			s.fatalf("Chart.yaml not bumped in lockstep to %s:\n%s", releasedVersion, chartYAML)
		}
		prs := w.gh.PRs()
		if len(prs) != 1 || prs[0].Head != releaseBranch || prs[0].Base != "main" || prs[0].State != "open" || !reflect.DeepEqual(prs[0].Labels, []string{"release"}) || !strings.Contains(prs[0].Body, "`"+prodDigests["chartpin/jobs-manager"][:19]+"`") {
			s.fatalf("pull requests on the fake: %+v", prs)
		}
		if p := w.git.Pushes(); p != 1 {
			s.fatalf("%d pushes, want 1", p)
		}
		// Request budget: one HEAD per distinct ref (3 prod tags and
		// chartpin:0.1.0; requestsProxy and the second CronJob add none).
		if n := w.proxy.Count("HEAD"); n != 4 {
			s.fatalf("%d registry HEADs, want 4 (one per distinct ref)", n)
		}
		return fmt.Sprintf("commit %.12s on %s, PR #%d %q, GitHub calls %v", releaseCommit, releaseBranch, prs[0].Number, prs[0].Title, w.gh.Sequence())
	})

	var published *publish.Result
	w.step("3 merge and publish", func(s *step) string {
		// "Merge": fast-forward main to the release commit, close the PR.
		gittest.Git(t, w.bare, "merge-base", "--is-ancestor", "main", releaseCommit)
		gittest.Git(t, w.bare, "update-ref", "refs/heads/main", releaseCommit)
		w.gh.ClosePR(w.gh.PRs()[0].Number)
		ci := filepath.Join(t.TempDir(), "ci-publish")
		clone(t, w.git, "edge.git", ghToken, ci)
		var err error
		published, err = w.publish(filepath.Join(ci, "charts/example"))
		if err != nil {
			s.fatalf("publish %s: %v", releasedVersion, err)
		}
		if published.Version != releasedVersion || published.Prerelease || published.Index == nil || published.Index.Action != publish.Added ||
			published.Index.Entries != 2 || published.OCI == nil || published.OCI.Action != publish.Pushed {
			s.fatalf("publish result %+v index %+v oci %+v", published, published.Index, published.OCI)
		}
		// Publishing the same version again is a no-op, never an overwrite.
		again, err := w.publish(filepath.Join(ci, "charts/example"))
		if err != nil || again.Index.Action != publish.Unchanged || again.OCI.Action != publish.Unchanged || again.Digest != published.Digest {
			s.fatalf("publishing %s again: %v, %+v; want unchanged with the same bytes", releasedVersion, err, again)
		}
		// What an edge sees: the index over HTTP and the chart in the registry.
		index := w.get(s, w.charts.URL+"/stable/index.yaml")
		if !strings.Contains(index, "version: "+releasedVersion) || !strings.Contains(index, published.Digest) {
			s.fatalf("served index.yaml lacks %s (digest %s):\n%s", releasedVersion, published.Digest, index)
		}
		if _, err := remote.Head(mustRef(s, w.host+"/charts/example:"+releasedVersion), remote.WithContext(w.ctx)); err != nil {
			s.fatalf("OCI chart %s: %v", releasedVersion, err)
		}
		// A release candidate goes to its own index, and to OCI (where an
		// auto-upgrade that lists tags sees it).
		rc := filepath.Join(t.TempDir(), "example")
		if err := os.CopyFS(rc, os.DirFS(filepath.Join(ci, "charts/example"))); err != nil {
			s.fatalf("%v", err)
		}
		setVersion(s, rc, prereleaseVersion)
		pre, err := w.publish(rc)
		if err != nil {
			s.fatalf("publish %s: %v", prereleaseVersion, err)
		}
		if !pre.Prerelease || pre.Index == nil || pre.Index.Location != w.preDir || pre.OCI == nil || pre.OCI.Action != publish.Pushed {
			s.fatalf("prerelease publish %+v index %+v oci %+v", pre, pre.Index, pre.OCI)
		}
		if stable := w.get(s, w.charts.URL+"/stable/index.yaml"); strings.Contains(stable, prereleaseVersion) {
			s.fatalf("prerelease %s leaked into the stable index", prereleaseVersion)
		}
		if p := w.get(s, w.charts.URL+"/prerelease/index.yaml"); !strings.Contains(p, prereleaseVersion) {
			s.fatalf("prerelease index lacks %s", prereleaseVersion)
		}
		return fmt.Sprintf("%s sha256:%.12s → %s (%d entries) and %s; %s → prerelease index and OCI", published.Version, published.Digest,
			published.Index.Location, published.Index.Entries, published.OCI.Ref, prereleaseVersion)
	})

	prodValues := map[string]any{
		"env":         "prod",
		"global":      map[string]any{"imageRegistry": w.host},
		"nodeAgents":  map[string]any{"namespace": prodNS},
		"autoUpgrade": map[string]any{"repo": w.charts.URL + "/stable", "schedule": "7 * * * *", "timeout": "1m"},
	}
	devValues := map[string]any{
		"env":         "dev",
		"global":      map[string]any{"imageRegistry": w.host},
		"nodeAgents":  map[string]any{"namespace": devNS},
		"autoUpgrade": map[string]any{"repo": "oci://" + w.host + "/charts", "timeout": "1m"},
		"reconcile":   map[string]any{"rolloutTimeout": "1m", "schedule": "*/5 * * * *"},
	}
	w.step("4 upgrade", func(s *step) string {
		w.startCluster(s)
		for ns, vals := range map[string]map[string]any{prodNS: prodValues, devNS: devValues} {
			w.install(s, ns, vals)
		}
		w.api.Reset() // installing the previous version is the edge's history, not the tick

		// Prod edge: auto-upgrade from the index.yaml repository, as the
		// chart's own ServiceAccount.
		start := time.Now()
		res, err := w.upgrade(prodNS, prodUpgradeToken, upgrade.Options{RepoURL: w.charts.URL + "/stable"})
		prodTime := time.Since(start)
		if err != nil {
			s.fatalf("prod upgrade: %v (result %+v)", err, res)
		}
		if res.Decision != upgrade.DecisionUpgraded || res.Current != previousVersion || res.Latest != releasedVersion || res.Revision != 2 || len(res.Shadowed) != 0 {
			s.fatalf("prod upgrade result %+v, want upgraded %s -> %s at revision 2", res, previousVersion, releasedVersion)
		}
		prodCalls := w.api.Reset()
		// The next hourly tick finds nothing newer and edits nothing.
		again, err := w.upgrade(prodNS, prodUpgradeToken, upgrade.Options{RepoURL: w.charts.URL + "/stable"})
		againCalls := w.api.Reset()
		if err != nil || again.Decision != upgrade.DecisionUpToDate || again.Revision != 2 || len(kubetest.Edits(againCalls)) != 0 {
			s.fatalf("second prod tick: %+v, %v, edits %v; want up-to-date at revision 2 with no edit", again, err, kubetest.Edits(againCalls))
		}
		rel := w.release(s, prodNS)
		if rel.Chart.Metadata.Version != releasedVersion || rel.Info.Status != release.StatusDeployed {
			s.fatalf("prod release is chart %s, %s", rel.Chart.Metadata.Version, rel.Info.Status)
		}
		if !reflect.DeepEqual(normalize(s, rel.Config), normalize(s, prodValues)) {
			s.fatalf("user-supplied values changed by the upgrade:\n got %v\nwant %v", rel.Config, prodValues)
		}
		// Rendered manifest: every workload container runs its prod pin, IfNotPresent.
		want := map[string]string{
			"api":              w.host + "/chartpin/jobs-manager@" + prodDigests["chartpin/jobs-manager"],
			"pods-monitor":     w.host + "/chartpin/pods-monitor@" + prodDigests["chartpin/pods-monitor"],
			"proxy":            w.host + "/chartpin/jobs-manager@" + prodDigests["chartpin/jobs-manager"],
			"resource-monitor": w.host + "/chartpin/resource-monitor@" + prodDigests["chartpin/resource-monitor"],
		}
		got := renderedContainers(s, rel.Manifest)
		for c, img := range want {
			g, ok := got[c]
			if !ok || g.Image != img || g.ImagePullPolicy != corev1.PullIfNotPresent {
				s.fatalf("rendered container %s = %+v, want %s IfNotPresent", c, g, img)
			}
		}
		if g := got["upgrade"]; !strings.HasSuffix(g.Image, "@"+toolDigest) || g.ImagePullPolicy != corev1.PullIfNotPresent {
			s.fatalf("auto-upgrade CronJob runs %+v, want chartpin pinned at %s, IfNotPresent", g, toolDigest)
		}
		if _, ok := got["reconcile"]; ok {
			s.fatalf("prod still renders the reconcile CronJob although every image is pinned")
		}
		if !strings.Contains(rel.Manifest, `schedule: "7 * * * *"`) {
			s.fatalf("user-supplied autoUpgrade.schedule did not survive into the render")
		}
		// And the API server holds what was rendered.
		for _, name := range w.liveNames(relName+"-jobs-manager", relName+"-requests-proxy") {
			d, err := w.admin.AppsV1().Deployments(prodNS).Get(w.ctx, name, metav1.GetOptions{})
			if err != nil {
				s.fatalf("%v", err)
			}
			for _, c := range d.Spec.Template.Spec.Containers {
				if c.Image != want[c.Name] || c.ImagePullPolicy != corev1.PullIfNotPresent {
					s.fatalf("live Deployment %s container %s runs %s %s, want %s IfNotPresent", name, c.Name, c.Image, c.ImagePullPolicy, want[c.Name])
				}
			}
		}

		// Dev edge: auto-upgrade from OCI, where the prerelease tag is listed too.
		dry, err := w.upgrade(devNS, devUpgradeTkn, upgrade.Options{OCI: "oci://" + w.host + "/charts", PlainHTTP: true, AllowPrerelease: true, DryRun: true})
		if err != nil || dry.Decision != upgrade.DecisionWouldUpgrade || dry.Latest != prereleaseVersion {
			s.fatalf("dry run with --allow-prerelease: %+v, %v; want would-upgrade to %s (the prerelease must be visible for the next check to mean anything)", dry, err, prereleaseVersion)
		}
		w.api.Reset()
		if err := w.ctl.WaitObserved(w.ctx); err != nil {
			s.fatalf("%v", err)
		}
		rolledBefore := w.ctl.Rollouts()
		start = time.Now()
		res, err = w.upgrade(devNS, devUpgradeTkn, upgrade.Options{OCI: "oci://" + w.host + "/charts", PlainHTTP: true})
		devTime, devCalls := time.Since(start), w.api.Reset()
		if err != nil {
			s.fatalf("dev upgrade: %v (result %+v)", err, res)
		}
		if res.Decision != upgrade.DecisionUpgraded || res.Latest != releasedVersion {
			s.fatalf("dev upgrade result %+v, want upgraded to %s, not the prerelease %s", res, releasedVersion, prereleaseVersion)
		}
		devRel := w.release(s, devNS)
		if devRel.Chart.Metadata.Version != releasedVersion || !reflect.DeepEqual(normalize(s, devRel.Config), normalize(s, devValues)) {
			s.fatalf("dev release chart %s values %v", devRel.Chart.Metadata.Version, devRel.Config)
		}
		// Dev keeps floating (the reconcile's path), IfNotPresent because the reconcile updates it.
		dc := renderedContainers(s, devRel.Manifest)
		if g := dc["api"]; g.Image != w.host+"/chartpin/jobs-manager:dev" || g.ImagePullPolicy != corev1.PullIfNotPresent {
			s.fatalf("dev api container %+v, want the dev tag, IfNotPresent", g)
		}
		if !strings.Contains(devRel.Manifest, "--rollout-timeout=1m") {
			s.fatalf("user-supplied reconcile.rolloutTimeout did not survive into the dev render")
		}
		if err := w.ctl.WaitObserved(w.ctx); err != nil {
			s.fatalf("%v", err)
		}
		if _, ok := dc["reconcile"]; !ok {
			s.fatalf("dev renders no reconcile CronJob")
		}
		// No dev pod template changed (pod templates carry no chart version),
		// so the upgrade rolled no dev workload.
		if n := w.ctl.Rollouts() - rolledBefore; n != 0 {
			s.fatalf("the dev upgrade rolled %d workloads; only the CronJobs' pins changed", n)
		}
		cluster := "Helm's in-memory release store and a printing kube client (NO API SERVER)"
		if w.kube != nil {
			cluster = fmt.Sprintf("kube-apiserver ready in %s", w.kube.Startup.Round(time.Millisecond))
		}
		return fmt.Sprintf("%s; prod %s→%s via index in %s (API %v), next tick up-to-date (API %v); dev %s→%s via OCI in %s (API %v), prerelease %s listed but not taken; stand-in rollouts %d",
			cluster, previousVersion, releasedVersion, prodTime.Round(time.Millisecond), kubetest.ByMethod(prodCalls), kubetest.ByMethod(againCalls),
			previousVersion, releasedVersion, devTime.Round(time.Millisecond), kubetest.ByMethod(devCalls), prereleaseVersion, w.ctl.Rollouts())
	})

	w.step("5 reconcile", func(s *step) string {
		if w.kube == nil {
			s.Logf("STEP 5 NOT RUN: the reconcile needs a real kube-apiserver (%s); see the skip below", w.noCluster)
			return ""
		}
		cm, err := w.admin.CoreV1().ConfigMaps(devNS).Get(w.ctx, reconcileSA, metav1.GetOptions{})
		if err != nil {
			s.fatalf("targets ConfigMap: %v", err)
		}
		targets, err := reconcile.ParseTargets("configmap/"+reconcileSA+":targets.yaml", []byte(cm.Data["targets.yaml"]))
		if err != nil {
			s.fatalf("%v", err)
		}
		if targets.Mirror != w.host || len(targets.Targets) != 4 {
			s.fatalf("targets: mirror %q, %d targets; want %s and 4", targets.Mirror, len(targets.Targets), w.host)
		}
		// A new jobs-manager build lands under the dev tag.
		old := w.digest("chartpin/jobs-manager:dev")
		fresh := w.pushIndex(t, "chartpin/jobs-manager", "dev") // straight to the registry: not counted
		w.api.Reset()

		start := time.Now()
		res, stats, err := w.tick(targets)
		firstTime := time.Since(start)
		if err != nil {
			s.fatalf("first tick: %v", err)
		}
		calls := w.api.Reset()
		wantPatched := []string{"Deployment " + devNS + "/" + relName + "-jobs-manager", "Deployment " + devNS + "/" + relName + "-requests-proxy"}
		sort.Strings(res.Patched)
		sort.Strings(res.RolledOut)
		if !reflect.DeepEqual(res.Patched, wantPatched) || !reflect.DeepEqual(res.RolledOut, wantPatched) {
			s.fatalf("patched %v, rolled out %v; want %v", res.Patched, res.RolledOut, wantPatched)
		}
		if stats.HEAD != 3 {
			s.fatalf("registry HEADs %d, want 3 (one per distinct image; requests-proxy follows)", stats.HEAD)
		}
		wantImg := w.host + "/chartpin/jobs-manager@" + fresh
		for _, name := range []string{relName + "-jobs-manager", relName + "-requests-proxy"} {
			d, err := w.admin.AppsV1().Deployments(devNS).Get(w.ctx, name, metav1.GetOptions{})
			if err != nil {
				s.fatalf("%v", err)
			}
			for _, c := range d.Spec.Template.Spec.Containers {
				switch c.Name {
				case "api", "proxy":
					if c.Image != wantImg {
						s.fatalf("%s/%s runs %s, want %s", name, c.Name, c.Image, wantImg)
					}
				case "pods-monitor":
					// Its tag did not move: it rolls with its sibling, pinned to
					// the digest it already runs (same bytes, now by digest).
					if want := w.host + "/chartpin/pods-monitor@" + w.digest("chartpin/pods-monitor:dev"); c.Image != want {
						s.fatalf("pods-monitor runs %s, want %s (the digest it already ran)", c.Image, want)
					}
				}
			}
		}
		ds, err := w.admin.AppsV1().DaemonSets(devNS).Get(w.ctx, relName+"-resource-monitor", metav1.GetOptions{})
		if err != nil {
			s.fatalf("%v", err)
		}
		if img := ds.Spec.Template.Spec.Containers[0].Image; img != w.host+"/chartpin/resource-monitor:dev" {
			s.fatalf("resource-monitor touched although its tag did not move: %s", img)
		}
		evs, err := w.admin.CoreV1().Events(devNS).List(w.ctx, metav1.ListOptions{FieldSelector: "reason=Reimaged"})
		if err != nil || len(evs.Items) != 2 {
			s.fatalf("Reimaged events in %s: %d (%v), want one per patched workload", devNS, len(evs.Items), err)
		}
		first := fmt.Sprintf("first tick in %s: dev jobs-manager %.19s → %.19s, patched %v, API %v, registry %+v",
			firstTime.Round(time.Millisecond), old, fresh, res.Patched, kubetest.ByMethod(calls), stats)

		// Second tick, once the rollouts settled: reads only.
		if err := w.ctl.WaitObserved(w.ctx); err != nil {
			s.fatalf("%v", err)
		}
		w.api.Reset()
		start = time.Now()
		res, stats, err = w.tick(targets)
		secondTime := time.Since(start)
		if err != nil {
			s.fatalf("second tick: %v", err)
		}
		calls = w.api.Reset()
		if len(res.Patched) != 0 || len(kubetest.Edits(calls)) != 0 {
			s.fatalf("second tick patched %v, edits %v; want a no-op", res.Patched, kubetest.Edits(calls))
		}
		for _, d := range res.Decisions {
			if d.Action != reconcile.ActionNone {
				s.fatalf("second tick: %s %s (%s)", d.Target, d.Action, d.Reason)
			}
		}
		return first + fmt.Sprintf("; second tick in %s: no-op, API %v, registry %+v", secondTime.Round(time.Millisecond), kubetest.ByMethod(calls), stats)
	})

	w.step("6 release again", func(s *step) string {
		ci := filepath.Join(t.TempDir(), "ci-again")
		clone(t, w.git, "edge.git", ghToken, ci)
		w.git.Reset()
		w.gh.Reset()
		head := gittest.Git(t, w.bare, "rev-parse", "main")
		rep, err := w.runRelease(ci)
		if err != nil {
			s.fatalf("release: %v", err)
		}
		if !rep.Nothing || rep.CommitCreated || rep.Pushed {
			s.fatalf("second release run did something: nothing=%v commit=%v pushed=%v", rep.Nothing, rep.CommitCreated, rep.Pushed)
		}
		var editing []string
		for _, c := range w.gh.Calls() {
			if c.Method != http.MethodGet {
				editing = append(editing, c.String())
			}
		}
		if len(editing) != 0 || w.git.Pushes() != 0 {
			s.fatalf("editing GitHub calls %v, pushes %d; want none", editing, w.git.Pushes())
		}
		// Unchanged pins: one HEAD per distinct ref, no manifest GET.
		if n, g := w.proxy.Count("HEAD"), w.proxy.CountPath("GET", "/manifests/"); n != 4 || g != 0 {
			s.fatalf("%d registry HEADs and %d manifest GETs, want 4 and 0", n, g)
		}
		if got := gittest.Git(t, w.bare, "rev-parse", "main"); got != head {
			s.fatalf("main moved from %s to %s", head, got)
		}
		if st := gittest.Git(t, ci, "status", "--porcelain"); st != "" {
			s.fatalf("checkout changed:\n%s", st)
		}
		return fmt.Sprintf("nothing to do; GitHub calls %v", w.gh.Sequence())
	})
	w.step("7 recall", func(s *step) string {
		// The released version turns out bad: deprecate it in the index and
		// in OCI. Every edge running it moves back to the previous version.
		tgz := filepath.Join(w.stableDir, chartName+"-"+releasedVersion+".tgz")
		before := fileSHA(s, tgz)
		ctx, cancel := context.WithTimeout(w.ctx, time.Minute)
		defer cancel()
		dep, err := publish.Deprecate(ctx, filepath.Join("..", "charts", "example"), releasedVersion, true, w.publishOptions())
		if err != nil {
			s.fatalf("deprecate %s: %v", releasedVersion, err)
		}
		if dep.Index.Action != publish.Deprecated || dep.OCI.Action != publish.Deprecated || dep.OCI.ManifestDigest != published.OCI.ManifestDigest {
			s.fatalf("deprecation %+v %+v, want both targets marked and the manifest %s untouched", dep.Index, dep.OCI, published.OCI.ManifestDigest)
		}
		if after := fileSHA(s, tgz); after != before || after != published.Digest {
			s.fatalf("the %s tarball changed: sha256 %s -> %s", releasedVersion, before, after)
		}
		prod, err := w.upgrade(prodNS, prodUpgradeToken, upgrade.Options{RepoURL: w.charts.URL + "/stable"})
		if err != nil || prod.Decision != upgrade.DecisionRecalled || prod.Target != previousVersion {
			s.fatalf("prod tick: %+v, %v; want recalled to %s", prod, err, previousVersion)
		}
		dev, err := w.upgrade(devNS, devUpgradeTkn, upgrade.Options{OCI: "oci://" + w.host + "/charts", PlainHTTP: true})
		if err != nil || dev.Decision != upgrade.DecisionRecalled || dev.Target != previousVersion {
			s.fatalf("dev tick: %+v, %v; want recalled to %s", dev, err, previousVersion)
		}
		for ns, vals := range map[string]map[string]any{prodNS: prodValues, devNS: devValues} {
			rel := w.release(s, ns)
			if rel.Chart.Metadata.Version != previousVersion || !reflect.DeepEqual(normalize(s, rel.Config), normalize(s, vals)) {
				s.fatalf("%s after the recall: chart %s, values %v; want %s with %v", ns, rel.Chart.Metadata.Version, rel.Config, previousVersion, vals)
			}
		}
		return fmt.Sprintf("%s deprecated (index entry, OCI marker %.19s); prod and dev recalled to %s; tarball sha256 unchanged", releasedVersion, dep.OCI.Marker, previousVersion)
	})
	t.Logf("whole path in %s", time.Since(total).Round(time.Millisecond))
	if w.kube == nil {
		t.Skipf("PARTLY RUN: steps 1-3 and 6 passed, step 4 ran on Helm's in-memory store with a fake kube client, step 5 did not run: %s", w.noCluster)
	}
}

// setup starts the registry, the git remote, the GitHub fake and the chart
// repository, pushes the images and publishes the previous chart version.
func (w *world) setup() {
	t := w.t
	w.dist = registrytest.StartDistribution(t, registrytest.DistributionOptions{})
	w.proxy = registrytest.NewProxy(t, w.dist.Host)
	w.host = w.proxy.Host
	w.push = registrytest.Pusher{Host: w.dist.Host}
	for _, repo := range workloadImages {
		for _, tag := range []string{"prod", "stg", "dev"} {
			w.pushIndex(t, repo, tag)
		}
	}
	w.pushIndex(t, "chartpin/chartpin", "0.1.0")

	// The repository: the example chart, its library chart and chartpin.yaml.
	root := t.TempDir()
	w.bare = filepath.Join(root, "edge.git")
	gittest.Git(t, root, "init", "-q", "--bare", w.bare)
	gittest.Git(t, w.bare, "config", "http.receivepack", "true")
	initial := filepath.Join(root, "initial")
	if err := os.CopyFS(filepath.Join(initial, "charts"), chartpin.Charts()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(initial, "chartpin.yaml"), chartpin.Config, 0o644); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, initial, "init", "-q")
	gittest.Git(t, initial, "add", ".")
	gittest.Git(t, initial, "commit", "-qm", "example chart "+previousVersion)
	gittest.Git(t, initial, "push", "-q", w.bare, "main")
	w.git = gittest.NewHTTP(t, root, ghToken)

	w.gh = fakegithub.New(owner, repoName, ghToken)
	t.Cleanup(w.gh.Close)
	w.gh.Branches = func(name string) bool { return gittest.HasBranch(w.bare, name) }

	w.repoRoot = t.TempDir()
	w.stableDir = filepath.Join(w.repoRoot, "stable")
	w.preDir = filepath.Join(w.repoRoot, "prerelease")
	for _, d := range []string{w.stableDir, w.preDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := http.FileServer(http.Dir(w.repoRoot))
	w.charts = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.chartReqs.Add(1)
		files.ServeHTTP(rw, r)
	}))
	t.Cleanup(w.charts.Close)

	// The previous chart version, published when it was released.
	res, err := w.publish(filepath.Join(initial, "charts/example"))
	if err != nil {
		t.Fatalf("setup: publishing the previous version %s: %v", previousVersion, err)
	}
	if res.Version != previousVersion {
		t.Fatalf("setup: published %s, want %s", res.Version, previousVersion)
	}
}

func (w *world) pushIndex(t *testing.T, repo, tag string) string {
	t.Helper()
	d := w.push.PushIndex(t, repo, tag, "linux/amd64", "linux/arm64")
	w.tagsMu.Lock()
	w.tags[repo+":"+tag] = d
	w.tagsMu.Unlock()
	return d
}

func (w *world) digest(ref string) string {
	w.tagsMu.Lock()
	defer w.tagsMu.Unlock()
	d, ok := w.tags[ref]
	if !ok {
		w.t.Fatalf("no image pushed as %s", ref)
	}
	return d
}

func (w *world) snapshotTags() map[string]string {
	w.tagsMu.Lock()
	defer w.tagsMu.Unlock()
	out := map[string]string{}
	for k, v := range w.tags {
		out[k] = v
	}
	return out
}

// pull is what a kubelet pulling image on an edge gets: the digest itself,
// or the digest the tag names right now.
func (w *world) pull(image string) (string, error) {
	if _, d, ok := strings.Cut(image, "@"); ok {
		return d, nil
	}
	ref := strings.TrimPrefix(image, w.host+"/")
	w.tagsMu.Lock()
	defer w.tagsMu.Unlock()
	if d, ok := w.tags[ref]; ok {
		return d, nil
	}
	return "", fmt.Errorf("image %s: not in the registry", image)
}

// mirrors are --registry-mirror docker.io=HOST --registry-mirror ghcr.io=HOST.
func (w *world) mirrors() map[string]string {
	return map[string]string{"docker.io": w.host, "ghcr.io": w.host}
}

// newResolver is the resolver a command builds from --registry-mirror and
// --insecure-registry.
func (w *world) newResolver() (*resolver.Remote, error) {
	return resolver.New(resolver.Options{Mirrors: w.mirrors(), InsecureRegistries: []string{w.host}, Logger: discard()})
}

// runRelease is `chartpin release` in checkout dir (cmd/chartpin/release.go):
// --repo acme/edge --github-api FAKE --label release, GITHUB_TOKEN set.
func (w *world) runRelease(dir string) (*chartrelease.Report, error) {
	repo, err := gitops.Open(dir, gitops.Options{Remote: "origin", Token: ghToken, Logger: discard(),
		CommitterName: "chartpin", CommitterEmail: "chartpin@users.noreply.github.com", Timeout: time.Minute})
	if err != nil {
		return nil, err
	}
	prs, err := pullrequest.NewGitHub(owner, repoName, ghToken, pullrequest.Options{API: w.gh.URL, Timeout: requestTimeout})
	if err != nil {
		return nil, err
	}
	r, err := w.newResolver()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(w.ctx, time.Minute)
	defer cancel()
	return chartrelease.Run(ctx, chartrelease.Options{
		Pin:  pin.Options{ConfigPath: filepath.Join(dir, "chartpin.yaml"), Resolver: r, Logger: discard()},
		Repo: repo, PRs: prs, Branch: releaseBranch, Base: "main", Labels: []string{"release"}, Logger: discard(),
	})
}

// publish is `chartpin publish DIR --index-dir stable --prerelease-index
// prerelease --base-url URL --oci oci://HOST/charts --insecure-registry HOST`.
// publish publishes dir as CI does; the prerelease directory is a sibling of
// the stable one, not below it, so its URL is given.
func (w *world) publish(dir string) (*publish.Result, error) {
	ctx, cancel := context.WithTimeout(w.ctx, time.Minute)
	defer cancel()
	return publish.Publish(ctx, dir, w.publishOptions())
}

// publishOptions are the release job's publish targets.
func (w *world) publishOptions() publish.Options {
	return publish.Options{
		IndexDir: w.stableDir, PrereleaseIndex: w.preDir,
		BaseURL: w.charts.URL + "/stable", PrereleaseBaseURL: w.charts.URL + "/prerelease",
		OCI: "oci://" + w.host + "/charts", PlainHTTP: []string{w.host},
		RegistryConfig: filepath.Join(w.t.TempDir(), "config.json"), // no credentials from the machine
		Timeout:        time.Minute, Logger: discard(),
	}
}

func fileSHA(s *step, path string) string {
	s.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		s.fatalf("%v", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func (w *world) get(s *step, url string) string {
	s.Helper()
	resp, err := http.Get(url)
	if err != nil {
		s.fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		s.fatalf("GET %s: %s %v", url, resp.Status, err)
	}
	return string(b)
}

// startCluster starts the kube-apiserver with the chart's ServiceAccounts as
// token users, the counting proxy, the namespaces and the stand-in controllers.
func (w *world) startCluster(s *step) {
	s.Helper()
	_, errA := kubetest.Binary()
	_, errE := kubetest.Etcd()
	if err := errors.Join(errA, errE); err != nil && os.Getenv("CHARTPIN_REQUIRE_INTEGRATION") != "1" {
		// Fallback the issue allows where the server cannot start: Helm's
		// in-memory release store and a fake kube client. Said loudly, and
		// the test ends skipped, not passed.
		w.noCluster = fmt.Sprintf("%v (hack/kube-apiserver/build.sh builds it; apt-get install -y etcd-server)", err)
		s.Logf("NO KUBE-APISERVER: %s; step 4 falls back to Helm's in-memory release store and a fake kube client", w.noCluster)
		w.memory = map[string]*action.Configuration{}
		for _, ns := range []string{prodNS, devNS} {
			mem := driver.NewMemory()
			mem.SetNamespace(ns)
			w.memory[ns] = &action.Configuration{Releases: storage.Init(mem), KubeClient: &kubefake.PrintingKubeClient{Out: io.Discard},
				Capabilities: chartutil.DefaultCapabilities, Log: func(string, ...any) {}}
		}
		return
	}
	w.kube = kubetest.Start(w.t,
		kubetest.ServiceAccountUser(prodUpgradeToken, prodNS, upgradeSA),
		kubetest.ServiceAccountUser(devUpgradeTkn, devNS, upgradeSA),
		kubetest.ServiceAccountUser(reconcileToken, devNS, reconcileSA))
	w.api = w.kube.Proxy(w.t)
	w.admin = w.kube.Client(w.t, kubetest.AdminToken)
	for _, ns := range []string{prodNS, devNS} {
		if _, err := w.admin.CoreV1().Namespaces().Create(w.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			s.fatalf("namespace %s: %v", ns, err)
		}
	}
	w.ctl = &kubetest.Controllers{Client: w.admin, Namespaces: []string{prodNS, devNS}, Pull: w.pull}
	w.t.Cleanup(w.ctl.Run())
}

// install is `helm install edge example-0.1.0.tgz -n NS -f values.yaml
// --wait` by a cluster admin, from the published previous version.
func (w *world) install(s *step, ns string, vals map[string]any) {
	s.Helper()
	cfg := w.adminConfig(s, ns)
	ch, err := loader.Load(filepath.Join(w.stableDir, chartName+"-"+previousVersion+".tgz"))
	if err != nil {
		s.fatalf("loading the published %s: %v", previousVersion, err)
	}
	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace = relName, ns
	in.Wait, in.Timeout = true, workloadTimeout
	if _, err := in.Run(ch, vals); err != nil {
		s.fatalf("installing %s %s in %s: %v (%v)", chartName, previousVersion, ns, err, w.ctl.Err())
	}
}

// upgrade is one `chartpin upgrade --release edge --namespace NS --chart
// example --timeout 30s --request-timeout 10s` tick, as the chart's
// auto-upgrade ServiceAccount (token), through the counting API proxy.
func (w *world) upgrade(ns, token string, o upgrade.Options) (upgrade.Result, error) {
	o.Release, o.Namespace, o.Chart = relName, ns, chartName
	o.Timeout, o.RequestTimeout = workloadTimeout, requestTimeout
	o.Logger = discard()
	if w.kube == nil {
		return upgrade.Run(w.ctx, w.memory[ns], o)
	}
	cfg, gotNS, err := upgrade.NewConfiguration(upgrade.ClusterOptions{Namespace: ns, Kubeconfig: w.api.Kubeconfig(w.t, token, ns),
		RequestTimeout: requestTimeout, Logger: discard()})
	if err != nil {
		return upgrade.Result{}, err
	}
	o.Namespace = gotNS
	deadline, _ := upgrade.CommandDeadline(time.Minute, o)
	ctx, cancel := context.WithTimeout(w.ctx, deadline)
	defer cancel()
	return upgrade.Run(ctx, cfg, o)
}

// release reads the deployed release as the admin.
func (w *world) release(s *step, ns string) *release.Release {
	s.Helper()
	rel, err := action.NewGet(w.adminConfig(s, ns)).Run(relName)
	if err != nil {
		s.fatalf("helm get %s -n %s: %v", relName, ns, err)
	}
	return rel
}

// adminConfig is Helm as a cluster admin (the in-memory store without a cluster).
func (w *world) adminConfig(s *step, ns string) *action.Configuration {
	s.Helper()
	if w.kube == nil {
		return w.memory[ns]
	}
	cfg, _, err := upgrade.NewConfiguration(upgrade.ClusterOptions{Namespace: ns, Kubeconfig: w.kube.Kubeconfig(w.t, kubetest.AdminToken), Logger: discard()})
	if err != nil {
		s.fatalf("helm configuration: %v", err)
	}
	return cfg
}

// liveNames is names when a real API server holds the objects, else none.
func (w *world) liveNames(names ...string) []string {
	if w.kube == nil {
		return nil
	}
	return names
}

// tick is one `chartpin reconcile --targets FILE --kubeconfig FILE` as the
// chart's reconcile ServiceAccount, through the counting API proxy.
func (w *world) tick(f *reconcile.File) (*reconcile.Result, resolver.Stats, error) {
	path := w.api.Kubeconfig(w.t, reconcileToken, devNS)
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(&clientcmd.ClientConfigLoadingRules{ExplicitPath: path}, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, resolver.Stats{}, err
	}
	cfg.Timeout = requestTimeout
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, resolver.Stats{}, err
	}
	res, err := w.newResolver()
	if err != nil {
		return nil, resolver.Stats{}, err
	}
	o := reconcile.DefaultOptions()
	o.Logger, o.RolloutTimeout, o.RequestTimeout, o.PollInterval, o.Instance = discard(), workloadTimeout, requestTimeout, 50*time.Millisecond, "e2e"
	r, err := reconcile.New(client, res, o)
	if err != nil {
		return nil, resolver.Stats{}, err
	}
	ctx, cancel := context.WithTimeout(w.ctx, 2*workloadTimeout)
	defer cancel()
	out, err := r.Tick(ctx, f)
	if err == nil && w.ctl.Err() != nil {
		err = w.ctl.Err()
	}
	return out, res.Stats(), err
}

// setVersion moves a chart copy to version (and appVersion, in lockstep).
func setVersion(s *step, dir, version string) {
	s.Helper()
	c, err := chartbump.Read(dir)
	if err != nil {
		s.fatalf("%v", err)
	}
	ch, err := chartbump.Plan(c, chartbump.Options{Version: version, AppVersion: version})
	if err != nil {
		s.fatalf("%v", err)
	}
	if err := chartbump.Write(ch); err != nil {
		s.fatalf("%v", err)
	}
}

// renderedContainers maps container name to container over every workload
// and CronJob in a release manifest.
func renderedContainers(s *step, manifest string) map[string]corev1.Container {
	s.Helper()
	out := map[string]corev1.Container{}
	add := func(cs []corev1.Container) {
		for _, c := range cs {
			out[c.Name] = c
		}
	}
	for _, doc := range releaseutil.SplitManifests(manifest) {
		var head metav1.TypeMeta
		if err := sigyaml.Unmarshal([]byte(doc), &head); err != nil {
			s.fatalf("manifest: %v", err)
		}
		switch head.Kind {
		case "Deployment":
			var d appsv1.Deployment
			mustUnmarshal(s, doc, &d)
			add(d.Spec.Template.Spec.Containers)
		case "DaemonSet":
			var d appsv1.DaemonSet
			mustUnmarshal(s, doc, &d)
			add(d.Spec.Template.Spec.Containers)
		case "CronJob":
			var c batchv1.CronJob
			mustUnmarshal(s, doc, &c)
			add(c.Spec.JobTemplate.Spec.Template.Spec.Containers)
		}
	}
	return out
}

func mustUnmarshal(s *step, doc string, v any) {
	s.Helper()
	if err := sigyaml.Unmarshal([]byte(doc), v); err != nil {
		s.fatalf("manifest: %v", err)
	}
}

// normalize round-trips values through YAML so maps compare by content.
func normalize(s *step, v map[string]any) map[string]any {
	s.Helper()
	b, err := sigyaml.Marshal(v)
	if err != nil {
		s.fatalf("%v", err)
	}
	out := map[string]any{}
	if err := sigyaml.Unmarshal(b, &out); err != nil {
		s.fatalf("%v", err)
	}
	return out
}

func mustRef(s *step, ref string) name.Reference {
	s.Helper()
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		s.fatalf("%v", err)
	}
	return r
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
