package app

import (
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// minLayout fills its area with its objects and asks for at least min:
// a wrapped text in a scroll otherwise asks for almost no width, and a
// narrow window would then wrap it one character per line.
type minLayout struct{ min fyne.Size }

func (l minLayout) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	for _, o := range objs {
		o.Move(fyne.NewPos(0, 0))
		o.Resize(size)
	}
}

func (l minLayout) MinSize(objs []fyne.CanvasObject) fyne.Size {
	m := l.min
	for _, o := range objs {
		m = m.Max(o.MinSize())
	}
	return m
}

// newMinWidth wraps o so that it is never laid out narrower than w.
func newMinWidth(o fyne.CanvasObject, w float32) fyne.CanvasObject {
	return &fyne.Container{Layout: minLayout{min: fyne.NewSize(w, 0)}, Objects: []fyne.CanvasObject{o}}
}

// newMinSize wraps o so that it is never laid out smaller than min.
func newMinSize(o fyne.CanvasObject, min fyne.Size) fyne.CanvasObject {
	return &fyne.Container{Layout: minLayout{min: min}, Objects: []fyne.CanvasObject{o}}
}

// fitChars wraps a short entry (a token count, a temperature) so that it
// is laid out wide enough to show chars digits whole: an entry in a row
// of buttons otherwise gets its own narrow minimum and scrolls "1024" to
// "024".
func fitChars(e *widget.Entry, chars int) fyne.CanvasObject {
	return newMinWidth(e, entryWidth(e, chars))
}

// entryWidth is the width an entry needs to show chars digits.
func entryWidth(e *widget.Entry, chars int) float32 {
	text := fyne.MeasureText(strings.Repeat("0", chars), theme.TextSize(), e.TextStyle).Width
	return text + 2*theme.InnerPadding() + 2*theme.InputBorderSize() + theme.Padding()
}
