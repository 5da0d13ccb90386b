package pin

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	"github.com/chartpin/chartpin/internal/atomicfile"
)

// Apply writes every file of the run, each atomically and keeping its mode.
// A file that changed on disk since Plan is refused before anything is
// written; if a write fails midway, the files already written are restored.
func (r *Result) Apply() error {
	if r.Refused() {
		return errors.New("the plan refuses a move; nothing written")
	}
	for _, f := range r.files {
		cur, err := os.ReadFile(f.Path)
		if err != nil {
			return fmt.Errorf("re-reading %s before writing: %w", f.Path, err)
		}
		if !bytes.Equal(cur, f.Before) {
			return fmt.Errorf("%s changed on disk since the plan; nothing written, rerun chartpin pin", f.Path)
		}
	}
	for i, f := range r.files {
		if err := atomicfile.WriteFile(f.Path, f.After, 0o644); err != nil {
			var errs []error
			for _, done := range r.files[:i] {
				if rerr := atomicfile.WriteFile(done.Path, done.Before, 0o644); rerr != nil {
					errs = append(errs, fmt.Errorf("restoring %s: %w", done.Path, rerr))
				}
			}
			return errors.Join(append([]error{fmt.Errorf("writing pins (files written so far were restored): %w", err)}, errs...)...)
		}
	}
	return nil
}
