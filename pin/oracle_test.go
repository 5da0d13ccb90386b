package pin

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chartpin/chartpin/internal/golden"
)

// The release oracles are real release commits: from before/, with a lock
// file holding the digests the release wrote and the release's flags,
// chartpin must produce after/ byte for byte.
func TestReleaseOracles(t *testing.T) {
	cases := []struct {
		name     string
		lock     string
		config   string // chartpin.yaml beside the chart ("" = discovery)
		opts     Options
		handMade map[string][]int // file → 1-based lines the real release changed by hand (excluded)
	}{
		{
			// kubernetes/ingress-nginx b86d9f09 → dbb11b92 (controller v1.15.1, chart 4.15.1).
			name: "oracle-ingress-nginx",
			// Each new digest and the pin it replaces, with their platforms.
			lock: "registry.k8s.io/ingress-nginx/controller:v1.15.1: {digest: sha256:594ceea76b01c592858f803f9ff4d2cb40542cae2060410b2c95f75907d659e1, platforms: [linux/amd64, linux/arm64]}\n" +
				"registry.k8s.io/ingress-nginx/controller@sha256:4eea9a4cc2cb6ddcb7da14d377aaf452e68bd3dbe87fe280755d225c4d5e7e4e: {digest: sha256:4eea9a4cc2cb6ddcb7da14d377aaf452e68bd3dbe87fe280755d225c4d5e7e4e, platforms: [linux/amd64, linux/arm64]}\n" +
				"registry.k8s.io/ingress-nginx/controller-chroot:v1.15.1: {digest: sha256:af31d00c9d82c612896b380a9003bd36843b7647b98e4588251c66325317bc72, platforms: [linux/amd64, linux/arm64]}\n" +
				"registry.k8s.io/ingress-nginx/controller-chroot@sha256:8f3634837abc5c739baff6527934e08131e095317d69bf64d168e07aef53ac12: {digest: sha256:8f3634837abc5c739baff6527934e08131e095317d69bf64d168e07aef53ac12, platforms: [linux/amd64, linux/arm64]}\n",
			// The chroot image is the controller's -chroot variant: one block, two entries.
			config: "charts:\n  - dir: chart\n    appVersion: from:controller.image\n    images:\n" +
				"      - at: controller.image\n        repository: registry.k8s.io/ingress-nginx/controller\n" +
				"      - at: controller.image\n        repository: registry.k8s.io/ingress-nginx/controller-chroot\n        pin: digestChroot\n",
			opts: Options{SetTags: map[string]string{"controller.image": "v1.15.1"}},
			// Chart.yaml line 3, "- Update Ingress-Nginx version controller-v1.15.1" in the
			// artifacthub.io/changes annotation, is release-note prose the release wrote by hand.
			handMade: map[string][]int{"Chart.yaml": {3}},
		},
		{
			// aws/karpenter-provider-aws 85eeae8f → 692ccdd0 'chore: Release v1.14.0'; discovery, no config.
			name: "oracle-karpenter",
			lock: "public.ecr.aws/karpenter/controller:1.14.0: {digest: sha256:723130949e4cab989461ff07d1be4cd781d63515432494641b33c235f300ae23, platforms: [linux/amd64, linux/arm64]}\n" +
				"public.ecr.aws/karpenter/controller@sha256:ea731b0cd813add8b2947a76bfe861c38069d85922b01d0c1647d1466279b7fe: {digest: sha256:ea731b0cd813add8b2947a76bfe861c38069d85922b01d0c1647d1466279b7fe, platforms: [linux/amd64, linux/arm64]}\n",
			opts: Options{SetTags: map[string]string{"controller.image": "1.14.0"}, Version: "1.14.0"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := filepath.Join("testdata", tc.name)
			work := t.TempDir()
			chart := filepath.Join(work, "chart")
			golden.WriteTree(t, chart, golden.ReadTree(t, filepath.Join(base, "before")))
			lockPath := filepath.Join(work, "digests.yaml")
			writeTree(t, work, map[string]string{"digests.yaml": tc.lock})
			opts := tc.opts
			opts.Resolver = offline(t, lockPath)
			if tc.config != "" {
				writeTree(t, work, map[string]string{"chartpin.yaml": tc.config})
				opts.ConfigPath = filepath.Join(work, "chartpin.yaml")
			} else {
				opts.ChartDirs = []string{chart}
			}
			res, err := Plan(context.Background(), opts)
			if err != nil {
				t.Fatal(err)
			}
			if err := res.Apply(); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"values.yaml", "Chart.yaml"} {
				got := read(t, filepath.Join(chart, f))
				want := read(t, filepath.Join(base, "after", f))
				before := read(t, filepath.Join(base, "before", f))
				gl, wl, bl := lines([]byte(got)), lines([]byte(want)), lines([]byte(before))
				for _, n := range tc.handMade[f] {
					// the hand-made line must be the only remaining difference: keep ours as before
					if gl[n-1] != bl[n-1] {
						t.Errorf("%s:%d: chartpin changed a line it should not: %q", f, n, gl[n-1])
					}
					gl[n-1] = wl[n-1]
				}
				if strings.Join(gl, "") != strings.Join(wl, "") {
					t.Errorf("%s differs from the release:\n%s", f, unified("release/"+f, "chartpin/"+f, []byte(strings.Join(wl, "")), []byte(strings.Join(gl, ""))))
				}
			}
			// the release is reproduced, so running again is a no-op
			res2, err := Plan(context.Background(), opts)
			if err != nil {
				t.Fatal(err)
			}
			if res2.Changed() {
				t.Errorf("second run changes files:\n%s", res2.Diff())
			}
			if _, err := os.Stat(filepath.Join(chart, "values.yaml")); err != nil {
				t.Fatal(err)
			}
		})
	}
}
