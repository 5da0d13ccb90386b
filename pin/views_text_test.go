package pin

import (
	"context"
	"testing"

	"github.com/chartpin/chartpin/resolver"
)

// textOf plans dir (written from files) offline against lock and returns
// Text and Markdown, rendered from inside dir.
func textOf(t *testing.T, files map[string]string, lock string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	writeTree(t, dir, files)
	l, err := resolver.ParseLock("digests.yaml", []byte(lock))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Plan(context.Background(), Options{ChartDirs: []string{dir}, Resolver: resolver.NewOffline(l)})
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	return res.Text(), res.Markdown()
}

// Review finding 2: a chart without appVersion shows only its version.
func TestTextChartWithoutAppVersion(t *testing.T) {
	txt, md := textOf(t, map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: lib\nversion: 1.0.0\n",
		"values.yaml": "image:\n  repository: example.org/app\n  tag: \"1.0\"\n  digest: \"\"\n",
	}, "example.org/app:1.0: "+copyNew+"\n")
	want := "chart lib (.)\n" +
		"  pinned  values.yaml:4 image.digest example.org/app:1.0 (none) -> sha256:222222222222\n" +
		"  version 1.0.0 -> 1.0.1\n"
	if txt != want {
		t.Errorf("text:\n%s\nwant:\n%s", txt, want)
	}
	wantMD := "### lib\n\n| image | tag | old → new digest | platforms |\n|---|---|---|---|\n" +
		"| `example.org/app` | `1.0` | `(none)` → `sha256:222222222222` |  |\n\n" +
		"Chart version `1.0.0` → `1.0.1`.\n\n"
	if md != wantMD {
		t.Errorf("markdown:\n%s\nwant:\n%s", md, wantMD)
	}
}

// Review finding 2: a run that wrote nothing but skipped pins does not
// claim that every pin is current.
func TestTextNothingWrittenButSkipped(t *testing.T) {
	d := "sha256:" + copyOld[7:]
	txt, _ := textOf(t, map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: app\nversion: 1.0.0\nappVersion: \"1.0\"\n",
		"values.yaml": "image:\n  repository: example.org/app\n  tag: \"1.0\"\n  digest: " + d + "\n" +
			"sidecar:\n  digest: \"\"\n",
	}, "example.org/app:1.0: "+d+"\n")
	want := "chart app (.)\n" +
		"  ok      values.yaml:4 image.digest example.org/app:1.0 sha256:111111111111 -> sha256:111111111111\n" +
		"  SKIPPED values.yaml:6 sidecar.digest: block sidecar has no repository or image key (configure repository: in chartpin.yaml)\n" +
		"nothing written: every pinned image is current, but 1 pin is not pinned (SKIPPED above)\n"
	if txt != want {
		t.Errorf("text:\n%s\nwant:\n%s", txt, want)
	}

	// Without skips the old sentence stays.
	txt, _ = textOf(t, map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: app\nversion: 1.0.0\nappVersion: \"1.0\"\n",
		"values.yaml": "image:\n  repository: example.org/app\n  tag: \"1.0\"\n  digest: " + d + "\n",
	}, "example.org/app:1.0: "+d+"\n")
	if want := "chart app (.)\n  ok      values.yaml:4 image.digest example.org/app:1.0 sha256:111111111111 -> sha256:111111111111\nnothing to do: every pin is current\n"; txt != want {
		t.Errorf("text:\n%s\nwant:\n%s", txt, want)
	}
}
