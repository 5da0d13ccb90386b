package guard_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/chartpin/chartpin/config"
	"github.com/chartpin/chartpin/guard"
	"github.com/chartpin/chartpin/guard/guardtest"
	"github.com/chartpin/chartpin/internal/failure"
)

func TestResultFields(t *testing.T) {
	r := guardtest.New(t)
	r.Chart("charts/a", "a", "1.0.0", "1.0.0")
	r.Chart("charts/b", "b", "2.0.0", "9")
	r.Write("chartpin.yaml", "charts:\n  - dir: charts/b\n    appVersion: keep\n")
	base := r.Base()
	r.Write("charts/a/values.yaml", "x: 1\n")
	r.ChartYAML("charts/a", "a", "1.1.0", "1.1.0")
	head := r.Commit("bump a")
	r.Write("charts/b/templates/extra.yaml", "kind: ConfigMap\n") // uncommitted
	cfg, err := config.Load(r.Path("chartpin.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := guard.Check(context.Background(), r.Dir, guard.Options{Base: "origin/main", Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if res.BaseCommit != base.String() || res.Head != head.String() {
		t.Errorf("commits %s %s, want %s %s", res.BaseCommit, res.Head, base, head)
	}
	if strings.Join(res.Uncommitted, ",") != "charts/b" || !strings.Contains(res.Compared, "uncommitted changes included (charts/b)") {
		t.Errorf("uncommitted %v, compared %q", res.Uncommitted, res.Compared)
	}
	if len(res.Charts) != 2 {
		t.Fatalf("charts: %+v", res.Charts)
	}
	a, b := res.Charts[0], res.Charts[1]
	if a.State != guard.Changed || !a.Lockstep || len(a.Findings) != 0 || strings.Join(a.Files, ",") != "Chart.yaml,values.yaml" {
		t.Errorf("a: %+v", a)
	}
	if b.State != guard.Changed || b.Lockstep || len(b.Findings) != 1 || b.Findings[0].Line != 3 || b.Findings[0].File != "charts/b/Chart.yaml" {
		t.Errorf("b: %+v", b)
	}
	if err := res.Err(); !errors.Is(err, failure.ErrFindings) || failure.Code(err) != 1 || !strings.Contains(err.Error(), "charts/b") {
		t.Errorf("Err() = %v", err)
	}
	data, err := json.Marshal(res)
	if err != nil || !strings.Contains(string(data), `"compared":`) || !strings.Contains(string(data), `"state":"changed"`) {
		t.Errorf("json (%v): %s", err, data)
	}
}

func TestNoBaseIsInput(t *testing.T) {
	r := guardtest.New(t)
	r.Chart("a", "a", "1.0.0", "1.0.0")
	r.Base()
	if _, err := guard.Check(context.Background(), r.Dir, guard.Options{Base: ""}); failure.Code(err) != 2 || !strings.Contains(err.Error(), "pass Base REF") || strings.Contains(err.Error(), "--") {
		t.Errorf("no base: %v; want exit 2 naming the option Base, no flag", err)
	}
	if _, err := guard.Check(context.Background(), r.Dir, guard.Options{Base: "no-such-rev"}); failure.Code(err) != 2 || !strings.Contains(err.Error(), "resolving Base no-such-rev") {
		t.Errorf("unknown base: %v; want exit 2 naming the option Base", err)
	}
	if _, err := guard.Check(context.Background(), t.TempDir(), guard.Options{Base: "origin/main"}); failure.Code(err) != 2 {
		t.Errorf("not a repository: %v", err)
	}
}

// Guard applies publish's version rule (chartbump.ParseVersion): a version
// guard passes is one publish accepts, and the other way round.
func TestVersionRuleIsPublishs(t *testing.T) {
	for _, c := range []struct {
		old, new string
		ok       bool
	}{
		{"1.2.3", "1.3", false},    // Helm-lenient, but publish refuses it
		{"1.2.3", "01.3.0", false}, // leading zero
		{"v1.2.3", "v1.2.4", true}, // chartbump keeps a v prefix; publish accepts it
		{"1.2.3", "1.2.4-rc.1", true},
	} {
		t.Run(c.old+"->"+c.new, func(t *testing.T) {
			r := guardtest.New(t)
			r.Chart("charts/a", "a", c.old, "1.0")
			r.Base()
			r.Write("charts/a/values.yaml", "replicaCount: 2\n")
			r.ChartYAML("charts/a", "a", c.new, "1.0")
			r.Commit("change")
			res, err := guard.Check(context.Background(), r.Dir, guard.Options{Base: "origin/main"})
			if err != nil {
				t.Fatal(err)
			}
			f := res.Charts[0].Findings
			if c.ok && len(f) != 0 {
				t.Fatalf("findings %+v, want none", f)
			}
			if !c.ok && (len(f) != 1 || f[0].Line != 3 || !strings.Contains(f[0].Message, "not a semantic version")) {
				t.Fatalf("findings %+v, want one at line 3 saying not a semantic version", f)
			}
		})
	}
}
