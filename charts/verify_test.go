package charts_test

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/chartpin/chartpin/internal/cosigned"
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
	for _, tg := range f.Targets {
		if (tg.Verify != nil) != (tg.ID == "jobs-manager-api") {
			t.Errorf("reconcile reads target %s with verify %+v", tg.ID, tg.Verify)
		}
	}
}

// verify: without a PEM key is refused, by the schema and, without it, by
// the library, naming the image.
func TestVerifyKeyRequired(t *testing.T) {
	for _, values := range []string{`images: {jobsManager: {verify: {}}}`, `images: {jobsManager: {verify: {key: keys/cosign.pub}}}`} {
		_, _, err := installDryRun(loadExample(t), releaseNs, parseValues(t, unpinned, values))
		if err == nil || !strings.Contains(err.Error(), "/images/jobsManager/verify") {
			t.Errorf("values %s: error %v, want a schema rejection of images.jobsManager.verify", values, err)
		}
		c := loadExample(t)
		c.Schema = nil
		_, _, err = installDryRun(c, releaseNs, parseValues(t, unpinned, values))
		if err == nil || !strings.Contains(err.Error(), "chartpin: images.jobsManager.verify needs key: the PEM public key itself") {
			t.Errorf("values %s without the schema: error %v, want the library's refusal", values, err)
		}
	}
}
