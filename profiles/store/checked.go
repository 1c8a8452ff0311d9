package store

import (
	"fmt"
	"os"
	"strings"
)

// A database about to be written is checked with PRAGMA quick_check unless
// it is exactly as Arborist last left it: Close records the file's size and
// modification time in PATH-checked beside it, and the next writing open
// compares. A file changed by anything else since (a copy, a restore, a
// stray write), a crash (its WAL left behind) or a database never opened
// here is checked before it is written; the check, which reads every page,
// is skipped on the common path of a database Arborist closed cleanly.

func checkedPath(path string) string { return path + "-checked" }

func fileStamp(path string) (string, bool) {
	st, err := os.Stat(path)
	if err != nil {
		return "", false
	}
	return fmt.Sprintf("%d %d", st.Size(), st.ModTime().UnixNano()), true
}

// unchangedSinceClose says whether path is as the last Close left it, with
// no WAL pending.
func unchangedSinceClose(path string) bool {
	if st, err := os.Stat(path + "-wal"); err == nil && st.Size() > 0 {
		return false
	}
	want, err := os.ReadFile(checkedPath(path))
	if err != nil {
		return false
	}
	got, ok := fileStamp(path)
	return ok && strings.TrimSpace(string(want)) == got
}

// markClosed records path's stamp after a clean close (best effort: without
// it the next open simply checks).
func markClosed(path string) {
	if st, err := os.Stat(path + "-wal"); err == nil && st.Size() > 0 {
		os.Remove(checkedPath(path)) // another process still has it open
		return
	}
	if stamp, ok := fileStamp(path); ok {
		os.WriteFile(checkedPath(path), []byte(stamp+"\n"), 0o644)
	}
}
