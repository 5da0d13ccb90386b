package chartfile

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// holder names the process holding f's lock, from /proc/locks.
func holder(f *os.File) string {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return "another process"
	}
	id := fmt.Sprintf("%02x:%02x:%d", unix.Major(uint64(st.Dev)), unix.Minor(uint64(st.Dev)), st.Ino)
	locks, err := os.Open("/proc/locks")
	if err != nil {
		return "another process"
	}
	defer locks.Close()
	sc := bufio.NewScanner(locks)
	for sc.Scan() {
		// 1: FLOCK  ADVISORY  WRITE 4242 00:2f:1234 0 EOF
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[1] != "FLOCK" || f[5] != id {
			continue
		}
		pid, err := strconv.Atoi(f[4])
		if err != nil || pid <= 0 {
			break
		}
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if line := strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " ")); line != "" {
			return fmt.Sprintf("pid %d: %s", pid, line)
		}
		return fmt.Sprintf("pid %d", pid)
	}
	return "another process"
}
