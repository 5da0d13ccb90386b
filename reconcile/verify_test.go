package reconcile

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/chartpin/chartpin/internal/cosigned"
	"github.com/chartpin/chartpin/internal/cosigned/keyless"
	"github.com/chartpin/chartpin/internal/kubetest"
	"github.com/chartpin/chartpin/internal/registrytest"
	"github.com/chartpin/chartpin/resolver"
	"github.com/chartpin/chartpin/signature"
)

// verifyTargets is a targets file with one target under verify: (its
// fields as the chart renders them: block scalars for the PEM and the
// trusted root).
func verifyTargets(image string, verify map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "targets:\n  - id: app\n    kind: Deployment\n    namespace: %s\n    name: app\n    container: app\n    image: %q\n    verify:\n", ns, image)
	for _, k := range []string{"identity", "issuer"} {
		if v, ok := verify[k]; ok {
			fmt.Fprintf(&b, "      %s: %q\n", k, v)
		}
	}
	for _, k := range []string{"key", "trustedRoot"} {
		if v, ok := verify[k]; ok {
			fmt.Fprintf(&b, "      %s: |\n        %s\n", k, strings.ReplaceAll(strings.TrimSpace(v), "\n", "\n        "))
		}
	}
	return b.String()
}

// On a real API server: a tag moved to an unsigned digest is refused (no
// patch reaches the server, a ReimageRefused Warning says why, the tick
// fails); once that digest is signed by the target's key, the next tick
// rolls it out. Each tick looks the new digest's signature up once.
func TestVerifyOnRealAPIServer(t *testing.T) {
	key, err := cosigned.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	verifyRollout(t, verifyCase{
		verify: map[string]string{"key": string(key.PublicPEM())},
		sign: func(repo, digest string) error {
			_, err := key.Push(repo, digest, []name.Option{name.Insecure})
			return err
		},
		refusal: "has no signature", refusedReads: [2]int{1, 1},
	})
}

// The same under a keyless policy, the trusted root's text in targets.yaml
// as the chart renders it: a digest signed by another identity of the same
// Sigstore is refused, one signed by the target's identity rolls out.
func TestVerifyKeylessOnRealAPIServer(t *testing.T) {
	const identity, issuer = "https://github.com/acme/app/.github/workflows/release.yaml@refs/heads/main", "https://token.actions.githubusercontent.com"
	ss, err := keyless.New()
	if err != nil {
		t.Fatal(err)
	}
	tr, err := ss.TrustedRoot()
	if err != nil {
		t.Fatal(err)
	}
	as := func(id string) func(repo, digest string) error {
		return func(repo, digest string) error {
			_, err := ss.Push(id, issuer, repo, digest, []name.Option{name.Insecure})
			return err
		}
	}
	verifyRollout(t, verifyCase{
		verify:  map[string]string{"identity": identity, "issuer": issuer, "trustedRoot": string(tr)},
		sign:    as(identity),
		refuse:  as("https://github.com/mallory/app/.github/workflows/release.yaml@refs/heads/main"),
		refusal: "expected SAN value", refusedReads: [2]int{1, 1},
	})
}

type verifyCase struct {
	verify map[string]string
	// refuse, when set, signs the new digest so that the policy refuses it.
	refuse, sign func(repo, digest string) error
	// refusal is in the refused tick's error; refusedReads are its
	// signature tag and referrers reads.
	refusal      string
	refusedReads [2]int
}

func verifyRollout(t *testing.T, vc verifyCase) {
	srv := kubetest.Start(t)
	ctx := context.Background()
	admin := srv.Client(t, kubetest.AdminToken)
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	reg := registrytest.New(t)
	image := reg.Host + "/team/app:1.0"
	old := reg.PushIndex(t, "team/app", "1.0", "linux/amd64")
	mustCreate(t, admin, deployment(ns, "app", 1, containers("app", image)))
	ctl := &kubetest.Controllers{Client: admin, Namespaces: []string{ns}, Pull: func(image string) (string, error) {
		return old, nil // the tag pulled the previous build
	}}
	ctl.Start(t, ctx)
	f, err := ParseTargets("targets.yaml", []byte(verifyTargets(image, vc.verify)))
	if err != nil {
		t.Fatal(err)
	}
	api := srv.Proxy(t)
	client, err := kubernetes.NewForConfig(api.Config(kubetest.AdminToken))
	if err != nil {
		t.Fatal(err)
	}
	tick := func() (*Result, error) {
		res, err := resolver.New(resolver.Options{InsecureRegistries: []string{reg.Host}})
		if err != nil {
			t.Fatal(err)
		}
		r, err := New(client, res, options(func(o *Options) {
			o.Signatures, o.PollInterval, o.RolloutTimeout = signature.NewChecker(res), 20*time.Millisecond, 30*time.Second
		}))
		if err != nil {
			t.Fatal(err)
		}
		reg.Reset()
		api.Reset()
		return r.Tick(ctx, f)
	}
	sigReads := func() (tags, referrers int) {
		for _, q := range reg.Requests() {
			if q.Method == http.MethodGet && strings.HasSuffix(q.Path, ".sig") {
				tags++
			}
		}
		return tags, reg.CountPath(http.MethodGet, "/referrers/")
	}

	unsigned := reg.PushIndex(t, "team/app", "1.0", "linux/arm64")
	if vc.refuse != nil {
		if err := vc.refuse(reg.Host+"/team/app", unsigned); err != nil {
			t.Fatal(err)
		}
	}
	res, err := tick()
	edits := kubetest.Edits(api.Reset())
	if err == nil || !strings.Contains(err.Error(), "Deployment "+ns+"/app was not re-imaged") || !strings.Contains(err.Error(), vc.refusal) {
		t.Fatalf("refused digest: tick error %v, want a refusal saying %q", err, vc.refusal)
	}
	if len(res.Decisions) != 1 || res.Decisions[0].Action != ActionRefuse || len(res.Patched) != 0 {
		t.Errorf("refused digest: decisions %+v, patched %v; want one refusal, no patch", res.Decisions, res.Patched)
	}
	for _, e := range edits {
		if !strings.HasPrefix(e, "POST /api/v1/namespaces/"+ns+"/events") {
			t.Errorf("refused digest: the API server saw %s; want only the Event", e)
		}
	}
	if tags, refs := sigReads(); tags != vc.refusedReads[0] || refs != vc.refusedReads[1] {
		t.Errorf("refused digest: %d signature tag reads and %d referrers reads, want %v: %v", tags, refs, vc.refusedReads, reg.Requests())
	}
	d, err := admin.AppsV1().Deployments(ns).Get(ctx, "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Spec.Template.Spec.Containers[0].Image; got != image {
		t.Errorf("refused digest: the workload runs %s, want %s untouched", got, image)
	}
	if _, ok := d.Annotations[AttemptsAnnotation]; ok {
		t.Errorf("a refusal counted an attempt: %v", d.Annotations)
	}
	evs, err := admin.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=ReimageRefused"})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs.Items) != 1 || evs.Items[0].Type != corev1.EventTypeWarning || !strings.Contains(evs.Items[0].Message, unsigned) {
		t.Errorf("ReimageRefused events %+v, want one Warning naming %s", evs.Items, unsigned)
	}

	if err := vc.sign(reg.Host+"/team/app", unsigned); err != nil {
		t.Fatal(err)
	}
	res, err = tick()
	if err != nil {
		t.Fatalf("signed digest: %v", err)
	}
	if len(res.Patched) != 1 || len(res.RolledOut) != 1 {
		t.Errorf("signed digest: patched %v, rolled out %v; want the workload", res.Patched, res.RolledOut)
	}
	if tags, refs := sigReads(); tags != 1 || refs != 0 {
		t.Errorf("signed digest: %d signature tag reads and %d referrers reads, want 1 and 0", tags, refs)
	}
	d, err = admin.AppsV1().Deployments(ns).Get(ctx, "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := d.Spec.Template.Spec.Containers[0].Image, reg.Host+"/team/app@"+unsigned; got != want {
		t.Errorf("signed digest: the workload runs %s, want %s", got, want)
	}
	if err := ctl.Err(); err != nil {
		t.Error(err)
	}
}

// A verify key that is no PEM public key, a keyless policy with a key or
// missing its issuer or trusted root, or verify: on a follower, is an input
// error naming the file and line.
func TestVerifyTargetsRejected(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"targets:\n  - {id: a, kind: Deployment, namespace: n, name: w, container: c, image: r.example/app:1, verify: {key: nope}}\n",
			`targets.yaml:2: target "a" verify.key: not a PEM public key`},
		{"targets:\n  - {id: a, kind: Deployment, namespace: n, name: w, container: c, image: r.example/app:1}\n" +
			"  - {id: b, kind: Deployment, namespace: n, name: w, container: d, follows: a, verify: {key: nope}}\n",
			`targets.yaml:3: target "b": verify: on a target that follows "a"`},
		{"targets:\n  - {id: a, kind: Deployment, namespace: n, name: w, container: c, image: r.example/app:1, verify: {key: k, identity: me}}\n",
			`targets.yaml:2: target "a": verify: has key and a keyless identity`},
		{"targets:\n  - {id: a, kind: Deployment, namespace: n, name: w, container: c, image: r.example/app:1, verify: {identity: me, issuer: https://issuer.example}}\n",
			`targets.yaml:2: target "a": verify: identity needs trustedRoot`},
		{"targets:\n  - {id: a, kind: Deployment, namespace: n, name: w, container: c, image: r.example/app:1, verify: {identity: me, trustedRoot: \"{}\"}}\n",
			`targets.yaml:2: target "a" verify.trustedRoot: keyless verification needs both an identity and an issuer`},
		{"targets:\n  - {id: a, kind: Deployment, namespace: n, name: w, container: c, image: r.example/app:1, verify: {identity: me, issuer: https://issuer.example, trustedRoot: nope}}\n",
			`reading trusted root targets.yaml:2: target "a" verify.trustedRoot`},
		{"targets:\n  - {id: a, kind: Deployment, namespace: n, name: w, container: c, image: r.example/app:1, verify: {}}\n",
			`targets.yaml:2: target "a": verify: needs key (a PEM public key) or identity, issuer and trustedRoot`},
	} {
		_, err := ParseTargets("targets.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
}
