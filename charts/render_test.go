package charts_test

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/chartpin/chartpin/reconcile"
)

// targetsFile is the reconcile targets file format (notes/targets-format.md),
// decoded strictly: an unknown key fails the test.
type targetsFile struct {
	Mirror      string       `json:"mirror"`
	PullSecrets []pullSecret `json:"pullSecrets"`
	Targets     []target     `json:"targets"`
}

type pullSecret struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Optional  bool   `json:"optional"`
}

type target struct {
	ID        string `json:"id"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Container string `json:"container"`
	Image     string `json:"image,omitempty"`
	Follows   string `json:"follows,omitempty"`
	Verify    *struct {
		Key         string `json:"key"`
		Identity    string `json:"identity"`
		Issuer      string `json:"issuer"`
		TrustedRoot string `json:"trustedRoot"`
	} `json:"verify,omitempty"`
}

// container is one container of one rendered pod template.
type container struct {
	Kind, Namespace, Name string // the owning object
	Container, Image      string
	Policy                corev1.PullPolicy
}

func (c container) slot() string {
	return c.Kind + "/" + c.Namespace + "/" + c.Name + "/" + c.Container
}

// rendered is one parsed render of the example chart.
type rendered struct {
	ns   string
	base string // name prefix of the library's objects

	objs       []object
	targets    *targetsFile // nil when the reconcile is not rendered
	containers []container
	notes      string
}

func (r rendered) container(t *testing.T, name string) container {
	t.Helper()
	var found []container
	for _, c := range r.containers {
		if c.Container == name {
			found = append(found, c)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want exactly one rendered container %q, found %d in %v", name, len(found), keys(r.objs))
	}
	return found[0]
}

func (r rendered) has(kind, ns, name string) bool {
	_, ok := find(r.objs, kind, ns, name)
	return ok
}

func (r rendered) targetIDs() []string {
	if r.targets == nil {
		return nil
	}
	var ids []string
	for _, t := range r.targets.Targets {
		ids = append(ids, t.ID)
	}
	return ids
}

// render installs the example chart (dry run) into ns with the overrides.
func render(t *testing.T, ns string, overrides ...string) rendered {
	t.Helper()
	manifest, notes, err := installDryRun(loadExample(t), ns, parseValues(t, overrides...))
	if err != nil {
		t.Fatalf("rendering example with %q: %v", overrides, err)
	}
	return renderParsed(t, rendered{ns: ns, notes: notes}, manifest)
}

// renderParsed fills r from a rendered manifest.
func renderParsed(t *testing.T, r rendered, manifest string) rendered {
	t.Helper()
	r.objs = parseManifest(t, manifest)
	if r.base == "" {
		r.base = releaseName + "-example"
	}
	for _, o := range r.objs {
		spec := podSpec(t, o)
		switch o.Kind {
		case "ConfigMap":
			var cm corev1.ConfigMap
			o.into(t, &cm)
			if data, ok := cm.Data["targets.yaml"]; ok {
				if r.targets != nil {
					t.Fatalf("two ConfigMaps carry targets.yaml")
				}
				r.targets = &targetsFile{}
				if err := yaml.UnmarshalStrict([]byte(data), r.targets); err != nil {
					t.Fatalf("targets.yaml does not match the targets file format: %v\n%s", err, data)
				}
				// The reconcile's own parser must accept it as rendered.
				if _, err := reconcile.ParseTargets("targets.yaml", []byte(data)); err != nil {
					t.Fatalf("chartpin reconcile refuses the rendered targets.yaml: %v\n%s", err, data)
				}
			}
		case "Pod", "Job", "ReplicaSet":
			t.Fatalf("%s: the chart renders no bare %s; extend the test if it must", o.key(), o.Kind)
		}
		if spec == nil {
			continue
		}
		for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
			for _, c := range list {
				r.containers = append(r.containers, container{o.Kind, o.Namespace, o.Name, c.Name, c.Image, c.ImagePullPolicy})
			}
		}
	}
	return r
}

const (
	// unpinned clears every pin and fixes every tag, so the tests hold
	// whatever the release job has since written into values.yaml.
	unpinned = `
images:
  jobsManager: {digest: "", prodDigest: "", prodPin: true, tag: "", channelTags: {dev: dev, stg: stg, prod: prod}}
  podsMonitor: {digest: "", prodDigest: "", prodPin: true, tag: "", channelTags: {dev: dev, stg: stg, prod: prod}}
  requestsProxy: {digest: "", prodDigest: "", prodPin: true, tag: "", channelTags: {dev: dev, stg: stg, prod: prod}}
  resourceMonitor: {digest: "", prodDigest: "", prodPin: true, tag: "", channelTags: {dev: dev, stg: stg, prod: prod}}
reconcile: {image: {digest: "", tag: "0.1.0"}}
autoUpgrade: {image: {digest: "", tag: "0.1.0"}}
`
	hub    = "docker.io/chartpin/"
	jm     = hub + "jobs-manager"
	pm     = hub + "pods-monitor"
	rm     = hub + "resource-monitor"
	tool   = "ghcr.io/chartpin/chartpin:0.1.0"
	ifnp   = corev1.PullIfNotPresent
	always = corev1.PullAlways
)

func digest(c byte) string { return "sha256:" + strings.Repeat(string(c), 64) }

var (
	dJM     = digest('a')
	dJMProd = digest('b')
	dPM     = digest('c')
	dRM     = digest('d')
	dRP     = digest('e')
	dTool   = digest('f')
)

type want struct {
	image  string
	policy corev1.PullPolicy
}

// TestMatrix renders the example chart across the configurations edges run,
// checks each case's images, policies and reconcile targets, and
// checks the global invariants on every render.
func TestMatrix(t *testing.T) {
	cases := []struct {
		name      string
		ns        string
		values    []string
		reconcile bool              // the values enable the reconcile
		images    map[string]want   // container name -> image and policy
		targets   []string          // reconcile target ids, nil = retired or disabled
		follows   map[string]string // target id -> leader id
		mirror    string            // targets.yaml mirror
		check     func(*testing.T, rendered)
	}{
		{
			name:      "default prod, unpinned",
			reconcile: true,
			images: map[string]want{
				"api": {jm + ":prod", ifnp}, "pods-monitor": {pm + ":prod", ifnp},
				"proxy": {jm + ":prod", ifnp}, "resource-monitor": {rm + ":prod", ifnp},
				"reconcile": {tool, always}, "upgrade": {tool, always},
			},
			targets: []string{"jobs-manager-api", "jobs-manager-pods-monitor", "requests-proxy-proxy", "resource-monitor-resource-monitor"},
			follows: map[string]string{"requests-proxy-proxy": "jobs-manager-api"},
			check: func(t *testing.T, r rendered) {
				var cj batchv1.CronJob
				o, _ := find(r.objs, "CronJob", releaseNs, "rel-example-reconcile")
				o.into(t, &cj)
				want := []string{"reconcile", "--targets=/etc/chartpin/targets.yaml", "--rollout-timeout=10m", "--max-attempts=3", "--max-skips=4", "--deadline=5460s", "--jitter=600s"}
				if got := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args; !slices.Equal(got, want) {
					t.Errorf("reconcile args %v, want %v", got, want)
				}
				if got := *cj.Spec.JobTemplate.Spec.ActiveDeadlineSeconds; got != 5580 {
					t.Errorf("activeDeadlineSeconds %d, want 4 x 600 x 2 + 60 + 600 (spread window) + 120 = 5580", got)
				}
				if cj.Spec.Schedule != "*/15 * * * *" {
					t.Errorf("schedule %q", cj.Spec.Schedule)
				}
			},
		},
		{
			name:      "default (dev)",
			values:    []string{"env: dev"},
			reconcile: true,
			images: map[string]want{
				"api": {jm + ":dev", ifnp}, "pods-monitor": {pm + ":dev", ifnp},
				"proxy": {jm + ":dev", ifnp}, "resource-monitor": {rm + ":dev", ifnp},
			},
			targets: []string{"jobs-manager-api", "jobs-manager-pods-monitor", "requests-proxy-proxy", "resource-monitor-resource-monitor"},
			follows: map[string]string{"requests-proxy-proxy": "jobs-manager-api"},
		},
		{
			name:      "stg",
			values:    []string{"env: stg"},
			reconcile: true,
			images:    map[string]want{"api": {jm + ":stg", ifnp}, "resource-monitor": {rm + ":stg", ifnp}},
			targets:   []string{"jobs-manager-api", "jobs-manager-pods-monitor", "requests-proxy-proxy", "resource-monitor-resource-monitor"},
		},
		{
			name: "prod with prodDigest (as chartpin pin writes them)",
			values: []string{fmt.Sprintf(`
images:
  jobsManager: {prodDigest: %q}
  podsMonitor: {prodDigest: %q}
  requestsProxy: {prodDigest: %q}
  resourceMonitor: {prodDigest: %q}`, dJMProd, dPM, dJMProd, dRM)},
			reconcile: true,
			images: map[string]want{
				"api": {jm + "@" + dJMProd, ifnp}, "pods-monitor": {pm + "@" + dPM, ifnp},
				"proxy": {jm + "@" + dJMProd, ifnp}, "resource-monitor": {rm + "@" + dRM, ifnp},
			},
			targets: nil, // every target pinned: retired
		},
		{
			name:      "prod with only jobs-manager's prodDigest",
			values:    []string{fmt.Sprintf(`images: {jobsManager: {prodDigest: %q}}`, dJMProd)},
			reconcile: true,
			images: map[string]want{
				"api": {jm + "@" + dJMProd, ifnp}, "proxy": {jm + "@" + dJMProd, ifnp},
				"pods-monitor": {pm + ":prod", ifnp}, "resource-monitor": {rm + ":prod", ifnp},
			},
			targets: []string{"jobs-manager-pods-monitor", "resource-monitor-resource-monitor"},
		},
		{
			name: "prod with prodPin false",
			values: []string{fmt.Sprintf(`
images:
  jobsManager: {prodDigest: %q, prodPin: false}
  podsMonitor: {prodDigest: %q, prodPin: false}
  requestsProxy: {prodDigest: %q, prodPin: false}
  resourceMonitor: {prodDigest: %q, prodPin: false}`, dJMProd, dPM, dJMProd, dRM)},
			reconcile: true,
			images: map[string]want{
				"api": {jm + ":prod", ifnp}, "pods-monitor": {pm + ":prod", ifnp},
				"proxy": {jm + ":prod", ifnp}, "resource-monitor": {rm + ":prod", ifnp},
			},
			targets: []string{"jobs-manager-api", "jobs-manager-pods-monitor", "requests-proxy-proxy", "resource-monitor-resource-monitor"},
			follows: map[string]string{"requests-proxy-proxy": "jobs-manager-api"},
		},
		{
			name:      "prodDigest does not apply off prod",
			values:    []string{"env: dev", fmt.Sprintf(`images: {jobsManager: {prodDigest: %q}, resourceMonitor: {prodDigest: %q}}`, dJMProd, dRM)},
			reconcile: true,
			images:    map[string]want{"api": {jm + ":dev", ifnp}, "proxy": {jm + ":dev", ifnp}, "resource-monitor": {rm + ":dev", ifnp}},
			targets:   []string{"jobs-manager-api", "jobs-manager-pods-monitor", "requests-proxy-proxy", "resource-monitor-resource-monitor"},
		},
		{
			name:      "explicit digest beats prodDigest and tag (prod)",
			values:    []string{fmt.Sprintf(`images: {jobsManager: {digest: %q, prodDigest: %q, tag: "1.4.2"}}`, dJM, dJMProd)},
			reconcile: true,
			images:    map[string]want{"api": {jm + "@" + dJM, ifnp}, "proxy": {jm + "@" + dJM, ifnp}},
			targets:   []string{"jobs-manager-pods-monitor", "resource-monitor-resource-monitor"},
		},
		{
			name:      "explicit digest beats the channel tag (dev)",
			values:    []string{"env: dev", fmt.Sprintf(`images: {jobsManager: {digest: %q, prodDigest: %q}}`, dJM, dJMProd)},
			reconcile: true,
			images:    map[string]want{"api": {jm + "@" + dJM, ifnp}, "pods-monitor": {pm + ":dev", ifnp}},
			targets:   []string{"jobs-manager-pods-monitor", "resource-monitor-resource-monitor"},
		},
		{
			name:      "explicit tag beats channelTags",
			values:    []string{"env: dev", `images: {jobsManager: {tag: "1.4.2"}}`},
			reconcile: true,
			images:    map[string]want{"api": {jm + ":1.4.2", ifnp}, "proxy": {jm + ":1.4.2", ifnp}},
			targets:   []string{"jobs-manager-api", "jobs-manager-pods-monitor", "requests-proxy-proxy", "resource-monitor-resource-monitor"},
		},
		{
			name: "all images pinned: reconcile retired",
			values: []string{fmt.Sprintf(`
images:
  jobsManager: {digest: %q}
  podsMonitor: {digest: %q}
  resourceMonitor: {digest: %q}`, dJM, dPM, dRM)},
			reconcile: true,
			images: map[string]want{
				"api": {jm + "@" + dJM, ifnp}, "pods-monitor": {pm + "@" + dPM, ifnp},
				"proxy": {jm + "@" + dJM, ifnp}, "resource-monitor": {rm + "@" + dRM, ifnp},
				"upgrade": {tool, always},
			},
			check: func(t *testing.T, r rendered) {
				for _, o := range r.objs {
					if strings.HasSuffix(o.Name, "-reconcile") || strings.Contains(o.Name, "-reconcile-") {
						t.Errorf("retired reconcile still renders %s", o.key())
					}
				}
				if !r.has("CronJob", releaseNs, "rel-example-upgrade") {
					t.Error("auto-upgrade must stay when the reconcile retires")
				}
				if !strings.Contains(r.notes, "Reconcile: retired, every image is pinned.") {
					t.Errorf("NOTES do not say the reconcile retired:\n%s", r.notes)
				}
			},
		},
		{
			name:      "mirror: reconcile still rendered, targets the mirror",
			values:    []string{"global: {imageRegistry: mirror.local:5000}"},
			reconcile: true,
			images: map[string]want{
				"api": {"mirror.local:5000/chartpin/jobs-manager:prod", ifnp}, "pods-monitor": {"mirror.local:5000/chartpin/pods-monitor:prod", ifnp},
				"proxy": {"mirror.local:5000/chartpin/jobs-manager:prod", ifnp}, "resource-monitor": {"mirror.local:5000/chartpin/resource-monitor:prod", ifnp},
				"reconcile": {"mirror.local:5000/chartpin/chartpin:0.1.0", always}, "upgrade": {"mirror.local:5000/chartpin/chartpin:0.1.0", always},
			},
			targets: []string{"jobs-manager-api", "jobs-manager-pods-monitor", "requests-proxy-proxy", "resource-monitor-resource-monitor"},
			follows: map[string]string{"requests-proxy-proxy": "jobs-manager-api"},
			mirror:  "mirror.local:5000",
		},
		{
			name:      "mirror with a path and a pin",
			values:    []string{"global: {imageRegistry: registry.corp/hub}", fmt.Sprintf(`images: {podsMonitor: {digest: %q}}`, dPM)},
			reconcile: true,
			images:    map[string]want{"api": {"registry.corp/hub/chartpin/jobs-manager:prod", ifnp}, "pods-monitor": {"registry.corp/hub/chartpin/pods-monitor@" + dPM, ifnp}},
			targets:   []string{"jobs-manager-api", "requests-proxy-proxy", "resource-monitor-resource-monitor"},
			mirror:    "registry.corp/hub",
		},
		{
			name:   "reconcile disabled: Always everywhere unpinned",
			values: []string{"reconcile: {enabled: false}"},
			check: func(t *testing.T, r rendered) {
				if !strings.Contains(r.notes, "Reconcile: disabled; unpinned images pull Always") {
					t.Errorf("NOTES do not say the reconcile is off:\n%s", r.notes)
				}
			},
			images: map[string]want{
				"api": {jm + ":prod", always}, "pods-monitor": {pm + ":prod", always},
				"proxy": {jm + ":prod", always}, "resource-monitor": {rm + ":prod", always},
			},
		},
		{
			name:   "a pin plus reconcile disabled: split per container",
			values: []string{"reconcile: {enabled: false}", "env: dev", fmt.Sprintf(`images: {jobsManager: {digest: %q}}`, dJM)},
			images: map[string]want{
				"api": {jm + "@" + dJM, ifnp}, "pods-monitor": {pm + ":dev", always},
				"proxy": {jm + "@" + dJM, ifnp}, "resource-monitor": {rm + ":dev", always},
			},
		},
		{
			name:      "resourceMonitor off, other images pinned: retired",
			values:    []string{"resourceMonitor: {enabled: false}", fmt.Sprintf(`images: {jobsManager: {digest: %q}, podsMonitor: {digest: %q}}`, dJM, dPM)},
			reconcile: true,
			images:    map[string]want{"api": {jm + "@" + dJM, ifnp}, "pods-monitor": {pm + "@" + dPM, ifnp}, "proxy": {jm + "@" + dJM, ifnp}},
			check: func(t *testing.T, r rendered) {
				for _, o := range r.objs {
					if o.Namespace == "node-agents" || o.Kind == "Namespace" || o.Kind == "DaemonSet" || o.Kind == "ClusterRole" {
						t.Errorf("resource-monitor is off, yet %s renders", o.key())
					}
				}
			},
		},
		{
			name:      "resourceMonitor off, other images unpinned: kept",
			values:    []string{"resourceMonitor: {enabled: false}"},
			reconcile: true,
			images:    map[string]want{"api": {jm + ":prod", ifnp}, "pods-monitor": {pm + ":prod", ifnp}, "proxy": {jm + ":prod", ifnp}},
			targets:   []string{"jobs-manager-api", "jobs-manager-pods-monitor", "requests-proxy-proxy"},
			check: func(t *testing.T, r rendered) {
				for _, o := range r.objs {
					if o.Namespace == "node-agents" || o.Kind == "Namespace" || o.Kind == "DaemonSet" {
						t.Errorf("resource-monitor is off, yet %s renders", o.key())
					}
				}
			},
		},
		{
			name:      "node-agents namespace equal to the release namespace",
			values:    []string{"nodeAgents: {namespace: prod-ns}"},
			reconcile: true,
			images:    map[string]want{"resource-monitor": {rm + ":prod", ifnp}},
			targets:   []string{"jobs-manager-api", "jobs-manager-pods-monitor", "requests-proxy-proxy", "resource-monitor-resource-monitor"},
			check: func(t *testing.T, r rendered) {
				if r.has("Namespace", "", "prod-ns") || r.has("Namespace", "", "node-agents") {
					t.Error("the collapsed layout must not render a Namespace")
				}
				ds := r.container(t, "resource-monitor")
				if ds.Namespace != releaseNs {
					t.Errorf("DaemonSet in %q, want the release namespace", ds.Namespace)
				}
				// One namespace, so one reconcile Role covering both kinds.
				var role rbacv1.Role
				o, ok := find(r.objs, "Role", releaseNs, "rel-example-reconcile-prod-ns")
				if !ok {
					t.Fatalf("no reconcile Role in %s: %v", releaseNs, keys(r.objs))
				}
				o.into(t, &role)
				got := scopedNames(role)
				wantNames := map[string][]string{"deployments": {"rel-jobs-manager", "rel-requests-proxy"}, "daemonsets": {"rel-resource-monitor"}}
				if fmt.Sprint(got) != fmt.Sprint(wantNames) {
					t.Errorf("collapsed Role scopes %v, want %v", got, wantNames)
				}
			},
		},
		{
			name:      "requests-proxy inherits jobs-manager's digest",
			values:    []string{"env: dev", fmt.Sprintf(`images: {jobsManager: {digest: %q}}`, dJM)},
			reconcile: true,
			images:    map[string]want{"api": {jm + "@" + dJM, ifnp}, "proxy": {jm + "@" + dJM, ifnp}},
			targets:   []string{"jobs-manager-pods-monitor", "resource-monitor-resource-monitor"},
		},
		{
			name:      "requests-proxy overrides jobs-manager's digest",
			values:    []string{"env: dev", fmt.Sprintf(`images: {jobsManager: {digest: %q}, requestsProxy: {digest: %q}}`, dJM, dRP)},
			reconcile: true,
			images:    map[string]want{"api": {jm + "@" + dJM, ifnp}, "proxy": {jm + "@" + dRP, ifnp}},
			targets:   []string{"jobs-manager-pods-monitor", "resource-monitor-resource-monitor"},
		},
		{
			name:      "requests-proxy pinned while jobs-manager floats",
			values:    []string{"env: dev", fmt.Sprintf(`images: {requestsProxy: {digest: %q}}`, dRP)},
			reconcile: true,
			images:    map[string]want{"api": {jm + ":dev", ifnp}, "proxy": {jm + "@" + dRP, ifnp}},
			targets:   []string{"jobs-manager-api", "jobs-manager-pods-monitor", "resource-monitor-resource-monitor"},
		},
		{
			name:      "chartpin's own image pinned",
			values:    []string{fmt.Sprintf(`{reconcile: {image: {digest: %q}}, autoUpgrade: {image: {digest: %q}}}`, dTool, dTool)},
			reconcile: true,
			images: map[string]want{
				"reconcile": {"ghcr.io/chartpin/chartpin@" + dTool, ifnp}, "upgrade": {"ghcr.io/chartpin/chartpin@" + dTool, ifnp},
			},
			targets: []string{"jobs-manager-api", "jobs-manager-pods-monitor", "requests-proxy-proxy", "resource-monitor-resource-monitor"},
		},
		{
			name:      "auto-upgrade from OCI with a long timeout",
			values:    []string{`autoUpgrade: {repo: "oci://ghcr.io/chartpin/charts", chart: edge, timeout: 45m}`},
			reconcile: true,
			targets:   []string{"jobs-manager-api", "jobs-manager-pods-monitor", "requests-proxy-proxy", "resource-monitor-resource-monitor"},
			check: func(t *testing.T, r rendered) {
				var cj batchv1.CronJob
				o, _ := find(r.objs, "CronJob", releaseNs, "rel-example-upgrade")
				o.into(t, &cj)
				args := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args
				for _, a := range []string{"--oci=oci://ghcr.io/chartpin/charts", "--chart=edge", "--timeout=45m"} {
					if !slices.Contains(args, a) {
						t.Errorf("upgrade args %v lack %s", args, a)
					}
				}
				for _, a := range args {
					if strings.HasPrefix(a, "--repo") {
						t.Errorf("an oci:// repository must be passed as --oci, got %s", a)
					}
				}
			},
		},
		{
			name:      "auto-upgrade disabled",
			values:    []string{"autoUpgrade: {enabled: false}"},
			reconcile: true,
			targets:   []string{"jobs-manager-api", "jobs-manager-pods-monitor", "requests-proxy-proxy", "resource-monitor-resource-monitor"},
			check: func(t *testing.T, r rendered) {
				for _, o := range r.objs {
					if strings.Contains(o.Name, "-upgrade") {
						t.Errorf("auto-upgrade is off, yet %s renders", o.key())
					}
				}
			},
		},
		{
			name:      "private registry: pull secrets and a credentials Secret",
			values:    []string{"imagePullSecrets: [regcred, {name: mirror-cred}]", "registryAuth: {secret: chartpin-registry}", "reconcile: {spread: {window: 7m, key: edge-42}}"},
			reconcile: true,
			targets:   []string{"jobs-manager-api", "jobs-manager-pods-monitor", "requests-proxy-proxy", "resource-monitor-resource-monitor"},
			check: func(t *testing.T, r rendered) {
				// Every pod the chart renders pulls with the pull secrets.
				for _, o := range r.objs {
					spec := podSpec(t, o)
					if spec == nil {
						continue
					}
					if got := fmt.Sprint(spec.ImagePullSecrets); got != "[{regcred} {mirror-cred}]" {
						t.Errorf("%s imagePullSecrets %s, want regcred then mirror-cred", o.key(), got)
					}
				}
				// The reconcile reads the workloads' pull secrets in each target
				// namespace (optional, as for the kubelet), then the chart's.
				want := "[{prod-ns regcred true} {prod-ns mirror-cred true} {node-agents regcred true} {node-agents mirror-cred true} {prod-ns chartpin-registry false}]"
				if got := fmt.Sprint(r.targets.PullSecrets); got != want {
					t.Errorf("targets pullSecrets %s, want %s", got, want)
				}
				var cj batchv1.CronJob
				o, _ := find(r.objs, "CronJob", releaseNs, "rel-example-reconcile")
				o.into(t, &cj)
				args := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args
				// 4 targets x 600s x 2 + 60s + 420s spread.
				for _, a := range []string{"--jitter=420s", "--jitter-key=edge-42", "--deadline=5280s"} {
					if !slices.Contains(args, a) {
						t.Errorf("reconcile args %v lack %s", args, a)
					}
				}
				// The upgrade job gets the Secret as its Docker config, read-only.
				o, _ = find(r.objs, "CronJob", releaseNs, "rel-example-upgrade")
				o.into(t, &cj)
				pod := cj.Spec.JobTemplate.Spec.Template.Spec
				c := pod.Containers[0]
				env := map[string]string{}
				for _, e := range c.Env {
					env[e.Name] = e.Value
				}
				mounted := false
				for _, v := range pod.Volumes {
					if v.Secret != nil && v.Secret.SecretName == "chartpin-registry" && len(v.Secret.Items) == 1 && v.Secret.Items[0].Path == "config.json" {
						for _, m := range c.VolumeMounts {
							mounted = mounted || (m.Name == v.Name && m.MountPath == env["DOCKER_CONFIG"] && m.ReadOnly)
						}
					}
				}
				if !mounted {
					t.Errorf("upgrade job: chartpin-registry is not mounted read-only at DOCKER_CONFIG %q", env["DOCKER_CONFIG"])
				}
			},
		},
		{
			name:      "another release namespace and a long rollout timeout",
			ns:        "edge-7",
			values:    []string{"reconcile: {rolloutTimeout: 1h30m, maxAttempts: 5, maxSkips: 0}"},
			reconcile: true,
			targets:   []string{"jobs-manager-api", "jobs-manager-pods-monitor", "requests-proxy-proxy", "resource-monitor-resource-monitor"},
			check: func(t *testing.T, r rendered) {
				var cj batchv1.CronJob
				o, _ := find(r.objs, "CronJob", "edge-7", "rel-example-reconcile")
				o.into(t, &cj)
				args := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args
				for _, a := range []string{"--rollout-timeout=1h30m", "--max-attempts=5", "--max-skips=0"} {
					if !slices.Contains(args, a) {
						t.Errorf("reconcile args %v lack %s", args, a)
					}
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := tc.ns
			if ns == "" {
				ns = releaseNs
			}
			r := render(t, ns, append([]string{unpinned}, tc.values...)...)
			for name, w := range tc.images {
				c := r.container(t, name)
				if c.Image != w.image || c.Policy != w.policy {
					t.Errorf("container %s: %s %s, want %s %s", c.slot(), c.Image, c.Policy, w.image, w.policy)
				}
			}
			if got := r.targetIDs(); !slices.Equal(got, tc.targets) {
				t.Errorf("reconcile targets %v, want %v", got, tc.targets)
			}
			if r.targets != nil {
				if r.targets.Mirror != tc.mirror {
					t.Errorf("targets mirror %q, want %q", r.targets.Mirror, tc.mirror)
				}
				for _, tg := range r.targets.Targets {
					if want, ok := tc.follows[tg.ID]; ok && tg.Follows != want {
						t.Errorf("target %s follows %q, want %q", tg.ID, tg.Follows, want)
					}
				}
			}
			checkInvariants(t, r, tc.reconcile)
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
}

// checkInvariants holds on every render: no duplicate objects; no image
// IfNotPresent without a digest or a reconcile target; reconcile targets and
// rendered containers agree both ways; RBAC as narrow as Kubernetes allows;
// deadlines derived from the work.
func checkInvariants(t *testing.T, r rendered, reconcileEnabled bool) {
	t.Helper()
	seen := map[string]bool{}
	for _, o := range r.objs {
		if seen[o.key()] {
			t.Errorf("duplicate object %s", o.key())
		}
		seen[o.key()] = true
	}

	targetBySlot := map[string]target{}
	targetByID := map[string]target{}
	if r.targets != nil {
		if len(r.targets.Targets) == 0 {
			t.Error("a rendered targets.yaml lists no target: it should have retired")
		}
		for _, tg := range r.targets.Targets {
			slot := tg.Kind + "/" + tg.Namespace + "/" + tg.Name + "/" + tg.Container
			if _, dup := targetByID[tg.ID]; dup {
				t.Errorf("target id %s twice", tg.ID)
			}
			if _, dup := targetBySlot[slot]; dup {
				t.Errorf("container %s targeted twice", slot)
			}
			targetByID[tg.ID], targetBySlot[slot] = tg, tg
			if (tg.Image == "") == (tg.Follows == "") {
				t.Errorf("target %s must have exactly one of image and follows: %+v", tg.ID, tg)
			}
			if !slices.Contains([]string{"Deployment", "DaemonSet", "StatefulSet"}, tg.Kind) {
				t.Errorf("target %s has kind %s", tg.ID, tg.Kind)
			}
		}
	}

	// The global pull-policy invariant, CronJob images included.
	workloadBySlot := map[string]container{}
	for _, c := range r.containers {
		pinned := strings.Contains(c.Image, "@sha256:")
		switch c.Policy {
		case ifnp:
			if _, targeted := targetBySlot[c.slot()]; !pinned && !targeted {
				t.Errorf("%s renders %s IfNotPresent with no digest and no reconcile target: frozen forever", c.slot(), c.Image)
			}
		case always:
		default:
			t.Errorf("%s has imagePullPolicy %q; every container must set Always or IfNotPresent explicitly", c.slot(), c.Policy)
		}
		if strings.HasSuffix(c.Image, ":latest") || !strings.Contains(c.Image, "/") {
			t.Errorf("%s image %q is not a fully qualified release reference", c.slot(), c.Image)
		}
		if c.Kind == "CronJob" {
			if _, targeted := targetBySlot[c.slot()]; targeted {
				t.Errorf("a CronJob container %s is a reconcile target", c.slot())
			}
			continue
		}
		workloadBySlot[c.slot()] = c
		// Vice versa: an unpinned workload container is a target whenever
		// the reconcile is on (and then the reconcile is rendered).
		if _, targeted := targetBySlot[c.slot()]; reconcileEnabled && !pinned && !targeted {
			t.Errorf("%s runs the floating %s but is no reconcile target", c.slot(), c.Image)
		}
		if _, targeted := targetBySlot[c.slot()]; pinned && targeted {
			t.Errorf("%s is pinned (%s) yet a reconcile target", c.slot(), c.Image)
		}
	}
	// Every target names a container the chart renders, with its image.
	for slot, tg := range targetBySlot {
		c, ok := workloadBySlot[slot]
		if !ok {
			t.Errorf("target %s names %s, which the chart does not render", tg.ID, slot)
			continue
		}
		if tg.Image != "" && tg.Image != c.Image {
			t.Errorf("target %s image %s, but the chart renders %s", tg.ID, tg.Image, c.Image)
		}
		if tg.Follows != "" {
			leader, ok := targetByID[tg.Follows]
			switch {
			case !ok:
				t.Errorf("target %s follows unknown target %s", tg.ID, tg.Follows)
			case leader.Follows != "":
				t.Errorf("target %s follows %s, itself a follower", tg.ID, tg.Follows)
			case leader.Image != c.Image:
				t.Errorf("target %s follows %s (%s) but renders %s", tg.ID, leader.ID, leader.Image, c.Image)
			}
		}
	}

	for _, o := range r.objs {
		if o.Kind == "DaemonSet" {
			var ds appsv1.DaemonSet
			o.into(t, &ds)
			ru := ds.Spec.UpdateStrategy.RollingUpdate
			if ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.String() != "10%" {
				t.Errorf("%s: maxUnavailable must be 10%% so a rollout converges within rolloutTimeout", o.key())
			}
		}
		checkPodSecurity(t, o)
	}

	checkReconcileObjects(t, r)
	checkUpgradeObjects(t, r)
	checkNoWildcards(t, r)
}

// podSpec is the pod template of a workload object; nil for other kinds.
func podSpec(t *testing.T, o object) *corev1.PodSpec {
	t.Helper()
	switch o.Kind {
	case "Deployment":
		var d appsv1.Deployment
		o.into(t, &d)
		return &d.Spec.Template.Spec
	case "DaemonSet":
		var d appsv1.DaemonSet
		o.into(t, &d)
		return &d.Spec.Template.Spec
	case "StatefulSet":
		var d appsv1.StatefulSet
		o.into(t, &d)
		return &d.Spec.Template.Spec
	case "CronJob":
		var c batchv1.CronJob
		o.into(t, &c)
		return &c.Spec.JobTemplate.Spec.Template.Spec
	}
	return nil
}

// checkPodSecurity: every pod the chart renders meets the restricted profile.
func checkPodSecurity(t *testing.T, o object) {
	t.Helper()
	spec := podSpec(t, o)
	if spec == nil {
		return
	}
	ps := spec.SecurityContext
	if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.SeccompProfile == nil || ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: pod security context is not restricted: %+v", o.key(), ps)
	}
	for _, c := range spec.Containers {
		sc := c.SecurityContext
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			t.Errorf("%s container %s: security context is not restricted", o.key(), c.Name)
		}
	}
}

// scopedNames maps resource -> resourceNames of a Role's get/patch rules.
func scopedNames(role rbacv1.Role) map[string][]string {
	out := map[string][]string{}
	for _, rule := range role.Rules {
		if len(rule.ResourceNames) == 0 {
			continue
		}
		for _, res := range rule.Resources {
			out[res] = append(out[res], rule.ResourceNames...)
			sort.Strings(out[res])
		}
	}
	return out
}

var kindResource = map[string]string{"Deployment": "deployments", "DaemonSet": "daemonsets", "StatefulSet": "statefulsets"}

// checkReconcileObjects: the reconcile's CronJob, ConfigMap, ServiceAccount and
// Roles render together or not at all, and say exactly what the targets need.
func checkReconcileObjects(t *testing.T, r rendered) {
	t.Helper()
	name := r.base + "-reconcile"
	cjObj, hasCJ := find(r.objs, "CronJob", r.ns, name)
	_, hasSA := find(r.objs, "ServiceAccount", r.ns, name)
	_, hasCM := find(r.objs, "ConfigMap", r.ns, name)
	if r.targets == nil {
		if hasCJ || hasSA || hasCM {
			t.Errorf("no targets.yaml, yet reconcile objects render: CronJob %v ServiceAccount %v ConfigMap %v", hasCJ, hasSA, hasCM)
		}
		for _, o := range r.objs {
			if (o.Kind == "Role" || o.Kind == "RoleBinding") && strings.HasPrefix(o.Name, name) {
				t.Errorf("retired reconcile still renders %s", o.key())
			}
		}
		return
	}
	if !hasCJ || !hasSA || !hasCM {
		t.Fatalf("targets.yaml renders without its CronJob %v / ServiceAccount %v / ConfigMap %v", hasCJ, hasSA, hasCM)
	}
	var cj batchv1.CronJob
	cjObj.into(t, &cj)
	if cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
		t.Errorf("reconcile concurrencyPolicy %q, want Forbid", cj.Spec.ConcurrencyPolicy)
	}
	pod := cj.Spec.JobTemplate.Spec.Template.Spec
	if pod.ServiceAccountName != name {
		t.Errorf("reconcile runs as %q, want %q", pod.ServiceAccountName, name)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("reconcile pod has %d containers", len(pod.Containers))
	}
	c := pod.Containers[0]
	if !slices.Equal(c.Command, []string{"chartpin"}) || len(c.Args) == 0 || c.Args[0] != "reconcile" {
		t.Errorf("reconcile runs %v %v, want chartpin reconcile", c.Command, c.Args)
	}
	flags := map[string]string{}
	for _, a := range c.Args[1:] {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			t.Errorf("reconcile arg %q is not --flag=value", a)
		}
		flags[k] = v
	}
	if flags["--targets"] != "/etc/chartpin/targets.yaml" {
		t.Errorf("--targets=%q", flags["--targets"])
	}
	for _, f := range []string{"--rollout-timeout", "--max-attempts", "--max-skips", "--deadline"} {
		if flags[f] == "" {
			t.Errorf("reconcile lacks %s: %v", f, c.Args)
		}
	}
	rollout, err := time.ParseDuration(flags["--rollout-timeout"])
	if err != nil {
		t.Fatalf("--rollout-timeout: %v", err)
	}
	deadline, err := time.ParseDuration(flags["--deadline"])
	if err != nil {
		t.Fatalf("--deadline: %v", err)
	}
	work := time.Duration(len(r.targets.Targets)) * rollout
	active := time.Duration(*cj.Spec.JobTemplate.Spec.ActiveDeadlineSeconds) * time.Second
	// Slack on both sides (docs/design.md#deadlines-with-slack): the tick's own deadline leaves at
	// least 50% over the sequential worst case, and the Job outlives it.
	if deadline < work+work/2 || active <= deadline {
		t.Errorf("%d targets x %s: --deadline %s, activeDeadlineSeconds %s; want deadline >= 1.5 x work and the Job deadline above it", len(r.targets.Targets), rollout, deadline, active)
	}
	if b := cj.Spec.JobTemplate.Spec.BackoffLimit; b == nil || *b != 0 {
		t.Errorf("reconcile backoffLimit %v, want 0 (the next tick retries)", b)
	}
	mounted := false
	for _, v := range pod.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == name {
			for _, m := range c.VolumeMounts {
				if m.Name == v.Name && m.MountPath == "/etc/chartpin" && m.ReadOnly {
					mounted = true
				}
			}
		}
	}
	if !mounted {
		t.Error("the targets ConfigMap is not mounted read-only at /etc/chartpin")
	}
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("reconcile container root filesystem is writable")
	}

	// RBAC: per target namespace one Role, distinct names, bound to the SA.
	wantNames := map[string]map[string][]string{} // ns -> resource -> names
	for _, tg := range r.targets.Targets {
		if wantNames[tg.Namespace] == nil {
			wantNames[tg.Namespace] = map[string][]string{}
		}
		res := kindResource[tg.Kind]
		if !slices.Contains(wantNames[tg.Namespace][res], tg.Name) {
			wantNames[tg.Namespace][res] = append(wantNames[tg.Namespace][res], tg.Name)
			sort.Strings(wantNames[tg.Namespace][res])
		}
	}
	// Exactly the pull secrets the targets file names, per namespace.
	for _, s := range r.targets.PullSecrets {
		if wantNames[s.Namespace] == nil {
			wantNames[s.Namespace] = map[string][]string{}
		}
		if !slices.Contains(wantNames[s.Namespace]["secrets"], s.Name) {
			wantNames[s.Namespace]["secrets"] = append(wantNames[s.Namespace]["secrets"], s.Name)
			sort.Strings(wantNames[s.Namespace]["secrets"])
		}
	}
	roleNames := map[string]bool{}
	rolesByNs := map[string]int{}
	for _, o := range r.objs {
		if o.Kind != "Role" || !strings.HasPrefix(o.Name, name) {
			continue
		}
		rolesByNs[o.Namespace]++
		if roleNames[o.Name] {
			t.Errorf("two reconcile Roles named %s", o.Name)
		}
		roleNames[o.Name] = true
		var role rbacv1.Role
		o.into(t, &role)
		want, ok := wantNames[o.Namespace]
		if !ok {
			t.Errorf("reconcile Role %s in %s, which has no target", o.Name, o.Namespace)
			continue
		}
		if got := scopedNames(role); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("Role %s scopes get/patch to %v, want exactly %v", o.key(), got, want)
		}
		for _, rule := range role.Rules {
			write := slices.ContainsFunc(rule.Verbs, func(v string) bool { return v != "get" && v != "list" && v != "watch" })
			if len(rule.ResourceNames) > 0 {
				want := []string{"get", "patch"}
				if slices.Equal(rule.Resources, []string{"secrets"}) {
					want = []string{"get"}
				}
				if !slices.Equal(rule.Verbs, want) {
					t.Errorf("Role %s: scoped rule verbs %v on %v, want %v", o.key(), rule.Verbs, rule.Resources, want)
				}
				continue
			}
			if write && !(slices.Equal(rule.Resources, []string{"events"}) && slices.Equal(rule.Verbs, []string{"create"})) {
				t.Errorf("Role %s: unscoped rule %v on %v may write", o.key(), rule.Verbs, rule.Resources)
			}
			if slices.Contains(rule.Resources, "pods") && !slices.Equal(rule.Verbs, []string{"list"}) {
				t.Errorf("Role %s: pods verbs %v, want list", o.key(), rule.Verbs)
			}
		}
		// Exactly what chartpin reconcile calls in this namespace, nothing more:
		// the workloads are only read by name (get), never listed or watched.
		var need, got []string
		for res := range want {
			switch res {
			case "secrets":
				need = append(need, "/secrets get")
			default:
				need = append(need, "apps/"+res+" get", "apps/"+res+" patch", "/pods list", "/events create")
			}
		}
		for _, rule := range role.Rules {
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					for _, v := range rule.Verbs {
						got = append(got, g+"/"+res+" "+v)
					}
				}
			}
		}
		slices.Sort(need)
		slices.Sort(got)
		if need, got = slices.Compact(need), slices.Compact(got); !slices.Equal(got, need) {
			t.Errorf("Role %s grants %v, want exactly %v", o.key(), got, need)
		}
		var rb rbacv1.RoleBinding
		bo, ok := find(r.objs, "RoleBinding", o.Namespace, o.Name)
		if !ok {
			t.Errorf("Role %s is not bound", o.key())
			continue
		}
		bo.into(t, &rb)
		if rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != o.Name || len(rb.Subjects) != 1 ||
			rb.Subjects[0].Kind != "ServiceAccount" || rb.Subjects[0].Name != name || rb.Subjects[0].Namespace != r.ns {
			t.Errorf("RoleBinding %s binds %+v to %+v, want Role %s to ServiceAccount %s/%s", bo.key(), rb.RoleRef, rb.Subjects, o.Name, r.ns, name)
		}
	}
	for ns := range wantNames {
		if rolesByNs[ns] != 1 {
			t.Errorf("namespace %s has %d reconcile Roles, want 1", ns, rolesByNs[ns])
		}
	}
}

// checkUpgradeObjects: the auto-upgrade CronJob's deadline never undercuts
// the upgrade timeout, and its RBAC is namespaced except for rules the chart
// declares, each scoped by name.
func checkUpgradeObjects(t *testing.T, r rendered) {
	t.Helper()
	name := r.base + "-upgrade"
	o, ok := find(r.objs, "CronJob", r.ns, name)
	if !ok {
		return
	}
	var cj batchv1.CronJob
	o.into(t, &cj)
	if cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
		t.Errorf("upgrade concurrencyPolicy %q, want Forbid", cj.Spec.ConcurrencyPolicy)
	}
	pod := cj.Spec.JobTemplate.Spec.Template.Spec
	c := pod.Containers[0]
	if pod.ServiceAccountName != name || !slices.Equal(c.Command, []string{"chartpin"}) || c.Args[0] != "upgrade" {
		t.Errorf("upgrade runs %v %v as %s", c.Command, c.Args, pod.ServiceAccountName)
	}
	var timeout time.Duration
	for _, want := range []string{"--release=" + releaseName, "--namespace=" + r.ns, "--chart=", "--timeout="} {
		found := false
		for _, a := range c.Args {
			if strings.HasPrefix(a, want) {
				found = true
				if want == "--timeout=" {
					var err error
					if timeout, err = time.ParseDuration(strings.TrimPrefix(a, want)); err != nil {
						t.Errorf("upgrade %s: %v", a, err)
					}
				}
			}
		}
		if !found {
			t.Errorf("upgrade args %v lack %s", c.Args, want)
		}
	}
	active := time.Duration(*cj.Spec.JobTemplate.Spec.ActiveDeadlineSeconds) * time.Second
	if active <= 3*timeout {
		t.Errorf("upgrade activeDeadlineSeconds %s undercuts a rollback, an upgrade and its atomic rollback of %s each", active, timeout)
	}

	// Every upgrade Role must hold every permission of the reconcile Role in
	// its namespace, or helm upgrade could not re-create that Role.
	for _, ro := range r.objs {
		if ro.Kind != "Role" || !strings.HasPrefix(ro.Name, r.base+"-reconcile") {
			continue
		}
		uo, ok := find(r.objs, "Role", ro.Namespace, name+"-"+ro.Namespace)
		if !ok {
			t.Errorf("no upgrade Role in %s, where the chart renders %s", ro.Namespace, ro.key())
			continue
		}
		var rec, up rbacv1.Role
		ro.into(t, &rec)
		uo.into(t, &up)
		for _, rule := range rec.Rules {
			for _, res := range rule.Resources {
				for _, verb := range rule.Verbs {
					ok := grants(up.Rules, rule.APIGroups[0], res, verb)
					if len(rule.ResourceNames) > 0 {
						ok = true
						for _, n := range rule.ResourceNames {
							ok = ok && grantsNamed(up.Rules, rule.APIGroups[0], res, verb, n)
						}
					}
					if !ok {
						t.Errorf("upgrade Role %s lacks %s %s/%s that %s grants: helm upgrade would be refused", uo.key(), verb, rule.APIGroups[0], res, ro.key())
					}
				}
			}
		}
	}
	// Auto-upgrade can apply this very chart again: its ServiceAccount may
	// manage every object the chart renders, where the chart renders it.
	var upRoles = map[string][]rbacv1.PolicyRule{} // namespace ("" = cluster) -> rules
	for _, o := range r.objs {
		if (o.Kind == "Role" || o.Kind == "ClusterRole") && (strings.HasPrefix(o.Name, name) || strings.HasSuffix(o.Name, "-"+name)) {
			var role rbacv1.ClusterRole
			o.into(t, &role)
			upRoles[o.Namespace] = append(upRoles[o.Namespace], role.Rules...)
		}
	}
	resourceOf := map[string][2]string{
		"ServiceAccount": {"", "serviceaccounts"}, "ConfigMap": {"", "configmaps"}, "Service": {"", "services"},
		"Namespace": {"", "namespaces"}, "Deployment": {"apps", "deployments"}, "DaemonSet": {"apps", "daemonsets"},
		"StatefulSet": {"apps", "statefulsets"}, "CronJob": {"batch", "cronjobs"},
		"Role": {"rbac.authorization.k8s.io", "roles"}, "RoleBinding": {"rbac.authorization.k8s.io", "rolebindings"},
		"ClusterRole": {"rbac.authorization.k8s.io", "clusterroles"}, "ClusterRoleBinding": {"rbac.authorization.k8s.io", "clusterrolebindings"},
	}
	for _, o := range r.objs {
		res, ok := resourceOf[o.Kind]
		if !ok {
			t.Errorf("%s: the test does not know which resource auto-upgrade needs for it", o.key())
			continue
		}
		verbs := []string{"get", "patch", "update"}
		if o.Namespace != "" {
			verbs = append(verbs, "create", "delete")
		}
		for _, verb := range verbs {
			if !grantsNamed(upRoles[o.Namespace], res[0], res[1], verb, o.Name) {
				t.Errorf("auto-upgrade may not %s %s: helm upgrade of this chart would be refused", verb, o.key())
			}
		}
	}
	for _, o := range r.objs {
		switch o.Kind {
		case "ClusterRole":
			var cr rbacv1.ClusterRole
			o.into(t, &cr)
			for _, rule := range cr.Rules {
				if len(rule.ResourceNames) == 0 {
					t.Errorf("ClusterRole %s has an unscoped rule %+v", o.Name, rule)
				}
			}
		case "ClusterRoleBinding", "RoleBinding":
			var rb rbacv1.RoleBinding
			o.into(t, &rb)
			if rb.RoleRef.Kind == "ClusterRole" && rb.RoleRef.Name != o.Name {
				t.Errorf("%s binds the foreign ClusterRole %s", o.key(), rb.RoleRef.Name)
			}
		}
	}
}

// grantsNamed: a rule allows verb on the named object (unscoped, or scoped to it).
func grantsNamed(rules []rbacv1.PolicyRule, group, resource, verb, name string) bool {
	for _, r := range rules {
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) &&
			(len(r.ResourceNames) == 0 || slices.Contains(r.ResourceNames, name)) {
			return true
		}
	}
	return false
}

func grants(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	for _, r := range rules {
		if len(r.ResourceNames) == 0 && slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
			return true
		}
	}
	return false
}

// checkNoWildcards: no RBAC rule anywhere uses "*".
func checkNoWildcards(t *testing.T, r rendered) {
	t.Helper()
	for _, o := range r.objs {
		if o.Kind != "Role" && o.Kind != "ClusterRole" {
			continue
		}
		var role rbacv1.ClusterRole
		o.into(t, &role)
		for _, rule := range role.Rules {
			for _, s := range slices.Concat(rule.APIGroups, rule.Resources, rule.Verbs) {
				if s == "*" {
					t.Errorf("%s grants a wildcard: %+v", o.key(), rule)
				}
			}
			if slices.Contains(rule.Verbs, "escalate") || slices.Contains(rule.Verbs, "bind") || slices.Contains(rule.Verbs, "impersonate") {
				t.Errorf("%s grants %v", o.key(), rule.Verbs)
			}
		}
	}
}

// TestReleaseRollsOnlyWhatChanged: a new chart version whose only change is
// one image's pin must change that image's pod templates and no other, or
// every edge would restart (and pull) every pod on each release.
func TestReleaseRollsOnlyWhatChanged(t *testing.T) {
	podTemplates := func(version, pins string) map[string]string {
		c := loadExample(t)
		c.Metadata.Version, c.Metadata.AppVersion = version, version
		manifest, _, err := installDryRun(c, releaseNs, parseValues(t, unpinned, pins))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, o := range parseManifest(t, manifest) {
			if o.Kind != "Deployment" && o.Kind != "DaemonSet" {
				continue
			}
			spec, _ := o.Map["spec"].(map[string]any)
			b, err := yaml.Marshal(spec["template"])
			if err != nil {
				t.Fatal(err)
			}
			out[o.key()] = string(b)
		}
		return out
	}
	before := podTemplates("0.1.0", fmt.Sprintf(`images: {podsMonitor: {prodDigest: %q}, resourceMonitor: {prodDigest: %q}}`, dPM, dRM))
	after := podTemplates("0.1.1", fmt.Sprintf(`images: {podsMonitor: {prodDigest: %q}, resourceMonitor: {prodDigest: %q}}`, dPM, digest('9')))
	if len(before) != 3 {
		t.Fatalf("rendered workloads %v", before)
	}
	for k, b := range before {
		changed := after[k] != b
		if want := k == "DaemonSet/node-agents/rel-resource-monitor"; changed != want {
			t.Errorf("%s pod template changed=%v across a release that moved only resource-monitor's pin", k, changed)
		}
	}
}

// BenchmarkRenderExample measures one client-side install render of the
// example chart (the library's helpers recompute the plan at every call site).
func BenchmarkRenderExample(b *testing.B) {
	c := loadExample(b)
	vals := parseValues(b, unpinned, "env: dev")
	for b.Loop() {
		if _, _, err := installDryRun(c, releaseNs, vals); err != nil {
			b.Fatal(err)
		}
	}
}
