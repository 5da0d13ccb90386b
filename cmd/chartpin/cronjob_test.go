package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// runMainEnv makes the test binary act as chartpin (see TestMain), so a test
// can run the CLI as its own process with exactly the environment a pod has.
const runMainEnv = "CHARTPIN_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
	}
	if os.Getenv(asChartpin) != "" {
		chartpinProcess()
	}
	os.Exit(m.Run())
}

// renderExample renders charts/example as `helm install rel -n ns --dry-run`
// with the given values (YAML documents, later ones win).
func renderExample(t *testing.T, ns string, values ...string) []byte {
	t.Helper()
	c, err := loader.Load("../../charts/example")
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]any{}
	for _, v := range values {
		m, err := chartutil.ReadValues([]byte(v))
		if err != nil {
			t.Fatalf("values %q: %v", v, err)
		}
		vals = chartutil.MergeTables(m.AsMap(), vals)
	}
	in := action.NewInstall(&action.Configuration{})
	in.DryRun, in.DryRunOption, in.ClientOnly, in.Replace = true, "client", true, true
	in.ReleaseName, in.Namespace = "rel", ns
	rel, err := in.Run(c, vals)
	if err != nil {
		t.Fatalf("rendering the example chart: %v", err)
	}
	return []byte(rel.Manifest)
}

// cronJobPod is the first container of a CronJob as a pod would run it:
// its args and env, each volume mount materialised in a temporary directory
// (ConfigMap and Secret items written, emptyDir empty) and every path under
// a mount point rewritten to that directory.
type cronJobPod struct {
	Args []string
	Env  []string
}

func readCronJob(t *testing.T, c kubernetes.Interface, ns, name string) cronJobPod {
	t.Helper()
	ctx := context.Background()
	cj, err := c.BatchV1().CronJobs(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := cj.Spec.JobTemplate.Spec.Template.Spec
	ctr := spec.Containers[0]
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	var mounts [][2]string // mount path, local directory
	for _, m := range ctr.VolumeMounts {
		dir := t.TempDir()
		v := volumes[m.Name]
		files := map[string][]byte{}
		var items []corev1.KeyToPath
		switch {
		case v.ConfigMap != nil:
			cm, err := c.CoreV1().ConfigMaps(ns).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for k, s := range cm.Data {
				files[k] = []byte(s)
			}
			items = v.ConfigMap.Items
		case v.Secret != nil:
			s, err := c.CoreV1().Secrets(ns).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			files = s.Data
			items = v.Secret.Items
		case v.EmptyDir != nil:
		default:
			t.Fatalf("CronJob %s: volume %s: only configMap, secret and emptyDir are materialised", name, m.Name)
		}
		if len(items) > 0 {
			picked := map[string][]byte{}
			for _, it := range items {
				picked[it.Path] = files[it.Key]
			}
			files = picked
		}
		for p, data := range files {
			if err := os.WriteFile(filepath.Join(dir, p), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		mounts = append(mounts, [2]string{m.MountPath, dir})
	}
	local := func(s string) string {
		for _, m := range mounts {
			if i := strings.Index(s, m[0]); i >= 0 {
				return s[:i] + m[1] + s[i+len(m[0]):]
			}
		}
		return s
	}
	var pod cronJobPod
	if len(ctr.Command) != 1 || ctr.Command[0] != "chartpin" {
		t.Fatalf("CronJob %s runs %v, want chartpin", name, ctr.Command)
	}
	for _, a := range ctr.Args {
		pod.Args = append(pod.Args, local(a))
	}
	for _, e := range ctr.Env {
		if e.ValueFrom != nil {
			t.Fatalf("CronJob %s: env %s from a reference is not materialised", name, e.Name)
		}
		pod.Env = append(pod.Env, e.Name+"="+local(e.Value))
	}
	return pod
}

// run runs chartpin as a process with the pod's env plus extra (e.g.
// KUBECONFIG standing in for the in-cluster config) and nothing else from
// the test's environment.
func (p cronJobPod) run(t *testing.T, extra []string, globalFlags ...string) (stdout, stderr string, code int) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, append(globalFlags, p.Args...)...)
	cmd.Env = append(append([]string{runMainEnv + "=1", "PATH=" + os.Getenv("PATH")}, p.Env...), extra...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}
