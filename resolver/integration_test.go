package resolver_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/chartpin/chartpin/internal/registrytest"
	"github.com/chartpin/chartpin/resolver"
)

// servedDigest is sha256 of the manifest bytes the registry serves for
// repo:ref, fetched with a plain HTTP GET, independent of the resolver.
func servedDigest(t *testing.T, host, repo, ref, user, pass string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+host+"/v2/"+repo+"/manifests/"+ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", strings.Join([]string{
		"application/vnd.oci.image.index.v1+json",
		"application/vnd.docker.distribution.manifest.list.v2+json",
		"application/vnd.oci.image.manifest.v1+json",
		"application/vnd.docker.distribution.manifest.v2+json",
	}, ", "))
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET manifest %s:%s: %s %v", repo, ref, resp.Status, err)
	}
	sum := sha256.Sum256(body)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func TestDistributionResolvesIndexDigests(t *testing.T) {
	reg := registrytest.StartDistribution(t, registrytest.DistributionOptions{})
	pushed := map[string]string{
		"oci:1":    reg.PushIndex(t, "oci", "1", "linux/amd64", "linux/arm64"),
		"docker:1": reg.PushDockerIndex(t, "docker", "1", "linux/amd64", "linux/arm64/v8"),
		"single:1": reg.PushImage(t, "single", "1"),
	}
	proxy := registrytest.NewProxy(t, reg.Host)
	r, err := resolver.New(resolver.Options{InsecureRegistries: []string{proxy.Host}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var refs []string
	for ref := range pushed {
		refs = append(refs, proxy.Host+"/"+ref, proxy.Host+"/"+ref) // each twice
	}
	images, err := resolver.ResolveEach(ctx, r, refs, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range images {
		key := strings.TrimPrefix(img.Ref, proxy.Host+"/")
		repo, tag, _ := strings.Cut(key, ":")
		served := servedDigest(t, reg.Host, repo, tag, "", "")
		if img.Digest != pushed[key] || img.Digest != served {
			t.Errorf("%s: resolved %s, pushed %s, registry serves bytes hashing to %s", key, img.Digest, pushed[key], served)
		}
		if wantIndex := key != "single:1"; img.IsIndex() != wantIndex || (wantIndex && len(img.Platforms) != 2) {
			t.Errorf("%s: %s platforms %v", key, img.MediaType, img.Platforms)
		}
	}
	s := r.Stats()
	if s.HEAD != 3 || s.GET != 3 || s.Ping != 1 || s.Total() != proxy.Count("") {
		t.Errorf("stats %+v, proxy saw %d: want 3 HEADs (unique refs), 3 GETs (each digest's manifest, read and hashed once), 1 ping", s, proxy.Count(""))
	}
	if _, err := r.Resolve(ctx, proxy.Host+"/oci:nope"); !errors.Is(err, resolver.ErrNotFound) || !strings.Contains(err.Error(), proxy.Host+"/oci:nope") {
		t.Errorf("missing tag: %v", err)
	}
}

const (
	testUser   = "ci-bot"
	testSecret = "Xy7-very-secret-pass"
)

func TestDistributionBasicAuth(t *testing.T) {
	reg := registrytest.StartDistribution(t, registrytest.DistributionOptions{Htpasswd: map[string]string{testUser: testSecret}})
	want := reg.PushIndex(t, "private/app", "1", "linux/amd64", "linux/arm64")
	ref := reg.Host + "/private/app:1"
	ctx := context.Background()
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	resolve := func(kc authn.Keychain) (resolver.Image, error) {
		r, err := resolver.New(resolver.Options{InsecureRegistries: []string{reg.Host}, Keychain: kc, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		img, err := r.Resolve(ctx, ref)
		if err == nil {
			_, err = r.Platforms(ctx, img)
		}
		return img, err
	}
	var errs []error
	for name, kc := range map[string]authn.Keychain{
		"wrong password": resolver.StaticKeychain(testUser, testSecret+"-wrong"),
		"no credentials": resolver.StaticKeychain("", ""),
	} {
		_, err := resolve(kc)
		if !errors.Is(err, resolver.ErrUnauthorized) || !strings.Contains(err.Error(), ref) || !strings.Contains(err.Error(), "log in") {
			t.Errorf("%s: err = %v, want ErrUnauthorized naming the ref and what to do", name, err)
		}
		errs = append(errs, err)
	}
	img, err := resolve(resolver.StaticKeychain(testUser, testSecret))
	if err != nil || img.Digest != want || img.Digest != servedDigest(t, reg.Host, "private/app", "1", testUser, testSecret) {
		t.Fatalf("right password: %+v, %v; want %s", img, err, want)
	}
	assertNoSecret(t, logs.String(), errs...)
}

// assertNoSecret fails if the password, or the Basic header that carries it,
// appears in any log line or error.
func assertNoSecret(t *testing.T, logs string, errs ...error) {
	t.Helper()
	if !strings.Contains(logs, "request") {
		t.Fatalf("the debug log is empty, so it proves nothing:\n%s", logs)
	}
	basic := base64.StdEncoding.EncodeToString([]byte(testUser + ":" + testSecret))
	texts := []string{logs}
	for _, err := range errs {
		texts = append(texts, fmt.Sprint(err))
	}
	for _, s := range texts {
		for _, secret := range []string{testSecret, basic, "Authorization"} {
			if strings.Contains(s, secret) {
				t.Errorf("secret material %q leaked into: %s", secret, s)
			}
		}
	}
}

func TestDistributionDockerConfigAndCredentialHelper(t *testing.T) {
	reg := registrytest.StartDistribution(t, registrytest.DistributionOptions{Htpasswd: map[string]string{testUser: testSecret}})
	want := reg.PushIndex(t, "app", "1", "linux/amd64")
	ctx := context.Background()
	resolve := func() (resolver.Image, error) {
		r, err := resolver.New(resolver.Options{InsecureRegistries: []string{reg.Host}}) // default keychain: DOCKER_CONFIG
		if err != nil {
			t.Fatal(err)
		}
		return r.Resolve(ctx, reg.Host+"/app:1")
	}
	t.Run("auths", func(t *testing.T) {
		dir := t.TempDir()
		auth := base64.StdEncoding.EncodeToString([]byte(testUser + ":" + testSecret))
		writeFile(t, filepath.Join(dir, "config.json"), fmt.Sprintf(`{"auths": {%q: {"auth": %q}}}`, reg.Host, auth))
		t.Setenv("DOCKER_CONFIG", dir)
		if img, err := resolve(); err != nil || img.Digest != want {
			t.Fatalf("%+v, %v", img, err)
		}
	})
	t.Run("credential helper", func(t *testing.T) {
		dir, bin := t.TempDir(), t.TempDir()
		calls := filepath.Join(dir, "calls")
		// A real docker-credential-* helper, speaking the helper protocol on stdin/stdout.
		writeFile(t, filepath.Join(bin, "docker-credential-chartpintest"), fmt.Sprintf(`#!/bin/sh
[ "$1" = get ] || exit 1
read host
echo "$host" >> %q
printf '{"ServerURL":"%%s","Username":%q,"Secret":%q}' "$host"
`, calls, testUser, testSecret))
		if err := os.Chmod(filepath.Join(bin, "docker-credential-chartpintest"), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, "config.json"), fmt.Sprintf(`{"credHelpers": {%q: "chartpintest"}}`, reg.Host))
		t.Setenv("DOCKER_CONFIG", dir)
		t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		if img, err := resolve(); err != nil || img.Digest != want {
			t.Fatalf("%+v, %v", img, err)
		}
		got, _ := os.ReadFile(calls)
		if strings.TrimSpace(string(got)) != reg.Host {
			t.Errorf("credential helper was asked for %q, want exactly once for %s", got, reg.Host)
		}
	})
	t.Run("anonymous", func(t *testing.T) {
		t.Setenv("DOCKER_CONFIG", t.TempDir())
		if _, err := resolve(); !errors.Is(err, resolver.ErrUnauthorized) {
			t.Fatalf("err = %v, want ErrUnauthorized without credentials", err)
		}
	})
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
