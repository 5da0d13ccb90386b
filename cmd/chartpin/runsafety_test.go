package main

import (
	"bytes"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"

	"github.com/chartpin/chartpin/internal/golden"
	"github.com/chartpin/chartpin/internal/registrytest"
)

// runChart is a chart whose pin run writes three files: values.yaml (the
// pin and its tag), templates/NOTES.txt (a copy of the old digest) and
// Chart.yaml (the bump).
func runChart(host, old string) map[string][]byte {
	return map[string][]byte{
		"Chart.yaml":          []byte("apiVersion: v2\nname: app\nversion: 0.1.0\nappVersion: \"0.1.0\"\n"),
		"values.yaml":         []byte("# app\nimage:\n  repository: " + host + "/team/app\n  tag: \"0.9\"\n  digest: \"" + old + "\"  # written by chartpin\n"),
		"templates/NOTES.txt": []byte("pinned " + host + "/team/app@" + old + "\n"),
	}
}

// runRegistry pushes team/app 0.9, 1.0 and 1.1 and returns the registry and 0.9's digest.
func runRegistry(t *testing.T) (*registrytest.Registry, string) {
	t.Helper()
	t.Setenv("GITHUB_ACTIONS", "")
	reg := registrytest.New(t)
	old := reg.PushIndex(t, "team/app", "0.9", "linux/amd64", "linux/arm64")
	reg.PushIndex(t, "team/app", "1.0", "linux/amd64", "linux/arm64")
	reg.PushIndex(t, "team/app", "1.1", "linux/amd64", "linux/arm64")
	return reg, old
}

// inProcess runs chartpin (in this process) on a copy of files and returns the tree it leaves.
func inProcess(t *testing.T, files map[string][]byte, args ...string) map[string][]byte {
	t.Helper()
	dir := t.TempDir()
	golden.WriteTree(t, dir, files)
	if _, errOut, code := runCLI(t, append(args, dir)...); code != 0 {
		t.Fatalf("chartpin %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	return golden.ReadTree(t, dir)
}

// TestPinKilledAtEveryWriteStep kills pin with SIGKILL at each step of its
// writes (before and after every rename: the journal's, then each file's).
// Between the kill and the next run, every chart file holds its old or its
// new bytes, and nothing chartpin left is in what helm package ships; a dry
// run writes nothing and reports a half-written chart; the next run
// completes the interrupted one, so the chart ends byte for byte as after an
// uninterrupted run, with no journal or temporary file left.
func TestPinKilledAtEveryWriteStep(t *testing.T) {
	reg, old := runRegistry(t)
	orig := runChart(reg.Host, old)
	args := []string{"--insecure-registry", reg.Host, "pin", "--rewrite-copies", "--set-tag", "image=1.0"}

	ref := t.TempDir()
	golden.WriteTree(t, ref, orig)
	p := startChartpin(t, nil, append(args, ref)...)
	if code, errOut := p.wait(t); code != 0 {
		t.Fatalf("uninterrupted run: exit %d: %s", code, errOut)
	}
	want := golden.ReadTree(t, ref)
	for _, n := range []string{"values.yaml", "Chart.yaml", "templates/NOTES.txt"} {
		if bytes.Equal(want[n], orig[n]) {
			t.Fatalf("the run does not write %s", n)
		}
	}
	steps := p.steps()
	if steps != 8 { // journal, values.yaml, NOTES.txt, Chart.yaml: before and after each rename
		t.Fatalf("%d write steps, want 8:\n%s", steps, p.errors())
	}

	for i := 1; i <= steps; i++ {
		t.Run(fmt.Sprintf("step %d", i), func(t *testing.T) {
			dir := t.TempDir()
			golden.WriteTree(t, dir, orig)
			p := startChartpin(t, []string{fmt.Sprintf("CHARTPIN_TEST_PAUSE=%d", i)}, append(args, dir)...)
			p.waitLine(t, "paused at ")
			if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			if code, _ := p.wait(t); code != -1 {
				t.Fatalf("exit %d, want killed", code)
			}

			ch, err := loader.LoadDir(dir)
			if err != nil {
				t.Fatalf("helm cannot load the chart after the kill: %v", err)
			}
			for _, f := range ch.Raw {
				if strings.Contains(f.Name, "chartpin") {
					t.Errorf("helm package would ship %s", f.Name)
				}
			}
			killed := golden.ReadTree(t, dir)
			pending := false
			for n, b := range killed {
				if strings.HasPrefix(filepath.Base(n), ".") {
					continue // chartpin's own, checked above
				}
				switch {
				case bytes.Equal(b, want[n]):
				case bytes.Equal(b, orig[n]):
					pending = true
				default:
					t.Errorf("%s is neither its old nor its new bytes:\n%s", n, b)
				}
			}
			_, journal := killed["templates/.chartpin-journal"]

			_, errOut, code := runCLI(t, append(append([]string{}, args...), "--dry-run", dir)...)
			if journal && pending {
				if code != 1 || !strings.Contains(errOut, "chart "+dir+" is half-written by an interrupted chartpin run") ||
					!strings.Contains(errOut, "run chartpin pin without --dry-run to complete it") {
					t.Errorf("dry run after the kill: exit %d: %s", code, errOut)
				}
			} else if code != 0 {
				t.Errorf("dry run after the kill: exit %d: %s", code, errOut)
			}
			golden.SameTree(t, "after the dry run", golden.ReadTree(t, dir), killed)

			_, errOut, code = runCLI(t, append(args, dir)...)
			if code != 0 {
				t.Fatalf("the run after the kill: exit %d: %s", code, errOut)
			}
			if completed := strings.Contains(errOut, "completed the writes of an interrupted chartpin run"); completed != (journal && pending) {
				t.Errorf("journal %v, files pending %v; the next run says: %s", journal, pending, errOut)
			}
			golden.SameTree(t, "after the next run", golden.ReadTree(t, dir), want)
		})
	}
}

// TestTwoPinRunsOnOneChart runs two pin processes on one chart. While one
// holds the chart, the other waits, then fails with exit 1 naming the chart
// and the holder, and writes nothing; the first ends as if alone. Started
// together, the second waits for the first, and the chart ends as after
// the two runs one after the other: never values.yaml from one and
// Chart.yaml from the other.
func TestTwoPinRunsOnOneChart(t *testing.T) {
	reg, old := runRegistry(t)
	orig := runChart(reg.Host, old)
	a := []string{"--insecure-registry", reg.Host, "pin", "--rewrite-copies", "--set-tag", "image=1.0"}
	b := []string{"--insecure-registry", reg.Host, "pin", "--rewrite-copies", "--set-tag", "image=1.1", "--bump", "major"}
	wantA := inProcess(t, orig, a...)

	dir := t.TempDir()
	golden.WriteTree(t, dir, orig)
	first := startChartpin(t, []string{"CHARTPIN_TEST_PAUSE=1"}, append(a, dir)...)
	first.waitLine(t, "paused at ")
	second := startChartpin(t, []string{"CHARTPIN_TEST_LOCK_WAIT=300ms"}, append(b, dir)...)
	code, errOut := second.wait(t)
	holder := fmt.Sprintf("chart %s is being written by another chartpin run (pid %d: ", dir, first.cmd.Process.Pid)
	if code != 1 || !strings.Contains(errOut, holder) || !strings.Contains(errOut, "wait until it ends, then run again") {
		t.Errorf("second run: exit %d: %s\nwant exit 1 and %q", code, errOut, holder)
	}
	if second.steps() != 0 {
		t.Errorf("the second run wrote:\n%s", second.errors())
	}
	first.stdin.Close()
	if code, errOut := first.wait(t); code != 0 {
		t.Fatalf("first run: exit %d: %s", code, errOut)
	}
	golden.SameTree(t, "after both runs", golden.ReadTree(t, dir), wantA)

	// Both at once, with the default wait.
	wantAB := inProcess(t, wantA, b...)
	wantBA := inProcess(t, inProcess(t, orig, b...), a...)
	for i := range 3 {
		dir := t.TempDir()
		golden.WriteTree(t, dir, orig)
		pa, pb := startChartpin(t, nil, append(a, dir)...), startChartpin(t, nil, append(b, dir)...)
		for _, p := range []*process{pa, pb} {
			if code, errOut := p.wait(t); code != 0 {
				t.Errorf("round %d: exit %d: %s", i, code, errOut)
			}
		}
		got := golden.ReadTree(t, dir)
		if !maps.EqualFunc(got, wantAB, bytes.Equal) && !maps.EqualFunc(got, wantBA, bytes.Equal) {
			golden.SameTree(t, fmt.Sprintf("round %d, neither run after the other", i), got, wantAB)
		}
	}
}

// TestSignalEndsABlockedRun sends SIGTERM or SIGINT to a pin blocked on a
// registry that never answers: it ends with exit 1, says it was
// interrupted, and leaves every file as it was.
func TestSignalEndsABlockedRun(t *testing.T) {
	t.Setenv("GITHUB_ACTIONS", "")
	entered, hang := make(chan struct{}, 100), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(hang) })
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, sig := range []struct {
		sig  syscall.Signal
		text string
	}{{syscall.SIGTERM, "terminated"}, {syscall.SIGINT, "interrupt"}} {
		t.Run(sig.text, func(t *testing.T) {
			dir := t.TempDir()
			orig := runChart(host, "")
			golden.WriteTree(t, dir, orig)
			p := startChartpin(t, nil, "--insecure-registry", host, "pin", dir)
			<-entered
			if err := p.cmd.Process.Signal(sig.sig); err != nil {
				t.Fatal(err)
			}
			code, errOut := p.wait(t)
			if code != 1 || !strings.HasPrefix(errOut, "chartpin: interrupted ("+sig.text+" signal received)") {
				t.Errorf("exit %d: %s", code, errOut)
			}
			golden.SameTree(t, "after the signal", golden.ReadTree(t, dir), orig)
		})
	}
}

// TestSignalEndsAStuckWrite sends SIGTERM to a pin stuck inside a write
// step, where no context reaches: it still ends (exit 1, saying so), and the
// next run completes its writes.
func TestSignalEndsAStuckWrite(t *testing.T) {
	reg, old := runRegistry(t)
	orig := runChart(reg.Host, old)
	args := []string{"--insecure-registry", reg.Host, "pin", "--rewrite-copies", "--set-tag", "image=1.0"}
	want := inProcess(t, orig, args...)
	dir := t.TempDir()
	golden.WriteTree(t, dir, orig)
	p := startChartpin(t, []string{"CHARTPIN_TEST_PAUSE=4"}, append(args, dir)...) // values.yaml written, the rest not
	p.waitLine(t, "paused at ")
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code, errOut := p.wait(t)
	if code != 1 || !strings.Contains(errOut, "chartpin: interrupted (terminated signal received); a step did not stop within") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	_, errOut, code = runCLI(t, append(args, dir)...)
	if code != 0 || !strings.Contains(errOut, "completed the writes of an interrupted chartpin run (templates/NOTES.txt, Chart.yaml)") {
		t.Errorf("next run: exit %d: %s", code, errOut)
	}
	golden.SameTree(t, "after the next run", golden.ReadTree(t, dir), want)
}

// TestChartFilesMustBeRegular: a values.yaml that is a FIFO, a link to
// /dev/zero or larger than the limit is an input error naming the file,
// reached at once (a FIFO's open does not wait for a writer, /dev/zero is
// not read), and nothing is written.
func TestChartFilesMustBeRegular(t *testing.T) {
	t.Setenv("GITHUB_ACTIONS", "")
	chart := []byte("apiVersion: v2\nname: app\nversion: 0.1.0\n")
	for _, tc := range []struct {
		name string
		make func(t *testing.T, values string)
		want string
	}{
		{"fifo", func(t *testing.T, values string) {
			if err := syscall.Mkfifo(values, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "values.yaml: a named pipe (FIFO), not a regular file; chart files must be regular files (a symbolic link to one is fine)"},
		{"link to /dev/zero", func(t *testing.T, values string) {
			if err := os.Symlink("/dev/zero", values); err != nil {
				t.Fatal(err)
			}
		}, "values.yaml (a link to /dev/zero): a character device, not a regular file"},
		{"oversized", func(t *testing.T, values string) {
			big := bytes.Repeat([]byte("# padding\n"), 8<<20/10+1)
			if err := os.WriteFile(values, big, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "values.yaml: larger than the 8 MiB a chart file may have"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "Chart.yaml"), chart, 0o644); err != nil {
				t.Fatal(err)
			}
			values := filepath.Join(dir, "values.yaml")
			tc.make(t, values)
			before, err := os.Lstat(values)
			if err != nil {
				t.Fatal(err)
			}
			p := startChartpin(t, nil, "pin", dir)
			code, errOut := p.wait(t)
			if code != 2 || !strings.Contains(errOut, filepath.Join(dir, tc.want)) {
				t.Errorf("exit %d: %s\nwant exit 2 and %q", code, errOut, tc.want)
			}
			entries, _ := os.ReadDir(dir)
			if got, _ := os.ReadFile(filepath.Join(dir, "Chart.yaml")); !bytes.Equal(got, chart) || len(entries) != 2 {
				t.Errorf("Chart.yaml %q; files %v", got, entries)
			}
			after, err := os.Lstat(values)
			if err != nil || after.Mode() != before.Mode() || after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) {
				t.Errorf("values.yaml changed: %v %v", after, err)
			}
		})
	}
}
