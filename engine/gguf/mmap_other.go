//go:build !unix

package gguf

import (
	"fmt"
	"io"
)

const openNonBlock = 0

// mapFile reads the whole file where memory mapping is not available.
func mapFile(path string, noMmap bool) (*mapping, error) {
	fd, st, err := OpenRegular(path)
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
