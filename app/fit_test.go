package app

import (
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"
)

// TestFitsSmallWindow: the window's minimum size is at most 800x600 (each
// screen scrolls where the window is smaller than it), and no screen is
// wider than a 1024-pixel window.
func TestFitsSmallWindow(t *testing.T) {
	wb := newBench(t)
	for i, it := range wb.Tabs.Items {
		var min fyne.Size
		fyne.DoAndWait(func() {
			wb.Tabs.SelectIndex(i)
			min = wb.Session.Win.Content().MinSize()
		})
		screen := it.Content.(*container.Scroll).Content.MinSize()
		t.Logf("%s: window %v, screen %v", it.Text, min, screen)
		if min.Width > 800 || min.Height > 600 {
			t.Errorf("%s needs a %vx%v window, more than 800x600", it.Text, min.Width, min.Height)
		}
		if screen.Width > 1000 { // at 1024 wide, no sideways scrolling
			t.Errorf("%s is %v wide: it scrolls sideways at 1024x640", it.Text, screen.Width)
		}
	}
}

// TestSlidersShowValues: every slider of the speedup model shows its value,
// and the label follows the slider.
func TestSlidersShowValues(t *testing.T) {
	sp := newBench(t).Speedup
	for _, sl := range []*widget.Slider{sp.Alpha, sp.Decay, sp.MaxDepth, sp.WMax} {
		if sp.Values[sl] == nil {
			t.Fatal("a slider without a value label")
		}
	}
	sp.Alpha.SetValue(0.9)
	sp.MaxDepth.SetValue(5)
	if got := sp.Values[sp.Alpha].Text; got != "90%" {
		t.Errorf("alpha shows %q", got)
	}
	if got := sp.Values[sp.MaxDepth].Text; got != "5 tokens" {
		t.Errorf("depth shows %q", got)
	}
	if sp.Best.Text == "" {
		t.Error("the slider no longer updates the model")
	}
}
