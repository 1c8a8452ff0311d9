package app

import "fyne.io/fyne/v2"

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
