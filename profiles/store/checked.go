package store

import (
	"io"
	"os"
	"path/filepath"
	"strings"
)

// A database about to be written is checked with PRAGMA quick_check unless
// it is exactly as Arborist last left it: Close records the file's stamp
// (size, modification time, inode and status-change time: stampOf) in
// PATH-checked beside it, and the next writing open compares. A file
// changed by anything else since (a copy, a restore, a stray write, even
// one that restores the size and modification time), a crash (its WAL left
// behind) or a database never opened here is checked before it is
// written; the check, which reads every page, is skipped on the common
// path of a database Arborist closed cleanly.
//
// The side file is read only when it is a regular file (a FIFO planted
// there would block the read), and written as a new file renamed into
// place, never through a link planted under its name.

func checkedPath(path string) string { return path + "-checked" }

func fileStamp(path string) (string, bool) {
	st, err := os.Stat(path)
	if err != nil {
		return "", false
	}
	return stampOf(st), true
}

// readSide reads a small side file beside the database: nothing when it
// is missing, not a regular file, or larger than a stamp can be.
func readSide(path string) (string, bool) {
	st, err := os.Lstat(path)
	if err != nil || !st.Mode().IsRegular() || st.Size() > 256 {
		return "", false
	}
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 256))
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}

// writeSide replaces the side file path with data: a new file in the same
// folder, renamed over it (a symlink there is replaced, not followed).
func writeSide(path, data string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".arborist-side-*")
	if err != nil {
		return err
	}
	_, err = tmp.WriteString(data)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// unchangedSinceClose says whether path is as the last Close left it, with
// no WAL pending.
func unchangedSinceClose(path string) bool {
	if st, err := os.Stat(path + "-wal"); err == nil && st.Size() > 0 {
		return false
	}
	want, ok := readSide(checkedPath(path))
	if !ok {
		return false
	}
	got, ok := fileStamp(path)
	return ok && want == got
}

// markClosed records path's stamp after a clean close (best effort: without
// it the next open simply checks).
func markClosed(path string) {
	if st, err := os.Stat(path + "-wal"); err == nil && st.Size() > 0 {
		if st, err := os.Lstat(checkedPath(path)); err == nil && st.Mode().IsRegular() {
			os.Remove(checkedPath(path)) // another process still has it open
		}
		return
	}
	if stamp, ok := fileStamp(path); ok {
		writeSide(checkedPath(path), stamp+"\n")
	}
}
