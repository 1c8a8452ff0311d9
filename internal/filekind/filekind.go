// Package filekind names the kind of a file that is not a regular one, for
// the messages that refuse it: a model path (engine/gguf) and an output
// path (profiles/outfile) are both refused when they name a FIFO, a device,
// a directory or a socket, and both say which in the same words. A leaf:
// it imports nothing of Arborist's, so any layer may use it.
package filekind

import "io/fs"

// Of names m's kind: "directory", "FIFO", "socket", "device", or "special
// file" for any other that is not regular.
func Of(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}
