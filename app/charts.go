package app

import (
	"image"
	"image/color"
	"math"
	"strconv"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/theme"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// newChart makes an empty chart image of at least w x h that keeps its
// aspect ratio when the layout gives it more room.
func newChart(w, h float32) *canvas.Image {
	img := canvas.NewImageFromImage(nil)
	img.FillMode = canvas.ImageFillContain
	img.SetMinSize(fyne.NewSize(w, h))
	return img
}

// Series is one line of a chart, with optional error bars (Err, same length).
type Series struct {
	Name string
	X, Y []float64
	Err  []float64
}

// ChartSpec describes a line chart.
type ChartSpec struct {
	Title, XLabel, YLabel string
	LogX, LogY            bool
	Series                []Series
	Mark                  *[2]float64 // a highlighted point (the best plan)
	Width, Height         int         // pixels
}

var palette = []color.Color{
	color.RGBA{31, 119, 180, 255}, color.RGBA{214, 39, 40, 255}, color.RGBA{44, 160, 44, 255},
	color.RGBA{148, 103, 189, 255}, color.RGBA{255, 127, 14, 255}, color.RGBA{23, 190, 207, 255},
}

// RenderChart draws spec with gonum/plot into an image.
func RenderChart(spec ChartSpec) image.Image {
	p := plot.New()
	p.Title.Text = spec.Title
	p.X.Label.Text = spec.XLabel
	p.Y.Label.Text = spec.YLabel
	st := currentChartStyle()
	leg := st.apply(p)
	if spec.LogX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = logTicks{}
	}
	if spec.LogY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = logTicks{}
	}
	for i, s := range spec.Series {
		pts := make(plotter.XYs, 0, len(s.X))
		for j := range s.X {
			if (spec.LogX && s.X[j] <= 0) || (spec.LogY && s.Y[j] <= 0) || math.IsNaN(s.Y[j]) {
				continue
			}
			pts = append(pts, plotter.XY{X: s.X[j], Y: s.Y[j]})
		}
		if len(pts) == 0 {
			continue
		}
		line, scatter, err := plotter.NewLinePoints(pts)
		if err != nil {
			continue
		}
		c := palette[i%len(palette)]
		line.Color, scatter.Color = c, c
		line.Width = vg.Points(1.5)
		scatter.Shape = draw.CircleGlyph{}
		scatter.Radius = vg.Points(2.5)
		p.Add(line, scatter)
		if s.Name != "" {
			leg.Add(s.Name, line, scatter)
		}
		if s.Err != nil {
			errs := make(plotter.YErrors, 0, len(pts))
			for j := range s.X {
				if j < len(s.Err) {
					errs = append(errs, struct{ Low, High float64 }{s.Err[j], s.Err[j]})
				}
			}
			if len(errs) == len(pts) {
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
	}
	if spec.Mark != nil {
		m, err := plotter.NewScatter(plotter.XYs{{X: spec.Mark[0], Y: spec.Mark[1]}})
		if err == nil {
			m.Shape = draw.RingGlyph{}
			m.Radius = vg.Points(7)
			m.Color = st.fg
			p.Add(m)
			leg.Add("best plan", m)
		}
	}
	w, h := spec.Width, spec.Height
	if w <= 0 {
		w, h = 640, 360
	}
	return st.render(p, &leg, w, h)
}

// BarSpec describes a grouped bar chart (one group per label).
type BarSpec struct {
	Title, YLabel string
	Labels        []string
	Groups        []Series // Y holds one value per label
	Width, Height int
}

// RenderBars draws a grouped bar chart.
func RenderBars(spec BarSpec) image.Image {
	p := plot.New()
	p.Title.Text = spec.Title
	p.Y.Label.Text = spec.YLabel
	st := currentChartStyle()
	leg := st.apply(p)
	n := len(spec.Groups)
	width := vg.Points(18)
	for i, g := range spec.Groups {
		vals := make(plotter.Values, len(g.Y))
		copy(vals, g.Y)
		bars, err := plotter.NewBarChart(vals, width)
		if err != nil {
			continue
		}
		bars.Color = palette[i%len(palette)]
		bars.Offset = vg.Length(float64(i)-float64(n-1)/2) * width
		bars.LineStyle.Color = st.fg
		p.Add(bars)
		if n > 1 {
			leg.Add(g.Name, bars)
		}
	}
	p.NominalX(spec.Labels...)
	w, h := spec.Width, spec.Height
	if w <= 0 {
		w, h = 640, 320
	}
	return st.render(p, &leg, w, h)
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
	return leg
}

// render draws the plot on its background, its legend (if any) in a column
// at the right, outside the data.
func (st chartStyle) render(p *plot.Plot, leg *plot.Legend, w, h int) image.Image {
	c := vgimg.New(vg.Length(w)*vg.Inch/96, vg.Length(h)*vg.Inch/96)
	dc := draw.New(c)
	dc.SetColor(st.bg)
	dc.Fill(dc.Rectangle.Path())
	r := leg.Rectangle(dc)
	if lw := r.Max.X - r.Min.X; lw > 0 {
		pad := vg.Points(8)
		p.Draw(draw.Crop(dc, 0, -(lw + 2*pad), 0, 0))
		leg.Draw(draw.Crop(dc, dc.Max.X-dc.Min.X-lw-pad, 0, 0, -vg.Points(24)))
	} else {
		p.Draw(dc)
	}
	return c.Image()
}

// logTicks labels a log axis at 1, 2 and 5 times each power of ten (with
// unlabelled minor ticks between), so even a narrow range reads.
type logTicks struct{}

func (logTicks) Ticks(min, max float64) []plot.Tick {
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
	return ts
}
