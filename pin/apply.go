package pin

import (
	"errors"

	"github.com/chartpin/chartpin/internal/chartfile"
)

// Apply writes every file of the run, each atomically and keeping its mode,
// through a journal that the next run completes if this one is killed
// midway (chartfile.Write). A file that changed on disk since Plan is
// refused before anything is written; if a write fails midway, the files
// already written are restored.
func (r *Result) Apply() error {
	if r.Refused() {
		return errors.New("the plan refuses a move; nothing written")
	}
	var charts []chartfile.Chart
	for _, f := range r.files {
		if len(charts) == 0 || charts[len(charts)-1].Dir != f.dir {
			charts = append(charts, chartfile.Chart{Dir: f.dir})
		}
		c := &charts[len(charts)-1]
		c.Files = append(c.Files, chartfile.File{Path: f.Path, Before: f.Before, After: f.After})
	}
	return chartfile.Write(charts)
}
