package app

import (
	"strings"
	"testing"

	"fyne.io/fyne/v2"
)

// TestProfileChartsFitTheWindow: at 1366x768 and 1920x1080 the Profile
// screen shows both charts whole under its controls (a two-line status
// included), the second not below the fold, each at least its least room.
func TestProfileChartsFitTheWindow(t *testing.T) {
	wb := newBench(t)
	p := wb.Profile
	for i, tab := range wb.Tabs.Items {
		if tab.Text == p.Title() {
			fyne.DoAndWait(func() { wb.Tabs.SelectIndex(i) })
		}
	}
	fyne.DoAndWait(func() {
		p.Status.SetText("Target curve measured now. " + strings.Repeat("Read bandwidth 30.4 GB/s: T_verify(1) = 1.803ms, 69% of the roofline. ", 3))
	})
	for _, size := range []fyne.Size{fyne.NewSize(1366, 768), fyne.NewSize(1920, 1080)} {
		var bottom, h1, h2 float32
		fyne.DoAndWait(func() {
			win := wb.Session.Win
			win.Resize(size)
			d := fyne.CurrentApp().Driver()
			c2 := p.Family.Chart
			bottom = d.AbsolutePositionForObject(c2).Y + c2.Size().Height
			h1, h2 = p.Chart.Size().Height, c2.Size().Height
			size = win.Canvas().Size()
		})
		if h1 < profileChartH || h2 < familyChartH {
			t.Errorf("%v: the charts are %v and %v high, want at least %v and %v", size, h1, h2, profileChartH, familyChartH)
		}
		if bottom > size.Height {
			t.Errorf("%v: the second chart ends at %v, below the window's %v", size, bottom, size.Height)
		}
	}
}
