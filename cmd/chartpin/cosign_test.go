package main

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chartpin/chartpin/internal/registrytest"
)

// cosignFixture is an image signed by the cosign CLI itself (v2, key-based,
// no transparency log), as hack/cosign/fixture.sh exported it from a
// docker-registry: the index at tag 1.0, its sha256-<hex>.sig signature,
// and an OCI 1.1 referrer signature kept under the referrers tag sha256-<hex>.
var cosignFixture = filepath.Join("testdata", "cosign")

// fixtureDigest is the signed index's digest, as the layout names it.
func fixtureDigest(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(cosignFixture, "layout", "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var idx struct {
		Manifests []struct {
			Digest      string            `json:"digest"`
			Annotations map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(data, &idx); err != nil {
		t.Fatal(err)
	}
	for _, m := range idx.Manifests {
		if m.Annotations["org.opencontainers.image.ref.name"] == "1.0" {
			return m.Digest
		}
	}
	t.Fatal("the cosign fixture has no tag 1.0")
	return ""
}

// layoutJSON decodes the fixture blob named by digest into v.
func layoutJSON(t *testing.T, digest string, v any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(cosignFixture, "layout", "blobs", "sha256", strings.TrimPrefix(digest, "sha256:")))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v\n%s", digest, err, data)
	}
}

// payloadOf is the digest of the signed payload of a signature manifest.
func payloadOf(t *testing.T, manifest string) string {
	t.Helper()
	var m struct {
		Layers []struct {
			Digest string `json:"digest"`
		} `json:"layers"`
	}
	layoutJSON(t, manifest, &m)
	if len(m.Layers) != 1 {
		t.Fatalf("signature manifest %s has %d layers, want 1", manifest, len(m.Layers))
	}
	return m.Layers[0].Digest
}

// onlyReferrer is the one manifest the fixture's referrers index lists.
func onlyReferrer(t *testing.T, index string) string {
	t.Helper()
	var idx struct {
		Manifests []struct {
			Digest string `json:"digest"`
		} `json:"manifests"`
	}
	layoutJSON(t, index, &idx)
	if len(idx.Manifests) != 1 {
		t.Fatalf("referrers index %s lists %d manifests, want 1", index, len(idx.Manifests))
	}
	return idx.Manifests[0].Digest
}

// cosignChart is pinChart for the fixture's image with verify: {key:
// cosign.pub}, the public half of the key the fixture was signed with.
func cosignChart(t *testing.T, host string) string {
	t.Helper()
	dir := pinChart(t, host)
	pub, err := os.ReadFile(filepath.Join(cosignFixture, "cosign.pub"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"chartpin.yaml": "charts:\n  - dir: .\n    images:\n      - at: image\n        verify: {key: cosign.pub}\n",
		"cosign.pub":    string(pub),
	}
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// pin and drift accept the signatures the cosign CLI makes, at the .sig tag
// and as an OCI 1.1 referrer (docker-registry has no referrers API: the
// referrers tag): one signature lookup online, none offline from the lock
// that records the signature. pin refuses another image carrying that
// signature, and the same image once its signature is gone (exit 1, the
// image and the reason named, no file touched), where drift reports the
// pinned digest UNSIGNED.
func TestCosignCLISignature(t *testing.T) {
	digest := fixtureDigest(t)
	tag := strings.Replace(digest, ":", "-", 1)
	layout := filepath.Join(cosignFixture, "layout")
	for _, tc := range []struct {
		name string
		tags []string
		// signature picks the digest of the signature manifest out of what was pushed.
		signature func(pushed map[string]string) string
		// lookups are the signature reads before the payload's: one
		// manifest for the .sig tag; the absent tag, then the referrers
		// (404: the fallback tag) for a referrer.
		lookups func(signature string) []string
	}{
		{"sig tag", []string{"1.0", tag + ".sig"}, func(pushed map[string]string) string { return pushed[tag+".sig"] },
			func(string) []string { return []string{"GET /v2/team/app/manifests/" + tag + ".sig"} }},
		{"referrer", []string{"1.0", tag}, func(pushed map[string]string) string { return onlyReferrer(t, pushed[tag]) },
			func(sig string) []string {
				return []string{"GET /v2/team/app/manifests/" + tag + ".sig", "GET /v2/team/app/referrers/" + digest,
					"GET /v2/team/app/manifests/" + tag, "GET /v2/team/app/manifests/" + sig}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := registrytest.StartDistribution(t, registrytest.DistributionOptions{})
			pushed := reg.PushLayout(t, layout, "team/app", tc.tags...)
			proxy := registrytest.NewProxy(t, reg.Host) // counts what pin asks the registry
			dir := cosignChart(t, proxy.Host)
			lock := filepath.Join(t.TempDir(), "digests.yaml")
			out, errOut, code := runCLI(t, "--insecure-registry", proxy.Host, "pin", "--output", "json", "--config", filepath.Join(dir, "chartpin.yaml"), "--write-digests", lock)
			if code != 0 {
				t.Fatalf("exit %d\n%s%s", code, out, errOut)
			}
			// One signature lookup for the new digest, after resolving the tag.
			sig := tc.signature(pushed)
			want := append([]string{"GET /v2/", "HEAD /v2/team/app/manifests/1.0", "GET /v2/team/app/manifests/" + digest},
				append(tc.lookups(sig), "GET /v2/team/app/blobs/"+payloadOf(t, sig))...)
			var got []string
			for _, q := range proxy.Requests() {
				got = append(got, q.Method+" "+q.Path)
			}
			if !slices.Equal(got, want) {
				t.Errorf("pin asked the registry\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if got, _ := os.ReadFile(filepath.Join(dir, "values.yaml")); !strings.Contains(string(got), "digest: \""+digest+"\"") {
				t.Errorf("values.yaml after the pin:\n%s", got)
			}
			var res struct {
				Charts []struct {
					Pins []struct {
						NewDigest string `json:"new_digest"`
						Signature string `json:"signature"`
					} `json:"pins"`
				} `json:"charts"`
			}
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if len(res.Charts) != 1 || len(res.Charts[0].Pins) != 1 {
				t.Fatalf("want one pin:\n%s", out)
			}
			p := res.Charts[0].Pins[0]
			if p.NewDigest != digest || p.Signature != sig {
				t.Errorf("pin %+v: want %s verified by signature %s", p, digest, sig)
			}

			code, out = runCheck(t, "--insecure-registry", proxy.Host, "drift", "--config", filepath.Join(dir, "chartpin.yaml"))
			wantExit(t, code, 0, out)
			if !strings.Contains(out, "\nok  ") || strings.Contains(out, "UNSIGNED") {
				t.Errorf("drift of the signed pin:\n%s", out)
			}

			// Offline, the lock's record of the cosign signature verifies the same move.
			offline := cosignChart(t, proxy.Host)
			proxy.Reset()
			if out, errOut, code := runCLI(t, "pin", "--config", filepath.Join(offline, "chartpin.yaml"), "--digests", lock); code != 0 {
				t.Fatalf("offline: exit %d\n%s%s", code, out, errOut)
			}
			if n := len(proxy.Requests()); n != 0 {
				t.Errorf("the offline pin sent %d registry requests: %v", n, proxy.Requests())
			}
			if got, _ := os.ReadFile(filepath.Join(offline, "values.yaml")); !strings.Contains(string(got), "digest: \""+digest+"\"") {
				t.Errorf("values.yaml after the offline pin:\n%s", got)
			}
		})
	}

	// cosign's signature copied to another image's .sig tag: the payload
	// names the digest it signed, not this one.
	t.Run("signature of another image", func(t *testing.T) {
		reg := registrytest.StartDistribution(t, registrytest.DistributionOptions{})
		pushed := reg.PushLayout(t, layout, "team/app", tag+".sig")
		other := reg.PushIndex(t, "team/app", "1.0", "linux/amd64", "linux/arm64")
		reg.Tag(t, "team/app", pushed[tag+".sig"], strings.Replace(other, ":", "-", 1)+".sig")
		dir := cosignChart(t, reg.Host)
		before := hashDir(t, dir)
		_, errOut, code := runCLI(t, "--insecure-registry", reg.Host, "pin", "--config", filepath.Join(dir, "chartpin.yaml"))
		if code != 1 {
			t.Errorf("exit %d, want 1; stderr:\n%s", code, errOut)
		}
		if want := "refusing to pin " + other + ": no valid signature"; !strings.Contains(errOut, want) || !strings.Contains(errOut, "signed payload names "+digest+", not this digest") {
			t.Errorf("stderr does not say %q and that the payload names %s:\n%s", want, digest, errOut)
		}
		if after := hashDir(t, dir); !maps.Equal(before, after) {
			t.Errorf("a refused pin changed files:\nbefore %v\nafter  %v", before, after)
		}
	})

	t.Run("signature removed", func(t *testing.T) {
		reg := registrytest.StartDistribution(t, registrytest.DistributionOptions{})
		reg.PushLayout(t, layout, "team/app", "1.0")
		dir := cosignChart(t, reg.Host)
		before := hashDir(t, dir)
		lock := filepath.Join(t.TempDir(), "lock.yaml")
		_, errOut, code := runCLI(t, "--insecure-registry", reg.Host, "pin", "--config", filepath.Join(dir, "chartpin.yaml"), "--write-digests", lock)
		if code != 1 {
			t.Errorf("exit %d, want 1; stderr:\n%s", code, errOut)
		}
		for _, want := range []string{"values.yaml:5 (image.digest)", "image " + reg.Host + "/team/app:1.0", "refusing to pin " + digest, "has no signature", "cosign.pub"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("stderr does not say %q:\n%s", want, errOut)
			}
		}
		if after := hashDir(t, dir); !maps.Equal(before, after) {
			t.Errorf("a refused pin changed files:\nbefore %v\nafter  %v", before, after)
		}
		if _, err := os.Stat(lock); err == nil {
			t.Error("a refused pin wrote the --write-digests file")
		}

		// Pinned by hand (or before the signature went): drift says UNSIGNED.
		values := filepath.Join(dir, "values.yaml")
		data, err := os.ReadFile(values)
		if err != nil {
			t.Fatal(err)
		}
		pinned := strings.Replace(string(data), `digest: ""`, `digest: "`+digest+`"`, 1)
		if err := os.WriteFile(values, []byte(pinned), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out := runCheck(t, "--insecure-registry", reg.Host, "drift", "--config", filepath.Join(dir, "chartpin.yaml"))
		wantExit(t, code, 1, out)
		for _, want := range []string{"UNSIGNED  " + values + ":5 image.digest", "has no signature", "1 UNSIGNED"} {
			if !strings.Contains(out, want) {
				t.Errorf("drift does not say %q:\n%s", want, out)
			}
		}
	})
}
