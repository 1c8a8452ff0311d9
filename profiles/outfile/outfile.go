// Package outfile writes the files Arborist produces (config.yaml, exported
// drafters, traces) so that no output can destroy an input: a path that
// names an input of the same command (the database or its side files, a
// model, a drafter, a config, a prompt suite: compared by device and inode,
// so another name for the same file is caught too) or anything but a
// regular file is refused before a byte is written, and a symlink there is
// replaced, never written through; the bytes go to a
// new temporary file in the target's folder, renamed over the target only
// when complete, keeping an existing file's permissions. A failure leaves
// the old file as it was.
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

// SideFiles are the files that travel with a SQLite database: an output
// naming one of these beside an input database is refused too.
var sideFiles = []string{"-wal", "-shm", "-journal", "-checked"}

// Check refuses path as an output: empty, an existing file that is not a
// regular file (a FIFO, a device, a folder), or the same file as
// one of inputs (or a database side file beside one).
func Check(path string, inputs ...string) error {
	if path == "" {
		return fmt.Errorf("%w: no output file named", ErrRefused)
	}
	st, err := os.Lstat(path)
	switch {
	case os.IsNotExist(err):
		if _, err := os.Stat(filepath.Dir(path)); err != nil {
			return fmt.Errorf("%w: %s: its folder: %v", ErrRefused, path, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("%w: %s: %v", ErrRefused, path, err)
	case st.Mode()&os.ModeSymlink != 0:
		return nil // the link itself is replaced, never written through
	case !st.Mode().IsRegular():
		return fmt.Errorf("%w: %s is a %s, not a regular file; it was left as it is", ErrRefused, path, filekind.Of(st.Mode()))
	}
	for _, in := range inputs {
		if in == "" {
			continue
		}
		for _, side := range append([]string{""}, sideFiles...) {
			if ist, err := os.Stat(in + side); err == nil && os.SameFile(st, ist) {
				what := "an input of this command"
				if side != "" {
					what = "a side file of " + in
				} else if in != path {
					what = "the same file as the input " + in
				}
				return fmt.Errorf("%w: %s is %s; it was left as it is (write elsewhere)", ErrRefused, path, what)
			}
		}
	}
	return nil
}

// File is an output written as it goes (a trace of JSON lines): Create
// makes the temporary file, Commit renames it into place, Abort removes it.
type File struct {
	*os.File
	path string
	mode os.FileMode
}

// Create checks path (Check) and starts its temporary file.
func Create(path string, inputs ...string) (*File, error) {
	if err := Check(path, inputs...); err != nil {
		return nil, err
	}
	mode := os.FileMode(0o644)
	if st, err := os.Lstat(path); err == nil && st.Mode().IsRegular() {
		mode = st.Mode().Perm() // keep a 0600 file 0600
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".arborist-*.tmp")
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	return &File{File: tmp, path: path, mode: mode}, nil
}

// Commit makes the written bytes the file at its path.
func (f *File) Commit() error {
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
