// Package chartfile is how chartpin touches the files of a chart: it reads
// only regular files of bounded size, opened without blocking; one run at a
// time writes a chart (Lock); and a run's writes to several files complete
// even when the run is killed between them (Write, and the next Lock).
package chartfile

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/chartpin/chartpin/internal/failure"
)

// MaxSize bounds every chart file chartpin reads: the values.yaml of the
// largest public charts is a few hundred KiB.
const MaxSize = 8 << 20

// ReadFile reads a chart file. It must be a regular file (a symbolic link to
// one is followed, as Helm does) of at most MaxSize bytes. It is opened
// without blocking and checked before a byte is read, so a FIFO cannot hang
// the run and /dev/zero cannot fill its memory; both are input errors.
func ReadFile(name string) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|openFlags, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	what := name
	if target, err := filepath.EvalSymlinks(name); err == nil && target != name {
		what += " (a link to " + target + ")"
	}
	if !fi.Mode().IsRegular() {
		return nil, failure.Input(fmt.Errorf("%s: a %s, not a regular file; chart files must be regular files (a symbolic link to one is fine): replace it", what, kind(fi.Mode())))
	}
	// Read one byte past the limit rather than trust the size: a file may
	// grow while it is read.
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxSize {
		return nil, failure.Input(fmt.Errorf("%s: larger than the %d MiB a chart file may have; is it the right file?", what, MaxSize>>20))
	}
	return data, nil
}

func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "named pipe (FIFO)"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m.IsDir():
		return "directory"
	}
	return "file of type " + m.Type().String()
}
