package gguf

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"arborist/internal/filekind"
)

// ErrNotRegular reports a model path that names a FIFO, a device, a
// directory or a socket: only regular files are read as models.
var ErrNotRegular = errors.New("gguf: not a regular file")

// ErrShrunk reports a memory-mapped model file that became shorter while it
// was open (truncated or rewritten in place): reading the pages past its new
// end would kill the process with SIGBUS.
var ErrShrunk = errors.New("gguf: the model file shrank while it was mapped")

// Options choose how a file is read.
type Options struct {
	// NoMmap reads the whole file into memory instead of mapping it. It
	// costs the file's size in RAM and the read time, and in return the
	// weights no longer depend on the file: truncating or rewriting the
	// file during a run cannot touch them.
	NoMmap bool
}

// OpenRegular opens path for reading only if it is a regular file. The
// open does not block (O_NONBLOCK where there is one), so a FIFO or a
// device named as a model is refused at once instead of hanging until a
// writer appears; the type is checked on the opened descriptor, so a file
// swapped in between a check and the open cannot slip through.
func OpenRegular(path string) (*os.File, os.FileInfo, error) {
	fd, err := os.OpenFile(path, os.O_RDONLY|openNonBlock, 0)
	if err != nil {
		return nil, nil, err
	}
	st, err := fd.Stat()
	if err != nil {
		fd.Close()
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		fd.Close()
		return nil, nil, fmt.Errorf("%w: is a %s, not a regular file", ErrNotRegular, filekind.Of(st.Mode()))
	}
	return fd, st, nil
}

// ErrTooLarge reports a file larger than its reader accepts.
var ErrTooLarge = errors.New("larger than accepted")

// ReadRegular reads the whole of path when it is a regular file of at most
// max bytes (OpenRegular: a FIFO or a device is refused at once, never
// read without end); the error names the file and the cap.
func ReadRegular(path string, max int64) ([]byte, error) {
	f, st, err := OpenRegular(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	if st.Size() > max {
		return nil, fmt.Errorf("%s: %w: %d bytes, at most %d read", path, ErrTooLarge, st.Size(), max)
	}
	data := make([]byte, st.Size())
	n, err := io.ReadFull(f, data)
	if err != nil && err != io.ErrUnexpectedEOF {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return data[:n], nil // a file that shrank while read is parsed as it is
}

// DeclaredSize is the bytes the file's header accounts for: the header
// and metadata, then the tensors' data to the end of the last one.
func (f *File) DeclaredSize() uint64 {
	end := f.DataOffset
	for i := range f.Tensors {
		end = max(end, f.DataOffset+f.Tensors[i].Offset+f.Tensors[i].Bytes())
	}
	return end
}

// ReadDeclared reads a whole GGUF file into memory (a file that is read
// whole and kept, such as a drafter to store) only once its header,
// parsed from a mapping that touches nothing else, accounts for the
// file's size: the header and tensors it declares end within one
// alignment of the end of the file. A sparse file of gigabytes, or a
// small header with a hole after it, is refused having read its header
// alone.
func ReadDeclared(path string) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	declared, size, align := f.DeclaredSize(), uint64(f.size), f.Alignment
	f.Close()
	if size > declared+align {
		return nil, &Error{Path: path, Err: fmt.Errorf("%w: its header and tensors account for %d bytes, the file has %d (a hole or bytes of something else after them); it was not read", ErrCorrupt, declared, size)}
	}
	return ReadRegular(path, int64(size))
}

// mapping is a file's bytes and how to release them.
type mapping struct {
	data  []byte
	size  int64
	fd    *os.File // open while mapped, for check
	unmap func() error
}

func (m *mapping) close() error {
	var err error
	if m.unmap != nil {
		err = m.unmap()
	}
	if m.fd != nil {
		m.fd.Close()
	}
	return err
}

// Open memory-maps and parses a GGUF file.
func Open(path string) (*File, error) { return OpenWith(path, Options{}) }

// OpenWith opens and parses a GGUF file, mapped or (Options.NoMmap) read
// into memory. Only regular files are opened; parsing runs with faults
// turned into errors, so a file that shrinks under the mapping while it is
// parsed gives ErrShrunk, not a crash.
func OpenWith(path string, o Options) (*File, error) {
	m, err := mapFile(path, o.NoMmap)
	if err != nil {
		return nil, &Error{Path: path, Err: err}
	}
	var f *File
	err = Guard(path, func() error {
		var perr error
		f, perr = Parse(path, m.data)
		return perr
	})
	if err != nil {
		m.close()
		return nil, err
	}
	f.size, f.mapped = m.size, m.fd != nil
	f.closer = m.close
	f.fd = m.fd
	return f, nil
}

// Mapped says whether the tensor data is a memory mapping of the file (as
// opposed to a copy in memory).
func (f *File) Mapped() bool { return f.mapped }

// Check reports ErrShrunk when the file under a mapping has become shorter
// than it was when opened. It costs one fstat, so decoding loops call it
// between passes: a file truncated during a run then ends the run with a
// clear error at the next pass instead of SIGBUS in a kernel. (A truncation
// that lands inside a pass still faults there; --no-mmap removes the risk.)
func (f *File) Check() error {
	if f == nil || f.fd == nil {
		return nil
	}
	st, err := f.fd.Stat()
	if err != nil {
		return f.errf(ErrShrunk, "cannot stat it any more: %v", err)
	}
	if st.Size() < f.size {
		return f.errf(ErrShrunk, "from %d to %d bytes; restore the file, or run with --no-mmap to read models into memory", f.size, st.Size())
	}
	return nil
}

// Guard runs fn with memory faults turned into errors
// (debug.SetPanicOnFault): Go code reading a mapped file that shrank gets
// ErrShrunk naming path instead of the process dying with SIGBUS. It only
// covers Go code on the calling goroutine; kernels in C are covered by
// File.Check between passes and by Options.NoMmap.
func Guard(path string, fn func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			if _, ok := r.(interface{ Addr() uintptr }); ok {
				err = &Error{Path: path, Err: fmt.Errorf("%w: reading it faulted (%v); restore the file, or use --no-mmap", ErrShrunk, r)}
				return
			}
			panic(r)
		}
	}()
	return fn()
}
