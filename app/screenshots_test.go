package app

import (
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/driver/software"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// TestPaintKeepsWrappedLabelsTight: a screenshot of a wide window shows a
// wrapped label at the lines it takes at that width, with the next row
// right under it. The negative control paints the way the screenshots
// did before (content first, then the size): it leaves a gap of the
// label's lines at its minimum width.
func TestPaintKeepsWrappedLabelsTight(t *testing.T) {
	test.NewTempApp(t)
	build := func() (root *fyne.Container, lbl *widget.Label, next *widget.Label) {
		lbl = widget.NewLabel(strings.Repeat("a wrapped status that takes one line on a wide screen ", 3))
		lbl.Wrapping = fyne.TextWrapWord
		next = widget.NewLabel("next row")
		root = container.NewVBox(lbl, next)
		root.Resize(fyne.NewSize(1900, 600)) // as the window lays it out
		return root, lbl, next
	}
	size := fyne.NewSize(1900, 600)
	gap := func(lbl, next *widget.Label) float32 {
		return next.Position().Y - (lbl.Position().Y + lbl.MinSize().Height)
	}

	root, lbl, next := build()
	paint(root, size)
	if lbl.MinSize().Height > 2*next.MinSize().Height {
		t.Fatalf("the label takes %v at %v: not one line, the check below proves nothing", lbl.MinSize().Height, lbl.Size().Width)
	}
	if g := gap(lbl, next); g > 2*theme.Padding() {
		t.Errorf("painted: %v between the label's line and the next row, want at most the padding", g)
	}

	root, lbl, next = build()
	c := software.NewCanvas()
	c.SetPadded(false)
	c.SetContent(root)
	c.Resize(size)
	if g := gap(lbl, next); g <= 2*theme.Padding() {
		t.Errorf("negative control: content before size leaves no gap (%v)", g)
	}
}
