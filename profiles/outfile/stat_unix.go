//go:build unix

package outfile

import (
	"os"
	"syscall"
)

// links is how many names the file has (1 where the system does not say).
func links(st os.FileInfo) uint64 {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return uint64(sys.Nlink)
	}
	return 1
}

// group is the file's group id (-1 where the system does not say).
func group(st os.FileInfo) int {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return int(sys.Gid)
	}
	return -1
}
