package reconcile

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/internal/registrytest"
	"github.com/chartpin/chartpin/resolver"
)

// dockerConfigSecret is what `kubectl create secret docker-registry` makes.
func dockerConfigSecret(ns, secretName string, auths map[string][2]string) *corev1.Secret {
	cfg := map[string]map[string]map[string]string{"auths": {}}
	for host, up := range auths {
		cfg["auths"][host] = map[string]string{
			"username": up[0], "password": up[1],
			"auth": base64.StdEncoding.EncodeToString([]byte(up[0] + ":" + up[1])),
		}
	}
	data, _ := json.Marshal(cfg)
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secretName},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: data},
	}
}

// The kubelet's matching: most specific key first, host globs per label,
// port and path prefix, /v1/ and /v2/ meaning the host, index.docker.io for
// Docker Hub images.
func TestPullSecretsMatchLikeTheKubelet(t *testing.T) {
	s := dockerConfigSecret("ns", "regcred", map[string][2]string{
		"registry.example.com":             {"host", "p1"},
		"registry.example.com/team-a":      {"team-a", "p2"},
		"https://*.mirror.example.com/v2/": {"glob", "p3"},
		"127.0.0.1:5000":                   {"port", "p4"},
		"https://index.docker.io/v1/":      {"hub", "p5"},
		"http://plain.example.com":         {"plain", "p6"},
	})
	entries, err := dockerConfigEntries(s)
	if err != nil {
		t.Fatal(err)
	}
	kc := NewPullSecrets()
	kc.set(entries)
	for _, tc := range []struct{ repo, user string }{
		{"registry.example.com/team-a/api", "team-a"},
		{"registry.example.com/team-b/api", "host"},
		{"eu.mirror.example.com/library/nginx", "glob"},
		{"mirror.example.com/library/nginx", ""}, // a glob label needs a label
		{"127.0.0.1:5000/chartpin/jm", "port"},
		{"127.0.0.1:5001/chartpin/jm", ""},
		{"index.docker.io/library/nginx", "hub"},
		{"plain.example.com/x", "plain"},
		{"ghcr.io/chartpin/jm", ""},
	} {
		repo, err := name.NewRepository(tc.repo, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		a, err := kc.Resolve(repo)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := a.Authorization()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Username != tc.user {
			t.Errorf("%s: user %q, want %q", tc.repo, cfg.Username, tc.user)
		}
	}
}

func TestPullSecretBadContentIsNotQuoted(t *testing.T) {
	s := &corev1.Secret{Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths": "s3cr3t-value`)}}
	_, err := dockerConfigEntries(s)
	if err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("err %v: want an error that does not quote the data", err)
	}
	s = &corev1.Secret{Type: corev1.SecretTypeOpaque}
	if _, err := dockerConfigEntries(s); err == nil || !strings.Contains(err.Error(), "kubectl create secret docker-registry") {
		t.Errorf("opaque secret: %v", err)
	}
}

// authFixture is the example workloads behind a registry that wants a
// password (the Docker token protocol), with the credentials only in a
// Secret the targets file names.
func authFixture(t *testing.T, password string) (*env, *registrytest.Registry, *File, string) {
	t.Helper()
	reg := registrytest.NewWithTokenAuth(t, "edge", "correct-horse")
	old := reg.PushIndex(t, "example/jm", "old", "linux/amd64", "linux/arm64")
	latest := reg.PushIndex(t, "example/jm", "dev", "linux/amd64", "linux/arm64")
	e := newEnv(t,
		deployment(ns, "jm", 1, containers("api", reg.Host+"/example/jm@"+old)),
		pod(ns, "jm", 0, "api", reg.Host+"/example/jm@"+old),
		dockerConfigSecret(ns, "regcred", map[string][2]string{reg.Host: {"edge", password}}),
	)
	f := targetsFile(t, fmt.Sprintf(`pullSecrets:
  - {namespace: prod-ns, name: workload-pull, optional: true}
  - {namespace: prod-ns, name: regcred}
targets:
  - {id: api, kind: Deployment, namespace: prod-ns, name: jm, container: api, image: %q}
`, reg.Host+"/example/jm:dev"))
	return e, reg, f, latest
}

func (e *env) authTick(reg *registrytest.Registry, f *File) (*Result, error) {
	e.t.Helper()
	e.client.ClearActions()
	kc := NewPullSecrets()
	res, err := resolver.New(resolver.Options{InsecureRegistries: []string{reg.Host}, Keychain: authn.NewMultiKeychain(kc, authn.DefaultKeychain), Logger: slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		e.t.Fatal(err)
	}
	return e.reconciler(res, func(o *Options) { o.PullSecrets = kc }).Tick(context.Background(), f)
}

func TestPullSecretCredentialsMoveTheWorkload(t *testing.T) {
	e, reg, f, latest := authFixture(t, "correct-horse")
	res, err := e.authTick(reg, f)
	if err != nil {
		t.Fatal(err)
	}
	if img := e.deployment(ns, "jm").Spec.Template.Spec.Containers[0].Image; img != reg.Host+"/example/jm@"+latest {
		t.Errorf("api runs %s, want the newest digest %s", img, latest)
	}
	if len(res.Patched) != 1 {
		t.Errorf("patched %v", res.Patched)
	}
	// The optional workload secret is absent (skipped, as the kubelet skips it);
	// the chart's is read; nothing else.
	var gets []string
	for _, c := range e.calls() {
		if c.resource == "secrets" {
			gets = append(gets, c.String())
		}
	}
	if fmt.Sprint(gets) != "[get secrets workload-pull get secrets regcred]" {
		t.Errorf("secret reads %v", gets)
	}
}

func TestPullSecretWrongPasswordFailsWithAnEventAndNoCredential(t *testing.T) {
	e, reg, f, _ := authFixture(t, "wrong-battery")
	_, err := e.authTick(reg, f)
	if err == nil || failure.Code(err) != 1 {
		t.Fatalf("err %v, want a failed tick (exit 1)", err)
	}
	if !strings.Contains(err.Error(), "pull secrets") {
		t.Errorf("error does not point at the pull secrets: %v", err)
	}
	if n := e.count("patch", ""); n != 0 {
		t.Errorf("%d patches with refused credentials", n)
	}
	ev := e.events()
	if len(ev) != 1 || ev[0].Reason != "ResolveFailed" || ev[0].Type != corev1.EventTypeWarning || ev[0].InvolvedObject.Name != "jm" {
		t.Fatalf("events %+v, want one ResolveFailed Warning on jm", ev)
	}
	var all bytes.Buffer
	all.WriteString(err.Error())
	all.WriteString(ev[0].Message)
	all.Write(e.logs.Bytes())
	for _, secret := range []string{"wrong-battery", base64.StdEncoding.EncodeToString([]byte("edge:wrong-battery"))} {
		if strings.Contains(all.String(), secret) {
			t.Errorf("credential %q appears in the error, Event or logs:\n%s", secret, all.String())
		}
	}
}

func TestChartPullSecretMissingOrForbiddenFailsBeforeTheRegistry(t *testing.T) {
	e, reg, f, _ := authFixture(t, "correct-horse")
	if err := e.client.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("secrets"), ns, "regcred"); err != nil {
		t.Fatal(err)
	}
	reg.Reset()
	_, err := e.authTick(reg, f)
	if err == nil || !strings.Contains(err.Error(), "reading pull secret prod-ns/regcred") || !strings.Contains(err.Error(), "nothing was changed") {
		t.Fatalf("err %v", err)
	}
	if n := len(reg.Requests()); n != 0 {
		t.Errorf("registry saw %d requests before the credentials were read", n)
	}
}
