package chartfile

// openFlags: Windows has no FIFO that an open waits on.
const openFlags = 0
