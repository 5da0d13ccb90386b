package publish

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"helm.sh/helm/v3/pkg/repo"
	"sigs.k8s.io/yaml"

	"github.com/chartpin/chartpin/deprecation"
	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/internal/gittest"
	"github.com/chartpin/chartpin/internal/registrytest"
)

// tarballSums is every tarball's sha256 in dir.
func tarballSums(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.tgz"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no tarballs in %s (%v)", dir, err)
	}
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s := sha256.Sum256(b)
		out[filepath.Base(f)] = hex.EncodeToString(s[:])
	}
	return out
}

// entriesOf is the index's entries as generic YAML, for exact comparison.
func entriesOf(t *testing.T, data []byte) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	return doc["entries"].(map[string]any)
}

func entry(entries map[string]any, version string) map[string]any {
	for _, e := range entries["app"].([]any) {
		if m := e.(map[string]any); m["version"] == version {
			return m
		}
	}
	return nil
}

// Deprecating a version adds deprecated: true to its index entry and
// nothing else: every tarball keeps its bytes, every other entry and field
// stays as it was; Helm reads the flag; a repeat is a no-op; --undeprecate
// takes it back off.
func TestDeprecateIndexEntry(t *testing.T) {
	ctx := context.Background()
	indexDir := t.TempDir()
	chartDir := writeChart(t, t.TempDir(), "0.4.1", "0.4.1", "0.8")
	o := opts(Options{IndexDir: indexDir, BaseURL: "https://charts.example.com"})
	for _, v := range []string{"0.4.1", "0.4.2", "0.4.3"} {
		writeChart(t, chartDir, v, v, "0.8")
		if _, err := Publish(ctx, chartDir, o); err != nil {
			t.Fatal(err)
		}
	}
	idxPath := filepath.Join(indexDir, "index.yaml")
	before, _ := os.ReadFile(idxPath)
	sums := tarballSums(t, indexDir)

	res, err := Deprecate(ctx, chartDir, "0.4.2", true, o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Index.Action != Deprecated || res.Index.Entries != 3 {
		t.Fatalf("result %+v", res.Index)
	}
	after, _ := os.ReadFile(idxPath)
	if got := tarballSums(t, indexDir); !reflect.DeepEqual(got, sums) {
		t.Fatalf("tarballs changed:\n got %v\nwant %v", got, sums)
	}
	was, now := entriesOf(t, before), entriesOf(t, after)
	if entry(now, "0.4.2")["deprecated"] != true {
		t.Fatalf("0.4.2 is not deprecated:\n%s", after)
	}
	delete(entry(now, "0.4.2"), "deprecated")
	if !reflect.DeepEqual(was, now) {
		t.Fatalf("deprecating changed more than one key:\nbefore\n%s\nafter\n%s", before, after)
	}
	idx, err := repo.LoadIndexFile(idxPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, cv := range idx.Entries["app"] {
		if cv.Deprecated != (cv.Version == "0.4.2") {
			t.Errorf("Helm reads %s deprecated=%v", cv.Version, cv.Deprecated)
		}
	}

	again, err := Deprecate(ctx, chartDir, "0.4.2", true, o)
	if err != nil || again.Index.Action != Unchanged {
		t.Fatalf("repeat: %+v, %v", again.Index, err)
	}
	if b, _ := os.ReadFile(idxPath); !bytes.Equal(b, after) {
		t.Fatal("a repeated deprecation rewrote the index")
	}

	back, err := Deprecate(ctx, chartDir, "0.4.2", false, o)
	if err != nil || back.Index.Action != Undeprecated {
		t.Fatalf("undeprecate: %+v, %v", back.Index, err)
	}
	restored, _ := os.ReadFile(idxPath)
	if !reflect.DeepEqual(entriesOf(t, restored), entriesOf(t, before)) {
		t.Fatalf("undeprecate did not restore the entries:\n%s", restored)
	}
	if got := tarballSums(t, indexDir); !reflect.DeepEqual(got, sums) {
		t.Fatal("tarballs changed by undeprecate")
	}

	// An unpublished version is bad input; nothing is written.
	_, err = Deprecate(ctx, chartDir, "0.9.0", true, o)
	if err == nil || failure.Code(err) != 2 || !strings.Contains(err.Error(), "app 0.9.0 is not in") {
		t.Fatalf("unpublished version: %v, want exit 2", err)
	}
	if b, _ := os.ReadFile(idxPath); !bytes.Equal(b, restored) {
		t.Fatal("a refused deprecation wrote the index")
	}
}

// On a gh-pages branch the change is one commit that touches index.yaml only.
func TestDeprecateOnPagesBranch(t *testing.T) {
	bare, chartDir, r := pagesRepo(t)
	o := opts(Options{PagesBranch: "gh-pages", Repo: r, BaseURL: "https://acme.github.io/charts"})
	ctx := context.Background()
	if _, err := Publish(ctx, chartDir, o); err != nil {
		t.Fatal(err)
	}
	res, err := Deprecate(ctx, chartDir, "1.0.0", true, o)
	if err != nil || res.Index.Action != Deprecated || res.Index.Commit == "" {
		t.Fatalf("%+v, %v", res.Index, err)
	}
	if got := gittest.Git(t, bare, "diff", "--name-only", "gh-pages~1", "gh-pages"); got != "index.yaml" {
		t.Fatalf("the deprecation commit touched %q, want index.yaml only", got)
	}
	if idx := gittest.Git(t, bare, "show", "gh-pages:index.yaml"); !strings.Contains(idx, "deprecated: true") {
		t.Fatalf("index on gh-pages:\n%s", idx)
	}
	if msg := gittest.Git(t, bare, "log", "-1", "--format=%s", "gh-pages"); msg != "deprecated app 1.0.0" {
		t.Errorf("commit message %q", msg)
	}
}

// In OCI a marker artifact refers to the chart manifest: the tag, the
// manifest and the chart layer stay exactly as published, on a registry with
// the referrers API and on Debian's docker-registry, which has none (the
// sha256-<digest> tag fallback).
func TestDeprecateOCI(t *testing.T) {
	t.Run("referrers API", func(t *testing.T) {
		reg := registrytest.New(t, ggcrregistry.WithReferrersSupport(true))
		testDeprecateOCI(t, reg.Host, opts(Options{OCI: "oci://" + reg.Host + "/charts", PlainHTTP: []string{reg.Host}, RegistryConfig: filepath.Join(t.TempDir(), "config.json")}), nil)
	})
	t.Run("docker-registry tag fallback", func(t *testing.T) {
		host, config := dockerRegistry(t)
		kc := remote.WithAuth(basicAuth("releaser", "pa55word"))
		testDeprecateOCI(t, host, opts(Options{OCI: "oci://" + host + "/charts", PlainHTTP: []string{host}, RegistryConfig: config}), []remote.Option{kc})
	})
}

func testDeprecateOCI(t *testing.T, host string, o Options, auth []remote.Option) {
	ctx := context.Background()
	chartDir := writeChart(t, t.TempDir(), "0.4.2", "0.4.2", "0.8")
	pub, err := Publish(ctx, chartDir, o)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(host+"/charts/app:0.4.2", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	subject := tag.Context().Digest(pub.OCI.ManifestDigest)
	tagsBefore, err := remote.List(tag.Context(), auth...)
	if err != nil {
		t.Fatal(err)
	}

	res, err := Deprecate(ctx, chartDir, "0.4.2", true, o)
	if err != nil {
		t.Fatal(err)
	}
	if res.OCI.Action != Deprecated || res.OCI.ManifestDigest != pub.OCI.ManifestDigest || res.OCI.Marker == "" {
		t.Fatalf("result %+v", res.OCI)
	}
	st, err := deprecation.Read(ctx, subject, auth...)
	if err != nil || !st.Deprecated || st.Markers != 1 {
		t.Fatalf("referrers say %+v, %v", st, err)
	}
	desc, err := remote.Head(tag, auth...)
	if err != nil || desc.Digest.String() != pub.OCI.ManifestDigest {
		t.Fatalf("tag 0.4.2 now %v (%v), was %s", desc, err, pub.OCI.ManifestDigest)
	}
	if got := pullBack(t, host, host+"/charts/app:0.4.2", o); !bytes.Equal(got, pub.Package) {
		t.Fatal("the chart's bytes changed")
	}
	tagsAfter, err := remote.List(tag.Context(), auth...)
	if err != nil {
		t.Fatal(err)
	}
	var added []string
	for _, a := range tagsAfter {
		if !strings.Contains(strings.Join(tagsBefore, " "), a) {
			added = append(added, a)
		}
	}
	// Only the referrers fallback tag may appear, never a moved version tag.
	for _, a := range added {
		if a != strings.Replace(pub.OCI.ManifestDigest, ":", "-", 1) {
			t.Errorf("deprecating created tag %q", a)
		}
	}

	if again, err := Deprecate(ctx, chartDir, "0.4.2", true, o); err != nil || again.OCI.Action != Unchanged || again.OCI.Marker != "" {
		t.Fatalf("repeat: %+v, %v", again.OCI, err)
	}
	back, err := Deprecate(ctx, chartDir, "0.4.2", false, o)
	if err != nil || back.OCI.Action != Undeprecated {
		t.Fatalf("undeprecate: %+v, %v", back.OCI, err)
	}
	if st, err := deprecation.Read(ctx, subject, auth...); err != nil || st.Deprecated || st.Markers != 2 {
		t.Fatalf("after undeprecate the referrers say %+v, %v", st, err)
	}
	if _, err := Deprecate(ctx, chartDir, "0.9.9", true, o); err == nil || failure.Code(err) != 2 {
		t.Fatalf("unpublished version: %v, want exit 2", err)
	}
}

func basicAuth(user, pass string) authn.Authenticator {
	return authn.FromConfig(authn.AuthConfig{Username: user, Password: pass})
}
