package app

import (
	"math"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"
	"gonum.org/v1/plot"

	"arborist/app/present"
	"arborist/profiles"
	"arborist/profiles/costmodel"
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

	// with a calibration in use the sliders show its values, disabled
	s := sp.s
	acc := costmodel.Uniform(0.62, 0.5, 8, 4)
	fyne.DoAndWait(func() { s.SetInputs(&profiles.Inputs{Acc: acc, CalID: 3}) })
	if !sp.Alpha.Disabled() || !sp.Decay.Disabled() || math.Abs(sp.Alpha.Value-0.62) > 0.005 || math.Abs(sp.Decay.Value-0.5) > 0.01 {
		t.Errorf("calibrated: alpha %v (disabled %v), decay %v (disabled %v)", sp.Alpha.Value, sp.Alpha.Disabled(), sp.Decay.Value, sp.Decay.Disabled())
	}
	if got := sp.Values[sp.Alpha].Text; got != "62% measured" {
		t.Errorf("calibrated alpha shows %q", got)
	}
	if !strings.Contains(sp.Mode.Text, "measured on calibration 3") || !strings.Contains(sp.Labels.Text, "acceptance measured on calibration 3") {
		t.Errorf("mode %q, labels %q", sp.Mode.Text, sp.Labels.Text)
	}
	// what-if: the user's values come back and move the model again
	fyne.DoAndWait(func() { sp.UseCal.SetChecked(false) })
	if sp.Alpha.Disabled() || sp.Alpha.Value != 0.9 || sp.Values[sp.Alpha].Text != "90%" || !strings.HasPrefix(sp.Mode.Text, "What-if") {
		t.Errorf("what-if: alpha %v (disabled %v) %q, mode %q", sp.Alpha.Value, sp.Alpha.Disabled(), sp.Values[sp.Alpha].Text, sp.Mode.Text)
	}
	if !strings.Contains(sp.Labels.Text, "assumed values (acceptance 90%") {
		t.Errorf("what-if labels %q", sp.Labels.Text)
	}
}

// TestSpeedupChartAgreesWithRanking: the speedup chart draws every plan
// family the search ranks, and its ring sits on the plan the text names
// as the best, whichever family that is.
func TestSpeedupChartAgreesWithRanking(t *testing.T) {
	sp := newBench(t).Speedup
	for _, alpha := range []float64{0.3, 0.75, 0.95} {
		fyne.DoAndWait(func() { sp.Alpha.SetValue(alpha) })
		ranked := profiles.Explore(profiles.ExploreOptions{Alpha: sp.Alpha.Value, Decay: sp.Decay.Value, Depth: int(sp.MaxDepth.Value), Calibrated: true}).Ranked
		drawn := map[string]bool{}
		for _, s := range sp.Chart.line.Series {
			drawn[s.Name] = true
		}
		for _, p := range ranked {
			if !drawn[familyName(p.Plan.Strategy)] {
				t.Errorf("alpha %v: the search ranks %s plans, the chart has no %s line (%v)", alpha, p.Plan.Strategy, p.Plan.Strategy, drawn)
				break
			}
		}
		best := ranked[0]
		m := sp.Chart.line.Mark
		if m == nil || m[0] != float64(present.Levels(best)) || m[1] != best.Speedup {
			t.Fatalf("alpha %v: the ring is at %v, the best %s at %d levels, %.3fx", alpha, m, best.Plan, present.Levels(best), best.Speedup)
		}
		if !strings.Contains(sp.Best.Text, best.Plan.String()+", predicted") {
			t.Errorf("alpha %v: the text names %q, the ranking's best is %s", alpha, sp.Best.Text, best.Plan)
		}
		// the ringed point is that plan: tapping it picks it
		ringed := false
		for _, pt := range sp.Chart.Points() {
			if pt.X == m[0] && pt.Y == m[1] && sp.chartPlans[pt.S][pt.I].Plan.String() == best.Plan.String() {
				ringed = true
			}
		}
		if !ringed {
			t.Errorf("alpha %v: no point of the chart is the best plan %s", alpha, best.Plan)
		}
	}
}

// TestTicksFitSmallCharts: a chart drawn small (the speedup screen's
// latency curve at 1024x640) labels as many ticks as its axes have room
// for, on linear and log axes alike, and never fewer than two.
func TestTicksFitSmallCharts(t *testing.T) {
	test.NewTempApp(t)
	for _, c := range []struct {
		w, h       int
		logX, logY bool
	}{{200, 120, true, true}, {240, 140, false, false}, {760, 420, true, true}, {160, 100, true, false}} {
		spec := ChartSpec{Title: "t", XLabel: "W", YLabel: "ms", LogX: c.logX, LogY: c.logY, Width: c.w, Height: c.h,
			Series: []Series{{Name: "T", X: []float64{1, 2, 4, 8, 16, 32, 64}, Y: []float64{0.04, 0.1, 0.3, 1, 3, 9, 20}}}}
		f := lineFigure(spec)
		f.render() // sets the axes' ranges
		xs, ys := f.tickBudget()
		for _, ax := range []struct {
			name string
			a    *plot.Axis
			most int
		}{{"x", &f.p.X, xs}, {"y", &f.p.Y, ys}} {
			n := 0
			for _, tk := range ax.a.Tick.Marker.Ticks(ax.a.Min, ax.a.Max) {
				if tk.Label != "" {
					n++
				}
			}
			if n > ax.most || n < 2 {
				t.Errorf("%dx%d (log %v/%v): %d labels on %s, room for %d", c.w, c.h, c.logX, c.logY, n, ax.name, ax.most)
			}
		}
	}
}

// TestTreeFits: the best plan's tree is drawn within the room it has,
// however small, every node a circle of its own.
func TestTreeFits(t *testing.T) {
	sp := newBench(t).Speedup
	parents := []int{-1, -1, -1, 0, 0, 1, 1, 2, 3, 3, 5, 8, 8, 8, 11}
	fyne.DoAndWait(func() { sp.drawTree(parents) })
	for _, size := range []fyne.Size{{Width: 140, Height: 80}, {Width: 400, Height: 260}} {
		sp.TreeBox.Layout.Layout(sp.TreeBox.Objects, size)
		for i, o := range sp.TreeBox.Objects[len(parents):] {
			p, s := o.Position(), o.Size()
			if p.X < 0 || p.Y < 0 || p.X+s.Width > size.Width || p.Y+s.Height > size.Height || s.Width < 2 {
				t.Errorf("%v: node %d drawn at %v, %v", size, i-1, p, s)
			}
		}
	}
}

// TestServeButtonHeight: at 1024x640, where the serving status wraps onto
// two lines, Serve stays a button's height (it stretched beside them).
func TestServeButtonHeight(t *testing.T) {
	wb := newBench(t)
	e := wb.Export
	for i, it := range wb.Tabs.Items {
		if it.Text == e.Title() {
			fyne.DoAndWait(func() {
				wb.Tabs.SelectIndex(i)
				wb.Session.Win.Resize(fyne.NewSize(1024, 640))
			})
		}
	}
	var got, want float32
	fyne.DoAndWait(func() { got, want = e.Serve.Size().Height, e.Serve.MinSize().Height })
	if got > want+1 {
		t.Errorf("Serve is %v high, a button %v", got, want)
	}
}

// TestSpeedupChartsInReach: on the Speedup model screen the verification
// latency chart, the lowest, ends within the window at 1366x768 and up,
// and at 1024x640 comes into view whole when the screen is scrolled to
// the bottom.
func TestSpeedupChartsInReach(t *testing.T) {
	wb := newBench(t)
	sp := wb.Speedup
	for i, it := range wb.Tabs.Items {
		if it.Text == sp.Title() {
			fyne.DoAndWait(func() { wb.Tabs.SelectIndex(i) })
		}
	}
	sc := screenScroll(t, wb, sp.Title())
	for _, size := range []fyne.Size{fyne.NewSize(1024, 640), fyne.NewSize(1366, 768), fyne.NewSize(1920, 1080)} {
		var bottom, h float32
		fyne.DoAndWait(func() {
			wb.Session.Win.Resize(size)
			if size.Height < 768 {
				sc.ScrollToBottom()
			}
			c := sp.Curve
			bottom = fyne.CurrentApp().Driver().AbsolutePositionForObject(c).Y + c.Size().Height
			h = wb.Session.Win.Canvas().Size().Height
			sc.ScrollToTop()
		})
		if bottom > h {
			t.Errorf("%v: the latency chart ends at %v, below the window's %v", size, bottom, h)
		}
	}
}
