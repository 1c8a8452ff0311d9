package app

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/storage"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// fileCheck watches a path entry (a remembered model, drafter or prompt
// suite) and, when the file it names no longer exists, says so beside it
// with a button to pick the file again, instead of leaving the user an
// error when the file is used.
type fileCheck struct {
	entry *widget.Entry
	what  string   // "target model", "prompt suite", ...
	exts  []string // file dialog filter (nil: any file)
	win   fyne.Window
	// skip, when set and true, turns the check off (a drafter entry
	// holding a database id).
	skip func() bool
	// Label says which file is missing; Repick opens the file dialog.
	Label  *widget.Label
	Repick *widget.Button
	Box    *fyne.Container // hidden while the file exists
}

// newFileCheck watches e; what names the file in the message.
func newFileCheck(e *widget.Entry, what string, exts []string, win fyne.Window) *fileCheck {
	fc := &fileCheck{entry: e, what: what, exts: exts, win: win}
	fc.Label = widget.NewLabel("")
	fc.Label.Wrapping = fyne.TextWrapWord
	fc.Label.Importance = widget.WarningImportance
	fc.Repick = widget.NewButtonWithIcon("Pick it again...", theme.FolderOpenIcon(), fc.pick)
	fc.Box = container.NewBorder(nil, nil, nil, fc.Repick, fc.Label)
	prev := e.OnChanged
	e.OnChanged = func(s string) {
		fc.Check()
		if prev != nil {
			prev(s)
		}
	}
	fc.Check()
	return fc
}

// Missing is the path the entry names when that file does not exist
// ("" when it exists, or the entry is empty).
func (fc *fileCheck) Missing() string {
	p := strings.TrimSpace(fc.entry.Text)
	if p == "" || (fc.skip != nil && fc.skip()) {
		return ""
	}
	if _, err := os.Stat(p); err == nil {
		return ""
	}
	return p
}

// Check shows or hides the notice for the entry's current path.
func (fc *fileCheck) Check() {
	p := fc.Missing()
	if p == "" {
		fc.Box.Hide()
		return
	}
	fc.Label.SetText(fmt.Sprintf("The %s %s no longer exists (moved or deleted?). Pick it again, or choose another.", fc.what, p))
	fc.Box.Show()
}

// pick opens a file dialog in the missing file's folder (or the nearest
// folder that exists) and puts the chosen file in the entry.
func (fc *fileCheck) pick() {
	if fc.win == nil {
		return
	}
	d := dialog.NewFileOpen(func(r fyne.URIReadCloser, err error) {
		if err == nil && r != nil {
			fc.Picked(r.URI().Path())
			r.Close()
		}
	}, fc.win)
	if len(fc.exts) > 0 {
		d.SetFilter(storage.NewExtensionFileFilter(fc.exts))
	}
	startIn(d, fc.entry.Text)
	d.Show()
}

// Picked takes the file chosen in the dialog.
func (fc *fileCheck) Picked(path string) {
	fc.entry.SetText(absPath(path))
	fc.Check()
}

// isID tells a hidden drafter's database id from a file path.
func isID(s string) bool {
	_, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	return err == nil
}
