//go:build unix

package chartfile

import "syscall"

// openFlags make opening a FIFO return at once instead of waiting for a writer.
const openFlags = syscall.O_NONBLOCK
