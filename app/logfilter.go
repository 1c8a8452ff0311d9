package app

import (
	"bytes"
	"io"
	"sync"
)

// quietFavorites wraps the log's writer (stderr) and drops one Fyne
// message: every file dialog looks up the XDG user folders for its
// sidebar and, when any is missing (no Videos folder, say, or
// xdg-user-dir answering with the home folder), logs "Fyne error: Getting
// favorite locations / Cause: this computer does not define a VIDEOS
// folder / At: ...", three records at every Open... or Save... The
// dialog works all the same (it lists the folders that exist), so the
// noise only alarms users. Every other record passes through.
func quietFavorites(w io.Writer) io.Writer { return &favoritesFilter{w: w} }

type favoritesFilter struct {
	mu   sync.Mutex
	w    io.Writer
	skip int // records of the dropped message still to come
}

func (f *favoritesFilter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case bytes.Contains(p, []byte("Fyne error:  Getting favorite locations")):
		f.skip = 2 // its Cause and At records follow
		return len(p), nil
	case f.skip > 0 && (bytes.Contains(p, []byte("  Cause: ")) || bytes.Contains(p, []byte("  At: "))):
		f.skip--
		return len(p), nil
	}
	f.skip = 0
	return f.w.Write(p)
}
