package app

import (
	"os"
	"path/filepath"

	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/storage"
)

// startIn opens a file dialog in near's folder (or the nearest one above it
// that exists), else in the working folder, rather than wherever Fyne would guess.
func startIn(d *dialog.FileDialog, near string) {
	dir := ""
	if near != "" { // the nearest folder that still exists
		for dir = filepath.Dir(absPath(near)); !isDir(dir); dir = filepath.Dir(dir) {
			if dir == filepath.Dir(dir) {
				dir = ""
				break
			}
		}
	}
	if dir == "" {
		dir, _ = os.Getwd()
	}
	if l, err := storage.ListerForURI(storage.NewFileURI(dir)); err == nil {
		d.SetLocation(l)
	}
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}
