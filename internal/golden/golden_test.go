package golden

import (
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
)

// errorsTB records the errors a check reports instead of failing the test.
type errorsTB struct {
	testing.TB
	errs []string
}

func (e *errorsTB) Helper()                      {}
func (e *errorsTB) Errorf(f string, args ...any) { e.errs = append(e.errs, fmt.Sprintf(f, args...)) }

func TestTreeReportsChangedMissingAndExtraFiles(t *testing.T) {
	got, want := t.TempDir(), t.TempDir()
	WriteTree(t, want, map[string][]byte{"a/same": []byte("x\n"), "changed": []byte("1\n2\n"), "missing": nil})
	WriteTree(t, got, map[string][]byte{"a/same": []byte("x\n"), "changed": []byte("1\n3\n"), "extra": nil})
	tb := &errorsTB{TB: t}
	Tree(tb, got, want)
	wantErrs := []string{
		want + ": changed differs (first at line 2)\n--- got ---\n1\n3\n\n--- want ---\n1\n2\n",
		want + ": extra file extra",
		want + ": missing file missing",
	}
	if !reflect.DeepEqual(tb.errs, wantErrs) {
		t.Errorf("errors %q\nwant %q", tb.errs, wantErrs)
	}

	*Update = true
	defer func() { *Update = false }()
	tb = &errorsTB{TB: t}
	Tree(tb, got, want)
	if len(tb.errs) != 0 || !reflect.DeepEqual(ReadTree(t, want), ReadTree(t, got)) {
		t.Errorf("under -update: %q, and %s is not a copy of %s", tb.errs, filepath.Base(want), filepath.Base(got))
	}
}
