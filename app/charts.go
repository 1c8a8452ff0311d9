package app

import (
	"fmt"
	"image"
	"image/color"
	"io"
	"math"
	"strconv"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/theme"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Series is one line of a chart, with optional error bars (Err, same length).
type Series struct {
	Name string
	X, Y []float64
	Err  []float64
	// Dashed draws the line dashed, thicker and over the others, without
	// point glyphs: a derived line (the suite's context range, interpolated
	// between measured curves) that can lie exactly on a measured one and
	// must still be told apart from it; the legend's sample is dashed too.
	// Dashed lines take turns along one period, so two of them lying on
	// each other (the suite's shortest and longest context, both below
	// the shortest measured) show both, and what is under them between.
	Dashed bool
}

// ChartSpec describes a line chart.
type ChartSpec struct {
	Title, XLabel, YLabel string
	LogX, LogY            bool
	Series                []Series
	Mark                  *[2]float64 // a highlighted point (the best plan)
	Width, Height         int         // pixels
	// XMin and XMax, when XMax > XMin, show only that range of X (a zoom).
	XMin, XMax float64
}

var palette = []color.Color{
	color.RGBA{31, 119, 180, 255}, color.RGBA{214, 39, 40, 255}, color.RGBA{44, 160, 44, 255},
	color.RGBA{148, 103, 189, 255}, color.RGBA{255, 127, 14, 255}, color.RGBA{23, 190, 207, 255},
}

// RenderChart draws spec with gonum/plot into an image.
func RenderChart(spec ChartSpec) image.Image { return lineFigure(spec).render().img }

// RenderBars draws a grouped bar chart.
func RenderBars(spec BarSpec) image.Image { return barFigure(spec).render().img }

// lineFigure builds a line chart in the current theme's style.
func lineFigure(spec ChartSpec) *chartFigure {
	p := plot.New()
	p.Title.Text = spec.Title
	p.X.Label.Text = spec.XLabel
	p.Y.Label.Text = spec.YLabel
	st := currentChartStyle()
	f := &chartFigure{p: p, leg: st.apply(p), bg: st.bg, w: spec.Width, h: spec.Height}
	if f.w <= 0 {
		f.w, f.h = 640, 360
	}
	f.fitYLabel()
	xs, ys := f.tickBudget()
	p.X.Tick.Marker, p.Y.Tick.Marker = niceTicks{most: xs}, niceTicks{most: ys}
	if spec.LogX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = logTicks{most: xs}
	}
	if spec.LogY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = logTicks{most: ys}
	}
	zoomed := spec.XMax > spec.XMin && (!spec.LogX || spec.XMin > 0)
	shown := func(x, y float64) bool {
		if (spec.LogX && x <= 0) || (spec.LogY && y <= 0) || math.IsNaN(x) || math.IsNaN(y) {
			return false
		}
		return !zoomed || (x >= spec.XMin && x <= spec.XMax)
	}
	valid := func(x, y float64) bool {
		return !(spec.LogX && x <= 0) && !(spec.LogY && y <= 0) && !math.IsNaN(x) && !math.IsNaN(y)
	}
	var over []plot.Plotter // the dashed lines, drawn last
	dashed := 0
	for _, s := range spec.Series {
		if s.Dashed {
			dashed++
		}
	}
	// each dashed line a dash of 5 points and a gap of 3 in turn
	dash, slot := vg.Points(5), vg.Points(8)
	period := slot * vg.Length(dashed)
	for i, s := range spec.Series {
		pts := make(plotter.XYs, 0, len(s.X))
		var errs plotter.YErrors
		var line plotter.XYs // the points and, zoomed, where the line crosses the range's edges
		var prev *plotter.XY
		for j := range s.X {
			if j >= len(s.Y) || !valid(s.X[j], s.Y[j]) {
				continue
			}
			pt := plotter.XY{X: s.X[j], Y: s.Y[j]}
			if zoomed && prev != nil {
				line = append(line, crossings(*prev, pt, spec)...)
			}
			prev = &pt
			if !shown(pt.X, pt.Y) {
				continue
			}
			line = append(line, pt)
			pts = append(pts, pt)
			f.pts = append(f.pts, ChartPoint{Series: s.Name, S: i, I: j, X: s.X[j], Y: s.Y[j]})
			if j < len(s.Err) {
				errs = append(errs, struct{ Low, High float64 }{s.Err[j], s.Err[j]})
			}
		}
		if len(line) == 0 {
			continue
		}
		c := palette[i%len(palette)]
		l, err := plotter.NewLine(line)
		if err != nil {
			continue
		}
		l.Color, l.Width = c, vg.Points(1.5)
		thumbs := []plot.Thumbnailer{l}
		if s.Dashed {
			l.Width, l.Dashes = vg.Points(2.5), []vg.Length{dash, period - dash}
			l.DashOffs = period - slot*vg.Length(len(over)) // its turn
			over = append(over, l)
			if s.Name != "" {
				f.leg.Add(s.Name, thumbs...)
			}
			continue
		}
		p.Add(l)
		if len(pts) > 0 {
			if sc, err := plotter.NewScatter(pts); err == nil {
				sc.Color, sc.Shape, sc.Radius = c, draw.CircleGlyph{}, vg.Points(2.5)
				p.Add(sc)
				thumbs = append(thumbs, sc)
			}
		}
		if s.Name != "" {
			f.leg.Add(s.Name, thumbs...)
		}
		if len(errs) == len(pts) && len(pts) > 0 {
			bars, err := plotter.NewYErrorBars(struct {
				plotter.XYer
				plotter.YErrorer
			}{pts, errs})
			if err == nil {
				bars.Color = c
				p.Add(bars)
			}
		}
	}
	p.Add(over...)
	if m := spec.Mark; m != nil && shown(m[0], m[1]) {
		ms, err := plotter.NewScatter(plotter.XYs{{X: m[0], Y: m[1]}})
		if err == nil {
			ms.Shape = draw.RingGlyph{}
			ms.Radius = vg.Points(7)
			ms.Color = st.fg
			p.Add(ms)
			f.leg.Add("best plan", ms)
		}
	}
	if zoomed {
		p.X.Min, p.X.Max = spec.XMin, spec.XMax
		// say so: a zoomed chart otherwise reads as all the data
		num := func(v float64) string { return strconv.FormatFloat(v, 'g', 3, 64) }
		p.Title.Text += fmt.Sprintf(" (zoomed to %s %s-%s)", spec.XLabel, num(spec.XMin), num(spec.XMax))
	}
	return f
}

// crossings are the points where the segment from a to b crosses the
// edges of a zoomed chart's x range, in order from a, interpolated on the
// chart's scales: a line leaving the range is drawn to its edge, and one
// spanning it (the roofline, drawn between its two ends) stays in view.
func crossings(a, b plotter.XY, spec ChartSpec) plotter.XYs {
	fx, fy := func(v float64) float64 { return v }, func(v float64) float64 { return v }
	gy := fy
	if spec.LogX {
		fx = math.Log
	}
	if spec.LogY {
		fy, gy = math.Log, math.Exp
	}
	edges := []float64{spec.XMin, spec.XMax}
	if b.X < a.X {
		edges = []float64{spec.XMax, spec.XMin}
	}
	var out plotter.XYs
	for _, e := range edges {
		if (a.X-e)*(b.X-e) >= 0 {
			continue // not crossed (an end on the edge is drawn as a point)
		}
		t := (fx(e) - fx(a.X)) / (fx(b.X) - fx(a.X))
		out = append(out, plotter.XY{X: e, Y: gy(fy(a.Y) + t*(fy(b.Y)-fy(a.Y)))})
	}
	return out
}

// BarSpec describes a grouped bar chart (one group per label).
type BarSpec struct {
	Title, YLabel string
	Labels        []string
	// Details, when set, describe each label in the values a hover shows
	// ("run 12, egt widths=1,2 branch=2 w-max=4") where the axis shows a
	// short label ("#12").
	Details []string
	// Colors, when set, colour each label's bars (a colour per plan)
	// instead of each group's.
	Colors []color.Color
	Groups []Series // Y holds one value per label
	// Marks, when set, ring a value over each label's bars (the predicted
	// speedup over the measured one; 0: none), named MarkName.
	Marks         []float64
	MarkName      string
	Width, Height int
}

// barFigure builds a grouped bar chart; its points are the bars' tops.
func barFigure(spec BarSpec) *chartFigure {
	p := plot.New()
	p.Title.Text = spec.Title
	p.Y.Label.Text = spec.YLabel
	st := currentChartStyle()
	f := &chartFigure{p: p, leg: st.apply(p), bg: st.bg, w: spec.Width, h: spec.Height}
	if f.w <= 0 {
		f.w, f.h = 640, 320
	}
	f.fitYLabel()
	_, ys := f.tickBudget()
	p.Y.Tick.Marker = niceTicks{most: ys}
	n := len(spec.Groups)
	// bars share about half of the width among them, 8 to 48 points each
	cw, _ := f.size()
	width := vg.Points(18)
	if k := len(spec.Labels) * max(n, 1); k > 0 {
		width = max(vg.Points(8), min(vg.Points(48), cw*0.45/vg.Length(k)))
	}
	label := func(j int) string {
		switch {
		case j < len(spec.Details) && spec.Details[j] != "":
			return spec.Details[j]
		case j < len(spec.Labels):
			return spec.Labels[j]
		}
		return ""
	}
	for i, g := range spec.Groups {
		offset := vg.Length(float64(i)-float64(n-1)/2) * width
		add := func(vals plotter.Values, xmin float64, c color.Color) *plotter.BarChart {
			bars, err := plotter.NewBarChart(vals, width)
			if err != nil {
				return nil
			}
			bars.Color, bars.Offset, bars.XMin = c, offset, xmin
			bars.LineStyle.Color = st.fg
			if len(vals) == 1 && vals[0] == 0 {
				// a zero bar is a line on the axis in its own colour: its
				// outline in the text colour drew a bright stripe on the
				// dark theme, read as a bar of some height
				bars.LineStyle.Color = c
			}
			p.Add(bars)
			return bars
		}
		if len(spec.Colors) >= len(g.Y) { // a bar at a time, each in its label's colour
			for j, v := range g.Y {
				add(plotter.Values{v}, float64(j), spec.Colors[j])
			}
		} else if bars := add(append(plotter.Values(nil), g.Y...), 0, palette[i%len(palette)]); bars != nil && n > 1 {
			f.leg.Add(g.Name, bars)
		}
		for j, v := range g.Y {
			f.pts = append(f.pts, ChartPoint{Series: g.Name, S: i, I: j, X: float64(j), Y: v, dx: offset, bar: width, Label: label(j)})
		}
	}
	var marks plotter.XYs
	for j, v := range spec.Marks {
		if v > 0 {
			marks = append(marks, plotter.XY{X: float64(j), Y: v})
			f.pts = append(f.pts, ChartPoint{Series: spec.MarkName, S: len(spec.Groups), I: j, X: float64(j), Y: v, Label: label(j)})
		}
	}
	if len(marks) > 0 {
		if sc, err := plotter.NewScatter(marks); err == nil {
			// named in the title: a legend would narrow a small chart
			sc.Shape, sc.Radius, sc.Color = draw.RingGlyph{}, vg.Points(6), st.fg
			p.Add(sc)
		}
	}
	p.NominalX(spec.Labels...)
	if len(spec.Labels) > 0 { // half a slot of room at each end
		p.X.Min, p.X.Max = -0.5, float64(len(spec.Labels))-0.5
	}
	// bars stand on zero: with every value 0 gonum centred the axis on it
	// (-1 to 1) and the zero bars floated mid-chart as if negative values
	// were possible
	if p.Y.Min >= 0 {
		p.Y.Min = 0
		if p.Y.Max <= 0 {
			p.Y.Max = 1
		}
	}
	return f
}

// ChartPoint is one data point of a chart and where it was drawn.
type ChartPoint struct {
	Series string  // the series' (or bar group's) name
	S, I   int     // series and point index in the spec
	X, Y   float64 // data values
	Label  string  // a bar's label (bar charts)
	dx     vg.Length
	bar    vg.Length // a bar's width (0: not a bar)
	px, py float32   // image pixels of the drawn point
	// a bar's half width and its foot (where it starts, at zero or the
	// axis), image pixels: the whole bar answers a hover, not its top only
	pw, pfoot float32
}

// chartFigure is a chart built with gonum/plot, ready to draw on any
// canvas: an image for the screen and PNG files, SVG for vector files.
type chartFigure struct {
	p   *plot.Plot
	leg plot.Legend
	// legend is where the legend was drawn (empty: none), gonum's units
	legend vg.Rectangle
	bg     color.Color
	w, h   int // pixels at 96 dpi
	pts    []ChartPoint
}

// tickBudget is how many labelled ticks each axis has room for at the
// size the figure is drawn: about one per 75 pixels across, one per 40
// up (a small chart at 1024x640 crowded seven labels on each).
func (f *chartFigure) tickBudget() (x, y int) {
	return max(2, min(7, f.w/75)), max(2, min(7, f.h/40))
}

// fitYLabel blanks the y axis' label when it is longer than the axis it
// stands beside (the height less the title's and the x axis' rows): cut
// at both ends it read as "ding" beside a small chart at 1024x640. The
// title names what is charted; a hover still names the axis.
func (f *chartFigure) fitYLabel() {
	y := &f.p.Y.Label
	if y.Text == "" {
		return
	}
	_, h := f.size()
	room := h - 2*f.p.Title.TextStyle.Height(f.p.Title.Text) - 3*f.p.X.Tick.Label.Height("0")
	if y.TextStyle.Width(y.Text) > room {
		// a blank label, not none: its row keeps the tick labels off the
		// image's left edge (without it gonum cut the first digit)
		y.Text = " "
	}
}

// size is the figure's size in gonum's units (points) at 96 pixels an inch.
func (f *chartFigure) size() (vg.Length, vg.Length) {
	return vg.Length(f.w) * vg.Inch / 96, vg.Length(f.h) * vg.Inch / 96
}

// draw paints the figure on its background, its legend (if any) in a
// column at the right, outside the data, and returns the data area.
func (f *chartFigure) draw(dc draw.Canvas) draw.Canvas {
	dc.SetColor(f.bg)
	dc.Fill(dc.Rectangle.Path())
	r := f.leg.Rectangle(dc)
	if lw := r.Max.X - r.Min.X; lw > 0 {
		pad := vg.Points(8)
		pc := draw.Crop(dc, 0, -(lw + 2*pad), 0, 0)
		f.p.Draw(pc)
		lc := draw.Crop(dc, dc.Max.X-dc.Min.X-lw-pad, 0, 0, -vg.Points(24))
		f.leg.Draw(lc)
		f.legend = f.leg.Rectangle(lc)
		return f.p.DataCanvas(pc)
	}
	f.p.Draw(dc)
	return f.p.DataCanvas(dc)
}

// chartRendering is a figure drawn into an image with the pixel of each
// point and the x axis' mapping: the one place where data and pixels meet.
type chartRendering struct {
	img        image.Image
	pts        []ChartPoint
	xmin, xmax float64                 // the x axis' range as drawn
	left, righ float32                 // the data area's left and right edge, image pixels
	fx, fy     func(float64) vg.Length // data x and y to canvas x and y
	height     float32                 // the image's height in pixels
	// legend is the legend's box in image pixels (zero: none): a tip
	// shown beside a point keeps clear of it
	legend [4]float32 // left, top, right, bottom
}

// pixels converts gonum's points (1/72 inch) to pixels at 96 dpi.
func pixels(l vg.Length) float32 { return float32(l.Points() * 96 / 72) }

// render draws the figure into an image and maps its points to pixels.
func (f *chartFigure) render() *chartRendering {
	w, h := f.size()
	c := vgimg.New(w, h)
	da := f.draw(draw.New(c))
	fx, fy := f.p.Transforms(&da)
	img := c.Image()
	ih := float32(img.Bounds().Dy())
	r := &chartRendering{img: img, xmin: f.p.X.Min, xmax: f.p.X.Max, left: pixels(da.Min.X), righ: pixels(da.Max.X), fx: fx, fy: fy, height: ih}
	if l := f.legend; l.Max.X > l.Min.X {
		r.legend = [4]float32{pixels(l.Min.X), ih - pixels(l.Max.Y), pixels(l.Max.X), ih - pixels(l.Min.Y)}
	}
	for _, pt := range f.pts {
		pt.px, pt.py = pixels(fx(pt.X)+pt.dx), ih-pixels(fy(pt.Y))
		if pt.bar > 0 {
			pt.pw, pt.pfoot = pixels(pt.bar)/2, ih-pixels(fy(max(0, f.p.Y.Min)))
		}
		r.pts = append(r.pts, pt)
	}
	return r
}

// dataX is the x value drawn at image pixel px (clamped to the axis),
// found by bisection so linear and log axes alike invert exactly.
func (r *chartRendering) dataX(px float32) float64 {
	lo, hi := r.xmin, r.xmax
	for i := 0; i < 64; i++ {
		mid := (lo + hi) / 2
		if pixels(r.fx(mid)) < px {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// writeSVG draws the figure as SVG.
func (f *chartFigure) writeSVG(w io.Writer) error {
	c := vgsvg.New(f.size())
	f.draw(draw.New(c))
	_, err := c.WriteTo(w)
	return err
}

// chartStyle is the Fyne theme's look carried into gonum/plot: background,
// text and grid colours and a sans-serif face, so charts sit in the light
// or dark theme instead of being white pictures pasted into it.
type chartStyle struct {
	bg, fg, grid color.Color
}

// currentChartStyle reads the running app's theme (light defaults when
// there is no app, as in a plain unit test).
func currentChartStyle() chartStyle {
	st := chartStyle{bg: color.White, fg: color.Black, grid: color.Gray{Y: 220}}
	a := fyne.CurrentApp()
	if a == nil || a.Settings() == nil {
		return st
	}
	th, v := a.Settings().Theme(), a.Settings().ThemeVariant()
	if th == nil {
		th = theme.DefaultTheme()
	}
	st.bg = th.Color(theme.ColorNameBackground, v)
	st.fg = th.Color(theme.ColorNameForeground, v)
	st.grid = th.Color(theme.ColorNameSeparator, v)
	return st
}

// apply styles a plot's texts, axes and grid, and returns the legend to
// fill, which render draws beside the data rather than on it.
func (st chartStyle) apply(p *plot.Plot) plot.Legend {
	p.BackgroundColor = st.bg
	styleText := func(t *text.Style, size float64) {
		t.Color = st.fg
		t.Font.Variant = "Sans"
		t.Font.Size = vg.Points(size)
	}
	styleText(&p.Title.TextStyle, 12)
	for _, ax := range []*plot.Axis{&p.X, &p.Y} {
		styleText(&ax.Label.TextStyle, 10)
		styleText(&ax.Tick.Label, 9)
		ax.LineStyle.Color = st.fg
		ax.Tick.LineStyle.Color = st.fg
	}
	g := plotter.NewGrid()
	g.Vertical.Color, g.Horizontal.Color = st.grid, st.grid
	p.Add(g)
	leg := plot.NewLegend()
	styleText(&leg.TextStyle, 9)
	leg.Top, leg.Left = true, true
	leg.Padding = vg.Points(3) // room between entries for the larger glyphs
	return leg
}

// niceTicks labels a linear axis at 1, 2 or 5 times a power of ten, at
// most most labels (0: seven) over the range (gonum's default gives a
// short axis two).
type niceTicks struct{ most int }

func (t niceTicks) Ticks(min, max float64) []plot.Tick {
	if !(max > min) || math.IsInf(max-min, 0) {
		return plot.DefaultTicks{}.Ticks(min, max)
	}
	most := t.most
	if most <= 0 {
		most = 7
	}
	// the smallest round step giving at most most labels, and at least two
	count := func(step float64) int {
		return int(math.Floor(max/step+1e-9)-math.Ceil(min/step-1e-9)) + 1
	}
	e := math.Floor(math.Log10((max - min) / float64(most)))
	var steps []float64
	for d := e - 1; d <= e+1; d++ {
		for _, m := range []float64{1, 2, 5} {
			steps = append(steps, m*math.Pow(10, d))
		}
	}
	step := steps[len(steps)-1]
	for _, st := range steps {
		if count(st) <= most {
			step = st
			break
		}
	}
	for i := len(steps) - 1; count(step) < 2 && i >= 0; i-- {
		step = steps[i]
	}
	var ts []plot.Tick
	for k := math.Ceil(min/step - 1e-9); k*step <= max+step*1e-9; k++ {
		v := k * step
		if k == 0 {
			v = 0 // not -0
		}
		ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', 6, 64)})
		if minor := v + step/2; minor < max {
			ts = append(ts, plot.Tick{Value: minor})
		}
	}
	return ts
}

// logTicks labels a log axis at 1, 2 and 5 times each power of ten (with
// unlabelled minor ticks between), so even a narrow range reads; where
// that is more than most labels (0: no limit), at powers of ten only, and
// then every other one.
type logTicks struct{ most int }

func (t logTicks) Ticks(min, max float64) []plot.Tick {
	if min <= 0 || max <= min {
		return nil
	}
	var ts []plot.Tick
	for e := math.Floor(math.Log10(min)); e <= math.Ceil(math.Log10(max)); e++ {
		base := math.Pow(10, e)
		for m := 1.0; m < 10; m++ {
			v := m * base
			if v < min*(1-1e-9) || v > max*(1+1e-9) {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(v, 'g', 4, 64)
			}
			ts = append(ts, t)
		}
	}
	labelled := 0
	for _, t := range ts {
		if t.Label != "" {
			labelled++
		}
	}
	if labelled < 3 { // a narrow range: label every tick
		for i := range ts {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'g', 4, 64)
		}
		labelled = len(ts)
	}
	// too many for the room: keep the powers of ten, then every k-th
	for k := 1; t.most > 0 && labelled > t.most && len(ts) > 0; k++ {
		labelled = 0
		for i := range ts {
			e := math.Log10(ts[i].Value)
			if ts[i].Label == "" {
				continue
			}
			if p := math.Round(e); math.Abs(e-p) > 1e-9 || int(p)%k != 0 {
				ts[i].Label = ""
				continue
			}
			labelled++
		}
		if labelled < 2 { // a range of a decade or less: its ends
			ts[0].Label = strconv.FormatFloat(ts[0].Value, 'g', 4, 64)
			ts[len(ts)-1].Label = strconv.FormatFloat(ts[len(ts)-1].Value, 'g', 4, 64)
			break
		}
	}
	return ts
}
