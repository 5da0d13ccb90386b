//go:build unix

package chartfile

import (
	"errors"
	"os"
	"syscall"
)

// lockDir opens the chart directory itself, whose flock(2) is the lock.
func lockDir(dir string) (*os.File, error) { return os.Open(dir) }

func tryLock(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return errBusy
		case errors.Is(err, syscall.ENOLCK), errors.Is(err, syscall.EOPNOTSUPP), errors.Is(err, syscall.EBADF):
			// A filesystem without locks (some NFS mounts): runs there
			// are not serialized, as before; docs/design.md says so.
			return nil
		}
		return err
	}
}
