// Package outfile writes the files Arborist produces (config.yaml, exported
// drafters, traces) so that no output can destroy an input: a path that
// names an input of the same command (the database or any of its side
// files, present or not, a model, a drafter, a config, a prompt suite:
// compared by resolved path and by device and inode, so another name for
// the same file is caught too) or anything but a regular file is refused
// before a byte is written, and so is a symbolic link or a file with other
// hard links (a write would reach, or leave behind, another name); the
// bytes go to a new temporary file in the target's folder, renamed over
// the target only when complete, keeping an existing file's mode (setgid
// and sticky bits included) and group. A failure leaves the old file as
// it was.
package outfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"arborist/internal/filekind"
)

// ErrRefused marks an output path that cannot be written safely (errors.Is).
var ErrRefused = errors.New("output refused")

// sideFiles are the files that travel with a SQLite database (its rollback
// journal, WAL and shared memory, and Arborist's stamp): an output naming
// one of these beside an input is refused too, whether the file is there
// or not (a file written where SQLite expects its journal is taken for a
// hot journal, and the database can no longer be opened).
var sideFiles = []string{"-journal", "-wal", "-shm", "-checked"}

// keptMode is the part of an existing file's mode a replacement keeps.
const keptMode = os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky

// Check refuses path as an output: empty, in a folder that is not there,
// an existing file that is not a regular file (a FIFO, a device, a
// folder), a symbolic link or a file with more than one hard link, or the
// same file as one of inputs or a database side file beside one (by name,
// once links in the folders are resolved, or by device and inode).
func Check(path string, inputs ...string) error {
	if path == "" {
		return fmt.Errorf("%w: no output file named", ErrRefused)
	}
	dir := filepath.Dir(path)
	if dst, err := os.Stat(dir); err != nil {
		if os.IsNotExist(err) {
			return fmt.Errorf("%w: %s: its folder %s does not exist (create it first)", ErrRefused, path, dir)
		}
		return fmt.Errorf("%w: %s: its folder %s: %v", ErrRefused, path, dir, err)
	} else if !dst.IsDir() {
		return fmt.Errorf("%w: %s: %s is not a folder", ErrRefused, path, dir)
	}
	st, err := os.Lstat(path)
	switch {
	case os.IsNotExist(err):
		st = nil
	case err != nil:
		return fmt.Errorf("%w: %s: %v", ErrRefused, path, err)
	case st.Mode()&os.ModeSymlink == 0 && !st.Mode().IsRegular():
		return fmt.Errorf("%w: %s is a %s, not a regular file; it was left as it is", ErrRefused, path, filekind.Of(st.Mode()))
	}
	if err := notAnInput(path, st, inputs); err != nil {
		return err
	}
	switch {
	case st == nil:
	case st.Mode()&os.ModeSymlink != 0:
		to, _ := os.Readlink(path)
		return fmt.Errorf("%w: %s is a symbolic link (to %s); an output is never written through or over a link: name the file itself; it was left as it is", ErrRefused, path, to)
	case links(st) > 1:
		return fmt.Errorf("%w: %s has %d hard links (other names for the same file); an output is never written through or over a link; it was left as it is", ErrRefused, path, links(st))
	}
	return nil
}

// notAnInput refuses path (st: its Lstat, nil when absent) where it names
// one of inputs or a side file beside one.
func notAnInput(path string, st os.FileInfo, inputs []string) error {
	out := resolved(path)
	var ids []os.FileInfo // the output itself and, for a link, what it points to
	if st != nil {
		ids = append(ids, st)
		if fst, err := os.Stat(path); err == nil {
			ids = append(ids, fst)
		}
	}
	for _, in := range inputs {
		if in == "" {
			continue
		}
		names := []string{in, resolved(in)}
		if real, err := filepath.EvalSymlinks(in); err == nil {
			names = append(names, absClean(real)) // the input's own links followed
		}
		for _, side := range append([]string{""}, sideFiles...) {
			for _, n := range names {
				same := absClean(n+side) == out
				if !same && ids != nil {
					if ist, err := os.Stat(n + side); err == nil {
						for _, id := range ids {
							same = same || os.SameFile(id, ist)
						}
					}
				}
				if !same {
					continue
				}
				what := "an input of this command"
				switch {
				case side != "":
					what = "a side file of " + in
				case in != path:
					what = "the same file as the input " + in
				}
				return fmt.Errorf("%w: %s is %s; it was left as it is (write elsewhere)", ErrRefused, path, what)
			}
		}
	}
	return nil
}

// absClean is path made absolute and clean ("a//b", "a/./b" and "a/../b"
// spelled one way).
func absClean(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return filepath.Clean(path)
}

// resolved is path with every link in its folders followed (a folder
// symlink, /proc/self/cwd), its last element kept as named: the name an
// open of the file would reach, whether the file exists or not.
func resolved(path string) string {
	abs := absClean(path)
	dir, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if err != nil {
		return abs
	}
	return filepath.Join(absClean(dir), filepath.Base(abs))
}

// File is an output written as it goes (a trace of JSON lines): Create
// makes the temporary file, Commit renames it into place, Abort removes it.
type File struct {
	*os.File
	path string
	mode os.FileMode
	gid  int // the replaced file's group (-1: none to keep)
}

// Create checks path (Check) and starts its temporary file.
func Create(path string, inputs ...string) (*File, error) {
	if err := Check(path, inputs...); err != nil {
		return nil, err
	}
	mode, gid := os.FileMode(0o644), -1
	if st, err := os.Lstat(path); err == nil && st.Mode().IsRegular() {
		mode, gid = st.Mode()&keptMode, group(st) // a 0600 file stays 0600, a 2755 one 2755
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".arborist-*.tmp")
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	return &File{File: tmp, path: path, mode: mode, gid: gid}, nil
}

// Commit makes the written bytes the file at its path.
func (f *File) Commit() error {
	if f.gid >= 0 {
		f.Chown(-1, f.gid) // best effort: only a member of the group may give it
	}
	// the mode last, after every write (a write by an unprivileged process
	// clears setuid and setgid); the system itself may still refuse setuid
	// or setgid (a group the process is not in), and then drops them
	err := f.Chmod(f.mode)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), f.path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write %s: %w", f.path, err)
	}
	return nil
}

// Abort drops the written bytes; the file at its path stays as it was.
func (f *File) Abort() {
	f.Close()
	os.Remove(f.Name())
}

// WriteFile writes data to path safely: Check, then a temporary file
// renamed into place.
func WriteFile(path string, data []byte, inputs ...string) error {
	f, err := Create(path, inputs...)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Abort()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Commit()
}

// ErrWriter passes writes to W and keeps the first error, so a stream
// written in many small pieces (a JSON-lines trace) can be checked once at
// the end instead of failing silently (--trace /dev/full used to exit 0).
type ErrWriter struct {
	W   io.Writer
	Err error
}

// Write writes p unless an earlier write failed.
func (e *ErrWriter) Write(p []byte) (int, error) {
	if e.Err != nil {
		return 0, e.Err
	}
	n, err := e.W.Write(p)
	if err != nil {
		e.Err = err
	}
	return n, err
}
