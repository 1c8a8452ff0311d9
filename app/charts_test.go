package app

import (
	"image/color"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/theme"
)

// TestChartsFollowTheme: a chart's background is the theme's, light or
// dark, not a white picture pasted into the dark theme.
func TestChartsFollowTheme(t *testing.T) {
	a := test.NewTempApp(t)
	spec := ChartSpec{Title: "t", XLabel: "W", YLabel: "ms", LogX: true, Series: []Series{{Name: "a", X: []float64{1, 2, 4, 8, 16}, Y: []float64{1, 2, 3, 4, 5}}}, Width: 300, Height: 200}
	for _, v := range []struct {
		name string
		th   fyne.Theme
	}{{"light", theme.LightTheme()}, {"dark", theme.DarkTheme()}} { //nolint:staticcheck // the fixed variants are what is tested
		a.Settings().SetTheme(v.th)
		img := RenderChart(spec)
		want := a.Settings().Theme().Color(theme.ColorNameBackground, a.Settings().ThemeVariant())
		if !sameColor(img.At(1, 1), want) {
			t.Errorf("%s: corner %v, theme background %v", v.name, img.At(1, 1), want)
		}
	}
	if ts := (logTicks{}).Ticks(1, 64); len(ts) < 10 || ts[0].Label != "1" || ts[1].Label != "2" {
		t.Errorf("log ticks 1..64: %+v", ts)
	}
	var labels []string
	for _, tk := range (logTicks{}).Ticks(22, 180) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	if len(labels) < 3 {
		t.Errorf("log ticks 22..180 label only %q", labels)
	}
}

func sameColor(a, b color.Color) bool {
	r1, g1, b1, _ := a.RGBA()
	r2, g2, b2, _ := b.RGBA()
	d := func(x, y uint32) bool { return x>>8 > y>>8+2 || y>>8 > x>>8+2 }
	return !d(r1, r2) && !d(g1, g2) && !d(b1, b2)
}

// TestNiceTicks: a linear axis gets about five round labels, whatever
// its range.
func TestNiceTicks(t *testing.T) {
	for _, c := range []struct {
		min, max float64
		want     string
	}{{0, 250, "0 50 100 150 200 250"}, {0.55, 1.95, "0.6 0.8 1 1.2 1.4 1.6 1.8"}, {1, 40, "10 20 30 40"}} {
		var labels []string
		for _, tk := range (niceTicks{}).Ticks(c.min, c.max) {
			if tk.Label != "" {
				labels = append(labels, tk.Label)
			}
		}
		if got := strings.Join(labels, " "); got != c.want {
			t.Errorf("%v..%v: %q, want %q", c.min, c.max, got, c.want)
		}
	}
}

// TestZeroBarOnTheAxis: in the dark theme a bar of value 0 lies on the
// axis at the data area's foot, in its own colour: not a stripe in the
// text colour floating mid-chart on an axis from -1 to 1 (as when every
// value was 0).
func TestZeroBarOnTheAxis(t *testing.T) {
	a := test.NewTempApp(t)
	a.Settings().SetTheme(theme.DarkTheme()) //nolint:staticcheck // the fixed variant is what is tested
	fg := a.Settings().Theme().Color(theme.ColorNameForeground, a.Settings().ThemeVariant())
	blue := color.NRGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	for _, vals := range [][]float64{{0}, {0, 2}} {
		f := barFigure(BarSpec{Title: "t", YLabel: "y", Labels: []string{"a", "b"}[:len(vals)], Colors: []color.Color{blue, blue},
			Groups: []Series{{Name: "g", Y: vals}}, Width: 300, Height: 200})
		r := f.render()
		if f.p.Y.Min != 0 || f.p.Y.Max <= 0 {
			t.Errorf("%v: y axis %g to %g, want from 0", vals, f.p.Y.Min, f.p.Y.Max)
		}
		zero := r.pts[0]
		if d := zero.py - zero.pfoot; d > 0.5 || d < -0.5 {
			t.Errorf("%v: the zero bar's top %g is off its foot %g", vals, zero.py, zero.pfoot)
		}
		// the bottom of the data area: the zero bar's own colour, never the text's
		x, y := int(zero.px), int(zero.pfoot)
		var saw bool
		for dy := -2; dy <= 2; dy++ {
			c := r.img.At(x, y+dy)
			if sameColor(c, fg) {
				t.Errorf("%v: the zero bar draws in the text colour at %d,%d", vals, x, y+dy)
			}
			saw = saw || sameColor(c, blue)
		}
		if !saw {
			t.Errorf("%v: the zero bar is not drawn at %d,%d", vals, x, y)
		}
	}
}

// TestLongYLabelBlanked: a y label longer than its axis is blanked
// (cut at both ends it read as "ding"); one that fits stays.
func TestLongYLabelBlanked(t *testing.T) {
	spec := ChartSpec{Title: "Best predicted speedup of each plan family", XLabel: "draft levels", YLabel: "speedup over plain decoding",
		Series: []Series{{Name: "a", X: []float64{1, 2}, Y: []float64{1, 2}}}, Width: 570, Height: 200}
	if f := lineFigure(spec); strings.TrimSpace(f.p.Y.Label.Text) != "" {
		t.Errorf("a %d-pixel chart keeps a y label %q", spec.Height, f.p.Y.Label.Text)
	}
	// the tick labels keep their room at the left edge: with no label at
	// all gonum drew the first digit half off the image
	bars := BarSpec{Title: "t", YLabel: "x over plain decoding", Labels: []string{"a"}, Groups: []Series{{Name: "g", Y: []float64{4}}}, Width: 480, Height: 150}
	if r := barFigure(bars).render(); r.left < 32 { // 42 pixels with a blank label, 25 without
		t.Errorf("the data area starts %v pixels from the left: no room for the tick labels", r.left)
	}
	spec.Height = 380
	if f := lineFigure(spec); f.p.Y.Label.Text != spec.YLabel {
		t.Errorf("a %d-pixel chart dropped its y label", spec.Height)
	}
	bars = BarSpec{Title: "t", YLabel: "ms", Labels: []string{"a"}, Groups: []Series{{Name: "g", Y: []float64{1}}}, Width: 300, Height: 120}
	if f := barFigure(bars); f.p.Y.Label.Text != "ms" {
		t.Error("a short y label dropped")
	}
}

// TestDashedLineShowsTheLineUnderIt: dashed series lying exactly on a
// measured one (the suite's shortest and longest context on the
// context-128 curve) take turns and let the measured line show between
// their dashes, so all can be told apart; drawn solid, as before, the
// last line hid the others whole (the negative control).
func TestDashedLineShowsTheLineUnderIt(t *testing.T) {
	a := test.NewTempApp(t)
	a.Settings().SetTheme(theme.LightTheme()) //nolint:staticcheck // a fixed variant
	// columns along the shared line where each series' colour shows
	line := func(dashed bool) (shown [3]int) {
		x, y := []float64{0, 10}, []float64{1, 1}
		spec := ChartSpec{Title: "t", XLabel: "W", YLabel: "ms", Width: 600, Height: 300,
			Series: []Series{{Name: "context 128", X: x, Y: y}, {Name: "shortest", X: x, Y: y, Dashed: dashed}, {Name: "longest", X: x, Y: y, Dashed: dashed}}}
		r := lineFigure(spec).render()
		left, right, row := int(r.pts[0].px)+12, int(r.pts[1].px)-12, int(r.pts[0].py)
		for px := left; px < right; px++ {
			var seen [3]bool
			for py := row - 2; py <= row+2; py++ {
				for i := range seen {
					seen[i] = seen[i] || sameColor(r.img.At(px, py), palette[i])
				}
			}
			for i, ok := range seen {
				if ok {
					shown[i]++
				}
			}
		}
		return shown
	}
	if shown := line(true); shown[0] < 20 || shown[1] < 20 || shown[2] < 20 {
		t.Errorf("dashed: the line under, the first and the second dashed one show in %v columns; want all three", shown)
	}
	if shown := line(false); shown[0] > 2 || shown[1] > 2 {
		t.Errorf("negative control: solid lines on top leave %v columns of the ones under", shown)
	}
}
