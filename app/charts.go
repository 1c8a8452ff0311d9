package app

import (
	"image"
	"image/color"
	"math"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
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
	p.Title.TextStyle.Font.Size = vg.Points(13)
	p.X.Label.TextStyle.Font.Size = vg.Points(11)
	p.Y.Label.TextStyle.Font.Size = vg.Points(11)
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	if spec.LogX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	if spec.LogY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
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
			p.Legend.Add(s.Name, line, scatter)
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
			m.Color = color.Black
			p.Add(m)
			p.Legend.Add("best plan", m)
		}
	}
	w, h := spec.Width, spec.Height
	if w <= 0 {
		w, h = 640, 360
	}
	c := vgimg.New(vg.Length(w)*vg.Inch/96, vg.Length(h)*vg.Inch/96)
	p.Draw(draw.New(c))
	return c.Image()
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
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
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
		p.Add(bars)
		p.Legend.Add(g.Name, bars)
	}
	p.NominalX(spec.Labels...)
	w, h := spec.Width, spec.Height
	if w <= 0 {
		w, h = 640, 320
	}
	c := vgimg.New(vg.Length(w)*vg.Inch/96, vg.Length(h)*vg.Inch/96)
	p.Draw(draw.New(c))
	return c.Image()
}
