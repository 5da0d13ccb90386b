package chartfile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

// LockWait is how long Lock waits for another run to finish with a chart.
var LockWait = 5 * time.Second

// errBusy is another process holding the lock.
var errBusy = errors.New("locked")

// Held is one run's lock on a chart directory. The operating system releases
// it when the process ends, however it ends, so a killed run leaves no stale
// lock, and nothing is written into the chart for it.
type Held struct {
	dir string
	f   *os.File
}

// Lock takes dir's lock, waiting up to LockWait for a run that holds it, and
// then completes (complete) or reports the writes of a run that was killed
// midway, before anything else reads the chart. note says what was completed.
func Lock(ctx context.Context, dir string, complete bool) (h *Held, note string, err error) {
	f, err := lockDir(dir)
	if err != nil {
		return nil, "", fmt.Errorf("locking chart %s: %w", dir, err)
	}
	deadline := time.Now().Add(LockWait)
	for {
		err = tryLock(f)
		if !errors.Is(err, errBusy) {
			break
		}
		if time.Now().After(deadline) {
			who := holder(f)
			f.Close()
			return nil, "", fmt.Errorf("chart %s is being written by another chartpin run (%s); wait until it ends, then run again", dir, who)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, "", fmt.Errorf("waiting for chart %s, which another chartpin run is writing: %w", dir, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err != nil {
		f.Close()
		return nil, "", fmt.Errorf("locking chart %s: %w", dir, err)
	}
	h = &Held{dir: dir, f: f}
	if note, err = recoverDir(dir, complete); err != nil {
		h.Unlock()
		return nil, "", err
	}
	return h, note, nil
}

// Unlock releases the lock; a nil Held is fine.
func (h *Held) Unlock() {
	if h != nil && h.f != nil {
		h.f.Close()
		h.f = nil
	}
}
