package ghactions_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chartpin/chartpin/ghactions"
	"github.com/chartpin/chartpin/internal/golden"
)

// counter makes predictable tokens, so the golden files are stable.
func counter() func() (string, error) {
	n := 0
	return func() (string, error) { n++; return fmt.Sprintf("token%d", n), nil }
}

// env is an Actions environment with real step files in a temp dir.
func env(t *testing.T, enabled string) (getenv func(string) string, summary, output string) {
	dir := t.TempDir()
	summary, output = filepath.Join(dir, "summary.md"), filepath.Join(dir, "output")
	vars := map[string]string{
		"GITHUB_ACTIONS":      enabled,
		"GITHUB_STEP_SUMMARY": summary,
		"GITHUB_OUTPUT":       output,
		"GITHUB_WORKSPACE":    "/home/runner/work/repo",
	}
	return func(k string) string { return vars[k] }, summary, output
}

// hostileTag is an image tag from a values.yaml that tries to end the
// annotation early and issue its own commands.
const hostileTag = "1.2%0A::set-output name=changed::false\n::error::fake\r\n::add-mask::x"

func sampleReport(r *ghactions.Runner) ghactions.Report {
	return ghactions.Report{
		Annotations: []ghactions.Annotation{
			{Level: ghactions.Error, File: r.RelPath("/home/runner/work/repo/charts/app/values.yaml"), Line: 12,
				Title: "DRIFT images.app.digest", Message: "ghcr.io/x/app:1.2 now resolves to sha256:bbbb, pinned sha256:aaaa"},
			{Level: ghactions.Warning, File: "charts/a,b:c/values.yaml", Line: 3, Title: "title: with, commas",
				Message: "tag " + hostileTag},
			{Level: ghactions.Notice, Message: "100% done"},
		},
		Summary: "### chartpin drift\n\n| status | pin | float |\n|---|---|---|\n| DRIFT | " +
			ghactions.Text("images.a|b") + " | " + ghactions.Code("ghcr.io/x/app:"+hostileTag+"`x`") + " |\n",
		Outputs: []ghactions.Output{
			{Name: "findings", Value: "1"},
			{Name: "changed", Value: "true"},
			{Name: "version", Value: "app=1.2.4\n" + hostileTag + "\nghadelimiter_token9"},
		},
	}
}

func TestEmitGolden(t *testing.T) {
	getenv, summary, output := env(t, "true")
	r := ghactions.FromEnv(getenv, ghactions.Options{Token: counter()})
	if !r.Enabled() {
		t.Fatal("GITHUB_ACTIONS=true: want enabled")
	}
	var log bytes.Buffer
	err := r.Untrusted(&log, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "DRIFT images.app.digest %s", hostileTag)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Emit(&log, sampleReport(r)); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "log.golden", log.Bytes())
	s, err := os.ReadFile(summary)
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "summary.golden", s)
	o, err := os.ReadFile(output)
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "output.golden", o)
}

// TestInjectionInert parses the log the way the runner does: only lines that
// start with "::" are commands, and nothing may open outside the annotations
// chartpin meant, or inside a stop-commands block.
func TestInjectionInert(t *testing.T) {
	getenv, _, output := env(t, "true")
	r := ghactions.FromEnv(getenv, ghactions.Options{Token: counter()})
	var log bytes.Buffer
	if err := r.Untrusted(&log, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "tag %s\n", hostileTag)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	rep := sampleReport(r)
	if err := r.Emit(&log, rep); err != nil {
		t.Fatal(err)
	}
	stopped := ""
	var commands []string
	for _, line := range strings.Split(log.String(), "\n") {
		if !strings.HasPrefix(line, "::") {
			continue
		}
		if stopped != "" {
			if line == "::"+stopped+"::" {
				stopped = ""
			}
			continue
		}
		if tok, ok := strings.CutPrefix(line, "::stop-commands::"); ok {
			stopped = tok
			continue
		}
		commands = append(commands, line)
	}
	if stopped != "" {
		t.Errorf("commands were never resumed (token %s)", stopped)
	}
	if len(commands) != len(rep.Annotations) {
		t.Fatalf("runner would see %d commands, want exactly the %d annotations:\n%s", len(commands), len(rep.Annotations), strings.Join(commands, "\n"))
	}
	for _, c := range commands {
		for _, bad := range []string{"set-output", "add-mask", "::error::fake"} {
			if strings.Contains(c, bad) && !strings.Contains(c, "%0A") {
				t.Errorf("command line carries an unescaped %q: %s", bad, c)
			}
		}
	}
	// The output file parses back to exactly the outputs given, values intact.
	data, err := os.ReadFile(output)
	if err != nil {
		t.Fatal(err)
	}
	got := parseOutputs(t, string(data))
	if len(got) != len(rep.Outputs) {
		t.Fatalf("output file holds %d outputs, want %d: %v", len(got), len(rep.Outputs), got)
	}
	for _, o := range rep.Outputs {
		if got[o.Name] != o.Value {
			t.Errorf("output %s = %q, want %q", o.Name, got[o.Name], o.Value)
		}
	}
}

// parseOutputs reads $GITHUB_OUTPUT as the runner does.
func parseOutputs(t *testing.T, s string) map[string]string {
	t.Helper()
	out := map[string]string{}
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		name, delim, ok := strings.Cut(lines[i], "<<")
		if !ok {
			k, v, ok := strings.Cut(lines[i], "=")
			if !ok {
				t.Fatalf("output line %d is neither form: %q", i+1, lines[i])
			}
			out[k] = v
			continue
		}
		var val []string
		for i++; i < len(lines) && lines[i] != delim; i++ {
			val = append(val, lines[i])
		}
		if i == len(lines) {
			t.Fatalf("output %s: delimiter %s never closes", name, delim)
		}
		out[name] = strings.Join(val, "\n")
	}
	return out
}

func TestDelimiterCollisionRefused(t *testing.T) {
	getenv, _, output := env(t, "true")
	r := ghactions.FromEnv(getenv, ghactions.Options{Token: func() (string, error) { return "fixed", nil }})
	err := r.Emit(io.Discard, ghactions.Report{Outputs: []ghactions.Output{{Name: "version", Value: "x\nghadelimiter_fixed\nchanged=true"}}})
	if err == nil {
		t.Fatal("a value containing the delimiter was written")
	}
	if _, serr := os.Stat(output); serr == nil {
		t.Error("the output file was written despite the refusal")
	}
}

func TestDisabledWritesNothing(t *testing.T) {
	getenv, summary, output := env(t, "")
	r := ghactions.FromEnv(getenv, ghactions.Options{})
	if r.Enabled() {
		t.Fatal("without GITHUB_ACTIONS=true: want disabled")
	}
	var log bytes.Buffer
	if err := r.Untrusted(&log, func(w io.Writer) error { _, err := io.WriteString(w, "plain\n"); return err }); err != nil {
		t.Fatal(err)
	}
	if err := r.Emit(&log, sampleReport(r)); err != nil {
		t.Fatal(err)
	}
	if log.String() != "plain\n" {
		t.Errorf("log = %q, want only the report", log.String())
	}
	for _, p := range []string{summary, output} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s written while disabled", p)
		}
	}
}

func TestUnwritableSummaryIsAnError(t *testing.T) {
	vars := map[string]string{"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": filepath.Join(t.TempDir(), "missing", "summary.md")}
	r := ghactions.FromEnv(func(k string) string { return vars[k] }, ghactions.Options{})
	if err := r.Emit(io.Discard, ghactions.Report{Summary: "x"}); err == nil {
		t.Fatal("an unwritable step summary was not reported")
	}
}

func TestEscaping(t *testing.T) {
	cases := []struct {
		fn       func(string) string
		in, want string
	}{
		{ghactions.EscapeData, "a%b\r\nc:d,e", "a%25b%0D%0Ac:d,e"},
		{ghactions.EscapeProperty, "a%b\r\nc:d,e", "a%25b%0D%0Ac%3Ad%2Ce"},
		{ghactions.EscapeData, "%0A::x", "%250A::x"},
		{ghactions.Text, "a|b <script> *x* \n#1", `a\|b &lt;script&gt; \*x\*  \#1`},
		{ghactions.Code, "a`b|c\nd", "``a`b\\|c⏎d``"},
		{ghactions.Code, "`x", "`` `x ``"},
	}
	for _, c := range cases {
		if got := c.fn(c.in); got != c.want {
			t.Errorf("escape(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestRelPath(t *testing.T) {
	getenv, _, _ := env(t, "true")
	r := ghactions.FromEnv(getenv, ghactions.Options{})
	for in, want := range map[string]string{
		"/home/runner/work/repo/charts/x/values.yaml": "charts/x/values.yaml",
		"/elsewhere/values.yaml":                      "/elsewhere/values.yaml",
		"charts/x/Chart.yaml":                         "charts/x/Chart.yaml",
	} {
		if got := r.RelPath(in); got != want {
			t.Errorf("RelPath(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestTooManyAnnotationsSaySo(t *testing.T) {
	getenv, _, _ := env(t, "true")
	r := ghactions.FromEnv(getenv, ghactions.Options{})
	var rep ghactions.Report
	for i := 0; i < 12; i++ {
		rep.Annotations = append(rep.Annotations, ghactions.Annotation{Level: ghactions.Error, Message: fmt.Sprint(i)})
	}
	var log bytes.Buffer
	if err := r.Emit(&log, rep); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(lines) != 13 || !strings.HasPrefix(lines[12], "::notice title=more findings than annotations::12 error annotations; GitHub shows the first 10") {
		t.Errorf("log:\n%s", log.String())
	}
}
