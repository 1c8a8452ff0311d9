//go:build unix

package store

import (
	"fmt"
	"os"
	"syscall"
)

// stampOf identifies a file's contents as cheaply as a stat can: its size,
// modification time, inode and status-change time. A file rewritten with
// the same size and its modification time restored (touch -r) still gets
// a new status-change time, and a copy moved into place a new inode.
func stampOf(st os.FileInfo) string {
	s := fmt.Sprintf("%d %d", st.Size(), st.ModTime().UnixNano())
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		s += fmt.Sprintf(" %d %d", sys.Ino, sys.Ctim.Nano())
	}
	return s
}

// dirWritable says whether the folder dir accepts new files: false on
// read-only storage or without write permission.
func dirWritable(dir string) bool { return syscall.Access(dir, 2 /* W_OK */) == nil }

// fileWritable says whether this process may write the file at path.
func fileWritable(path string) bool { return syscall.Access(path, 2 /* W_OK */) == nil }
