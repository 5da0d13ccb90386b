package pin

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"gopkg.in/yaml.v3"

	"github.com/chartpin/chartpin/internal/failure"
)

type chartMeta struct{ name, version, appVersion string }

// readChart reads Chart.yaml's name, version and appVersion.
func readChart(dir string) (chartMeta, error) {
	p := filepath.Join(dir, "Chart.yaml")
	data, err := os.ReadFile(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return chartMeta{}, failure.Input(fmt.Errorf("%s: no Chart.yaml; is this a chart directory?", dir))
		}
		return chartMeta{}, err
	}
	var m struct {
		Name       string `yaml:"name"`
		Version    string `yaml:"version"`
		AppVersion string `yaml:"appVersion"`
	}
	if err := yaml.Unmarshal(data, &m); err != nil {
		return chartMeta{}, failure.Input(fmt.Errorf("%s: %w", p, err))
	}
	return chartMeta{m.Name, m.Version, m.AppVersion}, nil
}

// bump is replaced by chartbump once it lands.
func (c *chart) bump(opts Options, files []FileChange) ([]FileChange, error) {
	return files, nil
}
