// Package outfile writes the files Arborist produces (config.yaml, exported
// drafters, traces) so that a failure or a planted link cannot damage
// another file.
package outfile

import (
	"io"

	"arborist/engine/gguf"
)

// WriteFile writes data to path the safe way: into a new temporary file in
// the same folder (os.CreateTemp: an unpredictable name, created
// exclusively), renamed over path only when complete. A symlink at path is
// replaced, never written through, so a link planted where an output goes
// cannot redirect it onto another file; a failure leaves path as it was.
func WriteFile(path string, data []byte) error {
	return gguf.WriteFileFunc(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
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
