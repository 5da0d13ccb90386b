package upgrade

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/provenance"
	helmregistry "helm.sh/helm/v3/pkg/registry"
	"helm.sh/helm/v3/pkg/repo"

	"github.com/chartpin/chartpin/internal/registrytest"
)

// dockerConfig points DOCKER_CONFIG at a directory holding config.json as
// the chart mounts it from a kubernetes.io/dockerconfigjson Secret.
func dockerConfig(t *testing.T, auths map[string][2]string) {
	t.Helper()
	m := map[string]any{}
	for host, up := range auths {
		m[host] = map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte(up[0] + ":" + up[1]))}
	}
	data, err := json.Marshal(map[string]any{"auths": m})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", dir)
}

// authSeen records the Authorization header of every request per server.
type authSeen struct {
	mu   sync.Mutex
	seen map[string][]string // host -> "METHOD path auth"
}

func (a *authSeen) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		if a.seen == nil {
			a.seen = map[string][]string{}
		}
		a.seen[r.Host] = append(a.seen[r.Host], r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		a.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

func (a *authSeen) get(host string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.seen[host]...)
}

// noSecret fails when any of texts shows the password or its basic-auth encoding.
func noSecret(t *testing.T, user, password string, texts map[string]string) {
	t.Helper()
	for where, text := range texts {
		for _, s := range []string{password, base64.StdEncoding.EncodeToString([]byte(user + ":" + password))} {
			if strings.Contains(text, s) {
				t.Errorf("%s shows the credential:\n%s", where, text)
			}
		}
	}
}

// An https index behind basic auth: the credentials for its host come from
// DOCKER_CONFIG (the chart's registryAuth.secret mount) and go to that host
// only: the index lists 1.1.0's archive on another host, which sees none.
func TestIndexBasicAuthFromDockerConfigGoesOnlyToTheIndexHost(t *testing.T) {
	const user, password = "edge", "idx-s3cret"
	dir := t.TempDir()
	seen := &authSeen{}
	files := http.FileServer(http.Dir(dir))
	index := httptest.NewTLSServer(seen.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="charts"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		files.ServeHTTP(w, r)
	})))
	t.Cleanup(index.Close)
	other := httptest.NewTLSServer(seen.wrap(files)) // same self-signed certificate, another port
	t.Cleanup(other.Close)
	idx := repo.NewIndexFile()
	for _, c := range []struct {
		ch   *chart.Chart
		base string
	}{{demoChart("1.0.0", oldPin, false), ""}, {demoChart("1.1.0", newPin, true), other.URL}} {
		tgz, err := chartutil.Save(c.ch, dir)
		if err != nil {
			t.Fatal(err)
		}
		digest, err := provenance.DigestFile(tgz)
		if err != nil {
			t.Fatal(err)
		}
		if err := idx.MustAdd(c.ch.Metadata, filepath.Base(tgz), c.base, digest); err != nil {
			t.Fatal(err)
		}
	}
	if err := idx.WriteFile(filepath.Join(dir, "index.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	indexHost, otherHost := strings.TrimPrefix(index.URL, "https://"), strings.TrimPrefix(other.URL, "https://")

	tick := func(t *testing.T) (Result, error, string) {
		opts := options(t, index.URL)
		opts.HTTPClient = index.Client()
		return debugTick(t, opts)
	}

	t.Run("right password", func(t *testing.T) {
		dockerConfig(t, map[string][2]string{indexHost: {user, password}})
		res, err, logs := tick(t)
		noSecret(t, user, password, shown(res, err, logs))
		if err != nil || res.Decision != DecisionUpgraded || res.Target != "1.1.0" {
			t.Fatalf("result %+v, error %v", res, err)
		}
		basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
		if got := seen.get(indexHost); len(got) != 1 || got[0] != "GET /index.yaml "+basic {
			t.Errorf("index host saw %q, want the index read with the credentials", got)
		}
		if got := seen.get(otherHost); len(got) != 1 || got[0] != "GET /demo-1.1.0.tgz " {
			t.Errorf("archive host saw %q, want one GET without credentials", got)
		}
	})
	t.Run("no credentials", func(t *testing.T) {
		dockerConfig(t, map[string][2]string{otherHost: {user, password}}) // for another host only
		res, err, logs := tick(t)
		noSecret(t, user, password, shown(res, err, logs))
		if err == nil || !strings.Contains(err.Error(), "401 Unauthorized: check the credentials for "+indexHost+" in DOCKER_CONFIG") {
			t.Errorf("error %v, want a 401 naming the host and where credentials come from", err)
		}
	})
	t.Run("wrong password", func(t *testing.T) {
		dockerConfig(t, map[string][2]string{indexHost: {user, "wr0ng-pw"}})
		res, err, logs := tick(t)
		noSecret(t, user, "wr0ng-pw", shown(res, err, logs))
		if err == nil || !strings.Contains(err.Error(), "401 Unauthorized") {
			t.Errorf("error %v, want 401", err)
		}
	})
	if got := seen.get(otherHost); len(got) != 1 {
		t.Errorf("archive host saw %q", got)
	}
}

// An OCI chart repository on docker-registry behind htpasswd (TLS): the
// credentials come from DOCKER_CONFIG, for both the tag list and pull (Helm's
// client) and the manifest reads (go-containerregistry), and reach no other host.
func TestOCIRegistryAuthFromDockerConfig(t *testing.T) {
	const user, password = "edge", "oci-s3cret"
	reg := registrytest.StartDistribution(t, registrytest.DistributionOptions{Htpasswd: map[string]string{user: password}, TLS: true})
	pusher, err := helmregistry.NewClient(helmregistry.ClientOptHTTPClient(&http.Client{Transport: reg.Transport}), helmregistry.ClientOptBasicAuth(user, password))
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range []*chart.Chart{demoChart("1.0.0", oldPin, false), demoChart("1.1.0", newPin, true)} {
		pushChart(t, pusher, reg.Host, ch)
	}
	// Every request the tick sends, with its Authorization header.
	var mu sync.Mutex
	var sent []string
	rec := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		sent = append(sent, r.URL.Host+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		return reg.Transport.RoundTrip(r)
	})
	tick := func(t *testing.T) (Result, error, string) {
		opts := options(t, "")
		opts.OCI = "oci://" + reg.Host + "/charts"
		opts.HTTPClient = &http.Client{Transport: rec}
		return debugTick(t, opts)
	}

	t.Run("no credentials", func(t *testing.T) {
		dockerConfig(t, map[string][2]string{"registry.example.com": {user, password}})
		res, err, logs := tick(t)
		noSecret(t, user, password, shown(res, err, logs))
		if err == nil || !strings.Contains(err.Error(), "check the credentials for "+reg.Host+" in DOCKER_CONFIG") {
			t.Errorf("error %v, want a refusal naming the host and where credentials come from", err)
		}
	})
	t.Run("wrong password", func(t *testing.T) {
		dockerConfig(t, map[string][2]string{reg.Host: {user, "wr0ng-pw"}})
		res, err, logs := tick(t)
		noSecret(t, user, "wr0ng-pw", shown(res, err, logs))
		if err == nil || !strings.Contains(err.Error(), "check the credentials for "+reg.Host) {
			t.Errorf("error %v, want a refusal naming the host", err)
		}
	})
	t.Run("right password", func(t *testing.T) {
		dockerConfig(t, map[string][2]string{reg.Host: {user, password}, "registry.example.com": {"other", "other-pw"}})
		mu.Lock()
		sent = nil
		mu.Unlock()
		res, err, logs := tick(t)
		noSecret(t, user, password, shown(res, err, logs))
		if err != nil || res.Decision != DecisionUpgraded || res.Target != "1.1.0" {
			t.Fatalf("result %+v, error %v", res, err)
		}
		mu.Lock()
		defer mu.Unlock()
		basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
		withAuth := 0
		for _, s := range sent {
			host, authz, _ := strings.Cut(s, " ")
			if host != reg.Host || (authz != "" && authz != basic) {
				t.Errorf("request to %s with Authorization %q", host, authz)
			}
			if authz != "" {
				withAuth++
			}
		}
		if withAuth == 0 {
			t.Errorf("no request carried the credentials: %q", sent)
		}
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// debugTick runs one tick with opts on a fresh in-memory store holding the
// demo chart 1.0.0, and returns its result, error and debug log.
func debugTick(t *testing.T, opts Options) (Result, error, string) {
	t.Helper()
	cfg, _ := newConfig(t)
	install(t, cfg, demoChart("1.0.0", oldPin, false), userValues())
	var logs bytes.Buffer
	opts.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	res, err := Run(context.Background(), cfg, opts)
	return res, err, logs.String()
}

// shown is everything a tick shows: its error, its result and its log.
func shown(res Result, err error, logs string) map[string]string {
	j, _ := json.Marshal(res)
	return map[string]string{"error": fmt.Sprint(err), "result": string(j), "logs": logs}
}
