package fanout

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// TestMapCallsEachKeyOnceConcurrently: a repeated key is one call, every
// call runs at once (each waits for all the others), and values and errors
// come back under their keys.
func TestMapCallsEachKeyOnceConcurrently(t *testing.T) {
	keys := []string{"a", "b", "a", "c", "bad", "c"}
	var calls atomic.Int32
	var started sync.WaitGroup
	started.Add(4) // a, b, c, bad
	out, errs := Map(keys, func(k string) (int, error) {
		calls.Add(1)
		started.Done()
		started.Wait() // deadlocks unless all four run concurrently
		if k == "bad" {
			return 0, errors.New("bad key")
		}
		return len(k) + int(k[0]), nil
	})
	if n := calls.Load(); n != 4 {
		t.Errorf("%d calls; want 4 (one per distinct key)", n)
	}
	if len(out) != 3 || out["a"] != 1+'a' || out["b"] != 1+'b' || out["c"] != 1+'c' {
		t.Errorf("values %v", out)
	}
	if len(errs) != 1 || errs["bad"] == nil || errs["bad"].Error() != "bad key" {
		t.Errorf("errors %v", errs)
	}
}
