package pin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/chartpin/chartpin/discover"
	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/internal/registrytest"
	"github.com/chartpin/chartpin/resolver"
)

// writeTree writes files (relative path → content) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// hashTree returns path → sha256 of every file under dir.
func hashTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		out[p] = hex.EncodeToString(sum[:]) + " " + fi.Mode().String()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameHashes(t *testing.T, before, after map[string]string) {
	t.Helper()
	if len(before) != len(after) {
		t.Errorf("file count changed: %d -> %d", len(before), len(after))
	}
	for p, h := range before {
		if after[p] != h {
			t.Errorf("%s changed on disk (%s -> %s), want untouched", p, h, after[p])
		}
	}
}

func read(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

type edgeChart struct {
	reg                            *registrytest.Registry
	dir, cfg                       string
	oldIngestor, ingestor084, jobs string
	egress, float08                string
	files                          map[string]string
}

const edgeValues = `# An edge control-plane chart: channel tags, a prod pin, a mirror setting.
global:
  imageRegistry: ""
serviceDbAccountsByEnv:
  prod: true
images:
  ingestor:
    repository: REG/example/ingestor
    tag: ""
    channelTags:
      dev: "0.9"
      prod: "0.8"
    prodPin: true
    # ordering ceiling: prod stays on <= 0.8.4
    prodDigest: OLD
    digest: ""
  jobsManager:
    repository: REG/example/jobs-manager
    tag: '1.4'
    digest: ""
  requestsProxy:
    repository: REG/example/jobs-manager
    tag: '1.4'
    digest: ""   # follows jobsManager
egressProxy:
  image:
    repository: REG/example/egress
    tag: "1.27"
    digest:
`

const edgeConfig = `charts:
  - dir: .
    appVersion: lockstep
    images:
      - at: images.ingestor
        tagFrom: channelTags.prod
        pin: prodDigest
        platforms: [linux/amd64, linux/arm64]
        versions: ">=0.8.0 <=0.8.4"
        when: serviceDbAccountsByEnv.prod == true
      - at: images.jobsManager
      - at: images.requestsProxy
        follows: images.jobsManager
      - at: egressProxy.image
`

// newEdgeChart pushes the chart's images and writes the chart.
func newEdgeChart(t *testing.T, singleArch084 bool) *edgeChart {
	t.Helper()
	reg := registrytest.New(t)
	s := &edgeChart{reg: reg, dir: t.TempDir()}
	s.oldIngestor = reg.PushIndex(t, "example/ingestor", "0.8.2", "linux/amd64", "linux/arm64")
	if singleArch084 {
		s.ingestor084 = reg.PushImage(t, "example/ingestor", "0.8.4")
	} else {
		s.ingestor084 = reg.PushIndex(t, "example/ingestor", "0.8.4", "linux/amd64", "linux/arm64")
	}
	s.float08 = reg.PushIndex(t, "example/ingestor", "0.8.8", "linux/amd64", "linux/arm64")
	reg.Tag(t, "example/ingestor", s.float08, "0.8")
	reg.PushIndex(t, "example/ingestor", "0.9.0-rc.1", "linux/amd64", "linux/arm64")
	s.jobs = reg.PushIndex(t, "example/jobs-manager", "1.4", "linux/amd64", "linux/arm64")
	s.egress = reg.PushIndex(t, "example/egress", "1.27", "linux/amd64")
	values := strings.ReplaceAll(edgeValues, "REG", reg.Host)
	values = strings.ReplaceAll(values, "OLD", s.oldIngestor)
	s.files = map[string]string{
		"chartpin.yaml": edgeConfig,
		"Chart.yaml":    "apiVersion: v2\nname: edge\nversion: 1.9.38\nappVersion: \"1.9.38\"\nannotations:\n  artifacthub.io/images: |\n    - name: ingestor\n      image: " + reg.Host + "/example/ingestor:0.8.2@" + s.oldIngestor + "\n",
		"values.yaml":   values,
		"templates/tests/ingestor_test.yaml": "suite: ingestor\ntests:\n  - it: renders the prod pin\n    asserts:\n      - equal:\n          path: spec.template.spec.containers[0].image\n          value: " + reg.Host + "/example/ingestor@" + s.oldIngestor + "\n" +
			"  # " + s.oldIngestor + " in a comment is rewritten too\n",
		"templates/_helpers.tpl": "{{- define \"x\" -}}\n{{- /* fallback */ -}}\n{{- default \"" + strings.TrimPrefix(s.oldIngestor, "sha256:") + "\" .Values.sha -}}\n{{- end -}}\n",
	}
	writeTree(t, s.dir, s.files)
	s.cfg = filepath.Join(s.dir, "chartpin.yaml")
	reg.Reset()
	return s
}

func (s *edgeChart) resolver(t *testing.T) *resolver.Remote {
	t.Helper()
	r, err := resolver.New(resolver.Options{InsecureRegistries: []string{s.reg.Host}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestEdgeChart(t *testing.T) {
	s := newEdgeChart(t, false)
	ctx := context.Background()
	res, err := Plan(ctx, Options{ConfigPath: s.cfg, Resolver: s.resolver(t), RewriteCopies: true})
	if err != nil {
		t.Fatal(err)
	}
	// One HEAD per unique ref: ingestor:0.8.4 (the range's highest, not the
	// 0.8 float), jobs-manager:1.4 (requestsProxy follows it, no request),
	// egress:1.27. One GET per new digest, whose manifest is hashed and
	// read for its media type and platforms; one tag list for the ingestor
	// repository.
	var heads, manifestGets, tagLists []string
	for _, q := range s.reg.Requests() {
		switch {
		case q.Method == "HEAD":
			heads = append(heads, q.Path)
		case q.Method == "GET" && strings.Contains(q.Path, "/manifests/"):
			manifestGets = append(manifestGets, q.Path)
		case q.Method == "GET" && strings.HasSuffix(q.Path, "/tags/list"):
			tagLists = append(tagLists, q.Path)
		}
	}
	sort.Strings(heads)
	want := []string{"/v2/example/egress/manifests/1.27", "/v2/example/ingestor/manifests/0.8.4", "/v2/example/jobs-manager/manifests/1.4"}
	if strings.Join(heads, " ") != strings.Join(want, " ") {
		t.Errorf("HEAD requests %v, want %v", heads, want)
	}
	// One GET per new digest, and one for the pin the ingestor's replaces,
	// whose platforms it must keep.
	sort.Strings(manifestGets)
	want = []string{"/v2/example/egress/manifests/" + s.egress, "/v2/example/ingestor/manifests/" + s.ingestor084,
		"/v2/example/ingestor/manifests/" + s.oldIngestor, "/v2/example/jobs-manager/manifests/" + s.jobs}
	sort.Strings(want)
	if strings.Join(manifestGets, " ") != strings.Join(want, " ") {
		t.Errorf("manifest GETs %v, want %v", manifestGets, want)
	}
	if len(tagLists) != 1 {
		t.Errorf("tag lists %v, want one", tagLists)
	}
	if !res.Changed() {
		t.Fatal("nothing changed")
	}
	if err := res.Apply(); err != nil {
		t.Fatal(err)
	}
	values := read(t, filepath.Join(s.dir, "values.yaml"))
	wantValues := strings.ReplaceAll(edgeValues, "REG", s.reg.Host)
	wantValues = strings.Replace(wantValues, "prodDigest: OLD", "prodDigest: "+s.ingestor084, 1)
	wantValues = strings.Replace(wantValues, "tag: '1.4'\n    digest: \"\"", "tag: '1.4'\n    digest: \""+s.jobs+"\"", 2)
	wantValues = strings.Replace(wantValues, "tag: \"1.27\"\n    digest:\n", "tag: \"1.27\"\n    digest: "+s.egress+"\n", 1)
	if values != wantValues {
		t.Errorf("values.yaml:\n%s\nwant:\n%s", values, wantValues)
	}
	test := read(t, filepath.Join(s.dir, "templates/tests/ingestor_test.yaml"))
	if !strings.Contains(test, "value: "+s.reg.Host+"/example/ingestor@"+s.ingestor084+"\n") ||
		!strings.Contains(test, "# "+s.ingestor084+" in a comment is rewritten too") {
		t.Errorf("test copy (or its comment line) not rewritten:\n%s", test)
	}
	helpers := read(t, filepath.Join(s.dir, "templates/_helpers.tpl"))
	if !strings.Contains(helpers, strings.TrimPrefix(s.ingestor084, "sha256:")) {
		t.Errorf("bare-hex copy in helpers not rewritten:\n%s", helpers)
	}
	chart := read(t, filepath.Join(s.dir, "Chart.yaml"))
	if !strings.HasPrefix(chart, "apiVersion: v2\nname: edge\nversion: 1.9.39\nappVersion: \"1.9.39\"\n") {
		t.Errorf("Chart.yaml not bumped in lockstep:\n%s", chart)
	}
	if c := res.Charts[0]; c.OldVersion != "1.9.38" || c.NewVersion != "1.9.39" || c.NewAppVersion != "1.9.39" {
		t.Errorf("result versions %+v", c)
	}
	if !strings.Contains(chart, "image: "+s.reg.Host+"/example/ingestor:0.8.4@"+s.ingestor084+"\n") {
		t.Errorf("Artifact Hub annotation not rewritten to the new full reference:\n%s", chart)
	}
	var copies []string
	for _, c := range res.Charts[0].Copies {
		copies = append(copies, filepath.Base(c.File)+":"+strconv.Itoa(c.Line))
	}
	sort.Strings(copies)
	if strings.Join(copies, " ") != "Chart.yaml:8 _helpers.tpl:3 ingestor_test.yaml:7 ingestor_test.yaml:8" {
		t.Errorf("copies %v", copies)
	}

	// Idempotent: a second run changes nothing and reads no platforms.
	s.reg.Reset()
	res2, err := Plan(ctx, Options{ConfigPath: s.cfg, Resolver: s.resolver(t), RewriteCopies: true})
	if err != nil {
		t.Fatal(err)
	}
	if res2.Changed() || res2.Diff() != "" {
		t.Errorf("second run changed files:\n%s", res2.Diff())
	}
	for _, q := range s.reg.Requests() {
		if q.Method == "GET" && strings.Contains(q.Path, "/manifests/") {
			t.Errorf("second run read a manifest (%s): platforms are checked only for a new digest", q.Path)
		}
	}
}

func TestEdgeChartRefusals(t *testing.T) {
	cases := []struct {
		name   string
		single bool
		mutate func(s *edgeChart)
		opts   func(s *edgeChart, o *Options)
		want   []string
		code   int
	}{
		{
			name: "copies listed without --rewrite-copies",
			want: []string{"rerun with RewriteCopies to update them", "templates/tests/ingestor_test.yaml:7: ", "Chart.yaml:8: ", "templates/_helpers.tpl:3: ", "old digest of images.ingestor.prodDigest"},
			code: 1,
		},
		{
			name: "when unreadable",
			mutate: func(s *edgeChart) {
				s.files["values.yaml"] = strings.Replace(s.files["values.yaml"], "serviceDbAccountsByEnv:\n  prod: true\n", "", 1)
			},
			opts: func(s *edgeChart, o *Options) { o.RewriteCopies = true },
			want: []string{"images.ingestor.prodDigest", "condition serviceDbAccountsByEnv.prod == true unreadable", "fail closed"},
			code: 1,
		},
		{
			name:   "single-arch where platforms require two",
			single: true,
			opts:   func(s *edgeChart, o *Options) { o.RewriteCopies = true },
			want:   []string{"values.yaml:15 (images.ingestor.prodDigest): image REG/example/ingestor:0.8.4: refusing to pin NEW", "required platforms missing: single-arch image, need linux/amd64, linux/arm64"},
			code:   1,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newEdgeChart(t, tc.single)
			if tc.mutate != nil {
				tc.mutate(s)
				writeTree(t, s.dir, s.files)
			}
			before := hashTree(t, s.dir)
			o := Options{ConfigPath: s.cfg, Resolver: s.resolver(t)}
			if tc.opts != nil {
				tc.opts(s, &o)
			}
			_, err := Plan(context.Background(), o)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				w = strings.ReplaceAll(w, "REG", s.reg.Host)
				w = strings.ReplaceAll(w, "OLD", s.oldIngestor)
				w = strings.ReplaceAll(w, "NEW", s.ingestor084)
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error:\n%v\nwant it to contain %q", err, w)
				}
			}
			if got := failure.Code(err); got != tc.code {
				t.Errorf("exit class %d, want %d", got, tc.code)
			}
			sameHashes(t, before, hashTree(t, s.dir))
		})
	}
}

func discoverPin(format, repo string) discover.Pin {
	return discover.Pin{Format: format, Repository: repo}
}

// Discovery: blocks that share a ref cost one HEAD between them, and each
// new digest one GET (its manifest is verified before it is written).
func TestOneHeadPerUniqueRef(t *testing.T) {
	reg := registrytest.New(t)
	d := reg.PushIndex(t, "team/app", "1.0", "linux/amd64", "linux/arm64")
	tool := reg.PushIndex(t, "team/tool", "2.0", "linux/amd64")
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: x\nversion: 1.0.0\n",
		"values.yaml": "a:\n  image:\n    repository: " + reg.Host + "/team/app\n    tag: \"1.0\"\n    digest: \"\"\n" +
			"b:\n  image:\n    repository: " + reg.Host + "/team/app\n    tag: \"1.0\"\n    digest: " + d + "\n" +
			"c:\n  sidecar:\n    image: " + reg.Host + "/team/app:1.0\n" +
			"d:\n  image:\n    registry: " + reg.Host + "\n    repository: team/tool\n    tag: \"2.0\"\n    sha: \"\"\n",
	})
	reg.Reset()
	r, err := resolver.New(resolver.Options{InsecureRegistries: []string{reg.Host}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Plan(context.Background(), Options{ChartDirs: []string{dir}, Resolver: r})
	if err != nil {
		t.Fatal(err)
	}
	heads, gets := map[string]int{}, map[string]int{}
	for _, q := range reg.Requests() {
		if q.Method == "HEAD" {
			heads[q.Path]++
		}
		if q.Method == "GET" && strings.Contains(q.Path, "/manifests/") {
			gets[q.Path]++
		}
	}
	if len(gets) != 2 || gets["/v2/team/app/manifests/"+d] != 1 || gets["/v2/team/tool/manifests/"+tool] != 1 {
		t.Errorf("manifest GETs %v, want one per new digest (%s, %s)", gets, d, tool)
	}
	if len(heads) != 2 || heads["/v2/team/app/manifests/1.0"] != 1 || heads["/v2/team/tool/manifests/2.0"] != 1 {
		t.Errorf("HEADs %v, want one per unique ref", heads)
	}
	if n := len(res.Charts[0].Pins); n != 4 {
		t.Errorf("%d pins, want 4", n)
	}
}

// Two configured charts: when the second one's image does not resolve, the
// first chart's pins are not written either (all or nothing per run).
func TestMultiChartAllOrNothing(t *testing.T) {
	reg := registrytest.New(t)
	reg.PushIndex(t, "team/a", "1", "linux/amd64")
	root := t.TempDir()
	chart := func(name, repo string) map[string]string {
		return map[string]string{
			name + "/Chart.yaml":  "apiVersion: v2\nname: " + name + "\nversion: 1.0.0\n",
			name + "/values.yaml": "image:\n  repository: " + reg.Host + "/" + repo + "\n  tag: \"1\"\n  digest: \"\"\n",
		}
	}
	files := chart("a", "team/a")
	for k, v := range chart("b", "team/missing") {
		files[k] = v
	}
	files["chartpin.yaml"] = "charts:\n  - dir: a\n    images: [{at: image}]\n  - dir: b\n    images: [{at: image}]\n"
	writeTree(t, root, files)
	before := hashTree(t, root)
	r, err := resolver.New(resolver.Options{InsecureRegistries: []string{reg.Host}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Plan(context.Background(), Options{ConfigPath: filepath.Join(root, "chartpin.yaml"), Resolver: r})
	if err == nil || !strings.Contains(err.Error(), filepath.Join(root, "b", "values.yaml")+":4 (image.digest): image "+reg.Host+"/team/missing:1") {
		t.Fatalf("err = %v", err)
	}
	sameHashes(t, before, hashTree(t, root))

	// Selecting only chart a by its directory pins it alone.
	res, err := Plan(context.Background(), Options{ConfigPath: filepath.Join(root, "chartpin.yaml"), ChartDirs: []string{filepath.Join(root, "a")}, Resolver: r})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Charts) != 1 || res.Charts[0].Name != "a" || len(res.Files()) != 2 {
		t.Errorf("selected run: %d charts, %d files", len(res.Charts), len(res.Files()))
	}
}

// A false when: holds that pin only: the ingestor stays (reported with the
// condition), the other images are pinned, and the copies of the held
// digest are left alone, as the held pin itself is. The condition reads
// values as Helm does, through << merge keys.
func TestEdgeChartWhenFalseHoldsThatPin(t *testing.T) {
	for name, mutate := range map[string]func(string) string{
		"plain": func(v string) string { return strings.Replace(v, "  prod: true", "  prod: false", 1) },
		"merge key": func(v string) string {
			return strings.Replace(v, "serviceDbAccountsByEnv:\n  prod: true\n", "envDefaults: &envs\n  prod: false\nserviceDbAccountsByEnv:\n  <<: *envs\n", 1)
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := newEdgeChart(t, false)
			s.files["values.yaml"] = mutate(s.files["values.yaml"])
			writeTree(t, s.dir, s.files)
			res, err := Plan(context.Background(), Options{ConfigPath: s.cfg, Resolver: s.resolver(t)})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]Change{}
			for _, p := range res.Charts[0].Pins {
				got[p.Path] = p
			}
			in := got["images.ingestor.prodDigest"]
			if in.Changed || in.Held != `when "serviceDbAccountsByEnv.prod == true" does not hold in values.yaml (would move to `+s.ingestor084+")" {
				t.Errorf("ingestor: changed %v, held %q", in.Changed, in.Held)
			}
			for _, p := range []string{"images.jobsManager.digest", "images.requestsProxy.digest", "egressProxy.image.digest"} {
				if !got[p].Changed {
					t.Errorf("%s not pinned: %+v", p, got[p])
				}
			}
			if len(res.Charts[0].Copies) != 0 || res.Refused() {
				t.Errorf("copies %v, refused %v", res.Charts[0].Copies, res.Refused())
			}
			if err := res.Apply(); err != nil {
				t.Fatal(err)
			}
			if v := read(t, filepath.Join(s.dir, "values.yaml")); !strings.Contains(v, "prodDigest: "+s.oldIngestor+"\n") || !strings.Contains(v, "digest: \""+s.jobs+"\"") {
				t.Errorf("values.yaml:\n%s", v)
			}
		})
	}
}
