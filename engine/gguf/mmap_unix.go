//go:build unix

package gguf

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// openNonBlock makes opening a FIFO return at once instead of waiting for
// a writer (OpenRegular then refuses it).
const openNonBlock = syscall.O_NONBLOCK

// mapFile maps (or, with noMmap, reads) path. An empty file maps to an
// empty slice. A mapped file keeps its descriptor open so check can ask
// whether the file under the mapping has shrunk.
func mapFile(path string, noMmap bool) (*mapping, error) {
	fd, st, err := OpenRegular(path)
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
