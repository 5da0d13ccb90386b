package release

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chartpin/chartpin/gitops"
	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/internal/gittest"
	"github.com/chartpin/chartpin/internal/registrytest"
	"github.com/chartpin/chartpin/pin"
	"github.com/chartpin/chartpin/publish"
	"github.com/chartpin/chartpin/pullrequest"
	"github.com/chartpin/chartpin/pullrequest/fakegithub"
	"github.com/chartpin/chartpin/resolver"
)

const token = "ghs_release-test-token"

// world is a throwaway repository served over smart HTTP with a token, a
// registry holding the chart's image, and a fake GitHub.
type world struct {
	reg      *registrytest.Registry
	bare     string
	url      string
	git      *gittest.Server
	gh       *fakegithub.Server
	values   string // values.yaml as committed on main
	digest14 string
}

const chartValues = `# app chart; pins are written by chartpin
image:
  repository: REG/example/app
  tag: "1.4"
  digest: ""   # pinned at release time
replicas: 1
`

func newWorld(t testing.TB) *world {
	t.Helper()
	w := &world{reg: registrytest.New(t)}
	w.digest14 = w.reg.PushIndex(t, "example/app", "1.4", "linux/amd64", "linux/arm64")
	root := t.TempDir()
	w.bare = filepath.Join(root, "charts.git")
	gittest.Git(t, root, "init", "-q", "--bare", w.bare)
	gittest.Git(t, w.bare, "config", "http.receivepack", "true")
	initial := filepath.Join(root, "initial")
	gittest.Git(t, root, "init", "-q", initial)
	w.values = strings.ReplaceAll(chartValues, "REG", w.reg.Host)
	for name, body := range map[string]string{
		"charts/app/Chart.yaml":                "apiVersion: v2\nname: app\nversion: 1.0.0\nappVersion: \"1.0.0\"\n",
		"charts/app/values.yaml":               w.values,
		"charts/app/templates/deployment.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app\nspec:\n  template:\n    spec:\n      containers:\n        - name: app\n          image: \"{{ .Values.image.repository }}:{{ .Values.image.tag }}{{ with .Values.image.digest }}@{{ . }}{{ end }}\"\n",
		"README.md":                            "charts\n",
	} {
		p := filepath.Join(initial, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gittest.Git(t, initial, "add", ".")
	gittest.Git(t, initial, "commit", "-qm", "initial")
	gittest.Git(t, initial, "push", "-q", w.bare, "main")

	w.git = gittest.NewHTTP(t, root, token)
	w.url = w.git.URL + "/charts.git"

	w.gh = fakegithub.New("acme", "charts", token)
	t.Cleanup(w.gh.Close)
	w.gh.Branches = func(name string) bool { return gittest.HasBranch(w.bare, name) }
	w.reg.Reset()
	return w
}

// clone is a fresh CI checkout of main.
func (w *world) clone(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ci")
	gittest.Git(t, filepath.Dir(dir), "-c", "http.extraHeader=Authorization: "+gittest.BasicAuth(token), "clone", "-q", w.url, dir)
	return dir
}

func (w *world) options(t testing.TB, dir string, dry bool) Options {
	t.Helper()
	repo, err := gitops.Open(dir, gitops.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	r, err := resolver.New(resolver.Options{InsecureRegistries: []string{w.reg.Host}})
	if err != nil {
		t.Fatal(err)
	}
	prs, err := pullrequest.NewGitHub("acme", "charts", token, pullrequest.Options{API: w.gh.URL})
	if err != nil {
		t.Fatal(err)
	}
	return Options{
		Pin:  pin.Options{ChartDirs: []string{filepath.Join(dir, "charts/app")}, Resolver: r},
		Repo: repo, PRs: prs, Labels: []string{"release"}, DryRun: dry,
	}
}

func (w *world) show(t testing.TB, rev string) string {
	t.Helper()
	return gittest.Git(t, w.bare, "show", rev)
}

const (
	list   = "GET /repos/acme/charts/pulls?head=acme%3Achartpin%2Fpins&per_page=10&state=open"
	create = "POST /repos/acme/charts/pulls"
	edit   = "PATCH /repos/acme/charts/pulls/1"
	label  = "POST /repos/acme/charts/issues/1/labels"
)

func seq(t *testing.T, gh *fakegithub.Server, want ...string) {
	t.Helper()
	got := gh.Sequence()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("GitHub calls:\n  got  %q\n  want %q", got, want)
	}
}

// TestFullRun is the "done when": pin → commit → push → PR; a second
// run updates it; after the merge, publish lands in an index and an OCI
// registry and the Helm SDK pulls the new version.
func TestFullRun(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()

	// 1. First run in a CI checkout.
	var opts Options
	ci := w.clone(t)
	opts = w.options(t, ci, false)
	w.git.Reset()
	start := time.Now()
	rep, err := Run(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first run: %v; registry %d requests, git %d requests, GitHub %d requests",
		time.Since(start).Round(time.Millisecond), w.reg.Count(""), len(w.git.Requests()), len(w.gh.Calls()))
	if !rep.CommitCreated || !rep.Pushed || rep.PR.Action != pullrequest.Created {
		t.Fatalf("first run: %+v", rep)
	}
	seq(t, w.gh, list, create, label)
	if got, _ := os.ReadFile(filepath.Join(ci, "charts/app/values.yaml")); string(got) != w.values {
		t.Fatal("the release wrote the checkout; the pins belong on the branch")
	}
	if got := w.show(t, "chartpin/pins:charts/app/values.yaml"); !strings.Contains(got, `digest: "`+w.digest14+`"   # pinned at release time`) {
		t.Fatalf("branch values.yaml:\n%s", got)
	}
	if got := w.show(t, "chartpin/pins:charts/app/Chart.yaml"); !strings.Contains(got, "version: 1.0.1") {
		t.Fatalf("branch Chart.yaml:\n%s", got)
	}
	if got := gittest.Git(t, w.bare, "diff", "--name-only", "main", "chartpin/pins"); got != "charts/app/Chart.yaml\ncharts/app/values.yaml" {
		t.Fatalf("committed files: %q", got)
	}
	pr := w.gh.PRs()[0]
	if pr.Head != "chartpin/pins" || pr.Base != "main" || !strings.Contains(pr.Body, w.digest14[7:19]) || !strings.Contains(pr.Body, "`1.0.0` → `1.0.1`") || !reflect.DeepEqual(pr.Labels, []string{"release"}) {
		t.Fatalf("PR: %+v", pr)
	}
	if pr.Title != rep.Title || !strings.HasPrefix(pr.Title, "chart(app 1.0.1): pin 1 image") {
		t.Fatalf("PR title %q", pr.Title)
	}
	firstTip := gittest.Git(t, w.bare, "rev-parse", "chartpin/pins")

	// 2. Re-run without changes (a new CI checkout): no commit, no push,
	// one read of GitHub.
	opts = w.options(t, w.clone(t), false)
	w.gh.Reset()
	w.git.Reset()
	w.reg.Reset()
	start = time.Now()
	rep, err = Run(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("unchanged re-run: %v; registry %d requests, git %d requests, GitHub %d requests",
		time.Since(start).Round(time.Millisecond), w.reg.Count(""), len(w.git.Requests()), len(w.gh.Calls()))
	if n := len(w.git.Requests()); n != 1 {
		t.Fatalf("unchanged re-run sent %d git requests, want 1 (the ref listing)", n)
	}
	if rep.CommitCreated || rep.Pushed || rep.PR.Action != pullrequest.Unchanged {
		t.Fatalf("unchanged re-run: %+v", rep)
	}
	seq(t, w.gh, list)
	if got := gittest.Git(t, w.bare, "rev-parse", "chartpin/pins"); got != firstTip {
		t.Fatal("unchanged re-run moved the branch")
	}

	// Same, in the first checkout (left untouched by the first run): also a no-op.
	w.gh.Reset()
	rep, err = Run(ctx, w.options(t, ci, false))
	if err != nil || rep.Pushed || rep.PR == nil || rep.PR.Action != pullrequest.Unchanged {
		t.Fatalf("re-run in the applied checkout: %+v, %v", rep, err)
	}
	seq(t, w.gh, list)

	// 3. The float moves: the next run replaces our commit and updates the PR.
	digest14b := w.reg.PushIndex(t, "example/app", "1.4", "linux/amd64", "linux/arm64")
	w.gh.Reset()
	rep, err = Run(ctx, w.options(t, w.clone(t), false))
	if err != nil {
		t.Fatal(err)
	}
	if !rep.CommitCreated || !rep.Pushed || rep.PR.Action != pullrequest.Updated {
		t.Fatalf("re-run with changes: %+v", rep)
	}
	seq(t, w.gh, list, edit)
	if got := w.show(t, "chartpin/pins:charts/app/values.yaml"); !strings.Contains(got, digest14b) {
		t.Fatal("branch lacks the new digest")
	}
	if n := gittest.Git(t, w.bare, "rev-list", "--count", "main..chartpin/pins"); n != "1" {
		t.Fatalf("%s commits on the branch, want 1", n)
	}
	if body := w.gh.PRs()[0].Body; !strings.Contains(body, digest14b[7:19]) {
		t.Fatalf("PR body not updated: %s", body)
	}

	// 4. Merge (fast-forward main, close the PR), then publish from main.
	gittest.Git(t, w.bare, "update-ref", "refs/heads/main", "refs/heads/chartpin/pins")
	w.gh.ClosePR(1)
	merged := w.clone(t)
	indexDir := t.TempDir()
	w.reg.Reset()
	start = time.Now()
	res, err := publish.Publish(ctx, filepath.Join(merged, "charts/app"), publish.Options{
		IndexDir: indexDir, BaseURL: "https://acme.github.io/charts",
		OCI: "oci://" + w.reg.Host + "/charts", PlainHTTP: []string{w.reg.Host}, RegistryConfig: filepath.Join(t.TempDir(), "none.json"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("publish: %v; registry %d requests", time.Since(start).Round(time.Millisecond), w.reg.Count(""))
	if res.Version != "1.0.1" || res.Index.Action != publish.Added || res.OCI.Action != publish.Pushed {
		t.Fatalf("publish: %+v %+v %+v", res, res.Index, res.OCI)
	}
	if !strings.Contains(res.Images, w.reg.Host+"/example/app:1.4@"+digest14b) {
		t.Fatalf("images annotation: %s", res.Images)
	}
	client, err := publish.NewRegistryClient(ctx, w.reg.Host, publish.Options{PlainHTTP: []string{w.reg.Host}, RegistryConfig: filepath.Join(t.TempDir(), "none.json")})
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := client.Pull(w.reg.Host + "/charts/app:1.0.1")
	if err != nil {
		t.Fatal(err)
	}
	onDisk, _ := os.ReadFile(filepath.Join(indexDir, "app-1.0.1.tgz"))
	if !bytes.Equal(pulled.Chart.Data, onDisk) || pulled.Chart.Meta.Version != "1.0.1" {
		t.Fatal("the OCI chart and the index tarball differ")
	}

	// 5. After the merge nothing is left to do: no commit, no push, no API call.
	w.gh.Reset()
	before := gittest.Git(t, w.bare, "rev-parse", "chartpin/pins")
	rep, err = Run(ctx, w.options(t, merged, false))
	if err != nil || !rep.Nothing {
		t.Fatalf("after merge: %+v, %v", rep, err)
	}
	seq(t, w.gh)
	if gittest.Git(t, w.bare, "rev-parse", "chartpin/pins") != before {
		t.Fatal("nothing-to-do run moved the branch")
	}
	if !strings.Contains(rep.Text(), "nothing to release") {
		t.Fatalf("text: %s", rep.Text())
	}
}

// A run that pushed but could not open the pull request is completed by the
// next run, both in the same checkout and in a fresh one.
func TestRerunCompletesPartialFailure(t *testing.T) {
	for _, fresh := range []bool{false, true} {
		t.Run(map[bool]string{false: "same-checkout", true: "fresh-checkout"}[fresh], func(t *testing.T) {
			w := newWorld(t)
			ctx := context.Background()
			ci := w.clone(t)
			w.gh.FailNext("POST", `/pulls$`, 502, `{"message":"Server Error"}`)
			_, err := Run(ctx, w.options(t, ci, false))
			if err == nil || !strings.Contains(err.Error(), "502") || !strings.Contains(err.Error(), "re-run to finish") {
				t.Fatalf("first run: %v", err)
			}
			tip := gittest.Git(t, w.bare, "rev-parse", "chartpin/pins") // pushed despite the failure
			w.gh.Reset()
			dir := ci
			if fresh {
				dir = w.clone(t)
			}
			rep, err := Run(ctx, w.options(t, dir, false))
			if err != nil {
				t.Fatal(err)
			}
			if rep.Pushed || rep.PR.Action != pullrequest.Created || rep.Commit != tip {
				t.Fatalf("completing run: %+v", rep)
			}
			seq(t, w.gh, list, create, label)
			if p := w.gh.PRs()[0]; !strings.Contains(p.Body, w.digest14[7:19]) || p.Title != rep.Title {
				t.Fatalf("PR: %+v", p)
			}
		})
	}
}

func TestForeignCommitStopsBeforeWriting(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	if _, err := Run(ctx, w.options(t, w.clone(t), false)); err != nil {
		t.Fatal(err)
	}
	// A reviewer pushes a fix to the PR branch.
	bob := filepath.Join(t.TempDir(), "bob")
	gittest.Git(t, filepath.Dir(bob), "-c", "http.extraHeader=Authorization: "+gittest.BasicAuth(token), "clone", "-q", "-b", "chartpin/pins", w.url, bob)
	os.WriteFile(filepath.Join(bob, "README.md"), []byte("reviewed\n"), 0o644)
	gittest.Git(t, bob, "commit", "-qam", "review fix")
	gittest.Git(t, bob, "-c", "http.extraHeader=Authorization: "+gittest.BasicAuth(token), "push", "-q", "origin", "chartpin/pins")
	bobTip := gittest.Git(t, w.bare, "rev-parse", "chartpin/pins")

	w.reg.PushIndex(t, "example/app", "1.4", "linux/amd64", "linux/arm64") // something to pin
	w.gh.Reset()
	ci := w.clone(t)
	_, err := Run(ctx, w.options(t, ci, false))
	if !errors.Is(err, gitops.ErrForeignCommits) || !strings.Contains(err.Error(), "review fix") {
		t.Fatalf("err = %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(ci, "charts/app/values.yaml")); string(got) != w.values {
		t.Fatal("refused run wrote the working tree")
	}
	if gittest.Git(t, w.bare, "rev-parse", "chartpin/pins") != bobTip {
		t.Fatal("bob's commit was overwritten")
	}
	seq(t, w.gh)
}

func TestDryRunWritesNothing(t *testing.T) {
	w := newWorld(t)
	ci := w.clone(t)
	rep, err := Run(context.Background(), w.options(t, ci, true))
	if err != nil {
		t.Fatal(err)
	}
	text := rep.Text()
	for _, want := range []string{"dry run", "would commit on chartpin/pins (parent ", "charts/app/values.yaml", "would open a pull request: chart(app 1.0.1)", "+  digest: \"" + w.digest14, "| image | tag |"} {
		if !strings.Contains(text, want) {
			t.Errorf("dry-run text lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, token) {
		t.Fatal("dry-run output contains the token")
	}
	seq(t, w.gh, list)
	if got, _ := os.ReadFile(filepath.Join(ci, "charts/app/values.yaml")); string(got) != w.values {
		t.Fatal("dry run wrote values.yaml")
	}
	if out := gittest.Git(t, ci, "branch", "--list", "chartpin/pins"); out != "" {
		t.Fatal("dry run created a local branch")
	}
	if out := gittest.Git(t, w.bare, "branch", "--list", "chartpin/pins"); out != "" {
		t.Fatal("dry run pushed")
	}
}

// actions/checkout clones with depth 1 by default: the release must commit
// and push from a shallow clone too.
func TestShallowCheckout(t *testing.T) {
	w := newWorld(t)
	full := w.clone(t)
	gittest.Git(t, full, "commit", "-q", "--allow-empty", "-m", "second")
	gittest.Git(t, full, "commit", "-q", "--allow-empty", "-m", "third")
	gittest.Git(t, full, "-c", "http.extraHeader=Authorization: "+gittest.BasicAuth(token), "push", "-q", "origin", "main")
	dir := filepath.Join(t.TempDir(), "shallow")
	gittest.Git(t, filepath.Dir(dir), "-c", "http.extraHeader=Authorization: "+gittest.BasicAuth(token), "clone", "-q", "--depth", "1", w.url, dir)
	if got := gittest.Git(t, dir, "rev-parse", "--is-shallow-repository"); got != "true" {
		t.Fatalf("clone is not shallow: %s", got)
	}
	rep, err := Run(context.Background(), w.options(t, dir, false))
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Pushed || rep.PR.Action != pullrequest.Created {
		t.Fatalf("shallow run: %+v", rep)
	}
	if got := gittest.Git(t, w.bare, "log", "--format=%s", "-2", "chartpin/pins"); !strings.HasPrefix(got, "chart(app 1.0.1)") || !strings.HasSuffix(got, "third") {
		t.Fatalf("branch history: %q", got)
	}
	if out := gittest.Git(t, w.bare, "fsck", "--strict"); strings.Contains(out, "missing") || strings.Contains(out, "error") {
		t.Fatalf("fsck: %s", out)
	}
}

// A checkout that finishes an old run never rolls the branch back over a
// newer one pushed since from elsewhere.
func TestStaleLocalRunDoesNotRollBack(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	a := w.clone(t)
	w.gh.FailNext("POST", `/pulls$`, 502, `{"message":"Server Error"}`)
	if _, err := Run(ctx, w.options(t, a, false)); err == nil {
		t.Fatal("first run: want the injected 502")
	}
	newer := w.reg.PushIndex(t, "example/app", "1.4", "linux/amd64", "linux/arm64")
	w.gh.FailNext("POST", `/pulls$`, 502, `{"message":"Server Error"}`)
	if _, err := Run(ctx, w.options(t, w.clone(t), false)); err == nil {
		t.Fatal("second run: want the injected 502")
	}
	tip := gittest.Git(t, w.bare, "rev-parse", "chartpin/pins")
	w.gh.Reset()
	rep, err := Run(ctx, w.options(t, a, false)) // checkout a: its local branch is older
	if err != nil {
		t.Fatal(err)
	}
	if rep.Pushed || rep.Commit != tip || gittest.Git(t, w.bare, "rev-parse", "chartpin/pins") != tip {
		t.Fatalf("stale checkout moved the branch: %+v", rep)
	}
	seq(t, w.gh, list, create, label)
	if body := w.gh.PRs()[0].Body; !strings.Contains(body, newer[7:19]) {
		t.Fatalf("PR body does not describe the pushed commit:\n%s", body)
	}
}

// The release commit holds the pins and nothing else: a checkout with
// uncommitted edits in a file the run changes is refused (exit 2).
func TestDirtyCheckoutRefused(t *testing.T) {
	w := newWorld(t)
	ci := w.clone(t)
	values := filepath.Join(ci, "charts/app/values.yaml")
	if err := os.WriteFile(values, []byte(w.values+"debug: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dry := range []bool{true, false} {
		_, err := Run(context.Background(), w.options(t, ci, dry))
		if failure.Code(err) != 2 || !strings.Contains(err.Error(), "charts/app/values.yaml has uncommitted changes") {
			t.Fatalf("dry=%v: %v", dry, err)
		}
	}
	if out := gittest.Git(t, w.bare, "branch", "--list", "chartpin/pins"); out != "" {
		t.Fatal("a refused run pushed")
	}
	if got, _ := os.ReadFile(values); string(got) != w.values+"debug: true\n" {
		t.Fatal("the user's edit was touched")
	}
}

// Without a token a dry run still shows the commit, and says it did not
// look the pull request up.
func TestDryRunWithoutToken(t *testing.T) {
	w := newWorld(t)
	o := w.options(t, w.clone(t), true)
	o.PRs = nil
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if text := rep.Text(); !strings.Contains(text, "pull request for chartpin/pins (not looked up)") || !strings.Contains(text, "would commit on chartpin/pins") {
		t.Fatalf("text:\n%s", text)
	}
	seq(t, w.gh)
	o.DryRun = false
	if _, err := Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "GITHUB_TOKEN") {
		t.Fatalf("real run without a PR service: %v", err)
	}
}

// Validate refuses, as input errors, what Run cannot start without, before
// any remote is asked.
func TestOptionsValidate(t *testing.T) {
	dir := t.TempDir()
	gittest.Git(t, dir, "init", "-q")
	repo, err := gitops.Open(dir, gitops.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{}, "release: no repository"},
		{Options{Repo: repo}, "release: no pull request service (set GITHUB_TOKEN)"},
		{Options{Repo: repo, DryRun: true, Pin: pin.Options{Bump: "huge"}}, `Bump "huge": want one of `},
	} {
		err := tc.o.Validate()
		if failure.Code(err) != 2 || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Validate() = %v (exit %d), want exit 2 and %q", err, failure.Code(err), tc.want)
		}
		if _, err := Run(context.Background(), tc.o); failure.Code(err) != 2 {
			t.Errorf("Run: %v, want the same input error", err)
		}
	}
	if err := (Options{Repo: repo, DryRun: true}).Validate(); err != nil {
		t.Errorf("dry run without a pull request service: %v", err)
	}
}
