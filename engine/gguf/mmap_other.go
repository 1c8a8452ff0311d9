//go:build !unix

package gguf

import (
	"fmt"
	"io"
	"os"
)

func openRegular(path string) (*os.File, os.FileInfo, error) {
	fd, err := os.Open(path)
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

// mapFile reads the whole file where memory mapping is not available.
func mapFile(path string, noMmap bool) (*mapping, error) {
	fd, st, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	data := make([]byte, st.Size())
	if _, err := io.ReadFull(fd, data); err != nil {
		return nil, fmt.Errorf("reading %d bytes: %w", st.Size(), err)
	}
	return &mapping{data: data, size: st.Size()}, nil
}
