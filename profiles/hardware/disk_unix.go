//go:build unix

package hardware

import "syscall"

// FreeDisk is the space left to an unprivileged writer in the file system
// holding dir (false where it cannot be read).
func FreeDisk(dir string) (uint64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return st.Bavail * uint64(st.Bsize), true
}
