package chartfile

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chartpin/chartpin/internal/atomicfile"
)

// TestJournalMeetsAnEdit: a killed run's journal whose file was edited
// since (neither its old nor its new bytes) is reported with the next step,
// and nothing is written; the same for a damaged journal.
func TestJournalMeetsAnEdit(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(t *testing.T, dir string)
		want string
	}{
		{"edited file", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte("version: 9.9.9\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "left the journal " + filepath.Join("DIR", journalName) + ", but Chart.yaml changed since; nothing written: compare the chart's files with version control, then delete"},
		{"damaged journal", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, journalName), []byte(`{"files":[{"path":"../x","after":""}]}`), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "the journal " + filepath.Join("DIR", journalName) + ` of an interrupted chartpin run is damaged (entry "../x")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			values, chart := filepath.Join(dir, "values.yaml"), filepath.Join(dir, "Chart.yaml")
			for name, b := range map[string]string{values: "a: 1\n", chart: "version: 1.0.0\n"} {
				if err := os.WriteFile(name, []byte(b), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			// Killed once values.yaml is written: the journal stays.
			atomicfile.Hook = func(stage, name string) {
				if stage == "renamed" && name == values {
					panic("killed")
				}
			}
			func() {
				defer func() { _ = recover() }()
				_ = Write([]Chart{{Dir: dir, Files: []File{
					{Path: values, Before: []byte("a: 1\n"), After: []byte("a: 2\n")},
					{Path: chart, Before: []byte("version: 1.0.0\n"), After: []byte("version: 1.0.1\n")},
				}}})
			}()
			atomicfile.Hook = nil
			tc.edit(t, dir)
			before := tree(t, dir)
			h, _, err := Lock(context.Background(), dir, true)
			h.Unlock()
			if want := strings.ReplaceAll(tc.want, "DIR", dir); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Lock: %v\nwant %q", err, want)
			}
			if after := tree(t, dir); after != before {
				t.Errorf("files changed:\n%s\nwas\n%s", after, before)
			}
		})
	}
}

func tree(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range entries {
		data, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		b.WriteString(e.Name() + ": " + string(data) + "\n")
	}
	return b.String()
}
