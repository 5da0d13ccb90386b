package chartfile

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/chartpin/chartpin/internal/atomicfile"
	"github.com/chartpin/chartpin/internal/failure"
)

// The files chartpin reads in a chart directory. Pins live in values.yaml:
// only chart defaults reach installed edges through helm upgrade
// --reset-then-reuse-values (docs/design.md#pins-live-in-chart-defaults).
const (
	ChartFile  = "Chart.yaml"
	ValuesFile = "values.yaml"
)

// Loaded is a chart's Chart.yaml and values.yaml as read, each with its path
// (inside the directory as given).
type Loaded struct {
	Dir                   string
	ChartPath, ValuesPath string
	Chart, Values         []byte
}

// Load reads the Chart.yaml and values.yaml of the chart in dir, with the
// errors of ReadChart and ReadValues.
func Load(dir string) (*Loaded, error) {
	l := &Loaded{Dir: dir}
	var err error
	if l.ChartPath, l.Chart, err = ReadChart(dir); err != nil {
		return nil, err
	}
	if l.ValuesPath, l.Values, err = ReadValues(dir); err != nil {
		return nil, err
	}
	return l, nil
}

// ReadChart reads dir/Chart.yaml (see ReadFile). A dir that is no directory,
// or holds no Chart.yaml, is an input error that says what to pass instead.
func ReadChart(dir string) (string, []byte, error) {
	name := filepath.Join(dir, ChartFile)
	data, err := ReadFile(name)
	if err != nil {
		if err := notADir(dir); err != nil {
			return name, nil, err
		}
		if errors.Is(err, fs.ErrNotExist) {
			return name, nil, failure.Input(fmt.Errorf("reading chart %s: no Chart.yaml; pass a chart directory: %w", dir, err))
		}
		return name, nil, fmt.Errorf("reading chart %s: %w", dir, err)
	}
	return name, data, nil
}

// ReadValues reads dir/values.yaml (see ReadFile), with ReadChart's errors.
func ReadValues(dir string) (string, []byte, error) {
	name := filepath.Join(dir, ValuesFile)
	data, err := ReadFile(name)
	if err != nil {
		if err := notADir(dir); err != nil {
			return name, nil, err
		}
		if errors.Is(err, fs.ErrNotExist) {
			return name, nil, failure.Input(fmt.Errorf("reading values: %w; pins live in the chart's default values.yaml", err))
		}
		return name, nil, fmt.Errorf("reading values: %w", err)
	}
	return name, data, nil
}

func notADir(dir string) error {
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return failure.Input(fmt.Errorf("chart dir %s: not a directory; name a chart directory holding Chart.yaml and values.yaml", dir))
	}
	return nil
}

// Unchanged refuses a file that no longer holds before, the bytes a plan
// was made from: another hand edited it since, and writing would lose that.
func Unchanged(name string, before []byte) error {
	now, err := ReadFile(name)
	if err != nil {
		return fmt.Errorf("re-reading %s before writing: %w", name, err)
	}
	if !bytes.Equal(now, before) {
		return fmt.Errorf("%s changed on disk since it was read; nothing written, run again", name)
	}
	return nil
}

// Replace writes after to name atomically, keeping its mode, unless the
// file changed since it was read as before (Unchanged).
func Replace(name string, before, after []byte) error {
	if err := Unchanged(name, before); err != nil {
		return err
	}
	return atomicfile.WriteFile(name, after, 0o644)
}
