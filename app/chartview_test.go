package app

import (
	"bytes"
	"image"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"

	"arborist/engine/model/modeltest"
)

// showChart puts c alone in an unpadded test window, so canvas and chart
// coordinates agree, at a size other than its image's (the image is
// scaled to fit, which the mapping must follow).
func showChart(t *testing.T, c *Chart) fyne.Window {
	t.Helper()
	w := test.NewTempWindow(t, c)
	w.SetPadded(false)
	w.Resize(fyne.NewSize(500, 420))
	return w
}

func ramp(name string, n int, f func(x float64) float64) Series {
	s := Series{Name: name}
	for i := 1; i <= n; i++ {
		s.X = append(s.X, float64(i))
		s.Y = append(s.Y, f(float64(i)))
	}
	return s
}

// TestChartHover: hovering a point shows that point's values, and the
// point is drawn where the chart says (its pixel has its series' colour).
func TestChartHover(t *testing.T) {
	test.NewTempApp(t)
	c := newChart(300, 200)
	w := showChart(t, c)
	c.SetSpec(ChartSpec{Title: "t", XLabel: "depth", YLabel: "speedup", Width: 600, Height: 360, Series: []Series{
		ramp("a", 6, func(x float64) float64 { return 1 + x/10 }),
		ramp("b", 6, func(x float64) float64 { return 2 - x/10 }),
	}})
	if len(c.Points()) != 12 {
		t.Fatalf("%d points drawn, want 12", len(c.Points()))
	}
	for _, pt := range c.Points() {
		if pt.S == 1 && pt.I == 3 { // b at x=4: y=1.6
			got := c.Image.At(int(pt.px), int(pt.py))
			if !sameColor(got, palette[1]) {
				t.Errorf("pixel of b(4) is %v, want the series colour %v: the mapping is off", got, palette[1])
			}
			test.MoveMouse(w.Canvas(), c.PointPos(pt))
			if want := "b: depth 4, speedup 1.6"; c.Tip != want {
				t.Errorf("hover tip %q, want %q", c.Tip, want)
			}
			if !c.tipText.Visible() {
				t.Error("the tip is not shown")
			}
		}
	}
	test.MoveMouse(w.Canvas(), fyne.NewPos(2, 2)) // a corner, far from data
	if c.Tip != "" {
		t.Errorf("tip %q away from every point", c.Tip)
	}
	// bars: the tip names the bar's label
	c.SetBars(BarSpec{Title: "Decode speed", YLabel: "tokens/s", Labels: []string{"run 1", "run 2"}, Groups: []Series{{Y: []float64{100, 250}}}, Width: 420, Height: 300})
	pts := c.Points()
	if len(pts) != 2 {
		t.Fatalf("%d bars", len(pts))
	}
	test.TapAt(c, c.PointPos(pts[1]))
	if want := "Decode speed, run 2: 250 tokens/s"; c.Tip != want {
		t.Errorf("bar tip %q, want %q", c.Tip, want)
	}
	// the whole bar answers a hover, down to its foot, not its top only;
	// beside it, nothing does
	top := c.PointPos(pts[1])
	foot := c.PointPos(ChartPoint{px: pts[1].px, py: pts[1].pfoot})
	if foot.Y-top.Y < 60 {
		t.Fatalf("bar 2 drawn %v high", foot.Y-top.Y)
	}
	test.MoveMouse(w.Canvas(), fyne.NewPos(2, 2))
	for _, y := range []float32{top.Y + 30, (top.Y + foot.Y) / 2, foot.Y - 3} {
		test.MoveMouse(w.Canvas(), c.Position().Add(fyne.NewPos(top.X+2, y)))
		if want := "Decode speed, run 2: 250 tokens/s"; c.Tip != want {
			t.Errorf("hover %v below the bar's top: tip %q, want %q", y-top.Y, c.Tip, want)
		}
	}
	test.MoveMouse(w.Canvas(), c.Position().Add(fyne.NewPos(top.X+50, (top.Y+foot.Y)/2)))
	if c.Tip != "" {
		t.Errorf("hover beside the bar: tip %q", c.Tip)
	}
}

// TestChartZoom: a drag over the timeline zooms to that range of steps,
// zoom out widens it, show all restores it; a log axis zooms too.
func TestChartZoom(t *testing.T) {
	test.NewTempApp(t)
	c := newChart(300, 200)
	c.Zoomable = true
	w := showChart(t, c)
	c.SetSpec(ChartSpec{Title: "Per-step timeline", XLabel: "step", YLabel: "ms", Width: 760, Height: 260,
		Series: []Series{ramp("verify", 40, func(x float64) float64 { return 5 + float64(int(x)%3) })}})
	lo0, hi0 := c.XRange()
	if lo0 > 1 || hi0 < 40 {
		t.Fatalf("full range %v..%v", lo0, hi0)
	}
	at := func(x float64) fyne.Position {
		for _, pt := range c.Points() {
			if pt.X == x {
				return c.PointPos(pt)
			}
		}
		t.Fatalf("no point at x=%v", x)
		return fyne.Position{}
	}
	from, to := at(10), at(20)
	test.Drag(w.Canvas(), to, to.X-from.X, 0)
	lo, hi := c.XRange()
	if lo < 9.5 || lo > 10.5 || hi < 19.5 || hi > 20.5 {
		t.Fatalf("zoomed to %v..%v, want about 10..20", lo, hi)
	}
	for _, pt := range c.Points() {
		if pt.X < lo || pt.X > hi {
			t.Errorf("point at step %v shown in %v..%v", pt.X, lo, hi)
		}
	}
	if n := len(c.Points()); n < 10 || n > 11 {
		t.Errorf("%d points in the zoom", n)
	}
	c.ZoomOut()
	if l, h := c.XRange(); !(l < lo && h > hi) {
		t.Errorf("zoom out gave %v..%v from %v..%v", l, h, lo, hi)
	}
	c.ResetZoom()
	if l, h := c.XRange(); l != lo0 || h != hi0 {
		t.Errorf("reset gave %v..%v, want %v..%v", l, h, lo0, hi0)
	}
	// new data keeps the zoom (a live timeline stays where the user looks)
	c.SetZoom(5, 8)
	c.SetSpec(ChartSpec{Title: "Per-step timeline", XLabel: "step", YLabel: "ms", Width: 760, Height: 260,
		Series: []Series{ramp("verify", 50, func(x float64) float64 { return 5 })}})
	if l, h := c.XRange(); l != 5 || h != 8 {
		t.Errorf("zoom lost on new data: %v..%v", l, h)
	}

	// the latency curve: log x
	c.ResetZoom()
	c.SetSpec(ChartSpec{Title: "Verification latency", XLabel: "W", YLabel: "ms", LogX: true, LogY: true, Width: 420, Height: 220,
		Series: []Series{{Name: "T", X: []float64{1, 2, 4, 8, 16, 32, 64}, Y: []float64{10, 11, 12, 14, 20, 30, 50}}}})
	from, to = at(4), at(16)
	c.ZoomToWidgetRange(from.X, to.X)
	lo, hi = c.XRange()
	if lo < 3.9 || lo > 4.1 || hi < 15.6 || hi > 16.4 {
		t.Errorf("log zoom to %v..%v, want about 4..16", lo, hi)
	}

	// a zoom says so, and a line drawn between two ends outside the range
	// (the profile's roofline) stays in view
	c.ResetZoom()
	c.SetSpec(ChartSpec{Title: "Latency", XLabel: "W", YLabel: "ms", LogX: true, LogY: true, Width: 420, Height: 220, Series: []Series{
		{Name: "T", X: []float64{1, 2, 4, 8, 16, 32}, Y: []float64{10, 11, 12, 14, 20, 30}},
		{Name: "roofline", X: []float64{1, 32}, Y: []float64{5, 5}}}})
	if strings.Contains(c.fig.p.Title.Text, "zoomed") {
		t.Errorf("unzoomed title %q", c.fig.p.Title.Text)
	}
	c.SetZoom(2, 10)
	if want := "Latency (zoomed to W 2-10)"; c.fig.p.Title.Text != want {
		t.Errorf("zoomed title %q, want %q", c.fig.p.Title.Text, want)
	}
	r := c.r
	x, y := int(pixels(r.fx(5))), int(r.height-pixels(r.fy(5)))
	hit := false
	for dy := -2; dy <= 2; dy++ {
		hit = hit || sameColor(r.img.At(x, y+dy), palette[1])
	}
	if !hit {
		t.Errorf("the roofline is not drawn across the zoom (pixel %v at %d,%d)", r.img.At(x, y), x, y)
	}
}

// TestChartSave: every chart saves as a PNG that decodes at its size and
// an SVG document; other formats are refused.
func TestChartSave(t *testing.T) {
	test.NewTempApp(t)
	c := newChart(300, 200)
	dir := t.TempDir()
	if err := c.SaveFile(filepath.Join(dir, "empty.png")); err == nil {
		t.Error("an empty chart saved")
	}
	c.SetSpec(ChartSpec{Title: "t", XLabel: "W", YLabel: "ms", Width: 420, Height: 220, Series: []Series{ramp("a", 5, func(x float64) float64 { return x })}})
	pngPath, svgPath := filepath.Join(dir, "c.png"), filepath.Join(dir, "c.svg")
	for _, p := range []string{pngPath, svgPath} {
		if err := c.SaveFile(p); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(pngPath)
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("saved PNG: %v", err)
	}
	if img.Bounds().Dx() != 420 || img.Bounds().Dy() != 220 {
		t.Errorf("PNG is %v", img.Bounds())
	}
	svg, _ := os.ReadFile(svgPath)
	if !bytes.HasPrefix(svg, []byte("<?xml")) || !bytes.Contains(svg, []byte("<svg")) || !bytes.Contains(svg, []byte("</svg>")) {
		t.Errorf("saved SVG starts %q", svg[:min(len(svg), 80)])
	}
	if !bytes.Contains(svg, []byte(">t<")) && !strings.Contains(string(svg), "t</text>") {
		t.Log("the SVG title is not plain text (fonts may be drawn as paths)")
	}
	if err := c.SaveFile(filepath.Join(dir, "c.jpg")); err == nil {
		t.Error("a .jpg was written")
	}
	if _, err := os.Stat(filepath.Join(dir, "c.jpg")); err == nil {
		t.Error("a refused file was left behind")
	}
	// a symlink at the chart's name is refused, not written through
	victim := filepath.Join(dir, "victim.txt")
	os.WriteFile(victim, []byte("precious"), 0o644)
	link := filepath.Join(dir, "link.png")
	if os.Symlink(victim, link) == nil {
		if err := c.SaveFile(link); err == nil || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("a chart saved onto a symlink: %v", err)
		}
		if b, _ := os.ReadFile(victim); string(b) != "precious" {
			t.Errorf("the chart was written through a symlink: %q", b)
		}
	}
}

// TestSpeedupChartPicksPlan: tapping a point of the speedup chart selects
// its plan for Run (the same selection the tuned list makes) and stores it
// as the pair's newest plan, which Export renders.
func TestSpeedupChartPicksPlan(t *testing.T) {
	dir := modeltest.ModelsDir(t)
	wb := newBench(t)
	s, sp, r := wb.Session, wb.Speedup, wb.Run
	m := wb.Models
	m.Target.SetText(filepath.Join(dir, "stories260K.gguf"))
	m.Draft.SetText(modeltest.NoisyDraft(t))
	test.Tap(m.Load)
	waitFor(t, "loading", func() bool {
		return m.s.idle() && (strings.Contains(m.Status.Text, "Loaded") || strings.Contains(m.Status.Text, "Not loaded"))
	})
	fyne.DoAndWait(func() { wb.Tabs.SelectIndex(2); sp.Update() })
	var pt ChartPoint
	found := false
	// an egt point no other family's point hides (plans doing the same
	// work, a chain and an egt of one branch, share theirs)
	pts := sp.Chart.Points()
	for _, p := range pts {
		alone := true
		for _, q := range pts {
			alone = alone && (q.S == p.S || q.X != p.X || math.Abs(q.Y-p.Y) > 0.01)
		}
		if p.Series == "egt" && alone && !found {
			pt, found = p, true
		}
	}
	if !found {
		t.Fatalf("no egt point of its own among %d", len(pts))
	}
	if sp.Chart.Size().Width < 100 {
		t.Fatalf("the chart is not laid out: %v", sp.Chart.Size())
	}
	fyne.DoAndWait(func() { test.TapAt(sp.Chart, sp.Chart.PointPos(pt)) })
	want := sp.chartPlans[pt.S][pt.I].Plan.String()
	if s.Tuned == nil || s.Tuned.Plan.String() != want || !strings.HasPrefix(want, "egt ") {
		t.Fatalf("tapped plan %+v, want %s", s.Tuned, want)
	}
	if !strings.Contains(sp.Chart.Tip, "egt: draft levels a step (drafter passes) ") {
		t.Errorf("tap tip %q", sp.Chart.Tip)
	}
	if r.UseTuned.Disabled() {
		t.Fatal("Run does not offer the picked plan")
	}
	test.Tap(r.UseTuned)
	if got, err := r.Plan(); err != nil || got.String() != want {
		t.Errorf("Run holds %v (%v), want %s", got, err, want)
	}
	waitFor(t, "the plan stored for Export", func() bool { return wb.Session.idle() && sp.stored == want })
	if !strings.Contains(sp.WorkStatus.Text, "Stored as plan") {
		t.Errorf("status: %s", sp.WorkStatus.Text)
	}
	e := wb.Export
	if err := e.Reload(); err != nil {
		t.Fatal(err)
	}
	t.Logf("export:\n%s", e.YAML.Text)
	if e.cfg == nil || e.cfg.Speculation.String() != want {
		t.Errorf("Export renders %v, want the picked %s", e.cfg, want)
	}
}

// TestEmptyChartOffersNoSave: an empty chart's Save (and zoom) buttons
// are disabled; drawn, they are enabled; cleared, disabled again.
func TestEmptyChartOffersNoSave(t *testing.T) {
	test.NewTempApp(t)
	c := newChart(220, 160)
	c.Zoomable = true
	c.View(nil)
	if len(c.tools) != 3 {
		t.Fatalf("%d tools", len(c.tools))
	}
	enabled := func() (n int) {
		for _, b := range c.tools {
			if !b.Disabled() {
				n++
			}
		}
		return n
	}
	if n := enabled(); n != 0 {
		t.Errorf("empty: %d tools enabled", n)
	}
	c.SetSpec(ChartSpec{Title: "t", Series: []Series{{Name: "a", X: []float64{1, 2}, Y: []float64{1, 2}}}, Width: 220, Height: 160})
	if n := enabled(); n != 3 {
		t.Errorf("drawn: %d of 3 tools enabled", n)
	}
	c.Clear()
	if n := enabled(); n != 0 {
		t.Errorf("cleared: %d tools enabled", n)
	}
}

// TestTipKeepsClearOfLegend: the values of a point near the legend (the
// best plan high at the right of the speedup chart) show beside it
// without covering the legend, which is found where its samples are
// drawn; a tip as wide as most of the chart (its axes' long names) too.
// The negative control: where the tip went before, it covered the legend.
func TestTipKeepsClearOfLegend(t *testing.T) {
	test.NewTempApp(t)
	for _, axes := range [][2]string{{"W", "x"}, {"draft levels a step (drafter passes)", "speedup over plain decoding"}} {
		c := newChart(300, 200)
		showChart(t, c)
		c.SetSpec(ChartSpec{Title: "Best predicted speedup", XLabel: axes[0], YLabel: axes[1],
			Series: []Series{ramp("egt", 8, func(x float64) float64 { return x }), ramp("a family with a long name", 8, func(x float64) float64 { return x / 2 })}})
		lp, ls := c.LegendBox()
		if ls.Width < 40 || ls.Height < 10 || lp.X < c.Size().Width/2 {
			t.Fatalf("legend box %v %v in a chart of %v: not the legend at the right", lp, ls, c.Size())
		}
		// the legend's box holds its first sample, drawn in the first series' colour
		s, ox, oy := c.fit()
		found := false
		for y := lp.Y; y < lp.Y+ls.Height && !found; y++ {
			for x := lp.X; x < lp.X+ls.Width; x++ {
				if sameColor(c.Image.At(int((x-ox)/s), int((y-oy)/s)), palette[0]) {
					found = true
					break
				}
			}
		}
		if !found {
			t.Error("no legend sample inside the legend's box")
		}
		var top ChartPoint
		for _, pt := range c.Points() {
			if pt.Series == "egt" && pt.I == 7 {
				top = pt
			}
		}
		p := c.PointPos(top)
		if _, ok := c.ShowTipAt(p); !ok {
			t.Fatal("no tip at the top point")
		}
		tp, ts := c.tipBg.Position(), c.tipBg.Size()
		overlap := func(x, y float32) bool {
			return x < lp.X+ls.Width && x+ts.Width > lp.X && y < lp.Y+ls.Height && y+ts.Height > lp.Y
		}
		if overlap(tp.X, tp.Y) {
			t.Errorf("%s: the tip at %v %v covers the legend at %v %v", axes[0], tp, ts, lp, ls)
		}
		if tp.X < 0 || tp.Y < 0 || tp.X+ts.Width > c.Size().Width || tp.Y+ts.Height > c.Size().Height {
			t.Errorf("%s: the tip at %v %v leaves the chart of %v", axes[0], tp, ts, c.Size())
		}
		// where the tip went before: above and right, below where the
		// title is, left where the chart ends
		rx, ry := p.X+10, p.Y-ts.Height-10
		if ry < c.Size().Height/6 {
			ry = p.Y + 10
		}
		if rx+ts.Width > c.Size().Width {
			rx = p.X - 10 - ts.Width
		}
		if !overlap(max(0, rx), max(0, ry)) {
			t.Errorf("%s: negative control: the old place (%v, %v) clears the legend; the check proves nothing", axes[0], rx, ry)
		}
	}
}

// TestTipNearestClearPlace: a tip too wide for either side of its point,
// whose place below and right would cover the legend, goes to the clear
// place nearest the point: centred under it, clear of the legend, not
// at the chart's left edge over the y axis.
func TestTipNearestClearPlace(t *testing.T) {
	test.NewTempApp(t)
	c := newChart(800, 300)
	w := showChart(t, c)
	w.Resize(fyne.NewSize(800, 300))
	c.Image = image.NewNRGBA(image.Rect(0, 0, int(c.Size().Width), int(c.Size().Height))) // shown at scale 1
	// sizes as text measures them, not round
	c.r = &chartRendering{img: c.Image, legend: [4]float32{600.3, 30, 800, 130}}
	box := fyne.NewSize(400.71875, 22.984375)
	p := fyne.NewPos(300.1, 25)
	got := c.tipPlace(p, box)
	if mid := got.X + box.Width/2; got.Y < 35 || got.Y > 35.2 || mid < p.X-1 || mid > p.X+1 {
		t.Errorf("tip at %v size %v, want it centred under the point %v (y 35)", got, box, p)
	}
	if got.X+box.Width > 600.3-4 && got.Y < 130 && got.Y+box.Height > 30 {
		t.Errorf("the tip at %v covers the legend", got)
	}
	// a tip above and right of its point would end on the legend's
	// edge, its last word run into the legend's first sample: it keeps
	// a few pixels off
	got = c.tipPlace(fyne.NewPos(190, 100), box)
	if got.X+box.Width > 600-4 && got.Y < 130+4 && got.Y+box.Height > 30-4 {
		t.Errorf("the tip at %v ends on the legend's edge", got)
	}
}
