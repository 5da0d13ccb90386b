package publish

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/provenance"
	"helm.sh/helm/v3/pkg/repo"

	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/internal/registrytest"
)

var clock = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

const digestA = "sha256:0a399eb16751829e1af26fea27b20c3ec28d7ab1fb72182879dcae1cca21206a"

// writeChart writes a small chart whose deployment runs a pinned image.
func writeChart(t testing.TB, dir, version, appVersion, tag string) string {
	t.Helper()
	files := map[string]string{
		"Chart.yaml":  fmt.Sprintf("apiVersion: v2\nname: app\ndescription: test chart\ntype: application\nversion: %s\nappVersion: %q\n", version, appVersion),
		"values.yaml": fmt.Sprintf("# images are pinned by chartpin\nimage:\n  repository: ghcr.io/example/ingestor\n  tag: %q\n  digest: %q\nsidecar:\n  image: docker.io/library/busybox:1.36\n", tag, digestA),
		"templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
spec:
  selector: {matchLabels: {app: x}}
  template:
    metadata: {labels: {app: x}}
    spec:
      containers:
        - name: ingestor
          image: "{{ .Values.image.repository }}:{{ .Values.image.tag }}@{{ .Values.image.digest }}"
        - name: sidecar
          image: {{ .Values.sidecar.image }}
`,
		"templates/_helpers.tpl": "{{- define \"app.name\" -}}app{{- end -}}\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func opts(o Options) Options {
	o.Now = func() time.Time { return clock }
	return o
}

func TestPackageIsReproducibleAndAnnotated(t *testing.T) {
	chartDir := writeChart(t, t.TempDir(), "1.0.0", "1.0.0", "0.8")
	a, err := Publish(context.Background(), chartDir, opts(Options{IndexDir: t.TempDir()}))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Publish(context.Background(), chartDir, opts(Options{IndexDir: t.TempDir()}))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Package, b.Package) {
		t.Fatal("packaging the same chart twice gave different bytes")
	}
	ch, err := loader.LoadArchive(bytes.NewReader(a.Package))
	if err != nil {
		t.Fatal(err)
	}
	want := "- name: sidecar\n  image: docker.io/library/busybox:1.36\n- name: ingestor\n  image: ghcr.io/example/ingestor:0.8@" + digestA + "\n"
	if got := ch.Metadata.Annotations[ImagesAnnotation]; got != want {
		t.Fatalf("annotation =\n%s\nwant\n%s", got, want)
	}
	if a.Filename != "app-1.0.0.tgz" || len(a.Digest) != 64 {
		t.Fatalf("filename %s digest %s", a.Filename, a.Digest)
	}
	// values.yaml travels byte-exact (comments included).
	for _, f := range ch.Raw {
		if f.Name == "values.yaml" && !strings.HasPrefix(string(f.Data), "# images are pinned by chartpin\n") {
			t.Fatalf("values.yaml changed in the package: %q", f.Data)
		}
	}
}

func TestMergeIntoRealWorldIndex(t *testing.T) {
	repoDir := t.TempDir()
	original, err := os.ReadFile("testdata/index.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repoDir, "index.yaml"), original, 0o644); err != nil {
		t.Fatal(err)
	}
	before, err := repo.LoadIndexFile(filepath.Join(repoDir, "index.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	chartDir := writeChart(t, t.TempDir(), "1.0.0", "1.0.0", "0.8")
	o := opts(Options{IndexDir: repoDir, BaseURL: "https://charts.example.com/stable"})
	r1, err := Publish(context.Background(), chartDir, o)
	if err != nil {
		t.Fatal(err)
	}
	if r1.Index.Action != Added || r1.Index.Entries != 6 || r1.Index.Unverified != 5 {
		t.Fatalf("first publish: %+v", r1.Index)
	}
	writeChart(t, chartDir, "1.0.1", "1.0.1", "0.8.4")
	r2, err := Publish(context.Background(), chartDir, o)
	if err != nil {
		t.Fatal(err)
	}
	if r2.Index.Entries != 7 {
		t.Fatalf("second publish: %+v", r2.Index)
	}

	after, err := repo.LoadIndexFile(filepath.Join(repoDir, "index.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// Every published entry survives with its digest, urls and created time.
	for name, cvs := range before.Entries {
		for _, old := range cvs {
			var found bool
			for _, cv := range after.Entries[name] {
				if cv.Version == old.Version {
					found = true
					if cv.Digest != old.Digest || cv.URLs[0] != old.URLs[0] || !cv.Created.Equal(old.Created) || cv.AppVersion != old.AppVersion {
						t.Errorf("%s %s changed: %+v → %+v", name, old.Version, old, cv)
					}
				}
			}
			if !found {
				t.Errorf("%s %s was dropped from the index", name, old.Version)
			}
		}
	}
	// The new entries carry digest, url and created.
	for _, r := range []*Result{r1, r2} {
		var cv *repo.ChartVersion
		for _, e := range after.Entries["app"] {
			if e.Version == r.Version {
				cv = e
			}
		}
		if cv == nil {
			t.Fatalf("app %s missing", r.Version)
		}
		onDisk, err := os.ReadFile(filepath.Join(repoDir, r.Filename))
		if err != nil {
			t.Fatal(err)
		}
		if cv.Digest != sha256hex(onDisk) || cv.URLs[0] != "https://charts.example.com/stable/"+r.Filename || !cv.Created.Equal(clock) {
			t.Errorf("entry %s: digest %s url %v created %v", r.Version, cv.Digest, cv.URLs, cv.Created)
		}
		if cv.Annotations[ImagesAnnotation] == "" {
			t.Errorf("entry %s lacks the images annotation", r.Version)
		}
	}
	if after.Entries["app"][0].Version != "1.0.1" {
		t.Errorf("entries not sorted newest first: %s", after.Entries["app"][0].Version)
	}
	if _, err := CheckIndex(repoDir, true, "https://charts.example.com/stable"); err != nil {
		t.Fatal(err)
	}
}

func TestNeverOverwrite(t *testing.T) {
	repoDir := t.TempDir()
	chartDir := writeChart(t, t.TempDir(), "1.0.0", "1.0.0", "0.8")
	o := opts(Options{IndexDir: repoDir})
	if _, err := Publish(context.Background(), chartDir, o); err != nil {
		t.Fatal(err)
	}
	index1, _ := os.ReadFile(filepath.Join(repoDir, "index.yaml"))
	tgz1, _ := os.ReadFile(filepath.Join(repoDir, "app-1.0.0.tgz"))

	// Identical bytes: a no-op, exit 0, nothing rewritten.
	o.Now = func() time.Time { return clock.Add(time.Hour) }
	r, err := Publish(context.Background(), chartDir, o)
	if err != nil || r.Index.Action != Unchanged {
		t.Fatalf("identical re-publish = %+v, %v", r.Index, err)
	}
	if index2, _ := os.ReadFile(filepath.Join(repoDir, "index.yaml")); !bytes.Equal(index1, index2) {
		t.Fatal("identical re-publish rewrote index.yaml")
	}

	// Same version, different content (a silent overwrite): refused, exit 1.
	writeChart(t, chartDir, "1.0.0", "1.0.0", "0.9")
	_, err = Publish(context.Background(), chartDir, o)
	if !errors.Is(err, ErrPublished) || failure.Code(err) != 1 {
		t.Fatalf("overwrite = %v (exit %d), want ErrPublished exit 1", err, failure.Code(err))
	}
	if !strings.Contains(err.Error(), "app 1.0.0") || !strings.Contains(err.Error(), "chartpin bump") {
		t.Errorf("message %q should name the version and the next step", err)
	}
	if index2, _ := os.ReadFile(filepath.Join(repoDir, "index.yaml")); !bytes.Equal(index1, index2) {
		t.Fatal("refused publish touched index.yaml")
	}
	if tgz2, _ := os.ReadFile(filepath.Join(repoDir, "app-1.0.0.tgz")); !bytes.Equal(tgz1, tgz2) {
		t.Fatal("refused publish overwrote the tarball")
	}
}

func TestPrereleaseRouting(t *testing.T) {
	stableDir, preDir := t.TempDir(), t.TempDir()
	chartDir := writeChart(t, t.TempDir(), "1.0.0", "1.0.0", "0.8")
	if _, err := Publish(context.Background(), chartDir, opts(Options{IndexDir: stableDir})); err != nil {
		t.Fatal(err)
	}
	stableIndex, _ := os.ReadFile(filepath.Join(stableDir, "index.yaml"))

	writeChart(t, chartDir, "1.1.0-rc.1", "1.1.0-rc.1", "0.9")
	// No prerelease index: refused as bad input, nothing written.
	_, err := Publish(context.Background(), chartDir, opts(Options{IndexDir: stableDir}))
	if failure.Code(err) != 2 || !strings.Contains(err.Error(), "pass PrereleaseIndex DIR") || strings.Contains(err.Error(), "--") {
		t.Fatalf("prerelease without --prerelease-index = %v (exit %d)", err, failure.Code(err))
	}
	r, err := Publish(context.Background(), chartDir, opts(Options{IndexDir: stableDir, PrereleaseIndex: preDir}))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Prerelease || r.Index.Location != preDir {
		t.Fatalf("prerelease went to %+v", r.Index)
	}
	if got, _ := os.ReadFile(filepath.Join(stableDir, "index.yaml")); !bytes.Equal(got, stableIndex) {
		t.Fatal("a prerelease touched the stable index")
	}
	if _, err := os.Stat(filepath.Join(stableDir, "app-1.1.0-rc.1.tgz")); !os.IsNotExist(err) {
		t.Fatal("prerelease tarball landed in the stable repository")
	}
	pre, err := repo.LoadIndexFile(filepath.Join(preDir, "index.yaml"))
	if err != nil || !pre.Has("app", "1.1.0-rc.1") {
		t.Fatalf("prerelease index: %v", err)
	}
	// Semantic ordering: 1.1.0 is newer than 1.1.0-rc.1 and is stable.
	writeChart(t, chartDir, "1.1.0", "1.1.0", "0.9")
	r, err = Publish(context.Background(), chartDir, opts(Options{IndexDir: stableDir, PrereleaseIndex: preDir}))
	if err != nil || r.Prerelease || r.Index.Location != stableDir {
		t.Fatalf("1.1.0 = %+v, %v", r, err)
	}
}

func TestIndexCheckCatchesCorruption(t *testing.T) {
	setup := func(t *testing.T) (repoDir, chartDir string) {
		repoDir = t.TempDir()
		chartDir = writeChart(t, t.TempDir(), "1.0.0", "1.0.0", "0.8")
		if _, err := Publish(context.Background(), chartDir, opts(Options{IndexDir: repoDir})); err != nil {
			t.Fatal(err)
		}
		return repoDir, chartDir
	}
	edit := func(t *testing.T, path string, f func(string) string) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(f(string(b))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name    string
		corrupt func(t *testing.T, repoDir string)
		want    string
	}{
		{"tarball replaced", func(t *testing.T, d string) {
			edit(t, filepath.Join(d, "app-1.0.0.tgz"), func(s string) string { return s + "x" })
		}, "app 1.0.0: digest mismatch"},
		{"digest edited", func(t *testing.T, d string) {
			edit(t, filepath.Join(d, "index.yaml"), func(s string) string {
				i := strings.Index(s, "digest: ") + len("digest: ")
				return s[:i] + "ffff" + s[i+4:]
			})
		}, "app 1.0.0: digest mismatch: index says ffff"},
		{"tarball deleted", func(t *testing.T, d string) {
			os.Remove(filepath.Join(d, "app-1.0.0.tgz"))
		}, "tarball app-1.0.0.tgz is missing"},
		{"duplicate version", func(t *testing.T, d string) {
			edit(t, filepath.Join(d, "index.yaml"), func(s string) string {
				start := strings.Index(s, "  - annotations:")
				end := strings.Index(s, "generated:")
				return s[:end] + s[start:end] + "generated:" + s[end+len("generated:"):]
			})
		}, "duplicate version"},
		{"prerelease in stable", func(t *testing.T, d string) {
			edit(t, filepath.Join(d, "index.yaml"), func(s string) string {
				return strings.Replace(s, "version: 1.0.0\n", "version: 1.0.0-rc.1\n", 1)
			})
		}, "prerelease in the stable index"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			repoDir, chartDir := setup(t)
			tc.corrupt(t, repoDir)
			_, err := CheckIndex(repoDir, true, "")
			if !errors.Is(err, failure.ErrFindings) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckIndex = %v, want findings with %q", err, tc.want)
			}
			// Publishing the next version onto the broken index is refused
			// and writes nothing.
			indexBefore, _ := os.ReadFile(filepath.Join(repoDir, "index.yaml"))
			writeChart(t, chartDir, "1.0.1", "1.0.1", "0.8")
			_, err = Publish(context.Background(), chartDir, opts(Options{IndexDir: repoDir}))
			if !errors.Is(err, failure.ErrFindings) || failure.Code(err) != 1 {
				t.Fatalf("publish onto a broken index = %v", err)
			}
			if got, _ := os.ReadFile(filepath.Join(repoDir, "index.yaml")); !bytes.Equal(got, indexBefore) {
				t.Fatal("index rewritten despite findings")
			}
			if _, err := os.Stat(filepath.Join(repoDir, "app-1.0.1.tgz")); !os.IsNotExist(err) {
				t.Fatal("tarball written despite findings")
			}
		})
	}
}

func TestVersionFlagsMustAgree(t *testing.T) {
	chartDir := writeChart(t, t.TempDir(), "1.0.0", "1.0.0", "0.8")
	repoDir := t.TempDir()
	for _, o := range []Options{{Version: "1.0.1"}, {AppVersion: "2.0.0"}} {
		o.IndexDir = repoDir
		_, err := Publish(context.Background(), chartDir, opts(o))
		if failure.Code(err) != 2 || !strings.Contains(err.Error(), "disagrees with") {
			t.Errorf("%+v: %v", o, err)
		}
	}
	if entries, _ := os.ReadDir(repoDir); len(entries) != 0 {
		t.Fatalf("refused publish wrote %d files", len(entries))
	}
	if _, err := Publish(context.Background(), chartDir, opts(Options{IndexDir: repoDir, Version: "1.0.0", AppVersion: "1.0.0"})); err != nil {
		t.Fatalf("agreeing flags: %v", err)
	}
	for _, bad := range []Options{{}, {IndexDir: "a", PagesBranch: "b"}, {OCI: "https://x"}} {
		if _, err := Publish(context.Background(), chartDir, bad); failure.Code(err) != 2 {
			t.Errorf("%+v: %v, want exit 2", bad, err)
		}
	}
}

func TestSignProvenance(t *testing.T) {
	keyring := filepath.Join(t.TempDir(), "secring.gpg")
	e, err := openpgp.NewEntity("chartpin-test", "", "release@example.com", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := e.SerializePrivate(&buf, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyring, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	repoDir := t.TempDir()
	chartDir := writeChart(t, t.TempDir(), "1.0.0", "1.0.0", "0.8")
	r, err := Publish(context.Background(), chartDir, opts(Options{IndexDir: repoDir, SignKey: "chartpin-test", Keyring: keyring}))
	if err != nil {
		t.Fatal(err)
	}
	prov := filepath.Join(repoDir, "app-1.0.0.tgz.prov")
	if got, err := os.ReadFile(prov); err != nil || !bytes.Equal(got, r.Provenance) {
		t.Fatalf("prov file: %v", err)
	}
	verifier, err := provenance.NewFromKeyring(keyring, "chartpin-test")
	if err != nil {
		t.Fatal(err)
	}
	v, err := verifier.Verify(filepath.Join(repoDir, "app-1.0.0.tgz"), prov)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if v.FileHash != "sha256:"+r.Digest {
		t.Fatalf("signed hash %s, package %s", v.FileHash, r.Digest)
	}
	_, err = Publish(context.Background(), chartDir, opts(Options{IndexDir: t.TempDir(), SignKey: "nobody", Keyring: keyring}))
	if err == nil || !strings.Contains(err.Error(), `signing key "nobody"`) {
		t.Fatalf("unknown key: %v", err)
	}
}

// countingRegistry is go-containerregistry's in-process registry behind a
// request counter.
func countingRegistry(t testing.TB) (host string, requests *atomic.Int64) {
	t.Helper()
	requests = &atomic.Int64{}
	h := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), requests
}

func pullBack(t *testing.T, host, ref string, o Options) []byte {
	t.Helper()
	c, err := NewRegistryClient(context.Background(), host, o)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Pull(ref)
	if err != nil {
		t.Fatalf("helm pull %s: %v", ref, err)
	}
	return res.Chart.Data
}

func TestOCIInProcessRegistry(t *testing.T) {
	host, requests := countingRegistry(t)
	chartDir := writeChart(t, t.TempDir(), "1.0.0", "1.0.0", "0.8")
	o := opts(Options{OCI: "oci://" + host + "/charts", PlainHTTP: []string{host}, RegistryConfig: filepath.Join(t.TempDir(), "config.json")})
	r, err := Publish(context.Background(), chartDir, o)
	if err != nil {
		t.Fatal(err)
	}
	if r.OCI.Action != Pushed || r.OCI.Ref != "oci://"+host+"/charts/app:1.0.0" {
		t.Fatalf("push: %+v", r.OCI)
	}
	t.Logf("first OCI push: %d registry requests", requests.Load())
	if got := pullBack(t, host, host+"/charts/app:1.0.0", o); !bytes.Equal(got, r.Package) {
		t.Fatal("pulled chart differs from the pushed package")
	}
	requests.Store(0)
	again, err := Publish(context.Background(), chartDir, o)
	if err != nil || again.OCI.Action != Unchanged || again.OCI.ManifestDigest != r.OCI.ManifestDigest {
		t.Fatalf("identical re-push = %+v, %v", again.OCI, err)
	}
	t.Logf("identical re-publish: %d registry requests", requests.Load())
	writeChart(t, chartDir, "1.0.0", "1.0.0", "0.9")
	_, err = Publish(context.Background(), chartDir, o)
	if !errors.Is(err, ErrPublished) || failure.Code(err) != 1 {
		t.Fatalf("overwrite = %v", err)
	}
	if got := pullBack(t, host, host+"/charts/app:1.0.0", o); !bytes.Equal(got, r.Package) {
		t.Fatal("the refused push changed the published chart")
	}
}

// dockerRegistry starts Debian's docker-registry with htpasswd auth and
// returns its host and a docker config.json with the credentials.
func dockerRegistry(t *testing.T) (host, config string) {
	t.Helper()
	d := registrytest.StartDistribution(t, registrytest.DistributionOptions{Htpasswd: map[string]string{"releaser": "pa55word"}})
	config = filepath.Join(t.TempDir(), "config.json")
	auth := "cmVsZWFzZXI6cGE1NXdvcmQ=" // base64("releaser:pa55word")
	if err := os.WriteFile(config, []byte(`{"auths":{"`+d.Host+`":{"auth":"`+auth+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return d.Host, config
}

func TestOCIDockerRegistry(t *testing.T) {
	host, config := dockerRegistry(t)
	chartDir := writeChart(t, t.TempDir(), "2.3.4+build.7", "2.3.4", "0.8")
	o := opts(Options{OCI: "oci://" + host + "/team/charts", PlainHTTP: []string{host}, RegistryConfig: config})

	// Without credentials: refused with a next step.
	noauth := o
	noauth.RegistryConfig = filepath.Join(t.TempDir(), "empty.json")
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	if _, err := Publish(context.Background(), chartDir, noauth); err == nil || !strings.Contains(err.Error(), "log in first") {
		t.Fatalf("unauthenticated push = %v", err)
	}

	r, err := Publish(context.Background(), chartDir, o)
	if err != nil {
		t.Fatal(err)
	}
	if r.OCI.Ref != "oci://"+host+"/team/charts/app:2.3.4+build.7" {
		t.Fatalf("ref %s", r.OCI.Ref)
	}
	if got := pullBack(t, host, host+"/team/charts/app:2.3.4+build.7", o); !bytes.Equal(got, r.Package) {
		t.Fatal("pulled chart differs from the pushed package")
	}
	// The registry itself holds Helm's tag form.
	req, _ := http.NewRequest(http.MethodGet, "http://"+host+"/v2/team/charts/app/tags/list", nil)
	req.SetBasicAuth("releaser", "pa55word")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	tags, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(tags), `"2.3.4_build.7"`) {
		t.Fatalf("tags = %s", tags)
	}
	again, err := Publish(context.Background(), chartDir, o)
	if err != nil || again.OCI.Action != Unchanged {
		t.Fatalf("identical re-push = %+v, %v", again.OCI, err)
	}
	writeChart(t, chartDir, "2.3.4+build.7", "2.3.4", "0.9")
	if _, err := Publish(context.Background(), chartDir, o); !errors.Is(err, ErrPublished) {
		t.Fatalf("overwrite = %v", err)
	}
}

func TestIndexAndOCITogether(t *testing.T) {
	host, _ := countingRegistry(t)
	repoDir := t.TempDir()
	chartDir := writeChart(t, t.TempDir(), "1.0.0", "1.0.0", "0.8")
	o := opts(Options{IndexDir: repoDir, OCI: "oci://" + host + "/c", PlainHTTP: []string{host}, RegistryConfig: filepath.Join(t.TempDir(), "c.json")})
	r, err := Publish(context.Background(), chartDir, o)
	if err != nil {
		t.Fatal(err)
	}
	onDisk, _ := os.ReadFile(filepath.Join(repoDir, "app-1.0.0.tgz"))
	if got := pullBack(t, host, host+"/c/app:1.0.0", o); !bytes.Equal(got, onDisk) || !bytes.Equal(onDisk, r.Package) {
		t.Fatal("index tarball and OCI chart differ")
	}
}

// lossyStore drops the last byte of every tarball it writes: a disk or
// sync tool that corrupts silently. The post-write check must catch it.
type lossyStore struct{ dirStore }

func (l lossyStore) write(name string, data []byte) error {
	if strings.HasSuffix(name, ".tgz") {
		data = data[:len(data)-1]
	}
	return l.dirStore.write(name, data)
}

func TestPostWriteCheckCatchesCorruptWrite(t *testing.T) {
	defer func(old func() store) { newDirStore = old }(newDirStore)
	newDirStore = func() store { return lossyStore{} }
	repoDir := t.TempDir()
	chartDir := writeChart(t, t.TempDir(), "1.0.0", "1.0.0", "0.8")
	_, err := Publish(context.Background(), chartDir, opts(Options{IndexDir: repoDir}))
	if !errors.Is(err, failure.ErrFindings) || !strings.Contains(err.Error(), "reads back with other bytes") {
		t.Fatalf("corrupt write = %v, want a post-write finding", err)
	}
	if _, err := os.Stat(filepath.Join(repoDir, "index.yaml")); !os.IsNotExist(err) {
		t.Fatal("the index was written to point at a corrupt tarball")
	}
}

// lossyIndexStore corrupts index.yaml on write: the re-read check after the
// index write must catch it.
type lossyIndexStore struct{ dirStore }

func (l lossyIndexStore) write(name string, data []byte) error {
	if strings.HasSuffix(name, "index.yaml") {
		data = bytes.Replace(data, []byte("digest: "), []byte("digest: 0"), 1)
	}
	return l.dirStore.write(name, data)
}

func TestPostWriteIndexCheck(t *testing.T) {
	defer func(old func() store) { newDirStore = old }(newDirStore)
	newDirStore = func() store { return lossyIndexStore{} }
	chartDir := writeChart(t, t.TempDir(), "1.0.0", "1.0.0", "0.8")
	_, err := Publish(context.Background(), chartDir, opts(Options{IndexDir: t.TempDir()}))
	if !errors.Is(err, failure.ErrFindings) || !strings.Contains(err.Error(), "after adding app 1.0.0") || !strings.Contains(err.Error(), "digest mismatch") {
		t.Fatalf("corrupt index write = %v, want a post-write finding", err)
	}
}

// The prerelease index in the stable index's place would let an rc into the
// stable index with exit 0: refused as input, nothing written.
func TestPrereleaseIndexIsNotTheStableIndex(t *testing.T) {
	root := t.TempDir()
	t.Chdir(root)
	chartDir := writeChart(t, t.TempDir(), "0.2.0-rc.1", "0.2.0-rc.1", "0.8")
	for _, pre := range []string{"idx", "idx/", "./idx", "idx/../idx", filepath.Join(root, "idx")} {
		_, err := Publish(context.Background(), chartDir, opts(Options{IndexDir: "idx", PrereleaseIndex: pre}))
		if failure.Code(err) != 2 || !strings.Contains(err.Error(), "prereleases never enter the stable index") {
			t.Errorf("--index-dir idx --prerelease-index %s = %v (exit %d), want exit 2", pre, err, failure.Code(err))
		}
	}
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Fatalf("refused publishes wrote %v", entries)
	}
	// One directory by two names is one index.
	if err := os.Mkdir("idx", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("idx", "alias"); err != nil {
		t.Fatal(err)
	}
	if _, err := Publish(context.Background(), chartDir, opts(Options{IndexDir: "idx", PrereleaseIndex: "alias"})); failure.Code(err) != 2 {
		t.Errorf("--prerelease-index a symlink to --index-dir = %v (exit %d), want exit 2", err, failure.Code(err))
	}
	if entries, _ := os.ReadDir("idx"); len(entries) != 0 {
		t.Fatalf("refused publish wrote %v", entries)
	}
}

// Each index's tarball URLs point where its tarballs are.
func TestPrereleaseURLs(t *testing.T) {
	const base = "https://example.test/charts"
	site := t.TempDir()
	pre := filepath.Join(site, "pre")
	chartDir := writeChart(t, t.TempDir(), "0.2.0", "0.2.0", "0.8")
	o := opts(Options{IndexDir: site, PrereleaseIndex: pre, BaseURL: base + "/"})
	if _, err := Publish(context.Background(), chartDir, o); err != nil {
		t.Fatal(err)
	}
	writeChart(t, chartDir, "0.3.0-rc.1", "0.3.0-rc.1", "0.9")
	if _, err := Publish(context.Background(), chartDir, o); err != nil {
		t.Fatal(err)
	}
	urls := func(dir string) map[string]string {
		idx, err := repo.LoadIndexFile(filepath.Join(dir, "index.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, cv := range idx.Entries["app"] {
			m[cv.Version] = strings.Join(cv.URLs, " ")
		}
		return m
	}
	if got := urls(site); len(got) != 1 || got["0.2.0"] != base+"/app-0.2.0.tgz" {
		t.Errorf("stable urls %v", got)
	}
	if got := urls(pre); len(got) != 1 || got["0.3.0-rc.1"] != base+"/pre/app-0.3.0-rc.1.tgz" {
		t.Errorf("prerelease urls %v, want %s/pre/app-0.3.0-rc.1.tgz (the tarball is in site/pre)", got, base)
	}
	if _, err := os.Stat(filepath.Join(pre, "app-0.3.0-rc.1.tgz")); err != nil {
		t.Fatal(err)
	}

	// A prerelease index outside the stable root: its URL must be given.
	elsewhere := t.TempDir()
	o = opts(Options{IndexDir: site, PrereleaseIndex: elsewhere, BaseURL: base})
	if _, err := Publish(context.Background(), chartDir, o); failure.Code(err) != 2 || !strings.Contains(err.Error(), "pass PrereleaseBaseURL URL") {
		t.Fatalf("prerelease index outside the stable root without --prerelease-base-url = %v (exit %d)", err, failure.Code(err))
	}
	o.PrereleaseBaseURL = base
	if _, err := Publish(context.Background(), chartDir, o); failure.Code(err) != 2 {
		t.Fatalf("--prerelease-base-url equal to --base-url = %v (exit %d), want exit 2", err, failure.Code(err))
	}
	o.PrereleaseBaseURL = "https://pre.example.test/x"
	if _, err := Publish(context.Background(), chartDir, o); err != nil {
		t.Fatal(err)
	}
	if got := urls(elsewhere); got["0.3.0-rc.1"] != "https://pre.example.test/x/app-0.3.0-rc.1.tgz" {
		t.Errorf("explicit prerelease urls %v", got)
	}

	// A prerelease index whose URLs point into the stable root (as
	// chartpin wrote them before) is found broken, not waved through.
	idxPath := filepath.Join(pre, "index.yaml")
	old, _ := os.ReadFile(idxPath)
	broken := bytes.ReplaceAll(old, []byte(base+"/pre/"), []byte(base+"/"))
	if err := os.WriteFile(idxPath, broken, 0o644); err != nil {
		t.Fatal(err)
	}
	writeChart(t, chartDir, "0.3.0-rc.2", "0.3.0-rc.2", "0.9")
	_, err := Publish(context.Background(), chartDir, opts(Options{IndexDir: site, PrereleaseIndex: pre, BaseURL: base}))
	if !errors.Is(err, failure.ErrFindings) || !strings.Contains(err.Error(), "app-0.3.0-rc.1.tgz is missing") || !strings.Contains(err.Error(), "it is in "+pre+": point the url there") {
		t.Fatalf("misdirected prerelease url = %v, want a finding", err)
	}
}

// The index is checked before it is live: a new index that fails the check
// is never written.
func TestIndexCheckedBeforeWrite(t *testing.T) {
	dir := t.TempDir()
	chartDir := writeChart(t, t.TempDir(), "1.0.0", "1.0.0", "0.8")
	if _, err := Publish(context.Background(), chartDir, opts(Options{IndexDir: dir})); err != nil {
		t.Fatal(err)
	}
	// Another tool published it as v1.0.0 (Helm accepts the prefix).
	idxPath := filepath.Join(dir, "index.yaml")
	old, _ := os.ReadFile(idxPath)
	respelled := bytes.ReplaceAll(bytes.ReplaceAll(old, []byte("version: 1.0.0"), []byte("version: v1.0.0")), []byte("app-1.0.0.tgz"), []byte("app-v1.0.0.tgz"))
	if err := os.WriteFile(idxPath, respelled, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "app-1.0.0.tgz"), filepath.Join(dir, "app-v1.0.0.tgz")); err != nil {
		t.Fatal(err)
	}
	if _, err := CheckIndex(dir, true, ""); err != nil {
		t.Fatalf("the respelled index should be good: %v", err)
	}
	// 1.0.0 again would be a duplicate of v1.0.0: refused, index untouched.
	_, err := Publish(context.Background(), chartDir, opts(Options{IndexDir: dir}))
	if !errors.Is(err, failure.ErrFindings) || !strings.Contains(err.Error(), "duplicate version") {
		t.Fatalf("duplicate = %v, want a finding", err)
	}
	if got, _ := os.ReadFile(idxPath); !bytes.Equal(got, respelled) {
		t.Fatalf("a refused index was written:\n%s", got)
	}
}

// chartbump keeps a v prefix and Helm accepts it; so does publish.
func TestVPrefixedVersion(t *testing.T) {
	dir := t.TempDir()
	chartDir := writeChart(t, t.TempDir(), "v1.2.4", "v1.2.4", "0.8")
	r, err := Publish(context.Background(), chartDir, opts(Options{IndexDir: dir, BaseURL: "https://example.test"}))
	if err != nil || r.Filename != "app-v1.2.4.tgz" {
		t.Fatalf("v1.2.4 = %+v, %v", r, err)
	}
	idx, err := repo.LoadIndexFile(filepath.Join(dir, "index.yaml"))
	if err != nil || !idx.Has("app", "v1.2.4") {
		t.Fatalf("index lacks v1.2.4: %v", err)
	}
	writeChart(t, chartDir, "1.3", "1.3", "0.8")
	if _, err := Publish(context.Background(), chartDir, opts(Options{IndexDir: dir})); failure.Code(err) != 2 || !strings.Contains(err.Error(), "not a semantic version") {
		t.Fatalf("1.3 = %v (exit %d), want exit 2", err, failure.Code(err))
	}
}

// A tarball left by a half-failed publish (no index entry) with other bytes
// is refused, never overwritten; the same bytes are adopted.
func TestDebrisTarballIsNeverOverwritten(t *testing.T) {
	repoDir := t.TempDir()
	chartDir := writeChart(t, t.TempDir(), "1.0.0", "1.0.0", "0.8")
	debris := filepath.Join(repoDir, "app-1.0.0.tgz")
	if err := os.WriteFile(debris, []byte("half a tarball"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Publish(context.Background(), chartDir, opts(Options{IndexDir: repoDir}))
	if !errors.Is(err, ErrPublished) || !strings.Contains(err.Error(), "app-1.0.0.tgz exists") || !strings.Contains(err.Error(), "remove it by hand") {
		t.Fatalf("publish over debris: %v, want ErrPublished naming the tarball and the next step", err)
	}
	if got, _ := os.ReadFile(debris); string(got) != "half a tarball" {
		t.Errorf("debris overwritten with %d bytes", len(got))
	}
	if _, err := os.Stat(filepath.Join(repoDir, "index.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("index written after a refusal: %v", err)
	}
}
