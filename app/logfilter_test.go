package app

import (
	"bytes"
	"errors"
	"log"
	"os"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/test"
)

// TestFileDialogQuiet: opening a file dialog on a machine without the XDG
// user folders (an empty home) prints nothing to the log (stderr) through
// the workbench's filter, while Fyne alone prints its "does not define a
// VIDEOS folder" noise there; other Fyne errors still print.
func TestFileDialogQuiet(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	a := test.NewTempApp(t)
	w := a.NewWindow("x")
	w.Resize(fyne.NewSize(800, 600))
	t.Cleanup(func() { log.SetOutput(os.Stderr) })
	open := func(out *bytes.Buffer, filter bool) {
		if filter {
			log.SetOutput(quietFavorites(out))
		} else {
			log.SetOutput(out)
		}
		dialog.NewFileOpen(func(fyne.URIReadCloser, error) {}, w).Show()
		dialog.NewFileSave(func(fyne.URIWriteCloser, error) {}, w).Show()
		log.SetOutput(os.Stderr)
	}
	var raw, quiet bytes.Buffer
	open(&raw, false)
	if !strings.Contains(raw.String(), "favorite locations") {
		t.Logf("Fyne printed no favourites noise here (%q); the filter is checked all the same", raw.String())
	}
	open(&quiet, true)
	if quiet.Len() != 0 {
		t.Errorf("a file dialog printed %q", quiet.String())
	}
	log.SetOutput(quietFavorites(&quiet))
	fyne.LogError("Something else", errors.New("broken"))
	log.SetOutput(os.Stderr)
	if !strings.Contains(quiet.String(), "Something else") || !strings.Contains(quiet.String(), "Cause: broken") {
		t.Errorf("another Fyne error was dropped: %q", quiet.String())
	}
}
