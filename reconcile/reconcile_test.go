package reconcile

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/internal/registrytest"
	"github.com/chartpin/chartpin/resolver"
)

const ns = "prod-ns"

// fixture: jobs-manager (api + pods-monitor sidecar) and requests-proxy
// (runs the jobs-manager image) in prod-ns, resource-monitor DaemonSet in
// node-agents.
type fixture struct {
	*env
	jm, pm         string // repositories
	jmOld, jmNew   string // digests
	pmOld, pmNew   string
	file           *File
	fileYAMLString string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	e := newEnv(t)
	fx := &fixture{env: e, jm: e.reg.Host + "/example/jobs-manager", pm: e.reg.Host + "/example/pods-monitor"}
	fx.jmOld = e.reg.PushIndex(t, "example/jobs-manager", "old", "linux/amd64", "linux/arm64")
	fx.jmNew = e.reg.PushIndex(t, "example/jobs-manager", "dev", "linux/amd64", "linux/arm64")
	fx.pmOld = e.reg.PushIndex(t, "example/pods-monitor", "old", "linux/amd64", "linux/arm64")
	fx.pmNew = e.reg.PushIndex(t, "example/pods-monitor", "dev", "linux/amd64", "linux/arm64")
	fx.fileYAMLString = fmt.Sprintf(`mirror: ""
targets:
  - id: jobs-manager-api
    kind: Deployment
    namespace: prod-ns
    name: rel-jobs-manager
    container: api
    image: %[1]s:dev
  - id: jobs-manager-pods-monitor
    kind: Deployment
    namespace: prod-ns
    name: rel-jobs-manager
    container: pods-monitor
    image: %[2]s:dev
  - id: requests-proxy-proxy
    kind: Deployment
    namespace: prod-ns
    name: rel-requests-proxy
    container: proxy
    follows: jobs-manager-api
`, fx.jm, fx.pm)
	fx.file = targetsFile(t, fx.fileYAMLString)
	return fx
}

// install puts the three workloads in the cluster running the given specs
// and pod digests.
func (fx *fixture) install(apiSpec, pmSpec, proxySpec string, apiPods, pmPods, proxyPods []string) {
	fx.add(
		deployment(ns, "rel-jobs-manager", int32(len(apiPods)), containers("api", apiSpec, "pods-monitor", pmSpec)),
		deployment(ns, "rel-requests-proxy", int32(len(proxyPods)), containers("proxy", proxySpec)),
	)
	for i := range apiPods {
		fx.add(pod(ns, "rel-jobs-manager", i, "api", fx.jm+"@"+apiPods[i], "pods-monitor", fx.pm+"@"+pmPods[i]))
	}
	for i := range proxyPods {
		fx.add(pod(ns, "rel-requests-proxy", i, "proxy", fx.jm+"@"+proxyPods[i]))
	}
}

func actions(d []Decision) map[string]Action {
	out := map[string]Action{}
	for _, x := range d {
		out[x.Target] = x.Action
	}
	return out
}

func TestFreshInstallOnNewestDigestIsNotRolled(t *testing.T) {
	fx := newFixture(t)
	fx.install(fx.jm+":dev", fx.pm+":dev", fx.jm+":dev",
		[]string{fx.jmNew, fx.jmNew}, []string{fx.pmNew, fx.pmNew}, []string{fx.jmNew})
	res, err := fx.tick(fx.file)
	if err != nil {
		t.Fatal(err)
	}
	for id, a := range actions(res.Decisions) {
		if a != ActionNone {
			t.Errorf("%s: action %s, want none", id, a)
		}
	}
	if n := fx.count("patch", ""); n != 0 {
		t.Errorf("%d patches on a fresh install running the newest digest, want 0: %v", n, fx.calls())
	}
	if n := fx.count("create", "events"); n != 0 {
		t.Errorf("%d events, want 0", n)
	}
	// One HEAD per unique image (requests-proxy follows, no request of its own).
	if n := fx.reg.Count("HEAD"); n != 2 {
		t.Errorf("registry saw %d HEADs, want 2: %v", n, fx.reg.Requests())
	}
	for _, r := range fx.reg.Requests() {
		if r.Method == "GET" && r.Path != "/v2/" {
			t.Errorf("registry saw %s %s; a tick needs HEADs only", r.Method, r.Path)
		}
	}
	// Reads only: one get per workload, one pod list per workload.
	want := []string{"get deployments rel-jobs-manager", "get deployments rel-requests-proxy", "list pods ", "list pods "}
	if got := fmt.Sprint(fx.calls()); got != fmt.Sprint(want) {
		t.Errorf("API calls %s, want %s", got, want)
	}
}

func TestTagMovedOnePatchPerWorkloadContainersBatched(t *testing.T) {
	fx := newFixture(t)
	fx.install(fx.jm+"@"+fx.jmOld, fx.pm+"@"+fx.pmOld, fx.jm+"@"+fx.jmOld,
		[]string{fx.jmOld, fx.jmOld}, []string{fx.pmOld, fx.pmOld}, []string{fx.jmOld})
	res, err := fx.tick(fx.file)
	if err != nil {
		t.Fatal(err)
	}
	for id, a := range actions(res.Decisions) {
		if a != ActionReimage {
			t.Errorf("%s: action %s, want reimage", id, a)
		}
	}
	p := fx.patches("rel-jobs-manager")
	if len(p) != 2 { // re-image, then clear the attempt counter after the rollout
		t.Fatalf("%d patches on rel-jobs-manager, want 2 (re-image, clear counter): %v", len(p), p)
	}
	got := patchContainers(p[0])
	want := []string{"api=" + fx.jm + "@" + fx.jmNew, "pods-monitor=" + fx.pm + "@" + fx.pmNew}
	if !slices.Equal(got, want) {
		t.Errorf("re-image patch containers %v, want %v (both in one patch)", got, want)
	}
	if ann := p[0]["metadata"].(map[string]any)["annotations"].(map[string]any); ann[AttemptsAnnotation] != "1" {
		t.Errorf("re-image patch annotations %v, want the attempt counter at 1", ann)
	}
	if len(patchContainers(p[1])) != 0 {
		t.Errorf("second patch re-images again: %v", p[1])
	}
	if got := patchContainers(fx.patches("rel-requests-proxy")[0]); !slices.Equal(got, []string{"proxy=" + fx.jm + "@" + fx.jmNew}) {
		t.Errorf("requests-proxy patch %v", got)
	}
	d := fx.deployment(ns, "rel-jobs-manager")
	if _, ok := d.Annotations[AttemptsAnnotation]; ok {
		t.Errorf("attempt counter left after a completed rollout: %v", d.Annotations)
	}
	if img := d.Spec.Template.Spec.Containers[0].Image; img != fx.jm+"@"+fx.jmNew {
		t.Errorf("api runs %s", img)
	}
	if !slices.Equal(res.RolledOut, []string{"Deployment prod-ns/rel-jobs-manager", "Deployment prod-ns/rel-requests-proxy"}) {
		t.Errorf("rolled out %v", res.RolledOut)
	}
	ev := fx.events()
	if len(ev) != 2 || ev[0].Reason != "Reimaged" || ev[0].InvolvedObject.Name != "rel-jobs-manager" || !strings.Contains(ev[0].Message, fx.jmNew) {
		t.Errorf("events %+v, want one Reimaged per workload naming the digest", ev)
	}
	if fx.reg.Count("HEAD") != 2 {
		t.Errorf("registry HEADs %d, want 2", fx.reg.Count("HEAD"))
	}
	// Structured log: one line per decision with target, running, latest, action.
	line := fmt.Sprintf("target=jobs-manager-api workload=\"Deployment prod-ns/rel-jobs-manager\" container=api running=%s latest=%s action=reimage", fx.jmOld, fx.jmNew)
	if !strings.Contains(fx.logs.String(), line) {
		t.Errorf("log lacks %q:\n%s", line, fx.logs)
	}

	// The next tick finds everything on the newest digest: a no-op.
	res, err = fx.tick(fx.file)
	if err != nil {
		t.Fatal(err)
	}
	if n := fx.count("patch", ""); n != 0 {
		t.Errorf("second tick sent %d patches: %v", n, fx.calls())
	}
	for id, a := range actions(res.Decisions) {
		if a != ActionNone {
			t.Errorf("second tick %s: %s", id, a)
		}
	}
}

func TestChartUpgradeReRenderedTagIsRePinned(t *testing.T) {
	fx := newFixture(t)
	// helm upgrade re-rendered repo:tag, pods still run the old build (IfNotPresent).
	fx.install(fx.jm+":dev", fx.pm+"@"+fx.pmNew, fx.jm+"@"+fx.jmNew,
		[]string{fx.jmOld}, []string{fx.pmNew}, []string{fx.jmNew})
	res, err := fx.tick(fx.file)
	if err != nil {
		t.Fatal(err)
	}
	a := actions(res.Decisions)
	if a["jobs-manager-api"] != ActionReimage || a["jobs-manager-pods-monitor"] != ActionNone || a["requests-proxy-proxy"] != ActionNone {
		t.Errorf("actions %v", a)
	}
	p := fx.patches("rel-jobs-manager")
	if len(p) == 0 || !slices.Equal(patchContainers(p[0]), []string{"api=" + fx.jm + "@" + fx.jmNew}) {
		t.Fatalf("patches %v, want api re-pinned alone", p)
	}
	if n := len(fx.patches("rel-requests-proxy")); n != 0 {
		t.Errorf("requests-proxy (already right) got %d patches", n)
	}
}

func TestSkewBetweenPodsIsRepaired(t *testing.T) {
	fx := newFixture(t)
	fx.install(fx.jm+":dev", fx.pm+":dev", fx.jm+":dev",
		[]string{fx.jmOld, fx.jmNew}, []string{fx.pmNew, fx.pmNew}, []string{fx.jmNew})
	res, err := fx.tick(fx.file)
	if err != nil {
		t.Fatal(err)
	}
	var api Decision
	for _, d := range res.Decisions {
		if d.Target == "jobs-manager-api" {
			api = d
		}
	}
	if api.Action != ActionReimage || !strings.Contains(api.Reason, "skew") || len(api.Running) != 2 {
		t.Errorf("api decision %+v, want a skew re-image seeing 2 digests", api)
	}
	// pods-monitor runs the newest digest under its tag; the workload rolls
	// anyway, so it is pinned in the same patch.
	p := fx.patches("rel-jobs-manager")
	if want := []string{"api=" + fx.jm + "@" + fx.jmNew, "pods-monitor=" + fx.pm + "@" + fx.pmNew}; !slices.Equal(patchContainers(p[0]), want) {
		t.Errorf("patch %v, want %v", patchContainers(p[0]), want)
	}
}

func TestFollowsCostsNoRegistryRequest(t *testing.T) {
	fx := newFixture(t)
	fx.install(fx.jm+"@"+fx.jmNew, fx.pm+"@"+fx.pmNew, fx.jm+"@"+fx.jmOld,
		[]string{fx.jmNew}, []string{fx.pmNew}, []string{fx.jmOld, fx.jmOld})
	res, err := fx.tick(fx.file)
	if err != nil {
		t.Fatal(err)
	}
	if a := actions(res.Decisions); a["requests-proxy-proxy"] != ActionReimage || a["jobs-manager-api"] != ActionNone {
		t.Errorf("actions %v", a)
	}
	var heads []string
	for _, r := range fx.reg.Requests() {
		if r.Method == "HEAD" {
			heads = append(heads, r.Path)
		}
	}
	want := []string{"/v2/example/jobs-manager/manifests/dev", "/v2/example/pods-monitor/manifests/dev"}
	slices.Sort(heads)
	if !slices.Equal(heads, want) {
		t.Errorf("HEADs %v, want %v (one per unique image; follows adds none)", heads, want)
	}
	if p := fx.patches("rel-requests-proxy"); len(p) == 0 || !slices.Equal(patchContainers(p[0]), []string{"proxy=" + fx.jm + "@" + fx.jmNew}) {
		t.Errorf("requests-proxy patches %v", p)
	}
}

func TestMirrorResolvesFromTheMirror(t *testing.T) {
	e := newEnv(t)
	upstream := registrytest.New(t)
	upOld := upstream.PushIndex(t, "example/jobs-manager", "dev", "linux/amd64", "linux/arm64")
	mirrorNew := e.reg.PushIndex(t, "example/jobs-manager", "dev", "linux/amd64", "linux/arm64")
	mirrored := e.reg.Host + "/example/jobs-manager"
	f := targetsFile(t, fmt.Sprintf(`mirror: %q
targets:
  - {id: api, kind: Deployment, namespace: prod-ns, name: jm, container: api, image: "%s:dev"}
`, e.reg.Host, mirrored))
	e.add(deployment(ns, "jm", 1, containers("api", mirrored+":dev")), pod(ns, "jm", 0, "api", mirrored+"@"+upOld))
	upstream.Reset()
	res, err := e.tick(f)
	if err != nil {
		t.Fatal(err)
	}
	if res.Decisions[0].Latest != mirrorNew || res.Decisions[0].Action != ActionReimage {
		t.Errorf("decision %+v, want the mirror's digest %s", res.Decisions[0], mirrorNew)
	}
	if upstream.Count("") != 0 || e.reg.Count("HEAD") != 1 {
		t.Errorf("upstream saw %d requests, mirror %d HEADs; want 0 and 1", upstream.Count(""), e.reg.Count("HEAD"))
	}
	if got := e.deployment(ns, "jm").Spec.Template.Spec.Containers[0].Image; got != mirrored+"@"+mirrorNew {
		t.Errorf("api runs %s, want the mirrored reference pinned", got)
	}
}

func TestRegistryMirrorFlagResolvesThroughTheResolver(t *testing.T) {
	// The file names the upstream; --registry-mirror (resolver.Options.Mirrors)
	// sends the HEAD to the mirror, and the pin keeps the pulled reference.
	e := newEnv(t)
	upstream := registrytest.New(t)
	upstream.PushIndex(t, "example/jobs-manager", "dev", "linux/amd64")
	mirrorNew := e.reg.PushIndex(t, "example/jobs-manager", "dev", "linux/amd64")
	repo := upstream.Host + "/example/jobs-manager"
	f := targetsFile(t, fmt.Sprintf("targets:\n  - {id: api, kind: Deployment, namespace: prod-ns, name: jm, container: api, image: %q}\n", repo+":dev"))
	e.add(deployment(ns, "jm", 1, containers("api", repo+":dev")), pod(ns, "jm", 0, "api", repo+"@sha256:"+strings.Repeat("0", 64)))
	upstream.Reset()
	e.reg.Reset()
	res := e.resolverWith(resolver.Options{InsecureRegistries: []string{upstream.Host}, Mirrors: map[string]string{upstream.Host: e.reg.Host}})
	if _, err := e.reconciler(res).Tick(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	if upstream.Count("") != 0 || e.reg.Count("HEAD") != 1 {
		t.Errorf("upstream %d requests, mirror %d HEADs; want 0 and 1", upstream.Count(""), e.reg.Count("HEAD"))
	}
	if got := e.deployment(ns, "jm").Spec.Template.Spec.Containers[0].Image; got != repo+"@"+mirrorNew {
		t.Errorf("api runs %s, want %s", got, repo+"@"+mirrorNew)
	}
}

func TestMirrorLackingTheTagChangesNothing(t *testing.T) {
	e := newEnv(t)
	mirrored := e.reg.Host + "/example/jobs-manager"
	f := targetsFile(t, fmt.Sprintf("mirror: %q\ntargets:\n  - {id: api, kind: Deployment, namespace: prod-ns, name: jm, container: api, image: %q}\n", e.reg.Host, mirrored+":dev"))
	e.add(deployment(ns, "jm", 1, containers("api", mirrored+":dev")), pod(ns, "jm", 0, "api", mirrored+"@sha256:"+strings.Repeat("1", 64)))
	_, err := e.tick(f)
	if err == nil || !errors.Is(err, resolver.ErrNotFound) || !strings.Contains(err.Error(), "the mirror "+e.reg.Host) {
		t.Fatalf("err %v, want a not-found naming the mirror", err)
	}
	// Only the Warning that tells kubectl describe why jm is not updated.
	if failure.Code(err) != 1 || fmt.Sprint(e.calls()) != "[create events ]" {
		t.Errorf("exit %d, API calls %v; want 1 and one Event", failure.Code(err), e.calls())
	}
	if ev := e.events(); len(ev) != 1 || ev[0].Reason != "ResolveFailed" || !strings.Contains(ev[0].Message, "the mirror "+e.reg.Host) {
		t.Errorf("events %+v, want one ResolveFailed naming the mirror", ev)
	}
}

func TestPinnedWorkloadAbsentFromFileIsUntouched(t *testing.T) {
	fx := newFixture(t)
	fx.install(fx.jm+"@"+fx.jmOld, fx.pm+"@"+fx.pmNew, fx.jm+"@"+fx.jmNew,
		[]string{fx.jmOld}, []string{fx.pmNew}, []string{fx.jmNew})
	// ingestor is pinned by the chart (prodDigest) and so not in the file.
	fx.add(deployment(ns, "rel-ingestor", 1, containers("ingestor", fx.jm+"@"+fx.jmOld)), pod(ns, "rel-ingestor", 0, "ingestor", fx.jm+"@"+fx.jmOld))
	if _, err := fx.tick(fx.file); err != nil {
		t.Fatal(err)
	}
	for _, c := range fx.calls() {
		if c.name == "rel-ingestor" {
			t.Errorf("the pinned workload was touched: %s", c)
		}
	}
	if got := fx.deployment(ns, "rel-ingestor").Spec.Template.Spec.Containers[0].Image; got != fx.jm+"@"+fx.jmOld {
		t.Errorf("ingestor now runs %s", got)
	}
	if len(fx.patches("rel-jobs-manager")) == 0 {
		t.Error("the target itself was not re-imaged")
	}
}

func TestRegistryDownFailsWithNoPatch(t *testing.T) {
	fx := newFixture(t)
	fx.install(fx.jm+"@"+fx.jmOld, fx.pm+"@"+fx.pmOld, fx.jm+"@"+fx.jmOld,
		[]string{fx.jmOld}, []string{fx.pmOld}, []string{fx.jmOld})
	fx.reg.Server.Close()
	_, err := fx.tick(fx.file)
	if err == nil || failure.Code(err) != 1 {
		t.Fatalf("err %v (exit %d), want exit 1", err, failure.Code(err))
	}
	if !strings.Contains(err.Error(), "nothing was changed") {
		t.Errorf("error does not say nothing changed: %v", err)
	}
	// One Warning per workload (requests-proxy follows the image that failed),
	// and not a single read or write besides.
	var reasons []string
	for _, ev := range fx.events() {
		reasons = append(reasons, ev.InvolvedObject.Name+":"+ev.Reason)
	}
	if got := fmt.Sprint(fx.calls()); got != "[create events  create events ]" || fmt.Sprint(reasons) != "[rel-jobs-manager:ResolveFailed rel-requests-proxy:ResolveFailed]" {
		t.Errorf("API calls %s, events %v with the registry down; want one ResolveFailed per workload and nothing else", got, reasons)
	}
}

func TestAPIReadErrorFailsWithNothingRecorded(t *testing.T) {
	for _, tc := range []struct{ verb, resource string }{{"get", "deployments"}, {"list", "pods"}} {
		t.Run(tc.verb+" "+tc.resource, func(t *testing.T) {
			fx := newFixture(t)
			fx.install(fx.jm+"@"+fx.jmOld, fx.pm+"@"+fx.pmOld, fx.jm+":dev",
				[]string{fx.jmOld}, []string{fx.pmOld}, []string{fx.jmOld})
			// The second workload's read fails: the first must not have been acted on.
			fx.client.PrependReactor(tc.verb, tc.resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
				if ga, ok := a.(k8stesting.GetAction); ok && ga.GetName() != "rel-requests-proxy" {
					return false, nil, nil
				}
				if la, ok := a.(k8stesting.ListAction); ok && !strings.Contains(la.GetListRestrictions().Labels.String(), "rel-requests-proxy") {
					return false, nil, nil
				}
				return true, nil, errors.New("etcdserver: request timed out")
			})
			_, err := fx.tick(fx.file)
			if err == nil || failure.Code(err) != 1 || !strings.Contains(err.Error(), "request timed out") {
				t.Fatalf("err %v, want exit 1 with the read error", err)
			}
			for _, c := range fx.calls() {
				if c.verb != "get" && c.verb != "list" {
					t.Errorf("wrote after a read error: %s", c)
				}
			}
		})
	}
}

func TestAPIForbiddenOrNotFoundFailsTheTick(t *testing.T) {
	fx := newFixture(t)
	fx.add(deployment(ns, "rel-jobs-manager", 1, containers("api", fx.jm+":dev", "pods-monitor", fx.pm+":dev")))
	// rel-requests-proxy does not exist: a failure, never a benign skip.
	_, err := fx.tick(fx.file)
	if err == nil || !strings.Contains(err.Error(), "rel-requests-proxy") || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("err %v", err)
	}
	if fx.count("patch", "") != 0 {
		t.Errorf("patched after a read error: %v", fx.calls())
	}
}

func TestRolloutNeverCompletesCountsTheAttempt(t *testing.T) {
	fx := newFixture(t)
	fx.install(fx.jm+"@"+fx.jmOld, fx.pm+"@"+fx.pmNew, fx.jm+"@"+fx.jmNew,
		[]string{fx.jmOld}, []string{fx.pmNew}, []string{fx.jmNew})
	fx.setStuck("rel-jobs-manager", true)
	_, err := fx.tick(fx.file, func(o *Options) { o.RolloutTimeout = 50 * time.Millisecond })
	if err == nil || failure.Code(err) != 1 {
		t.Fatalf("err %v, want exit 1", err)
	}
	for _, want := range []string{"rollout of Deployment prod-ns/rel-jobs-manager not complete within 50ms", "0 of 1 replicas updated", "attempt 1 of 3", "kubectl -n prod-ns rollout status deployment/rel-jobs-manager"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if got := fx.deployment(ns, "rel-jobs-manager").Annotations[AttemptsAnnotation]; got != "1" {
		t.Errorf("attempt counter %q, want 1", got)
	}
	ev := fx.events()
	if len(ev) != 2 || ev[1].Reason != "ReimageRolloutFailed" || ev[1].Type != "Warning" {
		t.Errorf("events %+v, want Reimaged then ReimageRolloutFailed", ev)
	}
	// Next tick: mid-rollout, so skipped, not patched again.
	res, err := fx.tick(fx.file)
	if err != nil {
		t.Fatal(err)
	}
	if a := actions(res.Decisions); a["jobs-manager-api"] != ActionSkip || fx.count("patch", "deployments") != 1 {
		t.Errorf("actions %v, calls %v; want a skip that only bumps the skip counter", a, fx.calls())
	}
}

func TestLockoutReachedEventNoPatch(t *testing.T) {
	fx := newFixture(t)
	fx.install(fx.jm+"@"+fx.jmOld, fx.pm+"@"+fx.pmNew, fx.jm+"@"+fx.jmNew,
		[]string{fx.jmOld}, []string{fx.pmNew}, []string{fx.jmNew})
	d := fx.deployment(ns, "rel-jobs-manager")
	d.Annotations = map[string]string{AttemptsAnnotation: "3"}
	if err := fx.client.Tracker().Update(deploymentsGVR, d, ns); err != nil {
		t.Fatal(err)
	}
	res, err := fx.tick(fx.file)
	if err == nil || failure.Code(err) != 1 {
		t.Fatalf("err %v, want exit 1", err)
	}
	rearm := "kubectl -n prod-ns annotate deployment/rel-jobs-manager chartpin.dev/reconcile-attempts-"
	if !strings.Contains(err.Error(), rearm) || !strings.Contains(err.Error(), "locked out") {
		t.Errorf("error %v lacks the re-arm command %q", err, rearm)
	}
	if a := actions(res.Decisions); a["jobs-manager-api"] != ActionLockout {
		t.Errorf("actions %v", a)
	}
	if n := fx.count("patch", ""); n != 0 {
		t.Errorf("%d patches while locked out: %v", n, fx.calls())
	}
	ev := fx.events()
	if len(ev) != 1 || ev[0].Reason != "ReimageLockedOut" || ev[0].Type != "Warning" || !strings.Contains(ev[0].Message, rearm) {
		t.Errorf("events %+v", ev)
	}
}

func TestLockoutReArmed(t *testing.T) {
	fx := newFixture(t)
	fx.install(fx.jm+"@"+fx.jmOld, fx.pm+"@"+fx.pmNew, fx.jm+"@"+fx.jmNew,
		[]string{fx.jmOld}, []string{fx.pmNew}, []string{fx.jmNew})
	lock := func() {
		d := fx.deployment(ns, "rel-jobs-manager")
		d.Annotations = map[string]string{AttemptsAnnotation: "3"}
		if err := fx.client.Tracker().Update(deploymentsGVR, d, ns); err != nil {
			t.Fatal(err)
		}
	}
	lock()
	if _, err := fx.tick(fx.file); err == nil {
		t.Fatal("locked-out tick succeeded")
	}
	// By hand: kubectl annotate ... chartpin.dev/reconcile-attempts-
	d := fx.deployment(ns, "rel-jobs-manager")
	delete(d.Annotations, AttemptsAnnotation)
	if err := fx.client.Tracker().Update(deploymentsGVR, d, ns); err != nil {
		t.Fatal(err)
	}
	res, err := fx.tick(fx.file)
	if err != nil {
		t.Fatal(err)
	}
	if a := actions(res.Decisions); a["jobs-manager-api"] != ActionReimage || len(res.RolledOut) != 1 {
		t.Errorf("after re-arming: actions %v, rolled out %v", a, res.RolledOut)
	}
	// By success: locked out again, but it now runs the newest digest.
	lock()
	res, err = fx.tick(fx.file)
	if err != nil {
		t.Fatal(err)
	}
	if a := actions(res.Decisions); a["jobs-manager-api"] != ActionNone {
		t.Errorf("actions %v", a)
	}
	if _, ok := fx.deployment(ns, "rel-jobs-manager").Annotations[AttemptsAnnotation]; ok {
		t.Error("a settled workload on the newest digest kept its lockout")
	}
	if p := fx.patches("rel-jobs-manager"); len(p) != 1 || len(patchContainers(p[0])) != 0 {
		t.Errorf("patches %v, want one that only clears the counter", p)
	}
}

func TestSkipStreak(t *testing.T) {
	fx := newFixture(t)
	fx.install(fx.jm+"@"+fx.jmOld, fx.pm+"@"+fx.pmNew, fx.jm+"@"+fx.jmNew,
		[]string{fx.jmOld}, []string{fx.pmNew}, []string{fx.jmNew})
	d := fx.deployment(ns, "rel-jobs-manager")
	d.Status.AvailableReplicas = 0 // not Ready
	if err := fx.client.Tracker().Update(deploymentsGVR, d, ns); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		res, err := fx.tick(fx.file, func(o *Options) { o.MaxSkips = 2 })
		if err != nil {
			t.Fatalf("tick %d: %v", i, err)
		}
		if a := actions(res.Decisions); a["jobs-manager-api"] != ActionSkip {
			t.Fatalf("tick %d: actions %v", i, a)
		}
		if got := fx.deployment(ns, "rel-jobs-manager").Annotations[SkipsAnnotation]; got != fmt.Sprint(i) {
			t.Errorf("tick %d: skip counter %q", i, got)
		}
		if len(fx.patches("rel-jobs-manager")) != 1 || len(patchContainers(fx.patches("rel-jobs-manager")[0])) != 0 {
			t.Errorf("tick %d: a skipped workload was re-imaged: %v", i, fx.patches("rel-jobs-manager"))
		}
	}
	_, err := fx.tick(fx.file, func(o *Options) { o.MaxSkips = 2 })
	if err == nil || failure.Code(err) != 1 {
		t.Fatalf("third skip: err %v, want exit 1", err)
	}
	for _, want := range []string{"skipped 3 ticks in a row (MaxSkips 2)", "0 of 1 replicas available", "kubectl -n prod-ns rollout status deployment/rel-jobs-manager", "kubectl -n prod-ns get pods -l app=rel-jobs-manager"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if ev := fx.events(); len(ev) != 1 || ev[0].Reason != "ReimageSkipStreak" {
		t.Errorf("events %+v", ev)
	}
	// It settles: the next tick re-images and the streak is cleared.
	d = fx.deployment(ns, "rel-jobs-manager")
	d.Status.AvailableReplicas = 1
	if err := fx.client.Tracker().Update(deploymentsGVR, d, ns); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.tick(fx.file, func(o *Options) { o.MaxSkips = 2 }); err != nil {
		t.Fatal(err)
	}
	ann := fx.deployment(ns, "rel-jobs-manager").Annotations
	if _, ok := ann[SkipsAnnotation]; ok {
		t.Errorf("skip counter left: %v", ann)
	}
}

func TestDaemonSetAndStatefulSet(t *testing.T) {
	e := newEnv(t)
	old := e.reg.PushIndex(t, "example/resource-monitor", "old", "linux/amd64")
	latest := e.reg.PushIndex(t, "example/resource-monitor", "dev", "linux/amd64")
	repo := e.reg.Host + "/example/resource-monitor"
	f := targetsFile(t, fmt.Sprintf(`targets:
  - {id: rm, kind: DaemonSet, namespace: node-agents, name: rel-resource-monitor, container: monitor, image: %[1]q}
  - {id: db, kind: StatefulSet, namespace: prod-ns, name: rel-db, container: db, image: %[1]q}
`, repo+":dev"))
	e.add(
		daemonSet("node-agents", "rel-resource-monitor", 3, containers("monitor", repo+":dev")),
		statefulSet(ns, "rel-db", 1, containers("db", repo+"@"+old)),
		pod("node-agents", "rel-resource-monitor", 0, "monitor", repo+"@"+old),
		pod("node-agents", "rel-resource-monitor", 1, "monitor", repo+"@"+latest),
		pod(ns, "rel-db", 0, "db", repo+"@"+old),
	)
	res, err := e.tick(f)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.RolledOut, []string{"DaemonSet node-agents/rel-resource-monitor", "StatefulSet prod-ns/rel-db"}) {
		t.Errorf("rolled out %v", res.RolledOut)
	}
	if e.reg.Count("HEAD") != 1 {
		t.Errorf("HEADs %d, want 1 for one unique image", e.reg.Count("HEAD"))
	}
	if got := patchContainers(e.patches("rel-resource-monitor")[0]); !slices.Equal(got, []string{"monitor=" + repo + "@" + latest}) {
		t.Errorf("daemonset patch %v", got)
	}
	// A stuck DaemonSet fails the tick.
	e2 := newEnv(t)
	e2.reg = e.reg
	e2.add(daemonSet("node-agents", "rel-resource-monitor", 3, containers("monitor", repo+"@"+old)), pod("node-agents", "rel-resource-monitor", 0, "monitor", repo+"@"+old))
	e2.setStuck("rel-resource-monitor", true)
	f2 := targetsFile(t, fmt.Sprintf("targets:\n  - {id: rm, kind: DaemonSet, namespace: node-agents, name: rel-resource-monitor, container: monitor, image: %q}\n", repo+":dev"))
	if _, err := e2.tick(f2, func(o *Options) { o.RolloutTimeout = 30 * time.Millisecond }); err == nil || !strings.Contains(err.Error(), "0 of 3 pods updated") {
		t.Errorf("stuck daemonset: %v", err)
	}
}

func TestDryRunWritesNothing(t *testing.T) {
	fx := newFixture(t)
	fx.install(fx.jm+"@"+fx.jmOld, fx.pm+"@"+fx.pmOld, fx.jm+"@"+fx.jmOld,
		[]string{fx.jmOld}, []string{fx.pmOld}, []string{fx.jmOld})
	res, err := fx.tick(fx.file, func(o *Options) { o.DryRun = true })
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range res.Decisions {
		if d.Action != ActionReimage || !d.DryRun {
			t.Errorf("%+v", d)
		}
	}
	for _, c := range fx.calls() {
		if c.verb != "get" && c.verb != "list" {
			t.Errorf("dry run wrote: %s", c)
		}
	}
}

func TestHungRegistryAndAPIFailTheTick(t *testing.T) {
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	t.Cleanup(hang.Close)
	host := strings.TrimPrefix(hang.URL, "http://")
	f := targetsFile(t, fmt.Sprintf("targets:\n  - {id: api, kind: Deployment, namespace: prod-ns, name: jm, container: api, image: %q}\n", host+"/example/jm:dev"))

	// A hung registry: the per-request timeout ends it.
	e := newEnv(t)
	res, err := resolver.New(resolver.Options{InsecureRegistries: []string{host}, RequestTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.reconciler(res).Tick(context.Background(), f); err == nil || failure.Code(err) != 1 {
		t.Errorf("hung registry: err %v", err)
	}

	// A hung API server (real client-go over HTTP): the per-request timeout ends it.
	reg := registrytest.New(t)
	reg.PushIndex(t, "example/jm", "dev", "linux/amd64")
	f2 := targetsFile(t, fmt.Sprintf("targets:\n  - {id: api, kind: Deployment, namespace: prod-ns, name: jm, container: api, image: %q}\n", reg.Host+"/example/jm:dev"))
	client, err := kubernetes.NewForConfig(&rest.Config{Host: hang.URL})
	if err != nil {
		t.Fatal(err)
	}
	rr, err := resolver.New(resolver.Options{InsecureRegistries: []string{reg.Host}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(client, rr, options(func(o *Options) { o.RequestTimeout = 100 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Tick(context.Background(), f2)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "deadline") {
		t.Errorf("hung API server: err %v, want a deadline error", err)
	}
	// The tick deadline bounds everything else.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	r2, _ := New(client, rr, options(func(o *Options) { o.RequestTimeout = time.Minute }))
	if _, err := r2.Tick(ctx, f2); err == nil {
		t.Error("tick deadline did not end a hung API server")
	}
}

func TestPinnedSpecWithOlderPodsIsRestarted(t *testing.T) {
	fx := newFixture(t)
	// The spec already names the newest digest, but a pod still runs the old
	// build (e.g. an OnDelete update strategy): restart through the template.
	fx.install(fx.jm+"@"+fx.jmNew, fx.pm+"@"+fx.pmNew, fx.jm+"@"+fx.jmNew,
		[]string{fx.jmNew, fx.jmOld}, []string{fx.pmNew, fx.pmNew}, []string{fx.jmNew})
	res, err := fx.tick(fx.file)
	if err != nil {
		t.Fatal(err)
	}
	if a := actions(res.Decisions); a["jobs-manager-api"] != ActionReimage {
		t.Fatalf("actions %v", a)
	}
	p := fx.patches("rel-jobs-manager")
	if len(p) == 0 {
		t.Fatal("no patch")
	}
	tmpl := p[0]["spec"].(map[string]any)["template"].(map[string]any)
	ann, _ := tmpl["metadata"].(map[string]any)["annotations"].(map[string]any)
	if ann[RestartAnnotation] != "2026-12-02T12:00:00Z" {
		t.Errorf("template annotations %v, want %s set to force a rollout", ann, RestartAnnotation)
	}
	if got := patchContainers(p[0]); !slices.Equal(got, []string{"api=" + fx.jm + "@" + fx.jmNew}) {
		t.Errorf("containers %v", got)
	}
	// The completed restart does not re-arm; the next tick, which sees every
	// pod on the newest digest, does.
	if got := fx.deployment(ns, "rel-jobs-manager").Annotations[AttemptsAnnotation]; got != "1" {
		t.Errorf("attempt counter %q after the restart, want 1 until a tick sees the newest digest", got)
	}
	res, err = fx.tick(fx.file)
	if err != nil {
		t.Fatal(err)
	}
	if a := actions(res.Decisions); a["jobs-manager-api"] != ActionNone {
		t.Errorf("after the restart: actions %v", a)
	}
	if _, ok := fx.deployment(ns, "rel-jobs-manager").Annotations[AttemptsAnnotation]; ok {
		t.Error("a workload seen on the newest digest kept its attempt counter")
	}
}

// oneApp is a Deployment "app" (2 replicas, container "app") whose spec is
// spec and whose pods report imageID, with its targets file.
func oneApp(t *testing.T, spec func(repo, latest string) string, imageID func(repo, old string) string) (e *env, f *File, repo, old, latest string) {
	t.Helper()
	e = newEnv(t)
	repo = e.reg.Host + "/example/app"
	old = e.reg.PushIndex(t, "example/app", "old", "linux/amd64", "linux/arm64")
	latest = e.reg.PushIndex(t, "example/app", "dev", "linux/amd64", "linux/arm64")
	e.add(deployment(ns, "app", 2, containers("app", spec(repo, latest))))
	for i := range 2 {
		e.add(pod(ns, "app", i, "app", imageID(repo, old)))
	}
	f = targetsFile(t, fmt.Sprintf("targets:\n  - id: app\n    kind: Deployment\n    namespace: %s\n    name: app\n    container: app\n    image: %s:dev\n", ns, repo))
	return e, f, repo, old, latest
}

func TestImageIDWithoutRepoDigestIsNotRestarted(t *testing.T) {
	// A runtime that reports an image config ID ("sha256:cfg1",
	// no repo digest) gives no evidence of an older build. A spec pinned to
	// the newest digest is left alone on every tick; a spec naming the tag is
	// pinned once, then left alone.
	for _, tc := range []struct {
		name    string
		spec    func(repo, latest string) string
		patches int // on the first tick
	}{
		{"spec pinned to the newest digest", func(repo, latest string) string { return repo + "@" + latest }, 0},
		{"spec names the tag", func(repo, _ string) string { return repo + ":dev" }, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, f, repo, _, latest := oneApp(t, tc.spec, func(string, string) string { return "sha256:cfg1" })
			e.setReports("app", "sha256:cfg1")
			for tick := 1; tick <= 4; tick++ {
				res, err := e.tick(f)
				if err != nil {
					t.Fatalf("tick %d: %v", tick, err)
				}
				want := 0
				if tick == 1 {
					want = tc.patches
				}
				var spec []map[string]any // patches that roll the workload
				for _, p := range e.patches("app") {
					if _, ok := p["spec"]; ok {
						spec = append(spec, p)
					}
				}
				if len(spec) != want {
					t.Fatalf("tick %d: %d re-image patches %v, want %d; decisions %+v", tick, len(spec), spec, want, res.Decisions)
				}
				if tick > 1 && len(e.patches("app")) != 0 {
					t.Errorf("tick %d: patches %v, want none", tick, e.patches("app"))
				}
				if tick == 1 && want == 1 {
					if got := patchContainers(spec[0]); !slices.Equal(got, []string{"app=" + repo + "@" + latest}) {
						t.Errorf("pin patch containers %v", got)
					}
					continue
				}
				d := res.Decisions[0]
				if d.Action != ActionNone || !strings.Contains(d.Reason, "no evidence of an older build") {
					t.Errorf("tick %d: decision %+v, want none: no evidence of an older build", tick, d)
				}
			}
			if got := e.deployment(ns, "app").Spec.Template.Spec.Containers[0].Image; got != repo+"@"+latest {
				t.Errorf("spec %s, want %s@%s", got, repo, latest)
			}
			if !strings.Contains(e.logs.String(), "no evidence of an older build") {
				t.Errorf("the decision was not logged:\n%s", e.logs)
			}
		})
	}
}

func TestRestartThatChangesNothingReachesLockout(t *testing.T) {
	// The spec names the newest digest, the pods report an older one, and a
	// restart does not change what they report: every rollout completes, yet
	// the attempt counter must climb to the lockout instead of restarting on
	// every tick.
	e, f, repo, old, _ := oneApp(t, func(repo, latest string) string { return repo + "@" + latest },
		func(repo, old string) string { return repo + "@" + old })
	e.setReports("app", repo+"@"+old)
	for tick := 1; tick <= 3; tick++ {
		res, err := e.tick(f)
		if err != nil {
			t.Fatalf("tick %d: %v", tick, err)
		}
		if len(res.RolledOut) != 1 || len(e.patches("app")) != 1 {
			t.Fatalf("tick %d: rolled out %v, patches %v; want one restart", tick, res.RolledOut, e.patches("app"))
		}
		if got := e.deployment(ns, "app").Annotations[AttemptsAnnotation]; got != fmt.Sprint(tick) {
			t.Errorf("tick %d: attempt counter %q after a restart, want %d", tick, got, tick)
		}
	}
	res, err := e.tick(f)
	if err == nil || !strings.Contains(err.Error(), "locked out") {
		t.Fatalf("tick 4: err %v, want a lockout", err)
	}
	if a := res.Decisions[0].Action; a != ActionLockout || len(e.patches("app")) != 0 {
		t.Errorf("tick 4: action %s, patches %v; want a lockout and no patch", a, e.patches("app"))
	}
}

func TestPatchRewrittenByTheClusterReachesLockout(t *testing.T) {
	// A mutating webhook rewrites every image to a mirror on the way in: the
	// stored spec never names the target, so each tick would patch again.
	// The tick fails, the attempt stays counted, and the lockout ends it
	e, f, _, _, latest := oneApp(t, func(repo, _ string) string { return repo + ":dev" },
		func(repo, old string) string { return repo + "@" + old })
	rewritten := "mirror.example/example/app@" + latest
	e.client.PrependReactor("patch", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		handled, obj, err := k8stesting.ObjectReaction(e.client.Tracker())(a)
		if err != nil || !handled {
			return handled, obj, err
		}
		d := obj.(*appsv1.Deployment)
		for i := range d.Spec.Template.Spec.Containers {
			d.Spec.Template.Spec.Containers[i].Image = rewritten
		}
		return true, d, e.client.Tracker().Update(deploymentsGVR, d, d.Namespace)
	})
	for tick := 1; tick <= 3; tick++ {
		res, err := e.tick(f)
		if err == nil || !strings.Contains(err.Error(), "did not land: container app holds "+rewritten) {
			t.Fatalf("tick %d: err %v, want the rewritten patch reported", tick, err)
		}
		if len(res.RolledOut) != 0 {
			t.Errorf("tick %d: rolled out %v", tick, res.RolledOut)
		}
		if got := e.deployment(ns, "app").Annotations[AttemptsAnnotation]; got != fmt.Sprint(tick) {
			t.Errorf("tick %d: attempt counter %q, want %d", tick, got, tick)
		}
		if ev := e.events(); len(ev) != 2 || ev[1].Reason != "ReimageNotApplied" {
			t.Errorf("tick %d: events %+v, want Reimaged then ReimageNotApplied", tick, ev)
		}
	}
	if _, err := e.tick(f); err == nil || !strings.Contains(err.Error(), "locked out") || len(e.patches("app")) != 0 {
		t.Fatalf("tick 4: err %v, patches %v; want a lockout and no patch", err, e.patches("app"))
	}
}

// A read error while waiting for a rollout is a failed tick: the attempt stays
// counted and a Warning is recorded, exactly as for a rollout that never
// completes. Reporting it as success would clear the counter, and a workload
// whose status cannot be read would never reach the lockout.
func TestRolloutWaitReadErrorFailsTheTick(t *testing.T) {
	fx := newFixture(t)
	fx.install(fx.jm+"@"+fx.jmOld, fx.pm+"@"+fx.pmNew, fx.jm+"@"+fx.jmNew,
		[]string{fx.jmOld}, []string{fx.pmNew}, []string{fx.jmNew})
	gets := 0
	fx.client.PrependReactor("get", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.GetAction).GetName() != "rel-jobs-manager" {
			return false, nil, nil
		}
		gets++
		if gets == 1 {
			return false, nil, nil // the tick's read
		}
		return true, nil, errors.New("etcdserver: leader changed")
	})
	_, err := fx.tick(fx.file)
	if err == nil || failure.Code(err) != 1 {
		t.Fatalf("err %v, want exit 1", err)
	}
	for _, want := range []string{"waiting for the rollout of Deployment prod-ns/rel-jobs-manager", "leader changed", "attempt 1 of 3"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if gets != 2 {
		t.Errorf("%d gets of rel-jobs-manager, want 2 (the read, one wait poll)", gets)
	}
	if got := fx.deployment(ns, "rel-jobs-manager").Annotations[AttemptsAnnotation]; got != "1" {
		t.Errorf("attempt counter %q after a failed wait, want 1 (kept)", got)
	}
	ev := fx.events()
	if len(ev) != 2 || ev[1].Reason != "ReimageRolloutFailed" || ev[1].Type != "Warning" || !strings.Contains(ev[1].Message, "leader changed") {
		t.Errorf("events %+v, want Reimaged then ReimageRolloutFailed naming the read error", ev)
	}
}

// An Event the API server refuses fails the tick, even when the patch and the
// rollout succeeded: a Role without create on events must not go unnoticed.
func TestEventRecordingFailureFailsTheTick(t *testing.T) {
	fx := newFixture(t)
	fx.install(fx.jm+"@"+fx.jmOld, fx.pm+"@"+fx.pmNew, fx.jm+"@"+fx.jmNew,
		[]string{fx.jmOld}, []string{fx.pmNew}, []string{fx.jmNew})
	fx.client.PrependReactor("create", "events", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "events"}, "", errors.New("no rule"))
	})
	res, err := fx.tick(fx.file)
	if err == nil || failure.Code(err) != 1 {
		t.Fatalf("err %v, want exit 1", err)
	}
	if !strings.Contains(err.Error(), "recording event Reimaged on Deployment prod-ns/rel-jobs-manager") || !strings.Contains(err.Error(), "grants create on events") {
		t.Errorf("error does not name the event and the missing rule: %v", err)
	}
	if !slices.Equal(res.Patched, []string{"Deployment prod-ns/rel-jobs-manager"}) {
		t.Errorf("patched %v; the re-image itself went through", res.Patched)
	}
}

// Some runtimes report the per-platform manifest they pulled as the pod's
// imageID, not the index digest the spec names: that pod runs the newest
// index. One GET of the index per tick decides it; a child of an older index
// is still an older build.
func TestPerPlatformImageIDRunsTheIndex(t *testing.T) {
	fx := newFixture(t)
	children := func(ref string) []string {
		m, err := fx.resolver().Manifest(context.Background(), ref)
		if err != nil {
			t.Fatal(err)
		}
		return m.Children
	}
	newAMD64, oldAMD64 := children(fx.jm + "@" + fx.jmNew)[0], children(fx.jm + "@" + fx.jmOld)[0]
	pmNewChild := children(fx.pm + "@" + fx.pmNew)[1]
	fx.install(fx.jm+"@"+fx.jmNew, fx.pm+":dev", fx.jm+"@"+fx.jmNew,
		[]string{newAMD64, newAMD64}, []string{pmNewChild, pmNewChild}, []string{oldAMD64})

	res, err := fx.tick(fx.file)
	if err != nil {
		t.Fatal(err)
	}
	got := actions(res.Decisions)
	want := map[string]Action{"jobs-manager-api": ActionNone, "jobs-manager-pods-monitor": ActionNone, "requests-proxy-proxy": ActionReimage}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("actions %v, want %v (a child of the newest index runs it; a child of an older one does not)", got, want)
	}
	// One GET per index that some pod did not report, not one per pod.
	for _, idx := range []string{fx.jmNew, fx.pmNew} {
		if n := fx.reg.CountPath("GET", "/manifests/"+idx); n != 1 {
			t.Errorf("GETs of index %s: %d, want 1", short(idx), n)
		}
	}
	if n := fx.reg.CountPath("GET", "/manifests/"); n != 2 {
		t.Errorf("%d manifest GETs, want the two indexes only: %v", n, fx.reg.Requests())
	}
	if p := fx.patches("rel-jobs-manager"); len(p) != 0 {
		t.Errorf("rel-jobs-manager patched: %v", p)
	}

	// Steady state, every pod on the index digest: HEADs only, no GET.
	fx2 := newFixture(t)
	fx2.install(fx2.jm+"@"+fx2.jmNew, fx2.pm+"@"+fx2.pmNew, fx2.jm+"@"+fx2.jmNew,
		[]string{fx2.jmNew}, []string{fx2.pmNew}, []string{fx2.jmNew})
	if _, err := fx2.tick(fx2.file); err != nil {
		t.Fatal(err)
	}
	if n := fx2.reg.CountPath("GET", "/manifests/"); n != 0 {
		t.Errorf("%d manifest GETs when every pod reports the index digest, want 0", n)
	}
}
