package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"gopkg.in/yaml.v3"

	"github.com/chartpin/chartpin/guard/guardtest"
	"github.com/chartpin/chartpin/internal/dist"
	"github.com/chartpin/chartpin/internal/gittest"
	"github.com/chartpin/chartpin/internal/registrytest"
	"github.com/chartpin/chartpin/internal/testenv"
)

const shipVersion = "v0.9.0"

// imagePinRe is chartpin's own image block in the example chart's values:
// the tag, its comment, the digest.
var imagePinRe = regexp.MustCompile(`(    tag: )"[^"]*"(\n    # Index digest pin[^\n]*\n    digest: )"[^"]*"`)

// TestShip runs chartpin's own release on loopback with the pieces a release
// job has: the dist build, the image pushed from its OCI layout to Debian's
// docker-registry, chartpin pinning its own chart to that digest, the binary
// taken out of the pushed image, and the GitHub Action's install steps and
// the Helm plugin fetching the release files from a local server (a file
// that does not match install/SHA256SUMS is refused). The dist build here
// covers the two image platforms; `make dist-check` covers all six.
func TestShip(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	reg := registrytest.StartDistribution(t, registrytest.DistributionOptions{})
	proxy := registrytest.NewProxy(t, reg.Host)

	start := time.Now()
	out := filepath.Join(t.TempDir(), "dist")
	res, err := dist.Build(ctx, dist.Options{
		Dir: root, Out: out, Version: shipVersion, Platforms: []string{"linux/amd64", "linux/arm64"},
		CACerts: []byte("-----BEGIN CERTIFICATE-----\n"), Created: time.Unix(1764672000, 0),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("dist: %v and image %s in %s", res.Files, res.Image, time.Since(start).Round(time.Second))
	bin := filepath.Join(out, "chartpin_linux_amd64")

	// The image goes up the way the ship workflow pushes it.
	push := exec.Command("go", "run", "./cmd/chartpin-image", "--from", filepath.Join(out, dist.ImageDir),
		"--insecure", "--push", reg.Host+"/chartpin/chartpin:0.9.0")
	push.Dir = root
	pushed, err := push.Output()
	if err != nil {
		t.Fatalf("chartpin-image --from --push: %v\n%s", err, stderrOf(err))
	}
	if got := strings.TrimSpace(string(pushed)); got != res.Image.String() {
		t.Fatalf("pushed %s, the layout holds %s", got, res.Image)
	}

	repo := shipRepo(t, root)
	t.Run("chartpin pins its own chart to the pushed digest", func(t *testing.T) {
		proxy.Reset()
		before := readFile(t, filepath.Join(repo, "charts/example/values.yaml"))
		run(t, repo, nil, bin, "--registry-mirror", "ghcr.io="+proxy.Host, "--insecure-registry", proxy.Host,
			"pin", "--config", ".github/chartpin-image.yaml",
			"--set-tag", "reconcile.image=0.9.0", "--set-tag", "autoUpgrade.image=0.9.0", "charts/example")
		after := readFile(t, filepath.Join(repo, "charts/example/values.yaml"))
		want := imagePinRe.ReplaceAllString(before, "${1}\"0.9.0\"${2}\""+res.Image.String()+"\"")
		if after != want {
			t.Errorf("values.yaml after pinning:\n%s\nwant only the two chartpin image pins moved", after)
		}
		if n := strings.Count(after, res.Image.String()); n != 2 {
			t.Errorf("the pushed digest appears %d times, want 2 (reconcile.image, autoUpgrade.image)", n)
		}
		if heads := proxy.Count("HEAD"); heads != 1 {
			t.Errorf("pin sent %d HEADs for one image, want 1", heads)
		}
	})

	t.Run("the binary in the pushed image runs and prints the tag", func(t *testing.T) {
		extracted := extractBinary(t, reg.Host+"/chartpin/chartpin@"+res.Image.String())
		if !bytes.Equal(extracted, []byte(readFile(t, bin))) {
			t.Error("the image's linux/amd64 binary is not dist's chartpin_linux_amd64")
		}
		path := filepath.Join(t.TempDir(), "chartpin")
		if err := os.WriteFile(path, extracted, 0o755); err != nil {
			t.Fatal(err)
		}
		if got := run(t, "", nil, path, "--version"); !strings.Contains(got, shipVersion) {
			t.Errorf("--version printed %q, want %s", got, shipVersion)
		}
	})

	srv := newReleaseServer(t, out)
	action := actionCheckout(t, root, out, srv)
	t.Run("the action installs the release binary, verified", func(t *testing.T) {
		env := actionEnv(srv, action)
		mode := runActionStep(t, action, "install-plan", env)
		if mode["mode"] != "release" {
			t.Fatalf("plan at the tagged commit: %v, want mode=release", mode)
		}
		env["steps.install-plan.outputs.mode"] = mode["mode"]
		runActionStep(t, action, "install chartpin", env)
		installed := filepath.Join(action.runnerTemp, "chartpin")
		if readFile(t, installed) != readFile(t, bin) {
			t.Error("the installed binary is not the release file")
		}
		if got := run(t, "", nil, installed, "--version"); !strings.Contains(got, shipVersion) {
			t.Errorf("installed chartpin --version: %q", got)
		}
		if srv.downloads.Load() != 1 {
			t.Errorf("%d downloads, want 1", srv.downloads.Load())
		}

		// Any other commit builds from source: the plan says so without downloading.
		other := gittest.Git(t, action.dir, "rev-parse", "HEAD~1")
		env["github.action_ref"] = other
		if mode := runActionStep(t, action, "install-plan", env); mode["mode"] != "source" {
			t.Errorf("plan at an untagged commit: %v, want mode=source", mode)
		}
	})

	t.Run("the action refuses a release file that does not match install/SHA256SUMS", func(t *testing.T) {
		srv.tamper.Store(true)
		defer srv.tamper.Store(false)
		env := actionEnv(srv, action)
		env["steps.install-plan.outputs.mode"] = "release"
		dest := filepath.Join(action.runnerTemp, "chartpin")
		os.Remove(dest)
		msg, err := tryActionStep(t, action, "install chartpin", env)
		if err == nil || !strings.Contains(msg, "refusing to install it") || !strings.Contains(msg, "chartpin_linux_amd64") {
			t.Errorf("tampered download: %v\n%s\nwant a refusal naming the file", err, msg)
		}
		if _, err := os.Stat(dest); !os.IsNotExist(err) {
			t.Errorf("a refused binary was installed at %s", dest)
		}
	})

	t.Run("pre-commit hooks: their entries, as pre-commit runs them", func(t *testing.T) {
		hooks := preCommitHooks(t, root)
		path := t.TempDir()
		writeFile(t, filepath.Join(path, "chartpin"), readFile(t, bin))
		os.Chmod(filepath.Join(path, "chartpin"), 0o755)
		env := []string{"PATH=" + path + string(os.PathListSeparator) + os.Getenv("PATH"),
			"CHARTPIN_REGISTRY_MIRROR=ghcr.io=" + proxy.Host, "CHARTPIN_INSECURE_REGISTRY=" + proxy.Host, "GITHUB_ACTIONS="}

		// chartpin-guard: a template change without a version bump fails the commit.
		g := guardtest.New(t)
		g.Chart("charts/app", "app", "0.1.0", "0.1.0")
		g.Base()
		g.Write("charts/app/templates/deployment.yaml", "kind: Deployment\n")
		if code, out := runHook(t, hooks["chartpin-guard"], g.Dir, env); code != 1 || !strings.Contains(out, "version 0.1.0 was not increased") {
			t.Errorf("chartpin-guard on an unbumped change: exit %d\n%s", code, out)
		}
		g.ChartYAML("charts/app", "app", "0.1.1", "0.1.1")
		if code, out := runHook(t, hooks["chartpin-guard"], g.Dir, env); code != 0 {
			t.Errorf("chartpin-guard after the bump: exit %d\n%s", code, out)
		}

		// chartpin-pin: an image that does not resolve fails; one that does
		// prints the pin and writes nothing.
		p := shipRepo(t, root)
		writeFile(t, filepath.Join(p, "chartpin.yaml"), strings.ReplaceAll(readFile(t, filepath.Join(p, ".github/chartpin-image.yaml")), "../charts/example", "charts/example"))
		if code, out := runHook(t, hooks["chartpin-pin"], p, env); code == 0 || !strings.Contains(out, "chartpin/chartpin:0.1.0") {
			t.Errorf("chartpin-pin with an unpushed tag: exit %d, want a failure naming the image\n%s", code, out)
		}
		values := filepath.Join(p, "charts/example/values.yaml")
		writeFile(t, values, strings.ReplaceAll(readFile(t, values), `tag: "0.1.0"`, `tag: "0.9.0"`))
		before := readFile(t, values)
		code, out := runHook(t, hooks["chartpin-pin"], p, env)
		if code != 0 || !strings.Contains(out, "+    digest: \""+res.Image.String()+"\"") {
			t.Errorf("chartpin-pin: exit %d, want 0 and the pin in the diff\n%s", code, out)
		}
		if readFile(t, values) != before {
			t.Error("chartpin-pin wrote values.yaml")
		}
	})

	t.Run("helm plugin install, then helm chartpin", func(t *testing.T) {
		helm := requireHelm(t)
		home := t.TempDir()
		env := []string{
			"HELM_PLUGINS=" + filepath.Join(home, "plugins"), "HELM_CONFIG_HOME=" + filepath.Join(home, "config"),
			"HELM_CACHE_HOME=" + filepath.Join(home, "cache"), "HELM_DATA_HOME=" + filepath.Join(home, "data"),
			"CHARTPIN_REPOSITORY_URL=" + srv.URL + "/chartpin/chartpin.git",
			"CHARTPIN_DOWNLOAD_URL=" + srv.URL + "/chartpin/chartpin/releases/download",
		}
		before := srv.downloads.Load()
		run(t, "", env, helm, "plugin", "install", action.dir)
		if srv.downloads.Load() != before+1 {
			t.Errorf("the plugin install hook downloaded %d files, want 1", srv.downloads.Load()-before)
		}
		if got := run(t, "", env, helm, "plugin", "list"); !regexp.MustCompile(`chartpin\s+0\.9\.0`).MatchString(got) {
			t.Errorf("helm plugin list:\n%s", got)
		}
		if got := run(t, "", env, helm, "chartpin", "--version"); !strings.Contains(got, shipVersion) {
			t.Errorf("helm chartpin --version: %q", got)
		}
		// The chart was pinned above: a dry run through helm finds nothing to move.
		got := run(t, repo, env, helm, "chartpin", "--registry-mirror", "ghcr.io="+proxy.Host, "--insecure-registry", proxy.Host,
			"pin", "--dry-run", "--config", ".github/chartpin-image.yaml", "charts/example")
		if strings.Contains(got, "+++") {
			t.Errorf("helm chartpin pin --dry-run on a pinned chart printed a diff:\n%s", got)
		}
	})
}

type hook struct {
	ID            string   `yaml:"id"`
	Entry         string   `yaml:"entry"`
	Args          []string `yaml:"args"`
	PassFilenames *bool    `yaml:"pass_filenames"`
}

func preCommitHooks(t *testing.T, root string) map[string]hook {
	t.Helper()
	var hooks []hook
	if err := yaml.Unmarshal([]byte(readFile(t, filepath.Join(root, ".pre-commit-hooks.yaml"))), &hooks); err != nil {
		t.Fatal(err)
	}
	out := map[string]hook{}
	for _, h := range hooks {
		if h.PassFilenames == nil || *h.PassFilenames {
			t.Errorf("hook %s passes file names: chartpin takes chart directories", h.ID)
		}
		out[h.ID] = h
	}
	for _, id := range []string{"chartpin-guard", "chartpin-pin"} {
		if _, ok := out[id]; !ok {
			t.Fatalf(".pre-commit-hooks.yaml lacks %s", id)
		}
	}
	return out
}

// runHook runs a hook's entry and args in dir as pre-commit does (split on
// spaces, no shell, file names not passed) and returns the exit status.
func runHook(t *testing.T, h hook, dir string, env []string) (int, string) {
	t.Helper()
	argv := append(strings.Fields(h.Entry), h.Args...)
	name := argv[0]
	for _, e := range env { // exec.Command resolves a name with the test's PATH: use the hook's
		if p, ok := strings.CutPrefix(e, "PATH="); ok {
			for _, d := range filepath.SplitList(p) {
				if fileExists(filepath.Join(d, argv[0])) {
					name = filepath.Join(d, argv[0])
					break
				}
			}
		}
	}
	cmd := exec.Command(name, argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

// shipRepo is a checkout with the example chart, its library chart and the
// configuration the ship workflow pins with.
func shipRepo(t *testing.T, root string) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"charts/example", "charts/chartpin-lib"} {
		if err := os.CopyFS(filepath.Join(dir, d), os.DirFS(filepath.Join(root, d))); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, ".github"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, ".github/chartpin-image.yaml"), readFile(t, filepath.Join(root, ".github/chartpin-image.yaml")))
	return dir
}

// extractBinary pulls ref's linux/amd64 image and returns /usr/local/bin/chartpin.
func extractBinary(t *testing.T, ref string) []byte {
	t.Helper()
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(r, remote.WithPlatform(v1.Platform{OS: "linux", Architecture: "amd64"}))
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("image user %q, want non-root 65532:65532", cf.Config.User)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layers[len(layers)-1].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("no usr/local/bin/chartpin in the image: %v", err)
		}
		if h.Name == "usr/local/bin/chartpin" {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return data
		}
	}
}

// releaseServer serves release files as GitHub's releases/download does, and
// the action's repository over smart HTTP (for git ls-remote).
type releaseServer struct {
	*httptest.Server
	gitRoot   string
	downloads atomic.Int64
	tamper    atomic.Bool // serve every release file with one byte changed
}

func newReleaseServer(t *testing.T, distDir string) *releaseServer {
	t.Helper()
	testenv.RequireBinary(t, gittest.Backend, "git")
	s := &releaseServer{gitRoot: t.TempDir()}
	git := &cgi.Handler{Path: gittest.Backend, Env: []string{"GIT_PROJECT_ROOT=" + s.gitRoot, "GIT_HTTP_EXPORT_ALL=1"}}
	prefix := "/chartpin/chartpin/releases/download/" + shipVersion + "/"
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/chartpin/chartpin.git/"):
			git.ServeHTTP(w, r)
		case strings.HasPrefix(r.URL.Path, prefix):
			data, err := os.ReadFile(filepath.Join(distDir, filepath.Base(r.URL.Path)))
			if err != nil {
				http.NotFound(w, r)
				return
			}
			s.downloads.Add(1)
			if s.tamper.Load() {
				data[len(data)/2] ^= 0xff
			}
			w.Write(data)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

type actionDir struct {
	dir, runnerTemp string
	steps           []actionStep
}

type actionStep struct {
	ID   string            `yaml:"id"`
	Name string            `yaml:"name"`
	Run  string            `yaml:"run"`
	Env  map[string]string `yaml:"env"`
}

// actionCheckout is the action as a release commit has it: action.yml,
// plugin.yaml and install/, with install/VERSION and install/SHA256SUMS as
// `make release-prep` writes them, committed and tagged, with the tag served
// by srv. A commit before it is untagged.
func actionCheckout(t *testing.T, root, distDir string, srv *releaseServer) *actionDir {
	t.Helper()
	a := &actionDir{dir: t.TempDir(), runnerTemp: t.TempDir()}
	for _, f := range []string{"action.yml", "plugin.yaml", "install/install.sh"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(a.dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(a.dir, f), readFile(t, filepath.Join(root, f)))
	}
	os.Chmod(filepath.Join(a.dir, "install/install.sh"), 0o755)
	gittest.Git(t, a.dir, "init", "-q")
	gittest.Git(t, a.dir, "add", ".")
	gittest.Git(t, a.dir, "commit", "-q", "-m", "before the release")
	var sums strings.Builder
	for _, line := range strings.SplitAfter(readFile(t, filepath.Join(distDir, dist.SumsFile)), "\n") {
		if line != "" && !strings.HasSuffix(line, " "+dist.SBOMFile+"\n") {
			sums.WriteString(line)
		}
	}
	writeFile(t, filepath.Join(a.dir, "install/SHA256SUMS"), sums.String())
	writeFile(t, filepath.Join(a.dir, "install/VERSION"), shipVersion+"\n")
	plugin := filepath.Join(a.dir, "plugin.yaml")
	writeFile(t, plugin, regexp.MustCompile(`(?m)^version: .*$`).ReplaceAllString(readFile(t, plugin), `version: "0.9.0"`))
	gittest.Git(t, a.dir, "add", ".")
	gittest.Git(t, a.dir, "commit", "-q", "-m", "release "+shipVersion)
	gittest.Git(t, a.dir, "tag", "-a", "-m", shipVersion, shipVersion)
	gittest.Git(t, srv.gitRoot, "clone", "-q", "--bare", a.dir, filepath.Join(srv.gitRoot, "chartpin/chartpin.git"))

	var spec struct {
		Runs struct {
			Steps []actionStep `yaml:"steps"`
		} `yaml:"runs"`
	}
	if err := yaml.Unmarshal([]byte(readFile(t, filepath.Join(root, "action.yml"))), &spec); err != nil {
		t.Fatal(err)
	}
	a.steps = spec.Runs.Steps
	return a
}

// actionEnv is what GitHub substitutes for the action's expressions.
func actionEnv(srv *releaseServer, a *actionDir) map[string]string {
	return map[string]string{
		"github.action_path":       a.dir,
		"github.action_ref":        strings.TrimSpace(gitOut(a.dir, "rev-parse", "HEAD")),
		"github.server_url":        srv.URL,
		"github.action_repository": "chartpin/chartpin",
	}
}

var expr = regexp.MustCompile(`\$\{\{\s*([^}]*?)\s*\}\}`)

// tryActionStep runs one step's script as the runner does (bash -eo
// pipefail, its env: with expressions substituted, GITHUB_OUTPUT and
// RUNNER_TEMP) and returns its output and the outputs it set.
func tryActionStep(t *testing.T, a *actionDir, idOrName string, values map[string]string) (string, error) {
	t.Helper()
	msg, _, err := execActionStep(t, a, idOrName, values)
	return msg, err
}

func runActionStep(t *testing.T, a *actionDir, idOrName string, values map[string]string) map[string]string {
	t.Helper()
	msg, outputs, err := execActionStep(t, a, idOrName, values)
	if err != nil {
		t.Fatalf("action step %s: %v\n%s", idOrName, err, msg)
	}
	return outputs
}

func execActionStep(t *testing.T, a *actionDir, idOrName string, values map[string]string) (string, map[string]string, error) {
	t.Helper()
	var step *actionStep
	for i, s := range a.steps {
		if s.ID == idOrName || s.Name == idOrName {
			step = &a.steps[i]
		}
	}
	if step == nil || step.Run == "" {
		t.Fatalf("action.yml has no run step %q", idOrName)
	}
	outFile := filepath.Join(t.TempDir(), "github_output")
	env := append(os.Environ(), "GITHUB_OUTPUT="+outFile, "RUNNER_TEMP="+a.runnerTemp)
	for k, v := range step.Env {
		v = expr.ReplaceAllStringFunc(v, func(m string) string {
			key := expr.FindStringSubmatch(m)[1]
			val, ok := values[key]
			if !ok {
				t.Fatalf("action step %s: no value for ${{ %s }}", idOrName, key)
			}
			return val
		})
		env = append(env, k+"="+v)
	}
	cmd := exec.Command("bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step.Run)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	outputs := map[string]string{}
	data, _ := os.ReadFile(outFile)
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			outputs[k] = v
		}
	}
	return string(out), outputs, err
}

// requireHelm finds the helm CLI (go install puts it in GOPATH/bin).
func requireHelm(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	if gopath := strings.TrimSpace(gitOutCmd("go", "env", "GOPATH")); gopath != "" {
		if p := filepath.Join(gopath, "bin", "helm"); fileExists(p) {
			return p
		}
	}
	testenv.Missing(t, "helm not found (go install helm.sh/helm/v3/cmd/helm@v3.22.0)")
	return ""
}

// run runs a command and returns its output; a failure fails the test.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return string(out)
}

func gitOut(dir string, args ...string) string {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, _ := cmd.Output()
	return string(out)
}

func gitOutCmd(name string, args ...string) string {
	out, _ := exec.Command(name, args...).Output()
	return string(out)
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
