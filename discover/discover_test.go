package discover

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/chartpin/chartpin/config"
	"github.com/chartpin/chartpin/internal/chartfile"
	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/yamledit"
)

// The corpus charts are copied, with attribution, into pin's golden trees.
const corpora = "../pin/testdata"

func corpusDir(t *testing.T, rel string) string {
	t.Helper()
	d := filepath.Join(corpora, rel)
	if _, err := os.Stat(filepath.Join(d, "values.yaml")); err != nil {
		t.Fatalf("corpus copy %s: %v", d, err)
	}
	return d
}

// summary is one pin as "path repo:tag format digest-prefix problem?".
func summary(p Pin) string {
	s := p.Path + " " + p.Repository + ":" + p.Tag + " " + p.Format
	if p.Digest != "" {
		s += " " + p.Digest[:16]
	}
	if p.Problem != "" {
		s += " PROBLEM"
	}
	return s
}

func TestDiscoverCorpora(t *testing.T) {
	cases := map[string][]string{
		"bitnami-nginx/original": {
			"image.digest docker.io/bitnami/nginx:1.29.1-debian-12-r0 digest",
			"cloneStaticSiteFromGit.image.digest docker.io/bitnami/git:2.51.0-debian-12-r0 digest",
			"metrics.image.digest docker.io/bitnami/nginx-exporter:1.4.2-debian-12-r9 digest",
		},
		// commented-out digests are never matched
		"cert-manager/original": nil,
		"velero/original":       nil,
		"oracle-ingress-nginx/before": {
			// registry comes from global.image.registry: the block's own is commented out
			"controller.image.digest registry.k8s.io/ingress-nginx/controller:v1.15.0 digest sha256:4eea9a4cc",
			"controller.image.digestChroot : digest sha256:8f3634837 PROBLEM",
			"controller.admissionWebhooks.patch.image.digest registry.k8s.io/ingress-nginx/kube-webhook-certgen:v1.6.9 digest sha256:01038e7de",
		},
		"oracle-karpenter/before": {
			"controller.image.digest public.ecr.aws/karpenter/controller:1.13.0 digest sha256:ea731b0cd",
		},
		"node-exporter/original": {
			"image.digest quay.io/prometheus/node-exporter: digest PROBLEM",
			"kubeRBACProxy.image.sha quay.io/brancz/kube-rbac-proxy:v0.22.1 hex",
			"permissionInitContainer.image.sha quay.io/prometheus/busybox:latest hex",
		},
		"fulcio/original": {
			"server.image.version ghcr.io/sigstore/fulcio:v1.8.8 tag@digest sha256:ef72cf56c",
		},
		"jellyfin/original": {
			"image.tag oci.trueforge.org/containerforge/jellyfin:10.11.11 tag@digest sha256:7f5325bd2",
			"broadcastProxyImage.tag docker.io/alpine/socat:1.8.1.3 tag@digest sha256:5f275aa1b",
		},
	}
	for rel, want := range cases {
		t.Run(rel, func(t *testing.T) {
			pins, err := Chart(corpusDir(t, rel), nil)
			if err != nil {
				t.Fatal(err)
			}
			checkPins(t, pins, nil, want...)
		})
	}
}

func TestDiscoverKubePrometheusStack(t *testing.T) {
	pins, err := Chart(corpusDir(t, "kube-prometheus-stack/original"), nil)
	if err != nil {
		t.Fatal(err)
	}
	var ok, problems int
	for _, p := range pins {
		if p.Format != config.FormatHex {
			t.Errorf("%s: format %s, want hex (the chart renders @sha256:{{ .sha }})", p.Path, p.Format)
		}
		if p.Problem != "" {
			problems++
			if !strings.Contains(p.Problem, "is empty") {
				t.Errorf("%s: problem %q", p.Path, p.Problem)
			}
		} else {
			ok++
		}
	}
	// 10 sha keys: 6 with a tag, 4 whose tag defaults to appVersion in the templates.
	if ok != 6 || problems != 4 {
		t.Errorf("ok=%d problems=%d, want 6 and 4 (none dropped)", ok, problems)
	}
}

func writeChart(t *testing.T, values string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "values.yaml"), []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// edgeValues is shaped like an edge control-plane chart: channel tags, a prod pin, a
// follower, a pin outside images:, and a block with no repository.
const edgeValues = `global:
  imageRegistry: ""
images:
  ingestor:
    repository: ghcr.io/example/ingestor
    tag: ""
    channelTags:
      dev: "0.9"
      stg: "0.8"
      prod: "0.8"
    prodPin: true
    prodDigest: sha256:1111111111111111111111111111111111111111111111111111111111111111
    digest: ""
  jobsManager:
    repository: docker.io/example/jobs-manager
    tag: "1.4"
    digest: ''
  requestsProxy:
    repository: docker.io/example/jobs-manager
    tag: "1.4"
    digest: ""
  podsMonitor:
    tag: "2.0"
    digest: ""
egressProxy:
  image:
    repository: docker.io/library/nginx
    tag: "1.27"
    # digest: sha256:2222222222222222222222222222222222222222222222222222222222222222
    digest:
sidecar:
  image: busybox:1.36
  other: nginx:1.27@sha256:3333333333333333333333333333333333333333333333333333333333333333
notAnImage:
  image: not-a-ref
  command: "echo x:y"
`

func TestDiscoverEdgeShape(t *testing.T) {
	dir := writeChart(t, edgeValues)
	pins, err := Chart(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"images.ingestor.prodDigest ghcr.io/example/ingestor:0.8 digest sha256:111111111",
		"images.ingestor.digest ghcr.io/example/ingestor: digest PROBLEM",
		"images.jobsManager.digest docker.io/example/jobs-manager:1.4 digest",
		"images.requestsProxy.digest docker.io/example/jobs-manager:1.4 digest",
		"images.podsMonitor.digest : digest PROBLEM",
		"egressProxy.image.digest docker.io/library/nginx:1.27 digest",
		"sidecar.image docker.io/library/busybox:1.36 ref@digest",
		"sidecar.other docker.io/library/nginx:1.27 ref@digest sha256:333333333",
	}
	checkPins(t, pins, nil, want...)
	for _, p := range pins {
		if p.Path == "images.ingestor.prodDigest" && (p.TagPath != "images.ingestor.channelTags.prod" || p.Line != 12 || p.TagLine != 10) {
			t.Errorf("prodDigest: tagPath %s line %d tagLine %d", p.TagPath, p.Line, p.TagLine)
		}
		if p.Path == "images.podsMonitor.digest" && !strings.Contains(p.Problem, "no repository or image key") {
			t.Errorf("podsMonitor problem = %q", p.Problem)
		}
		if p.File != filepath.Join(dir, "values.yaml") {
			t.Errorf("file = %s", p.File)
		}
		if p.Node == nil || p.Node.Line != p.Line {
			t.Errorf("%s: pin node %v does not sit at line %d", p.Path, p.Node, p.Line)
		}
		if p.Problem == "" && (p.TagNode == nil || !strings.Contains(p.TagNode.Value, p.Tag) || p.TagNode.Line != p.TagLine) {
			t.Errorf("%s: tag node %v, want the scalar holding %q at line %d", p.Path, p.TagNode, p.Tag, p.TagLine)
		}
	}
}

func TestDiscoverBadInput(t *testing.T) {
	cases := []struct {
		name, values, want string
	}{
		{"malformed", "a:\n  b: [\n", "values.yaml:2: parsing yaml: did not find expected node content; fix the file and retry"},
		{"malformed later document", "a: 1\n---\nb: [\n", "values.yaml:3: parsing yaml:"},
		{"duplicate", "image:\n  repository: a/b\n  tag: x\n  digest: \"\"\n  digest: \"\"\n", "values.yaml:5: mapping key \"digest\" already defined at line 4"},
		{"duplicate in a later document", "a: 1\n---\nb: 1\nb: 2\n", "values.yaml:4: mapping key \"b\" already defined at line 3"},
		// yaml.v3 refuses a repeated << when decoding into a map, so yamledit does too.
		{"duplicate merge key", "x: &x {a: 1}\ny: &y {b: 1}\nz:\n  <<: *x\n  <<: *y\n", "values.yaml:5: mapping key \"<<\" already defined at line 4"},
		{"not utf-8", "image:\n  repository: a/b\n  tag: \"\xff\"\n", "values.yaml:3: not valid UTF-8"},
		{"ambiguous", "image:\n  repository: a/b\n  tag: v1@sha256:1111111111111111111111111111111111111111111111111111111111111111\n  digest: \"\"\n",
			"values.yaml:2: ambiguous pin: image.tag (line 3) and image.digest (line 4) hold the same image's digest"},
		{"top level list", "- a\n", "values must be a mapping"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Chart(writeChart(t, tc.values), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if failure.Code(err) != 2 {
				t.Errorf("exit class %d, want 2", failure.Code(err))
			}
		})
	}
	_, err := Chart(t.TempDir(), nil)
	if err == nil || failure.Code(err) != 2 || !strings.Contains(err.Error(), "values.yaml") {
		t.Errorf("missing values.yaml: %v", err)
	}
}

func TestDiscoverAnchorsAndDocuments(t *testing.T) {
	values := "---\nbase: &img\n  repository: a/b\n  tag: \"1\"\n  digest: &d sha256:1111111111111111111111111111111111111111111111111111111111111111\ncopy: *img\nother:\n  repository: a/c\n  tag: \"2\"\n  digest: *d\n---\nsecond:\n  image:\n    repository: x/y\n    tag: z\n    digest: \"\"\n"
	pins, err := Chart(writeChart(t, values), nil)
	if err != nil {
		t.Fatal(err)
	}
	// copy: *img is the anchored block again (found once); other.digest: *d
	// points at the anchored scalar (line 5), which is written once.
	checkPins(t, pins, func(p Pin) string { return " @" + strconv.Itoa(p.Line) },
		"base.digest docker.io/a/b:1 digest sha256:111111111 @5",
		"other.digest docker.io/a/c:2 digest sha256:111111111 @5")
}

// checkPins compares each pin's summary, followed by more(p) unless more is nil, with want.
func checkPins(t *testing.T, pins []Pin, more func(Pin) string, want ...string) {
	t.Helper()
	var got []string
	for _, p := range pins {
		s := summary(p)
		if more != nil {
			s += more(p)
		}
		got = append(got, s)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("pins:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestConfigured(t *testing.T) {
	dir := writeChart(t, edgeValues+`serviceDbAccountsByEnv:
  prod: true
controller:
  image:
    image: ingress-nginx/controller
    tag: "v1.15.0"
    digest: sha256:4eea9a4cc2cb6ddcb7da14d377aaf452e68bd3dbe87fe280755d225c4d5e7e4e
    digestChroot: sha256:8f3634837abc5c739baff6527934e08131e095317d69bf64d168e07aef53ac12
jelly:
  repository: oci.example.org/jellyfin
  tag: 10.11.11@sha256:7f5325bd23b7445a8fda17b6d2d24033e3935536789f682aed63698b7b3a97c6
`)
	cfgText := `charts:
  - dir: ` + dir + `
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
      - at: images.podsMonitor
        repository: ghcr.io/example/pods-monitor
      - at: controller.image
        repository: registry.k8s.io/ingress-nginx/controller
      - at: controller.image
        repository: registry.k8s.io/ingress-nginx/controller-chroot
        pin: digestChroot
      - at: jelly
      - at: sidecar.image
`
	cf, err := config.Parse(filepath.Join(dir, "chartpin.yaml"), []byte(cfgText))
	if err != nil {
		t.Fatal(err)
	}
	pins, err := Chart(dir, &cf.Charts[0])
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"images.ingestor.prodDigest ghcr.io/example/ingestor:0.8 digest sha256:111111111",
		"images.jobsManager.digest docker.io/example/jobs-manager:1.4 digest",
		"images.requestsProxy.digest docker.io/example/jobs-manager:1.4 digest",
		"images.podsMonitor.digest ghcr.io/example/pods-monitor:2.0 digest",
		"controller.image.digest registry.k8s.io/ingress-nginx/controller:v1.15.0 digest sha256:4eea9a4cc",
		"controller.image.digestChroot registry.k8s.io/ingress-nginx/controller-chroot:v1.15.0 digest sha256:8f3634837",
		"jelly.tag oci.example.org/jellyfin:10.11.11 tag@digest sha256:7f5325bd2",
		"sidecar.image docker.io/library/busybox:1.36 ref@digest",
	}
	checkPins(t, pins, nil, want...)
	if pins[0].Versions == "" || pins[0].When == "" || len(pins[0].Platforms) != 2 || pins[2].Follows != "images.jobsManager" || pins[0].ConfigLine != 4 {
		t.Errorf("config fields not carried: %+v / %+v", pins[0], pins[2])
	}

	bad := []struct{ name, images, want string }{
		{"missing path", "      - at: images.nope\n", "chartpin.yaml:4: image images.nope: " + dir + "/values.yaml: no key \"nope\" under images"},
		{"missing pin key", "      - at: images.jobsManager\n        pin: prodDigest\n", "has no prodDigest key"},
		{"no pin key at all", "      - at: serviceDbAccountsByEnv\n", "has no digest or sha key"},
		{"ambiguous", "      - at: amb\n", "ambiguous pin: amb has digest and tag"},
		{"list", "      - at: list\n", "is a list"},
	}
	extra := "amb:\n  repository: a/b\n  tag: v1@sha256:1111111111111111111111111111111111111111111111111111111111111111\n  digest: \"\"\nlist: [1]\n"
	dir2 := writeChart(t, edgeValues+"serviceDbAccountsByEnv:\n  prod: true\n"+extra)
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			cf, err := config.Parse(filepath.Join(dir2, "chartpin.yaml"), []byte("charts:\n  - dir: "+dir2+"\n    images:\n"+tc.images))
			if err != nil {
				t.Fatal(err)
			}
			_, err = Chart(dir2, &cf.Charts[0])
			want := strings.ReplaceAll(tc.want, dir, dir2)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("err = %v, want %q", err, want)
			}
			if failure.Code(err) != 2 {
				t.Errorf("exit class %d, want 2", failure.Code(err))
			}
		})
	}
}

func TestValuesTopLevel(t *testing.T) {
	for name, values := range map[string]string{
		"empty file":       "",
		"comments only":    "# nothing yet\n",
		"null document":    "---\n~\n",
		"empty document":   "---\n---\na: 1\n",
		"later documents":  "image:\n  repository: a/b\n  tag: x\n---\nimage:\n  repository: c/d\n  tag: y\n  digest: \"\"\n",
		"later list value": "{}\n---\n- a\n",
	} {
		t.Run(name, func(t *testing.T) {
			pins, err := Chart(writeChart(t, values), nil)
			if err != nil || len(pins) != 0 {
				t.Fatalf("Chart = %v, %v; want no pins and no error (only the first document is values)", pins, err)
			}
		})
	}
	f, err := yamledit.Parse("values.yaml", []byte("\n\n- a\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Values(f); err == nil || err.Error() != "values.yaml:3: values must be a mapping at the top level" || failure.Code(err) != 2 {
		t.Errorf("Values of a list = %v, want an input error naming values.yaml:3", err)
	}
	f, err = yamledit.Parse("values.yaml", []byte("a: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if root, err := Values(f); err != nil || root != f.Docs[0].Content[0] {
		t.Errorf("Values = %v, %v; want the first document's root mapping itself (pins edit its nodes)", root, err)
	}
}

// Paths are looked up as yamledit does, through `<<` merge keys: Helm sees
// merged values, so a tag, a when: value or a configured at: that only a
// merge provides is found (discover's own lookup used to miss it).
func TestMergeKeys(t *testing.T) {
	values := `tags: &tags
  tag: "1.2"
common: &common
  web:
    repository: a/web
    tag: "3"
    digest: ""
app:
  repository: a/b
  <<: *tags
  digest: ""
apps:
  <<: *common
`
	dir := writeChart(t, values)
	pins, err := Chart(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	// apps.web is common.web through a merge: found at its own path, its
	// scalar shared with common.web (Via is the merge, line 13).
	checkPins(t, pins, func(p Pin) string { return " tag@" + strconv.Itoa(p.TagLine) + viaLine(p) },
		"common.web.digest docker.io/a/web:3 digest tag@6",
		"apps.web.digest docker.io/a/web:3 digest tag@6 via@13",
		"app.digest docker.io/a/b:1.2 digest tag@2")
	if len(pins) == 3 && (pins[2].TagPath != "app.tag" || pins[2].TagNode == nil || pins[2].TagNode.Line != 2) {
		t.Errorf("app's tag: path %s node %v, want app.tag read from the anchored scalar at line 2", pins[2].TagPath, pins[2].TagNode)
	}
	cf, err := config.Parse(filepath.Join(dir, "chartpin.yaml"), []byte("charts:\n  - dir: "+dir+"\n    images:\n      - at: apps.web\n"))
	if err != nil {
		t.Fatal(err)
	}
	pins, err = Chart(dir, &cf.Charts[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(pins) != 1 || summary(pins[0]) != "apps.web.digest docker.io/a/web:3 digest" || pins[0].Node.Line != 7 {
		t.Errorf("configured through a merge: %+v, want apps.web.digest written at the anchored scalar, line 7", pins)
	}
}

func viaLine(p Pin) string {
	if p.Via == nil {
		return ""
	}
	return " via@" + strconv.Itoa(p.Via.Line)
}

// A block whose image comes through a `<<` merge is an image block as Helm
// renders it: web is base's image again, and worker overrides the
// repository while sharing base's digest scalar (line 4); both are found,
// with the merge they reach that scalar through.
func TestMergedImageBlocks(t *testing.T) {
	values := "base: &base\n  repository: a/app\n  tag: \"1.0\"\n  digest: \"\"\nweb:\n  <<: *base\nworker:\n  <<: [*base]\n  repository: a/worker\nlist:\n  - <<: *base\n    tag: \"2.0\"\n"
	pins, err := Chart(writeChart(t, values), nil)
	if err != nil {
		t.Fatal(err)
	}
	checkPins(t, pins, func(p Pin) string { return " @" + strconv.Itoa(p.Line) + viaLine(p) },
		"base.digest docker.io/a/app:1.0 digest @4",
		"web.digest docker.io/a/app:1.0 digest @4 via@6",
		"worker.digest docker.io/a/worker:1.0 digest @4 via@8",
		"list[0].digest docker.io/a/app:2.0 digest @4 via@11")
	// Merges that nest an anchored tree into itself are bounded.
	var b strings.Builder
	b.WriteString("l0: &l0\n  image:\n    repository: a/b\n    tag: \"1\"\n    digest: \"\"\n")
	for i := 1; i < 18; i++ {
		fmt.Fprintf(&b, "l%d: &l%d\n  a:\n    <<: *l%d\n  b:\n    <<: *l%d\n", i, i, i-1, i-1)
	}
	if _, err := Chart(writeChart(t, b.String()), nil); err == nil || !strings.Contains(err.Error(), "exceed 100000 nodes") || !failure.IsInput(err) {
		t.Errorf("nested merges: %v", err)
	}
}

// Pin paths are yamledit paths: a key holding . [ ] " or \ is quoted, and
// Path, TagPath and At each name the pin's own nodes again, in every shape
// discovery knows (sub-paths such as channelTags.prod included).
func TestPathsAreYamleditPaths(t *testing.T) {
	const d = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	quoted := `podLabels:
  "app.kubernetes.io":
    image:
      repository: a/b
      tag: "1.0"
      digest: ""
"odd[0]":
  'say "hi"':
    repository: a/c
    tag: "2"
    sha: ""
  'back\slash':
    image: a/d:1@` + d + `
  "x.y":
    repository: a/e
    tag: v1@` + d + `
  "v.2":
    repository: a/f
    channelTags:
      prod: "3"
    prodDigest: ""
&k image.key:
  repository: a/g
  tag: "4"
  digest: ""
aliased:
  *k :
    repository: a/h
    tag: "5"
    digest: ""
`
	qdir := writeChart(t, quoted)
	pins, err := Chart(qdir, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkPins(t, pins, func(p Pin) string { return " tag=" + p.TagPath },
		`podLabels."app.kubernetes.io".image.digest docker.io/a/b:1.0 digest tag=podLabels."app.kubernetes.io".image.tag`,
		`"odd[0]"."say \"hi\"".sha docker.io/a/c:2 hex tag="odd[0]"."say \"hi\"".tag`,
		`"odd[0]"."back\\slash".image docker.io/a/d:1 ref@digest sha256:111111111 tag="odd[0]"."back\\slash".image`,
		`"odd[0]"."x.y".tag docker.io/a/e:v1 tag@digest sha256:111111111 tag="odd[0]"."x.y".tag`,
		`"odd[0]"."v.2".prodDigest docker.io/a/f:3 digest tag="odd[0]"."v.2".channelTags.prod`,
		`"image.key".digest docker.io/a/g:4 digest tag="image.key".tag`,
		`aliased."image.key".digest docker.io/a/h:5 digest tag=aliased."image.key".tag`)
	dirs := map[string]string{"quoted": qdir, "edge": writeChart(t, edgeValues)}
	for _, rel := range []string{"bitnami-nginx/original", "oracle-ingress-nginx/before", "node-exporter/original", "fulcio/original", "jellyfin/original", "kube-prometheus-stack/original"} {
		dirs[rel] = corpusDir(t, rel)
	}
	for label, dir := range dirs {
		// Find on a tree parsed here, so the pins' nodes are nodes of root.
		name := filepath.Join(dir, chartfile.ValuesFile)
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := yamledit.Parse(name, data)
		if err != nil {
			t.Fatal(err)
		}
		root, err := Values(f)
		if err != nil {
			t.Fatal(err)
		}
		pins, err := Find(name, root, nil)
		if err != nil || len(pins) == 0 {
			t.Fatalf("%s: %d pins, %v", label, len(pins), err)
		}
		for _, p := range pins {
			if n, err := yamledit.LookupNode(root, p.Path); err != nil || n != p.Node {
				t.Errorf("%s: Path %s names %v (%v), not the pin at line %d", label, p.Path, n, err, p.Line)
			}
			if p.TagNode != nil {
				if n, err := yamledit.LookupNode(root, p.TagPath); err != nil || n != p.TagNode {
					t.Errorf("%s: TagPath %s names %v (%v), not the tag at line %d", label, p.TagPath, n, err, p.TagLine)
				}
			}
			if _, err := yamledit.LookupNode(root, p.At); err != nil {
				t.Errorf("%s: At %s: %v", label, p.At, err)
			}
		}
	}
}

// Survey never stops at one ambiguous block: it becomes a Problem pin and the
// pins after it are still found; Chart (for pin) still refuses the file.
func TestSurveyKeepsWalkingPastAnAmbiguousBlock(t *testing.T) {
	dir := t.TempDir()
	d := "sha256:" + strings.Repeat("1", 64)
	values := "amb:\n  repository: a/b\n  tag: v1@" + d + "\n  digest: \"\"\nlate:\n  repository: a/c\n  tag: \"2\"\n  digest: \"\"\n"
	if err := os.WriteFile(filepath.Join(dir, "values.yaml"), []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Chart(dir, nil); err == nil || !strings.Contains(err.Error(), "ambiguous pin") {
		t.Fatalf("Chart: err = %v, want the ambiguity", err)
	}
	pins, err := Survey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(pins) != 2 || pins[0].Path != "amb" || !strings.Contains(pins[0].Problem, "ambiguous pin") || pins[0].Line != 2 ||
		pins[1].Path != "late.digest" || pins[1].Problem != "" {
		t.Fatalf("Survey = %+v", pins)
	}
}

// A configured pin: key must hold a digest (or nothing yet): pointing it at
// another key would overwrite that key with a digest.
func TestConfiguredPinKeyMustHoldADigest(t *testing.T) {
	dir := writeChart(t, "app:\n  image:\n    repository: ghcr.io/example/app\n    tag: \"1.0\"\n    pullPolicy: IfNotPresent\n    digest: \"\"\n")
	cf, err := config.Parse(filepath.Join(dir, "chartpin.yaml"), []byte("charts:\n  - dir: "+dir+"\n    images:\n      - at: app.image\n        pin: pullPolicy\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Chart(dir, &cf.Charts[0])
	if err == nil || !strings.Contains(err.Error(), dir+"/values.yaml:5: app.image.pullPolicy holds \"IfNotPresent\", which is not a digest") {
		t.Fatalf("err = %v, want a refusal naming file, line and value", err)
	}
	if failure.Code(err) != 2 {
		t.Errorf("exit class %d, want 2", failure.Code(err))
	}
}
