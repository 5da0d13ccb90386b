package charts_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/cli/values"
	"helm.sh/helm/v3/pkg/getter"
	corev1 "k8s.io/api/core/v1"

	"github.com/chartpin/chartpin/internal/cosigned"
	"github.com/chartpin/chartpin/internal/cosigned/keyless"
	"github.com/chartpin/chartpin/reconcile"
)

// An image block's verify.key (the PEM) reaches the reconcile: the target
// that resolves that image carries it in targets.yaml, which the reconcile
// parses into its policy; a follower of a target inherits it through the
// target it follows, and an image without verify: renders none.
func TestTargetsCarryVerifyKey(t *testing.T) {
	key, err := cosigned.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	pem := string(key.PublicPEM())
	r := render(t, releaseNs, unpinned, "env: dev", fmt.Sprintf("images: {jobsManager: {verify: {key: %q}}}", pem))
	if r.targets == nil {
		t.Fatal("no targets.yaml rendered")
	}
	got := map[string]target{}
	for _, tg := range r.targets.Targets {
		got[tg.ID] = tg
	}
	if api := got["jobs-manager-api"]; api.Verify == nil || api.Verify.Key != pem {
		t.Errorf("jobs-manager-api verify %+v, want the key\n%s", api.Verify, pem)
	}
	if proxy := got["requests-proxy-proxy"]; proxy.Follows != "jobs-manager-api" || proxy.Verify != nil {
		t.Errorf("requests-proxy-proxy: follows %q, verify %+v; want it to follow the verified target, with no key of its own", proxy.Follows, proxy.Verify)
	}
	for _, id := range []string{"jobs-manager-pods-monitor", "resource-monitor-resource-monitor"} {
		if v := got[id].Verify; v != nil {
			t.Errorf("%s has verify %+v but its image has none", id, v)
		}
	}
	// What the reconcile reads: the ConfigMap's targets.yaml as rendered.
	for _, tg := range reconcileTargets(t, r) {
		if (tg.Verify != nil) != (tg.ID == "jobs-manager-api") {
			t.Errorf("reconcile reads target %s with verify %+v", tg.ID, tg.Verify)
		}
	}
}

// reconcileTargets is the targets.yaml of r's reconcile ConfigMap as the
// reconcile parses it.
func reconcileTargets(t *testing.T, r rendered) []reconcile.Target {
	t.Helper()
	o, ok := find(r.objs, "ConfigMap", releaseNs, r.base+"-reconcile")
	if !ok {
		t.Fatal("no reconcile ConfigMap")
	}
	var cm corev1.ConfigMap
	o.into(t, &cm)
	f, err := reconcile.ParseTargets("targets.yaml", []byte(cm.Data["targets.yaml"]))
	if err != nil {
		t.Fatal(err)
	}
	return f.Targets
}

// verify: without a PEM key is refused, by the schema and, without it, by
// the library, naming the image.
func TestVerifyKeyRequired(t *testing.T) {
	for _, vals := range []string{`images: {jobsManager: {verify: {}}}`, `images: {jobsManager: {verify: {key: keys/cosign.pub}}}`} {
		_, _, err := installDryRun(loadExample(t), releaseNs, parseValues(t, unpinned, vals))
		if err == nil || !strings.Contains(err.Error(), "/images/jobsManager/verify") {
			t.Errorf("values %s: error %v, want a schema rejection of images.jobsManager.verify", vals, err)
		}
		c := loadExample(t)
		c.Schema = nil
		_, _, err = installDryRun(c, releaseNs, parseValues(t, unpinned, vals))
		if err == nil || !strings.Contains(err.Error(), "chartpin: images.jobsManager.verify needs key: the PEM public key itself") {
			t.Errorf("values %s without the schema: error %v, want the library's refusal", vals, err)
		}
	}
}

const signerIdentity, signerIssuer = keyless.Identity, keyless.Issuer

// keylessValues is the values an operator gives for a keyless policy on
// jobsManager: identity and issuer in YAML, the trusted root read by
// --set-file as the helm CLI does (the pod has no chartpin.yaml).
func keylessValues(t *testing.T, rootPath string, docs ...string) map[string]any {
	t.Helper()
	opts := values.Options{FileValues: []string{"images.jobsManager.verify.trustedRoot=" + rootPath}}
	fromFile, err := opts.MergeValues(getter.Providers{})
	if err != nil {
		t.Fatal(err)
	}
	return chartutil.MergeTables(fromFile, parseValues(t, append([]string{unpinned}, docs...)...))
}

// An image block's keyless verify: {identity, issuer, trustedRoot} reaches
// its target in targets.yaml as given, and the reconcile reads it into a
// policy under that root; the follower of the target inherits it.
func TestTargetsCarryKeylessVerify(t *testing.T) {
	_, tr, err := keyless.NewWithRoot()
	if err != nil {
		t.Fatal(err)
	}
	rootPath := filepath.Join(t.TempDir(), "trusted_root.json")
	if err := os.WriteFile(rootPath, tr, 0o644); err != nil {
		t.Fatal(err)
	}
	manifest, notes, err := installDryRun(loadExample(t), releaseNs, keylessValues(t, rootPath, "env: dev",
		fmt.Sprintf("images: {jobsManager: {verify: {identity: %q, issuer: %q}}}", signerIdentity, signerIssuer)))
	if err != nil {
		t.Fatal(err)
	}
	r := renderParsed(t, rendered{ns: releaseNs, notes: notes}, manifest)
	if r.targets == nil {
		t.Fatal("no targets.yaml rendered")
	}
	got := map[string]target{}
	for _, tg := range r.targets.Targets {
		got[tg.ID] = tg
	}
	api := got["jobs-manager-api"]
	if v := api.Verify; v == nil || v.Key != "" || v.Identity != signerIdentity || v.Issuer != signerIssuer || strings.TrimSpace(v.TrustedRoot) != strings.TrimSpace(string(tr)) {
		t.Errorf("jobs-manager-api verify %+v, want identity %s, issuer %s and the trusted root as given", api.Verify, signerIdentity, signerIssuer)
	}
	if proxy := got["requests-proxy-proxy"]; proxy.Follows != "jobs-manager-api" || proxy.Verify != nil {
		t.Errorf("requests-proxy-proxy: follows %q, verify %+v; want it to follow the verified target", proxy.Follows, proxy.Verify)
	}
	for _, tg := range reconcileTargets(t, r) {
		if want := tg.ID == "jobs-manager-api"; (tg.Verify != nil && tg.Verify.Identity == signerIdentity && tg.Verify.Issuer == signerIssuer) != want {
			t.Errorf("reconcile reads target %s with verify %+v", tg.ID, tg.Verify)
		}
	}
}

// A keyless verify: with a key too, without its issuer or trusted root, or
// with a path for the trusted root is refused by the schema and, without
// it, by the library, naming the image.
func TestKeylessVerifyRefused(t *testing.T) {
	rootPath := filepath.Join(t.TempDir(), "trusted_root.json")
	if err := os.WriteFile(rootPath, []byte(`{"mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	key, err := cosigned.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		vals    string
		setFile bool
		want    string
	}{
		{fmt.Sprintf("images: {jobsManager: {verify: {key: %q, identity: %q, issuer: %q}}}", key.PublicPEM(), signerIdentity, signerIssuer), true,
			"chartpin: images.jobsManager.verify has key and a keyless identity"},
		{fmt.Sprintf("images: {jobsManager: {verify: {identity: %q}}}", signerIdentity), true,
			"chartpin: images.jobsManager.verify needs identity, issuer and trustedRoot together"},
		{fmt.Sprintf("images: {jobsManager: {verify: {identity: %q, issuer: %q}}}", signerIdentity, signerIssuer), false,
			"chartpin: images.jobsManager.verify needs identity, issuer and trustedRoot together"},
		{fmt.Sprintf("images: {jobsManager: {verify: {identity: %q, issuer: %q, trustedRoot: trusted_root.json}}}", signerIdentity, signerIssuer), false,
			"chartpin: images.jobsManager.verify.trustedRoot is the JSON of trusted_root.json itself"},
	} {
		vals := func() map[string]any {
			if tc.setFile {
				return keylessValues(t, rootPath, tc.vals)
			}
			return parseValues(t, unpinned, tc.vals)
		}
		_, _, err := installDryRun(loadExample(t), releaseNs, vals())
		if err == nil || !strings.Contains(err.Error(), "/images/jobsManager/verify") {
			t.Errorf("values %s: error %v, want a schema rejection of images.jobsManager.verify", tc.vals, err)
		}
		c := loadExample(t)
		c.Schema = nil
		_, _, err = installDryRun(c, releaseNs, vals())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("values %s without the schema: error %v, want %q", tc.vals, err, tc.want)
		}
	}
}
