// Package chartpin embeds the repository's example chart, its library chart
// and chartpin.yaml, so `chartpin demo` runs the real job from one binary.
package chartpin

import (
	"embed"
	"io/fs"
)

//go:embed chartpin.yaml
var Config []byte

//go:embed all:charts/example all:charts/chartpin-lib
var charts embed.FS

// Charts is the charts/ tree (example and chartpin-lib).
func Charts() fs.FS {
	sub, err := fs.Sub(charts, "charts")
	if err != nil {
		panic(err) // the embed pattern above guarantees the directory
	}
	return sub
}
