package resolver_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/internal/registrytest"
	"github.com/chartpin/chartpin/resolver"
)

// newRemote is a Remote with o that speaks plain HTTP to reg.
func newRemote(t *testing.T, reg *registrytest.Registry, o resolver.Options) *resolver.Remote {
	t.Helper()
	o.InsecureRegistries = append(o.InsecureRegistries, reg.Host)
	r, err := resolver.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestResolveIndexDigestWithOneHEAD(t *testing.T) {
	reg := registrytest.New(t)
	want := reg.PushIndex(t, "app", "1.0", "linux/amd64", "linux/arm64")
	reg.Reset()
	r := newRemote(t, reg, resolver.Options{})
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		img, err := r.Resolve(ctx, reg.Host+"/app:1.0")
		if err != nil {
			t.Fatal(err)
		}
		if img.Digest != want {
			t.Fatalf("digest = %s, want index digest %s", img.Digest, want)
		}
		if !img.IsIndex() {
			t.Errorf("media type %s: want an index", img.MediaType)
		}
	}
	if got := reg.Count("HEAD"); got != 1 {
		t.Errorf("registry saw %d HEADs for one unique ref, want 1", got)
	}
	if got := reg.Count("GET"); got != 1 { // the /v2/ ping
		t.Errorf("registry saw %d GETs, want 1 (the ping): %v", got, reg.Requests())
	}
	img, _ := r.Resolve(ctx, reg.Host+"/app:1.0")
	plats, err := r.Platforms(ctx, img)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(plats, ",") != "linux/amd64,linux/arm64" {
		t.Errorf("platforms = %v", plats)
	}
	if _, err := r.Platforms(ctx, img); err != nil {
		t.Fatal(err)
	}
	if got := reg.Count("GET"); got != 2 {
		t.Errorf("registry saw %d GETs after two platform reads, want 2 (ping + one manifest): %v", got, reg.Requests())
	}
}

func TestResolveMissingTagNamesRef(t *testing.T) {
	reg := registrytest.New(t)
	reg.PushIndex(t, "app", "1.0", "linux/amd64")
	_, err := newRemote(t, reg, resolver.Options{}).Resolve(context.Background(), reg.Host+"/app:9.9")
	if !errors.Is(err, resolver.ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	if !strings.Contains(err.Error(), reg.Host+"/app:9.9") {
		t.Errorf("error does not name the ref: %v", err)
	}
}

func TestPlainHTTPOnlyForInsecureHosts(t *testing.T) {
	reg := registrytest.New(t)
	reg.PushIndex(t, "app", "1.0", "linux/amd64")
	r, err := resolver.New(resolver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Resolve(context.Background(), reg.Host+"/app:1.0")
	if err == nil || !strings.Contains(err.Error(), "InsecureRegistries "+reg.Host) {
		t.Fatalf("err = %v, want a refusal naming InsecureRegistries", err)
	}
}

func TestSingleArchFailsPlatformCheck(t *testing.T) {
	reg := registrytest.New(t)
	reg.PushImage(t, "one", "1")
	r := newRemote(t, reg, resolver.Options{})
	ctx := context.Background()
	img, err := r.Resolve(ctx, reg.Host+"/one:1")
	if err != nil {
		t.Fatal(err)
	}
	plats, err := r.Platforms(ctx, img)
	if err != nil {
		t.Fatal(err)
	}
	err = resolver.RequirePlatforms(img.Ref, plats, []string{"linux/amd64", "linux/arm64"})
	if !errors.Is(err, resolver.ErrPlatforms) || !strings.Contains(err.Error(), "single-arch") {
		t.Fatalf("err = %v, want ErrPlatforms saying single-arch", err)
	}
}

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"nginx":                           "docker.io/library/nginx:latest",
		"nginx:1.27":                      "docker.io/library/nginx:1.27",
		"index.docker.io/library/nginx:1": "docker.io/library/nginx:1",
		"ghcr.io/a/b:0.8":                 "ghcr.io/a/b:0.8",
		"127.0.0.1:5000/x:1":              "127.0.0.1:5000/x:1",
		"ghcr.io/a/b:0.8@sha256:" + strings.Repeat("a", 64): "ghcr.io/a/b@sha256:" + strings.Repeat("a", 64),
	} {
		got, err := resolver.Normalize(in)
		if err != nil || got != want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestMediaTypes(t *testing.T) {
	reg := registrytest.New(t)
	cases := []struct {
		repo, digest, mediaType string
		index                   bool
	}{
		{"oci-index", reg.PushIndex(t, "oci-index", "1", "linux/amd64", "linux/arm64"), "application/vnd.oci.image.index.v1+json", true},
		{"docker-list", reg.PushDockerIndex(t, "docker-list", "1", "linux/amd64", "linux/arm/v7"), "application/vnd.docker.distribution.manifest.list.v2+json", true},
		{"docker-image", reg.PushImage(t, "docker-image", "1"), "application/vnd.docker.distribution.manifest.v2+json", false},
		{"oci-image", reg.PushOCIImage(t, "oci-image", "1"), "application/vnd.oci.image.manifest.v1+json", false},
	}
	r := newRemote(t, reg, resolver.Options{})
	ctx := context.Background()
	for _, c := range cases {
		img, err := r.Resolve(ctx, reg.Host+"/"+c.repo+":1")
		if err != nil {
			t.Fatalf("%s: %v", c.repo, err)
		}
		if img.Digest != c.digest || img.MediaType != c.mediaType || img.IsIndex() != c.index {
			t.Errorf("%s: got %s %s index=%v; want %s %s index=%v", c.repo, img.Digest, img.MediaType, img.IsIndex(), c.digest, c.mediaType, c.index)
		}
	}
	img, _ := r.Resolve(ctx, reg.Host+"/docker-list:1")
	plats, err := r.Platforms(ctx, img)
	if err != nil || strings.Join(plats, ",") != "linux/amd64,linux/arm/v7" {
		t.Errorf("docker manifest list platforms = %v, %v", plats, err)
	}
}

func TestDigestRef(t *testing.T) {
	reg := registrytest.New(t)
	want := reg.PushIndex(t, "app", "1.0", "linux/amd64", "linux/arm64")
	r := newRemote(t, reg, resolver.Options{})
	ctx := context.Background()
	img, err := r.Resolve(ctx, reg.Host+"/app@"+want)
	if err != nil {
		t.Fatal(err)
	}
	if img.Digest != want || img.Ref != reg.Host+"/app@"+want || !img.IsIndex() {
		t.Errorf("digest ref resolved to %+v", img)
	}
	// tag@digest: the digest wins, the tag is not consulted.
	img, err = r.Resolve(ctx, reg.Host+"/app:does-not-exist@"+want)
	if err != nil || img.Digest != want {
		t.Errorf("tag@digest: %+v, %v", img, err)
	}
	missing := "sha256:" + strings.Repeat("0", 64)
	_, err = r.Resolve(ctx, reg.Host+"/app@"+missing)
	if !errors.Is(err, resolver.ErrNotFound) || !strings.Contains(err.Error(), reg.Host+"/app@"+missing) {
		t.Errorf("unknown digest: err = %v, want ErrNotFound naming the ref", err)
	}
}

func TestDedupAcrossManyRefs(t *testing.T) {
	reg := registrytest.New(t)
	var refs []string
	unique := map[string]bool{}
	for i := 0; i < 10; i++ {
		repo := fmt.Sprintf("svc%d", i)
		reg.PushIndex(t, repo, "1", "linux/amd64")
		reg.PushImage(t, repo, "2")
		for j := 0; j < 6; j++ { // each ref named several times, spelled two ways
			tag := []string{"1", "2"}[j%2]
			ref := reg.Host + "/" + repo + ":" + tag
			unique[ref] = true
			refs = append(refs, ref)
			if j == 5 {
				refs = append(refs, " "+ref+" ")
			}
		}
	}
	reg.Reset()
	r := newRemote(t, reg, resolver.Options{})
	ctx := context.Background()
	// Many callers at once, as several charts naming the same images would.
	var wg sync.WaitGroup
	for k := 0; k < 4; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := resolver.ResolveAll(ctx, r, refs); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got := reg.Count("HEAD"); got != len(unique) {
		t.Errorf("registry saw %d HEADs for %d refs (%d unique), want %d", got, len(refs), len(unique), len(unique))
	}
	if got := reg.CountPath("GET", "/manifests/"); got != 0 {
		t.Errorf("registry saw %d manifest GETs, want 0", got)
	}
	if got := reg.Count(""); got != len(unique)+1 {
		t.Errorf("registry saw %d requests, want %d HEADs and one ping: %v", got, len(unique), reg.Requests())
	}
	s := r.Stats()
	if s.HEAD != len(unique) || s.Ping != 1 || s.GET != 0 || s.Token != 0 || s.Total() != reg.Count("") {
		t.Errorf("stats %+v disagree with the registry's %d requests", s, reg.Count(""))
	}
}

func TestPlatformsOncePerDigest(t *testing.T) {
	reg := registrytest.New(t)
	d := reg.PushIndex(t, "app", "1", "linux/amd64", "linux/arm64")
	reg.Tag(t, "app", d, "latest")
	reg.Tag(t, "app", d, "stable")
	reg.Reset()
	r := newRemote(t, reg, resolver.Options{})
	images, err := resolver.ResolveEach(context.Background(), r,
		[]string{reg.Host + "/app:1", reg.Host + "/app:latest", reg.Host + "/app:stable", reg.Host + "/app:1"},
		[]string{"linux/amd64", "linux/arm64"})
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range images {
		if img.Digest != d || strings.Join(img.Platforms, ",") != "linux/amd64,linux/arm64" {
			t.Errorf("%+v", img)
		}
	}
	if got := reg.CountPath("GET", "/manifests/"); got != 1 {
		t.Errorf("registry saw %d manifest GETs for one digest, want 1", got)
	}
	if got := reg.Count("HEAD"); got != 3 {
		t.Errorf("registry saw %d HEADs for 3 unique tags, want 3", got)
	}
}

func TestConcurrencyBound(t *testing.T) {
	reg := registrytest.New(t)
	var refs []string
	for i := 0; i < 12; i++ {
		reg.PushImage(t, fmt.Sprintf("r%d", i), "1")
		refs = append(refs, fmt.Sprintf("%s/r%d:1", "PROXY", i))
	}
	for _, c := range []struct{ global, perRegistry, want int }{{3, 8, 3}, {8, 2, 2}, {8, 8, 8}} {
		proxy := registrytest.NewProxy(t, reg.Host)
		proxy.SetDelay(100 * time.Millisecond)
		r, err := resolver.New(resolver.Options{InsecureRegistries: []string{proxy.Host}, Concurrency: c.global, PerRegistryLimit: c.perRegistry})
		if err != nil {
			t.Fatal(err)
		}
		var these []string
		for _, ref := range refs {
			these = append(these, strings.Replace(ref, "PROXY", proxy.Host, 1))
		}
		if _, err := resolver.ResolveAll(context.Background(), r, these); err != nil {
			t.Fatal(err)
		}
		if got := proxy.MaxInFlight(); got != c.want {
			t.Errorf("concurrency %d, per registry %d: %d requests in flight at most, want %d", c.global, c.perRegistry, got, c.want)
		}
	}
}

func TestMirrorsResolveFromTheServingRegistry(t *testing.T) {
	origin := registrytest.New(t)
	mirror := registrytest.New(t)
	fromOrigin := origin.PushIndex(t, "library/app", "1", "linux/amd64", "linux/arm64")
	fromMirror := mirror.PushIndex(t, "library/app", "1", "linux/amd64", "linux/arm64")
	if fromOrigin == fromMirror {
		t.Fatal("fixtures must differ")
	}
	origin.Reset()
	mirror.Reset()
	ctx := context.Background()
	r, err := resolver.New(resolver.Options{InsecureRegistries: []string{origin.Host, mirror.Host}, Mirrors: map[string]string{origin.Host: mirror.Host}})
	if err != nil {
		t.Fatal(err)
	}
	img, err := r.Resolve(ctx, origin.Host+"/library/app:1")
	if err != nil {
		t.Fatal(err)
	}
	if img.Digest != fromMirror || img.Ref != origin.Host+"/library/app:1" || img.Source != mirror.Host+"/library/app:1" {
		t.Errorf("mirrored resolve = %+v; want the mirror's digest %s with Source naming the mirror", img, fromMirror)
	}
	if origin.Count("") != 0 {
		t.Errorf("origin saw %d requests behind a mirror, want 0", origin.Count(""))
	}
	// The same Remote asked about the mirror directly shares the answer (same queried ref) …
	direct, err := r.Resolve(ctx, mirror.Host+"/library/app:1")
	if err != nil || direct.Digest != fromMirror || mirror.Count("HEAD") != 1 {
		t.Errorf("direct mirror ref: %+v, %v, %d HEADs", direct, err, mirror.Count("HEAD"))
	}
	plats, err := r.Platforms(ctx, img)
	if err != nil || len(plats) != 2 || mirror.CountPath("GET", "/manifests/") != 1 || origin.Count("") != 0 {
		t.Errorf("platforms read from the mirror: %v, %v; origin saw %d requests", plats, err, origin.Count(""))
	}
	// … while a Remote without the mirror reports the origin's digest, not the mirror's.
	plain := newRemote(t, origin, resolver.Options{})
	img, err = plain.Resolve(ctx, origin.Host+"/library/app:1")
	if err != nil || img.Digest != fromOrigin || img.Source != img.Ref {
		t.Errorf("unmirrored resolve = %+v, %v; want the origin's digest %s", img, err, fromOrigin)
	}
	// A mirror that lacks the image fails naming both refs; the origin is not asked.
	origin.PushImage(t, "only-origin", "1")
	origin.Reset()
	_, err = r.Resolve(ctx, origin.Host+"/only-origin:1")
	if !errors.Is(err, resolver.ErrNotFound) || !strings.Contains(err.Error(), mirror.Host+"/only-origin:1") || !strings.Contains(err.Error(), origin.Host+"/only-origin:1 via mirror "+mirror.Host) || origin.Count("") != 0 {
		t.Errorf("image missing on the mirror: err = %v; origin saw %d requests", err, origin.Count(""))
	}
}

// schemeRecorder records the scheme of every request that reaches the network.
type schemeRecorder struct {
	mu      sync.Mutex
	schemes []string
}

func (s *schemeRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	s.schemes = append(s.schemes, req.URL.Scheme)
	s.mu.Unlock()
	return http.DefaultTransport.RoundTrip(req)
}

func TestInsecureRegistryNeverTriesHTTPS(t *testing.T) {
	reg := registrytest.New(t)
	want := reg.PushIndex(t, "app", "1", "linux/amd64")
	reg.Reset()
	rec := &schemeRecorder{}
	r := newRemote(t, reg, resolver.Options{Transport: rec})
	img, err := r.Resolve(context.Background(), reg.Host+"/app:1")
	if err != nil || img.Digest != want {
		t.Fatalf("%+v, %v", img, err)
	}
	if strings.Join(rec.schemes, ",") != "http,http" {
		t.Errorf("schemes on the wire = %v, want exactly the ping and the HEAD over http", rec.schemes)
	}
}

func TestSecureRegistryNeverFallsBackToHTTP(t *testing.T) {
	reg := registrytest.New(t)
	reg.PushIndex(t, "app", "1", "linux/amd64")
	reg.Reset()
	rec := &schemeRecorder{}
	r, err := resolver.New(resolver.Options{Transport: rec, RetryAttempts: 1, RetryBase: 0, RetryMax: 0})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Resolve(context.Background(), reg.Host+"/app:1")
	if err == nil || !strings.Contains(err.Error(), "InsecureRegistries "+reg.Host) {
		t.Fatalf("err = %v, want advice naming InsecureRegistries", err)
	}
	if strings.Join(rec.schemes, ",") != "https" || reg.Count("") != 0 {
		t.Errorf("schemes on the wire = %v (registry handled %d), want one https attempt and no plain HTTP", rec.schemes, reg.Count(""))
	}
}

func TestTags(t *testing.T) {
	reg := registrytest.New(t)
	for _, tag := range []string{"0.8.4", "0.8.10", "latest"} {
		reg.PushImage(t, "app", tag)
	}
	reg.Reset()
	r := newRemote(t, reg, resolver.Options{})
	for i := 0; i < 3; i++ {
		tags, err := r.Tags(context.Background(), reg.Host+"/app")
		if err != nil || strings.Join(tags, ",") != "0.8.10,0.8.4,latest" {
			t.Fatalf("tags = %v, %v", tags, err)
		}
	}
	if got := reg.CountPath("GET", "/tags/list"); got != 1 {
		t.Errorf("registry saw %d tag listings, want 1", got)
	}
}

func TestBearerTokenOncePerRepository(t *testing.T) {
	reg := registrytest.NewWithTokenAuth(t, "", "") // anonymous pulls, like Docker Hub
	var refs []string
	for _, repo := range []string{"a", "b"} {
		for _, tag := range []string{"1", "2", "3"} {
			reg.PushIndex(t, repo, tag, "linux/amd64")
			refs = append(refs, reg.Host+"/"+repo+":"+tag, reg.Host+"/"+repo+":"+tag)
		}
	}
	reg.Reset()
	r := newRemote(t, reg, resolver.Options{})
	if _, err := resolver.ResolveAll(context.Background(), r, refs); err != nil {
		t.Fatal(err)
	}
	s := r.Stats()
	if s.Token != 2 || s.HEAD != 6 || s.Ping != 1 || s.Total() != reg.Count("") || reg.CountPath("", "/token") != 2 {
		t.Errorf("stats %+v, registry saw %v; want 1 ping, 2 tokens (one per repository), 6 HEADs", s, reg.Requests())
	}
}

func TestBearerTokenWithCredentials(t *testing.T) {
	reg := registrytest.NewWithTokenAuth(t, "robot", "token-secret")
	want := reg.PushIndex(t, "private/app", "1", "linux/amd64")
	for _, c := range []struct {
		kc authn.Keychain
		ok bool
	}{
		{resolver.StaticKeychain("robot", "wrong"), false},
		{authn.NewMultiKeychain(), false}, // anonymous: the token endpoint refuses
		{resolver.StaticKeychain("robot", "token-secret"), true},
	} {
		r := newRemote(t, reg, resolver.Options{Keychain: c.kc})
		img, err := r.Resolve(context.Background(), reg.Host+"/private/app:1")
		if c.ok && (err != nil || img.Digest != want) {
			t.Errorf("right credentials: %+v, %v", img, err)
		}
		if !c.ok && (!errors.Is(err, resolver.ErrUnauthorized) || strings.Contains(err.Error(), "token-secret")) {
			t.Errorf("bad credentials: err = %v, want ErrUnauthorized without the secret", err)
		}
	}
}

func TestCancelledAnswerIsNotKept(t *testing.T) {
	reg := registrytest.New(t)
	want := reg.PushIndex(t, "app", "1", "linux/amd64")
	proxy := registrytest.NewProxy(t, reg.Host)
	proxy.SetDelay(50 * time.Millisecond)
	r, err := resolver.New(resolver.Options{InsecureRegistries: []string{proxy.Host}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Resolve(ctx, proxy.Host+"/app:1"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller: err = %v", err)
	}
	img, err := r.Resolve(context.Background(), proxy.Host+"/app:1")
	if err != nil || img.Digest != want {
		t.Fatalf("the next caller got the cancelled answer: %+v, %v", img, err)
	}
}

// failingTransport records each URL and fails without touching the network.
type failingTransport struct{ urls []string }

func (f *failingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	f.urls = append(f.urls, req.URL.String())
	return nil, errors.New("no network in this test")
}

func TestDockerHubRefsGoToIndexDockerIOOverHTTPS(t *testing.T) {
	ft := &failingTransport{}
	r, err := resolver.New(resolver.Options{Transport: ft, RetryAttempts: 1, RetryBase: 0, RetryMax: 0})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Resolve(context.Background(), "nginx:1.27")
	if err == nil || !strings.Contains(err.Error(), "docker.io/library/nginx:1.27") || strings.Contains(err.Error(), "via mirror") {
		t.Errorf("err = %v, want one naming docker.io/library/nginx:1.27 and no mirror", err)
	}
	if strings.Join(ft.urls, " ") != "https://index.docker.io/v2/" {
		t.Errorf("requests %v, want one https ping of index.docker.io", ft.urls)
	}
}

func TestMirrorWithPathPrefix(t *testing.T) {
	mirror := registrytest.New(t) // a proxy cache that keeps docker.io under a project, as Harbor does
	want := mirror.PushIndex(t, "dockerhub/library/nginx", "1.27", "linux/amd64", "linux/arm64")
	mirror.Reset()
	r, err := resolver.New(resolver.Options{InsecureRegistries: []string{mirror.Host}, Mirrors: map[string]string{"index.docker.io": mirror.Host + "/dockerhub"}})
	if err != nil {
		t.Fatal(err)
	}
	img, err := r.Resolve(context.Background(), "nginx:1.27")
	if err != nil || img.Digest != want || img.Ref != "docker.io/library/nginx:1.27" || img.Source != mirror.Host+"/dockerhub/library/nginx:1.27" {
		t.Fatalf("%+v, %v", img, err)
	}
	if mirror.Count("HEAD") != 1 {
		t.Errorf("mirror saw %v", mirror.Requests())
	}
}

// A registry that is not there gets a message with the next step, not a bare dial error.
func TestUnreachableRegistrySaysWhatToCheck(t *testing.T) {
	r, err := resolver.New(resolver.Options{InsecureRegistries: []string{"127.0.0.1:1"}, RetryAttempts: 1, RetryBase: time.Millisecond, RetryMax: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Resolve(context.Background(), "127.0.0.1:1/app:1")
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1/app:1") || !strings.Contains(err.Error(), "check that 127.0.0.1:1 is reachable") {
		t.Fatalf("err = %v, want the ref and what to check", err)
	}
}

// A registry allowed plain HTTP may still not send credentials over plain
// HTTP elsewhere: a bearer realm on another host over http:// is refused
// before any request reaches it.
func TestTokenRealmOverPlainHTTPElsewhereIsRefused(t *testing.T) {
	var realmHits atomic.Int32
	realm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		realmHits.Add(1)
		_, _ = w.Write([]byte(`{"token":"t"}`))
	}))
	defer realm.Close()
	// A name, not a loopback address, as a realm elsewhere would be; the
	// test's dialer sends it to the loopback server.
	realmHost := "token.example.test:" + realm.URL[strings.LastIndex(realm.URL, ":")+1:]
	reg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="http://`+realmHost+`/token",service="x"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer reg.Close()
	host := strings.TrimPrefix(reg.URL, "http://")
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, strings.Replace(addr, "token.example.test", "127.0.0.1", 1))
	}
	r, err := resolver.New(resolver.Options{InsecureRegistries: []string{host}, Transport: base, Keychain: resolver.StaticKeychain("robot", "s3cret")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Resolve(context.Background(), host+"/app:1")
	if err == nil || !strings.Contains(err.Error(), "plain HTTP to "+realmHost+" refused") {
		t.Errorf("err = %v, want plain HTTP to the realm refused", err)
	}
	// The option stays visible to a command line that renders it as its flag.
	if got := failure.Render(err, strings.ToUpper); !strings.Contains(got, "pass INSECUREREGISTRIES "+realmHost) {
		t.Errorf("rendered %q: want the option rendered by the caller", got)
	}
	if n := realmHits.Load(); n != 0 {
		t.Errorf("the plain-HTTP realm on another host got %d request(s), credentials included", n)
	}
}

// An image builder's base index comes through the same mirrors and transport
// as every lookup: one ping, one manifest GET, and the bytes the registry holds.
func TestIndexThroughMirror(t *testing.T) {
	reg := registrytest.New(t)
	want := reg.PushIndex(t, "distroless/static", "nonroot", "linux/amd64", "linux/arm64")
	reg.Reset()
	r := newRemote(t, reg, resolver.Options{Mirrors: map[string]string{"gcr.io": reg.Host}})
	idx, err := r.Index(context.Background(), "gcr.io/distroless/static:nonroot")
	if err != nil {
		t.Fatal(err)
	}
	got, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != want {
		t.Errorf("index digest %s, want %s", got, want)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 2 {
		t.Errorf("index lists %d manifests, want 2", len(im.Manifests))
	}
	var paths []string
	for _, q := range reg.Requests() {
		paths = append(paths, q.Method+" "+q.Path)
	}
	if strings.Join(paths, "\n") != "GET /v2/\nGET /v2/distroless/static/manifests/nonroot" {
		t.Errorf("registry saw:\n%s\nwant one ping and one manifest GET", strings.Join(paths, "\n"))
	}
	_, err = r.Index(context.Background(), "gcr.io/distroless/static:missing")
	if !errors.Is(err, resolver.ErrNotFound) || !strings.Contains(err.Error(), reg.Host+"/distroless/static:missing") {
		t.Errorf("missing base: %v; want ErrNotFound naming the mirrored ref", err)
	}
}

// Options out of range are input errors naming the field, before any
// request; the zero value takes every default.
func TestOptionsValidate(t *testing.T) {
	if _, err := resolver.New(resolver.Options{}); err != nil {
		t.Fatalf("zero options: %v", err)
	}
	for want, o := range map[string]resolver.Options{
		"Concurrency -1: want at least 1":         {Concurrency: -1},
		"PerRegistryLimit -2: want at least 1":    {PerRegistryLimit: -2},
		"RequestTimeout -1s: want more than zero": {RequestTimeout: -time.Second},
		"RetryAttempts 2, backoff RetryBase 2s up to RetryMax 1s: want attempts ≥ 1 and 0 ≤ base ≤ max": {RetryAttempts: 2, RetryBase: 2 * time.Second, RetryMax: time.Second},
		"RetryAttempts 0, backoff RetryBase 0s up to RetryMax 1s: want attempts ≥ 1 and 0 ≤ base ≤ max": {RetryMax: time.Second},
		"RetryAfterCap -1s: want zero or more": {RetryAfterCap: -time.Second},
		`Mirrors "docker.io"="": want FROM=TO`: {Mirrors: map[string]string{"docker.io": ""}},
	} {
		_, err := resolver.New(o)
		if failure.Code(err) != 2 || err.Error() != want {
			t.Errorf("New(%+v) = %v (exit %d), want exit 2 and %q", o, err, failure.Code(err), want)
		}
	}
}
