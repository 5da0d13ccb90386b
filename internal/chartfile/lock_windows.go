package chartfile

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"

	"golang.org/x/sys/windows"
)

// lockDir opens a lock file named after the chart in the temporary
// directory: Windows cannot lock a directory handle.
func lockDir(dir string) (*os.File, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(abs))
	return os.OpenFile(filepath.Join(os.TempDir(), "chartpin-"+hex.EncodeToString(sum[:8])+".lock"), os.O_RDWR|os.O_CREATE, 0o600)
}

func tryLock(f *os.File) error {
	err := windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, new(windows.Overlapped))
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
		return errBusy
	}
	return err
}
