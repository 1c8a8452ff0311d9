package app

import (
	"os"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/storage"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
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

// showError reports err in a dialog over win: the error icon in a column
// of its own at the left of the wrapped message. Fyne's error dialog
// draws its icon large at the top right, over a long message's text.
func showError(err error, win fyne.Window) dialog.Dialog {
	content, _, _ := errorContent(err, win)
	d := dialog.NewCustom("Error", "OK", content, win)
	d.Show()
	return d
}

// errorContent is the error dialog's content, its icon and its message,
// broken into lines as wide as the message needs, up to 560 and three
// quarters of the window (a wrapping label in a dialog asks for its height
// before it knows its width).
func errorContent(err error, win fyne.Window) (fyne.CanvasObject, *canvas.Image, *widget.Label) {
	text := err.Error()
	if r, n := utf8.DecodeRuneInString(text); r != utf8.RuneError {
		text = string(unicode.ToUpper(r)) + text[n:]
	}
	width := float32(560)
	if win != nil && win.Canvas() != nil {
		if w := win.Canvas().Size().Width*0.75 - 80; w > 200 {
			width = min(width, w)
		}
	}
	msg := widget.NewLabel(wrapWords(text, width, theme.TextSize()))
	icon := canvas.NewImageFromResource(theme.ErrorIcon())
	icon.FillMode = canvas.ImageFillContain
	icon.SetMinSize(fyne.NewSize(40, 40))
	return container.NewBorder(nil, nil, container.NewVBox(icon), nil, msg), icon, msg
}

// wrapWords breaks text into lines of at most width at spaces (a word
// wider than a line keeps a line of its own).
func wrapWords(text string, width, size float32) string {
	var out []string
	for _, para := range strings.Split(text, "\n") {
		line := ""
		for _, w := range strings.Fields(para) {
			try := w
			if line != "" {
				try = line + " " + w
			}
			if line != "" && fyne.MeasureText(try, size, fyne.TextStyle{}).Width > width {
				out = append(out, line)
				try = w
			}
			line = try
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}
