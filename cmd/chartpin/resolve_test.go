package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/chartpin/chartpin/internal/registrytest"
	"github.com/chartpin/chartpin/resolver"
)

func TestResolveTextOutput(t *testing.T) {
	reg := registrytest.New(t)
	multi := reg.PushIndex(t, "app", "1", "linux/amd64", "linux/arm64")
	single := reg.PushImage(t, "tool", "2")
	out, errOut, code := runCLI(t, "--insecure-registry", reg.Host, "resolve", reg.Host+"/app:1", reg.Host+"/tool:2", "--show-platforms")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || strings.Fields(lines[0])[0] != "REF" {
		t.Fatalf("output:\n%s", out)
	}
	for i, want := range [][]string{
		{reg.Host + "/app:1", multi, "index", "linux/amd64,linux/arm64"},
		{reg.Host + "/tool:2", single, "manifest"},
	} {
		if got := strings.Fields(lines[i+1]); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("line %d = %q, want %q", i+1, got, want)
		}
	}
}

func TestResolveJSONCountsRequests(t *testing.T) {
	reg := registrytest.New(t)
	want := reg.PushIndex(t, "app", "1", "linux/amd64", "linux/arm64")
	reg.Tag(t, "app", want, "latest")
	reg.Reset()
	ref := reg.Host + "/app:1"
	// Environment bindings work like the flags.
	t.Setenv("CHARTPIN_INSECURE_REGISTRY", reg.Host)
	out, errOut, code := runCLI(t, "resolve", "-o", "json", ref, ref, reg.Host+"/app:latest", ref)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got struct {
		Images   []resolver.Image `json:"images"`
		Requests resolver.Stats   `json:"requests"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if len(got.Images) != 4 || got.Images[0].Digest != want || got.Images[2].Ref != reg.Host+"/app:latest" || got.Images[2].Digest != want {
		t.Errorf("images %+v", got.Images)
	}
	r := got.Requests
	if r.HEAD != 2 || r.GET != 0 || r.Ping != 1 || r.Token != 0 || r.Total() != reg.Count("") {
		t.Errorf("requests %+v, registry saw %d; want 2 HEADs (unique refs), no GET (no platforms asked for), 1 ping", r, reg.Count(""))
	}
	if !strings.Contains(out, `"head": 2`) {
		t.Errorf("json lacks the request counts:\n%s", out)
	}
}

func TestResolvePlatforms(t *testing.T) {
	reg := registrytest.New(t)
	reg.PushIndex(t, "amd", "1", "linux/amd64")
	reg.PushIndex(t, "both", "1", "linux/amd64", "linux/arm64/v8")
	reg.PushImage(t, "single", "1")
	base := []string{"--insecure-registry", reg.Host, "resolve"}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--platforms", "linux/amd64,linux/arm64", reg.Host + "/amd:1"}, 1, "linux/arm64 (index has linux/amd64)"},
		{[]string{"--platforms", "linux/amd64", "--platforms", "linux/arm64", reg.Host + "/amd:1"}, 1, "required platforms missing"},
		{[]string{"--platforms", "linux/amd64,linux/arm64", reg.Host + "/both:1"}, 0, ""},
		{[]string{"--platforms", "linux/amd64", reg.Host + "/single:1"}, 1, "single-arch"},
	} {
		out, errOut, code := runCLI(t, append(base, c.args...)...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d mentioning %q", c.args, code, errOut, c.code, c.want)
		}
		if !strings.Contains(out, reg.Host) { // the table is printed either way
			t.Errorf("%v: no table:\n%s", c.args, out)
		}
	}
}

func TestResolveExitStatuses(t *testing.T) {
	reg := registrytest.New(t)
	reg.PushImage(t, "app", "1")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"resolve"}, 2, "name at least one image reference"},
		{[]string{"resolve", "Not A Ref!"}, 2, "Not A Ref!"},
		{[]string{"resolve", "-o", "yaml", "nginx:1"}, 2, "want text, json or markdown"},
		{[]string{"resolve", "--concurrency", "0", "nginx:1"}, 2, "concurrency 0"},
		{[]string{"--registry-mirror", "nonsense", "resolve", "nginx:1"}, 2, "want FROM=TO"},
		{[]string{"--insecure-registry", reg.Host, "resolve", reg.Host + "/app:nope"}, 1, reg.Host + "/app:nope: image not found"},
		{[]string{"resolve", reg.Host + "/app:1"}, 1, "--insecure-registry " + reg.Host},
	} {
		_, errOut, code := runCLI(t, c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d mentioning %q", c.args, code, errOut, c.code, c.want)
		}
	}
}

func TestResolveWriteThenReadDigests(t *testing.T) {
	reg := registrytest.New(t)
	multi := reg.PushIndex(t, "app", "1", "linux/amd64", "linux/arm64")
	lock := filepath.Join(t.TempDir(), "digests.yaml")
	ref := reg.Host + "/app:1"
	if _, errOut, code := runCLI(t, "--insecure-registry", reg.Host, "resolve", "--write-digests", lock, ref); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	data, err := os.ReadFile(lock)
	if err != nil || !strings.Contains(string(data), ref+": {digest: "+multi+", mediaType: application/vnd.oci.image.index.v1+json, platforms: [linux/amd64, linux/arm64]}") {
		t.Fatalf("lock file %q, %v", data, err)
	}
	reg.Server.Close() // offline means offline
	out, errOut, code := runCLI(t, "resolve", "--digests", lock, "-o", "json", "--platforms", "linux/arm64", ref)
	if code != 0 || !strings.Contains(out, multi) || !strings.Contains(out, `"offline": true`) || !strings.Contains(out, `"head": 0`) {
		t.Fatalf("offline: exit %d, %s\n%s", code, errOut, out)
	}
	_, errOut, code = runCLI(t, "resolve", "--digests", lock, reg.Host+"/app:2")
	if code != 1 || !strings.Contains(errOut, reg.Host+"/app:2: not in digest lock file") {
		t.Errorf("missing entry: exit %d, %s", code, errOut)
	}
	if err := os.WriteFile(lock, []byte("x/y:1: nope\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = runCLI(t, "resolve", "--digests", lock, "x/y:1")
	if code != 2 || !strings.Contains(errOut, lock+":1:") {
		t.Errorf("bad lock file: exit %d, %s", code, errOut)
	}
}

func TestResolveFailedRunWritesNoLock(t *testing.T) {
	reg := registrytest.New(t)
	reg.PushIndex(t, "app", "1", "linux/amd64")
	lock := filepath.Join(t.TempDir(), "digests.yaml")
	_, _, code := runCLI(t, "--insecure-registry", reg.Host, "resolve", "--write-digests", lock, "--platforms", "linux/arm64", reg.Host+"/app:1")
	if _, err := os.Stat(lock); code != 1 || !os.IsNotExist(err) {
		t.Errorf("exit %d, lock file stat: %v; want exit 1 and no file", code, err)
	}
}

func TestResolveThroughMirror(t *testing.T) {
	origin := registrytest.New(t)
	mirror := registrytest.New(t)
	origin.PushIndex(t, "app", "1", "linux/amd64")
	want := mirror.PushIndex(t, "app", "1", "linux/amd64")
	origin.Reset()
	out, errOut, code := runCLI(t, "--insecure-registry", origin.Host, "--insecure-registry", mirror.Host,
		"--registry-mirror", origin.Host+"="+mirror.Host, "resolve", origin.Host+"/app:1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasSuffix(lines[0], "SOURCE") {
		t.Fatalf("output:\n%s", out)
	}
	if f := strings.Fields(lines[1]); f[0] != origin.Host+"/app:1" || f[1] != want || f[len(f)-1] != mirror.Host+"/app:1" || origin.Count("") != 0 {
		t.Errorf("line %q; origin saw %d requests", lines[1], origin.Count(""))
	}
}

func TestResolveRegistryAuthNeverPrinted(t *testing.T) {
	const user, secret = "ci-bot", "Zq9-cli-secret"
	reg := registrytest.StartDistribution(t, registrytest.DistributionOptions{Htpasswd: map[string]string{user: secret}})
	want := reg.PushIndex(t, "app", "1", "linux/amd64")
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	t.Setenv("CHARTPIN_REGISTRY_AUTH", user+":wrong-"+secret)
	_, errOut, code := runCLI(t, "-v", "--insecure-registry", reg.Host, "resolve", reg.Host+"/app:1")
	if code != 1 || !strings.Contains(errOut, "registry refused credentials") {
		t.Errorf("wrong password: exit %d, %s", code, errOut)
	}
	leaks := errOut
	t.Setenv("CHARTPIN_REGISTRY_AUTH", user+":"+secret)
	out, errOut, code := runCLI(t, "-v", "--insecure-registry", reg.Host, "resolve", "-o", "json", reg.Host+"/app:1")
	if code != 0 || !strings.Contains(out, want) {
		t.Fatalf("right password: exit %d, %s", code, errOut)
	}
	leaks += errOut + out
	if !strings.Contains(leaks, "level=DEBUG msg=request") {
		t.Fatalf("-v logged nothing, so the leak check proves nothing:\n%s", leaks)
	}
	if strings.Contains(leaks, secret) {
		t.Errorf("the password leaked:\n%s", leaks)
	}
	// Scoped to the registry: the same password, offered to that host only.
	t.Setenv("CHARTPIN_REGISTRY_AUTH", reg.Host+"="+user+":"+secret)
	if out, errOut, code := runCLI(t, "--insecure-registry", reg.Host, "resolve", reg.Host+"/app:1"); code != 0 || !strings.Contains(out, want) {
		t.Errorf("HOST=user:password: exit %d, %s", code, errOut)
	}
	t.Setenv("CHARTPIN_REGISTRY_AUTH", "other.example="+user+":"+secret)
	if _, errOut, code := runCLI(t, "--insecure-registry", reg.Host, "resolve", reg.Host+"/app:1"); code != 1 || !strings.Contains(errOut, "registry refused credentials") {
		t.Errorf("credentials for another host must not be offered: exit %d, %s", code, errOut)
	}
	t.Setenv("CHARTPIN_REGISTRY_AUTH", secret) // no colon
	_, errOut, code = runCLI(t, "resolve", "x/y:1")
	if code != 2 || strings.Contains(errOut, secret) {
		t.Errorf("malformed CHARTPIN_REGISTRY_AUTH: exit %d, %s", code, errOut)
	}
}

// One missing ref does not hide the others: the table lists what resolved,
// the error names the missing ref, and the exit status is 1.
func TestResolvePartialFailureStillPrints(t *testing.T) {
	reg := registrytest.New(t)
	digest := reg.PushIndex(t, "app", "1", "linux/amd64", "linux/arm64")
	out, errOut, code := runCLI(t, "--insecure-registry", reg.Host, "resolve", reg.Host+"/app:1", reg.Host+"/app:404")
	if code != 1 {
		t.Fatalf("exit %d, want 1: %s", code, errOut)
	}
	if !strings.Contains(out, digest) || strings.Contains(out, "app:404") {
		t.Errorf("table should list app:1 only:\n%s", out)
	}
	if !strings.Contains(errOut, reg.Host+"/app:404") {
		t.Errorf("error does not name the missing ref: %s", errOut)
	}
}

// resolve costs what crane digest costs: 20 unique tags are 20 manifest
// requests (HEADs), with no GET for platforms nobody asked for.
func TestResolveTwentyTagsTwentyRequests(t *testing.T) {
	reg := registrytest.New(t)
	var refs []string
	for i := 0; i < 20; i++ {
		tag := fmt.Sprintf("1.%d", i)
		if i%2 == 0 {
			reg.PushIndex(t, "app", tag, "linux/amd64", "linux/arm64")
		} else {
			reg.PushImage(t, "app", tag)
		}
		refs = append(refs, reg.Host+"/app:"+tag)
	}
	reg.Reset()
	for _, format := range []string{"text", "json", "markdown"} {
		reg.Reset()
		out, errOut, code := runCLI(t, append([]string{"resolve", "-o", format, "--insecure-registry", reg.Host}, append(refs, refs[:5]...)...)...)
		if code != 0 {
			t.Fatalf("-o %s: exit %d: %s", format, code, errOut)
		}
		if got := reg.CountPath("", "/manifests/"); got != 20 || reg.CountPath("GET", "/manifests/") != 0 {
			t.Errorf("-o %s: registry saw %d manifest requests (%d GETs) for 20 unique tags, want 20 HEADs", format, got, reg.CountPath("GET", "/manifests/"))
		}
		if !strings.Contains(out, refs[19]) {
			t.Errorf("-o %s: output lacks %s:\n%s", format, refs[19], out)
		}
	}
}

// Under GitHub Actions nothing a registry says becomes a workflow command:
// a platform string holding ::error::x (served for every manifest) reaches
// neither stdout nor stderr as a line the runner would execute; the only
// commands are chartpin's own.
func TestResolveRegistryStringsUnderActions(t *testing.T) {
	reg := registrytest.New(t)
	reg.PushIndex(t, "app", "1", "linux/amd64", "linux/arm64")
	amd := reg.PushImage(t, "app", "amd")
	for _, p := range []v1.Platform{
		{OS: "::error::x", Architecture: "amd64"},
		{OS: "linux", Architecture: "amd64\n::error::x"},
		{OS: "linux", Architecture: "amd64", Variant: "v1\r\n::error::x"},
	} {
		body, _ := json.Marshal(v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: []v1.Descriptor{{
			MediaType: types.DockerManifestSchema2, Digest: v1.Hash{Algorithm: "sha256", Hex: strings.TrimPrefix(amd, "sha256:")}, Size: 1, Platform: &p,
		}}})
		reg.Lie(registrytest.Lie{Body: body, MediaType: string(types.OCIImageIndex)})
		t.Setenv("GITHUB_ACTIONS", "true")
		t.Setenv("GITHUB_OUTPUT", filepath.Join(t.TempDir(), "output"))
		t.Setenv("GITHUB_STEP_SUMMARY", filepath.Join(t.TempDir(), "summary"))
		for _, args := range [][]string{{"resolve", reg.Host + "/app:1", "--show-platforms"}, {"resolve", reg.Host + "/app:1", "--show-platforms", "-o", "markdown"}} {
			stdout, stderr, code := runCLI(t, append([]string{"--insecure-registry", reg.Host}, args...)...)
			if code == 0 {
				t.Errorf("%+v %v: exit 0, want the hostile platform refused\n%s", p, args, stdout)
			}
			for _, c := range runnerCommands(stdout + "\n" + stderr) {
				if !strings.HasPrefix(c, "::error title=chartpin") || strings.Contains(c[2:], "::error::") {
					t.Errorf("%+v %v: workflow command %q\nstdout:\n%s\nstderr:\n%s", p, args, c, stdout, stderr)
				}
			}
		}
	}
}
