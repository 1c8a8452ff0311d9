package app

import (
	"strings"
	"testing"

	"fyne.io/fyne/v2"

	"arborist/profiles"
)

// TestProfileChartsFitTheWindow: at 1366x768 and 1920x1080 the Profile
// screen shows both charts whole under its controls (a two-line status
// included), the second not below the fold, each at least its least room;
// so does the speed at depth in the second's place.
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
	for _, size := range []fyne.Size{fyne.NewSize(1024, 640), fyne.NewSize(1366, 768), fyne.NewSize(1920, 1080)} {
		small := size.Height < 768 // the screen scrolls there: its charts keep their room below the fold
		fyne.DoAndWait(func() { p.Lower.SelectIndex(0) })
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
		if small { // scrolled to the bottom, the lower chart comes into view whole
			var b2 float32
			sc := screenScroll(t, wb, p.Title())
			fyne.DoAndWait(func() {
				sc.ScrollToBottom()
				c2 := p.Family.Chart
				b2 = fyne.CurrentApp().Driver().AbsolutePositionForObject(c2).Y + c2.Size().Height
			})
			if b2 > size.Height {
				t.Errorf("%v: scrolled to the bottom, the second chart ends at %v, below the window", size, b2)
			}
			fyne.DoAndWait(func() { sc.ScrollToTop() })
		}
		if h1 < profileChartH || h2 < familyChartH {
			t.Errorf("%v: the charts are %v and %v high, want at least %v and %v", size, h1, h2, profileChartH, familyChartH)
		}
		if bottom > size.Height && !small {
			t.Errorf("%v: the second chart ends at %v, below the window's %v", size, bottom, size.Height)
		}
		// the speed at depth, in the family's place, under its controls
		var h3 float32
		fyne.DoAndWait(func() {
			p.Lower.SelectIndex(1)
			p.Depth.Status.SetText("context 4096: verify passes: 3 of 15, W=64: 1.204s; at most about 1 min left")
			_, figures := depthSpec(&profiles.BenchReport{Decode: []float64{62}, Median: 62, Roofline: 84, Context: 69, Depths: []profiles.DepthReport{
				{Context: 1024, Decode: []float64{41.8}, Median: 41.8, Roofline: 66, Prefill: 130.6}, {Context: 4096, Decode: []float64{19}, Median: 19, Roofline: 25, Prefill: 85.7}}}, 5)
			p.Depth.Summary.SetText(figures)
			c3 := p.Depth.Chart
			bottom = fyne.CurrentApp().Driver().AbsolutePositionForObject(c3).Y + c3.Size().Height
			h3 = c3.Size().Height
		})
		if h3 < depthChartH || bottom > size.Height && !small {
			t.Errorf("%v: the speed at depth's chart is %v high (want at least %v) and ends at %v, the window %v", size, h3, depthChartH, bottom, size.Height)
		}
	}
}
