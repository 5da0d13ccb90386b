package failure

import (
	"errors"
	"fmt"
	"testing"
)

func TestCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{errors.New("registry down"), 1},
		{fmt.Errorf("drift: %w", ErrFindings), 1},
		{Input(errors.New("bad flag")), 2},
		{fmt.Errorf("values.yaml:3: %w", Input(errors.New("duplicate key"))), 2},
	} {
		if got := Code(tc.err); got != tc.want {
			t.Errorf("Code(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
	if Input(nil) != nil {
		t.Error("Input(nil) must stay nil")
	}
	inner := errors.New("x")
	if !errors.Is(Input(inner), inner) {
		t.Error("Input must keep the wrapped error visible to errors.Is")
	}
}
