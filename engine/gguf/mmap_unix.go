//go:build unix

package gguf

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// openRegular opens path for reading only if it is a regular file. The
// open does not block (O_NONBLOCK), so a FIFO or a device named as a model
// is refused at once instead of hanging the verb until a writer appears;
// the type is checked on the opened descriptor, so a file swapped in
// between a check and the open cannot slip through.
func openRegular(path string) (*os.File, os.FileInfo, error) {
	fd, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
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
		return nil, nil, fmt.Errorf("%w: is a %s, not a regular file", ErrNotRegular, kindOf(st.Mode()))
	}
	return fd, st, nil
}

// mapFile maps (or, with noMmap, reads) path. An empty file maps to an
// empty slice. A mapped file keeps its descriptor open so check can ask
// whether the file under the mapping has shrunk.
func mapFile(path string, noMmap bool) (*mapping, error) {
	fd, st, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	size := st.Size()
	if int64(int(size)) != size {
		fd.Close()
		return nil, fmt.Errorf("file of %d bytes is too large to map", size)
	}
	if size == 0 || noMmap {
		defer fd.Close()
		data, err := readAll(fd, size)
		if err != nil {
			return nil, err
		}
		return &mapping{data: data, size: size}, nil
	}
	data, err := syscall.Mmap(int(fd.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		fd.Close()
		return nil, fmt.Errorf("mmap: %w", err)
	}
	return &mapping{data: data, size: size, fd: fd, unmap: func() error { return syscall.Munmap(data) }}, nil
}

// readAll reads exactly size bytes (the size fstat gave) from fd.
func readAll(fd *os.File, size int64) ([]byte, error) {
	data := make([]byte, size)
	if _, err := io.ReadFull(fd, data); err != nil {
		return nil, fmt.Errorf("reading %d bytes: %w (did the file shrink while it was read?)", size, err)
	}
	return data, nil
}
