package app

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"arborist/profiles"
)

// Chart is an interactive chart drawn with gonum/plot: hovering (or
// tapping) a point shows its values, a tap can pick a point (OnTapped), a
// horizontal drag zooms a zoomable chart to that range of x, and the
// chart saves as PNG or SVG. The pixel <-> data mapping lives in
// chartRendering; Chart only converts between its own coordinates and the
// image's, which it shows scaled to fit (aspect kept, centred).
type Chart struct {
	widget.BaseWidget
	// Image is the last rendering (nil before the first).
	Image image.Image
	// OnTapped receives the point nearest a tap, when one is near.
	OnTapped func(ChartPoint)
	// Zoomable charts zoom to a dragged range of x.
	Zoomable bool
	// Name is the file name offered when saving.
	Name string
	// Tip is the shown point's values ("" when none is shown).
	Tip   string
	tipOf *[2]int // the series and index of the point Tip describes

	line *ChartSpec
	bars *BarSpec
	// drawn is the size the chart is laid out at: it is drawn at that
	// size (fonts stay their size however large the chart is shown);
	// zero before the first layout, when the spec's size is used.
	drawn fyne.Size
	zoom  *[2]float64
	fig   *chartFigure
	r     *chartRendering
	min   fyne.Size

	tools            []*widget.Button // Save and zoom, where View made them
	raster           *canvas.Image
	tipBg, selection *canvas.Rectangle
	tipText          *canvas.Text
	dragging         bool
	dragFrom, dragTo float32 // widget x of a zoom drag
}

// newChart makes an empty chart of at least w x h.
func newChart(w, h float32) *Chart {
	c := &Chart{min: fyne.NewSize(w, h), Name: "chart"}
	c.raster = canvas.NewImageFromImage(nil)
	c.raster.FillMode = canvas.ImageFillContain
	c.tipBg = canvas.NewRectangle(color.NRGBA{A: 220})
	c.tipBg.CornerRadius = 4
	c.tipText = canvas.NewText("", color.White)
	c.tipText.TextSize = theme.CaptionTextSize()
	c.selection = canvas.NewRectangle(color.NRGBA{R: 31, G: 119, B: 180, A: 70})
	c.hideTip()
	c.selection.Hide()
	c.ExtendBaseWidget(c)
	return c
}

// SetSpec draws a line chart (keeping the zoom when the chart has one).
func (c *Chart) SetSpec(spec ChartSpec) {
	c.line, c.bars = &spec, nil
	c.redraw()
}

// SetBars draws a bar chart.
func (c *Chart) SetBars(spec BarSpec) {
	c.line, c.bars, c.zoom = nil, &spec, nil
	c.redraw()
}

// redraw builds and renders the figure for the spec and the zoom.
func (c *Chart) redraw() {
	w, h := int(c.drawn.Width), int(c.drawn.Height)
	switch {
	case c.line != nil:
		spec := *c.line
		if c.zoom != nil {
			spec.XMin, spec.XMax = c.zoom[0], c.zoom[1]
		}
		if w > 0 && h > 0 {
			spec.Width, spec.Height = w, h
		}
		c.fig = lineFigure(spec)
	case c.bars != nil:
		spec := *c.bars
		if w > 0 && h > 0 {
			spec.Width, spec.Height = w, h
		}
		c.fig = barFigure(spec)
	default:
		return
	}
	c.r = c.fig.render()
	c.Image = c.r.img
	c.raster.Image = c.Image
	c.enableTools()
	c.Refresh()
	// the tip follows its point to where it is drawn now, if it still is
	if of := c.tipOf; of != nil {
		c.hideTip()
		for _, pt := range c.r.pts {
			if pt.S == of[0] && pt.I == of[1] {
				c.ShowTipAt(c.PointPos(pt))
			}
		}
	}
}

// Clear empties the chart.
func (c *Chart) Clear() {
	c.line, c.bars, c.zoom, c.fig, c.r, c.Image = nil, nil, nil, nil, nil, nil
	c.hideTip()
	c.enableTools()
	c.Refresh()
}

// XRange is the range of x the chart shows.
func (c *Chart) XRange() (lo, hi float64) {
	if c.r == nil {
		return 0, 0
	}
	return c.r.xmin, c.r.xmax
}

// SetZoom shows only x in [lo, hi] (a line chart's; lo > 0 on a log axis).
func (c *Chart) SetZoom(lo, hi float64) {
	if c.line == nil || !(hi > lo) || (c.line.LogX && lo <= 0) {
		return
	}
	c.zoom = &[2]float64{lo, hi}
	c.redraw()
}

// ZoomOut doubles the shown range around its centre (on a log axis, in
// log space); past the data's extent it shows all again.
func (c *Chart) ZoomOut() {
	if c.zoom == nil || c.line == nil {
		return
	}
	lo, hi := c.zoom[0], c.zoom[1]
	if c.line.LogX {
		l, h := math.Log(lo), math.Log(hi)
		lo, hi = math.Exp(l-(h-l)/2), math.Exp(h+(h-l)/2)
	} else {
		d := (hi - lo) / 2
		lo, hi = lo-d, hi+d
	}
	dlo, dhi := c.dataRange()
	if lo <= dlo && hi >= dhi {
		c.ResetZoom()
		return
	}
	c.SetZoom(max(lo, dlo), min(hi, dhi))
}

// ResetZoom shows all the data again.
func (c *Chart) ResetZoom() {
	if c.zoom == nil {
		return
	}
	c.zoom = nil
	c.redraw()
}

// dataRange is the extent of x over all series.
func (c *Chart) dataRange() (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	if c.line != nil {
		for _, s := range c.line.Series {
			for _, x := range s.X {
				if c.line.LogX && x <= 0 {
					continue
				}
				lo, hi = min(lo, x), max(hi, x)
			}
		}
	}
	return lo, hi
}

// fit is how the image is shown in the widget: the scale from image
// pixels to widget units and the image's top-left corner.
func (c *Chart) fit() (scale, ox, oy float32) {
	if c.Image == nil {
		return 0, 0, 0
	}
	b := c.Image.Bounds()
	iw, ih := float32(b.Dx()), float32(b.Dy())
	sz := c.Size()
	if iw == 0 || ih == 0 || sz.Width <= 0 || sz.Height <= 0 {
		return 0, 0, 0
	}
	scale = min(sz.Width/iw, sz.Height/ih)
	return scale, (sz.Width - iw*scale) / 2, (sz.Height - ih*scale) / 2
}

// PointPos is where a point is drawn, in the widget's coordinates.
func (c *Chart) PointPos(pt ChartPoint) fyne.Position {
	s, ox, oy := c.fit()
	return fyne.NewPos(ox+pt.px*s, oy+pt.py*s)
}

// Points are the drawn points with their values.
func (c *Chart) Points() []ChartPoint {
	if c.r == nil {
		return nil
	}
	return c.r.pts
}

// nearest is the drawn point closest to pos (widget coordinates) within
// a finger's reach; a bar answers anywhere over it, from its foot to its
// top, unless a mark (a ring) is within half a reach of pos.
func (c *Chart) nearest(pos fyne.Position) (ChartPoint, bool) {
	const reach = 14
	best, bestD := ChartPoint{}, float32(math.Inf(1))
	s, _, _ := c.fit()
	for _, pt := range c.Points() {
		p := c.PointPos(pt)
		dx, dy := p.X-pos.X, p.Y-pos.Y
		d := dx*dx + dy*dy
		if pt.pw > 0 {
			foot := c.PointPos(ChartPoint{px: pt.px, py: pt.pfoot}).Y
			top, bottom := min(p.Y, foot), max(p.Y, foot)
			if abs32(dx) <= pt.pw*s && pos.Y >= top-reach/2 && pos.Y <= bottom {
				d = min(d, reach*reach/4)
			}
		}
		if d < bestD {
			best, bestD = pt, d
		}
	}
	return best, bestD <= reach*reach
}

// describe is a point's values as the tip shows them.
func (c *Chart) describe(pt ChartPoint) string {
	num := func(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }
	name := pt.Series
	if c.bars != nil {
		if name == "" {
			name = c.bars.Title
		}
		return fmt.Sprintf("%s, %s: %s %s", name, pt.Label, num(pt.Y), c.bars.YLabel)
	}
	xl, yl := "x", "y"
	if c.line != nil {
		xl, yl = c.line.XLabel, c.line.YLabel
	}
	if name != "" {
		name += ": "
	}
	return fmt.Sprintf("%s%s %s, %s %s", name, xl, num(pt.X), yl, num(pt.Y))
}

// ShowTipAt shows the values of the point nearest pos, if one is near.
func (c *Chart) ShowTipAt(pos fyne.Position) (ChartPoint, bool) {
	pt, ok := c.nearest(pos)
	if !ok {
		c.hideTip()
		return pt, false
	}
	c.Tip, c.tipOf = c.describe(pt), &[2]int{pt.S, pt.I}
	c.tipText.Text = c.Tip
	c.tipText.Color = theme.Color(theme.ColorNameForeground)
	c.tipBg.FillColor = theme.Color(theme.ColorNameOverlayBackground)
	c.tipBg.StrokeColor = theme.Color(theme.ColorNameForeground)
	c.tipBg.StrokeWidth = 1
	ts := fyne.MeasureText(c.Tip, c.tipText.TextSize, c.tipText.TextStyle)
	pad := theme.InnerPadding() / 2
	box := fyne.NewSize(ts.Width+2*pad, ts.Height+2*pad)
	at := c.tipPlace(c.PointPos(pt), box)
	x, y := at.X, at.Y
	c.tipBg.Move(fyne.NewPos(x, y))
	c.tipBg.Resize(box)
	c.tipText.Move(fyne.NewPos(x+pad, y+pad))
	c.tipText.Resize(ts)
	c.tipBg.Show()
	c.tipText.Show()
	c.tipBg.Refresh()
	c.tipText.Refresh()
	return pt, true
}

// tipPlace is where a tip of size box goes beside the point at p: above
// and right of it, else above and left, below and right, below and left,
// the first that stays inside the chart and clear of the legend (one
// above the point also clear of the title, the top sixth), which a tip
// at the right covered. A tip too wide for those (a long name beside a
// narrow chart) takes the clear place nearest the point among: moved
// inside the chart, centred on the point or left of the legend, above or
// below the point or under the legend; where nothing is clear, above and
// right, moved inside.
func (c *Chart) tipPlace(p fyne.Position, box fyne.Size) fyne.Position {
	sz := c.Size()
	lp, ls := c.LegendBox()
	if !ls.IsZero() { // a tip ending where the legend's samples begin read as one line with them
		lp, ls = lp.SubtractXY(4, 4), ls.AddWidthHeight(8, 8)
	}
	above, below := p.Y-box.Height-10, p.Y+10
	clear := func(q fyne.Position) bool {
		if q.X < 0 || q.Y < 0 || (q.Y == above && q.Y < sz.Height/6) || q.X+box.Width > sz.Width || q.Y+box.Height > sz.Height {
			return false
		}
		return ls.IsZero() || q.X >= lp.X+ls.Width || q.X+box.Width <= lp.X || q.Y >= lp.Y+ls.Height || q.Y+box.Height <= lp.Y
	}
	right, left := p.X+10, p.X-10-box.Width
	for _, q := range []fyne.Position{{X: right, Y: above}, {X: left, Y: above}, {X: right, Y: below}, {X: left, Y: below}} {
		if clear(q) {
			return q
		}
	}
	// too wide for either side: the clear place nearest the point, moved
	// inside the chart, centred on the point or left of the legend,
	// above or below the point or under the legend
	var best fyne.Position
	bestD := float32(math.Inf(1))
	inside := func(x float32) float32 { return min(max(0, x), sz.Width-box.Width) }
	for _, x := range []float32{inside(left), inside(p.X - box.Width/2), lp.X - box.Width} {
		for _, y := range []float32{above, below, lp.Y + ls.Height + 2} {
			q := fyne.NewPos(x, y)
			dx, dy := q.X+box.Width/2-p.X, q.Y+box.Height/2-p.Y
			if d := dx*dx + dy*dy; clear(q) && d < bestD {
				best, bestD = q, d
			}
		}
	}
	if !math.IsInf(float64(bestD), 1) {
		return best
	}
	x, y := right, above
	if y < sz.Height/6 {
		y = below
	}
	if x+box.Width > sz.Width {
		x = left
	}
	return fyne.NewPos(max(0, x), max(0, y))
}

// LegendBox is where the legend is shown, in the widget's coordinates (a
// zero size: none).
func (c *Chart) LegendBox() (fyne.Position, fyne.Size) {
	if c.r == nil || c.r.legend[2] <= c.r.legend[0] {
		return fyne.Position{}, fyne.Size{}
	}
	s, ox, oy := c.fit()
	l := c.r.legend
	return fyne.NewPos(ox+l[0]*s, oy+l[1]*s), fyne.NewSize((l[2]-l[0])*s, (l[3]-l[1])*s)
}

func (c *Chart) hideTip() {
	c.Tip, c.tipOf = "", nil
	c.tipBg.Hide()
	c.tipText.Hide()
}

// MouseIn shows the values under the pointer (desktop.Hoverable).
func (c *Chart) MouseIn(e *desktop.MouseEvent) { c.ShowTipAt(e.Position) }

// MouseMoved follows the pointer.
func (c *Chart) MouseMoved(e *desktop.MouseEvent) { c.ShowTipAt(e.Position) }

// MouseOut hides the values.
func (c *Chart) MouseOut() { c.hideTip() }

// Tapped shows the tapped point's values (touch has no hover) and hands
// the point to OnTapped.
func (c *Chart) Tapped(e *fyne.PointEvent) {
	if pt, ok := c.nearest(e.Position); ok && c.OnTapped != nil {
		c.OnTapped(pt) // may redraw the chart, so the tip comes after
	}
	c.ShowTipAt(e.Position)
}

// Dragged draws the range a zoom drag selects.
func (c *Chart) Dragged(e *fyne.DragEvent) {
	if !c.Zoomable || c.line == nil {
		return
	}
	if !c.dragging {
		c.dragging, c.dragFrom = true, e.Position.X-e.Dragged.DX
	}
	c.dragTo = e.Position.X
	lo, hi := min(c.dragFrom, c.dragTo), max(c.dragFrom, c.dragTo)
	c.selection.Move(fyne.NewPos(lo, 0))
	c.selection.Resize(fyne.NewSize(hi-lo, c.Size().Height))
	c.selection.Show()
	c.selection.Refresh()
}

// DragEnd zooms to the dragged range (a drag of a few pixels is ignored).
func (c *Chart) DragEnd() {
	if !c.dragging {
		return
	}
	c.dragging = false
	c.selection.Hide()
	c.ZoomToWidgetRange(c.dragFrom, c.dragTo)
}

// ZoomToWidgetRange zooms to the x values drawn between two widget x
// positions.
func (c *Chart) ZoomToWidgetRange(a, b float32) {
	s, ox, _ := c.fit()
	if c.r == nil || s == 0 || math.Abs(float64(a-b)) < 6 {
		return
	}
	toImg := func(x float32) float32 { return max(c.r.left, min(c.r.righ, (x-ox)/s)) }
	lo, hi := c.r.dataX(toImg(min(a, b))), c.r.dataX(toImg(max(a, b)))
	c.SetZoom(lo, hi)
}

// Save writes the chart as "png" or "svg".
func (c *Chart) Save(w io.Writer, format string) error {
	if c.fig == nil {
		return fmt.Errorf("the chart is empty: nothing to save yet")
	}
	switch format {
	case "png":
		return png.Encode(w, c.Image)
	case "svg":
		return c.fig.writeSVG(w)
	}
	return fmt.Errorf("charts save as .png or .svg, not %q", format)
}

// chartFormat is the format a file name asks for.
func chartFormat(path string) string {
	return strings.TrimPrefix(strings.ToLower(filepath.Ext(path)), ".")
}

// SaveFile writes the chart to path, as SVG or PNG by its extension.
func (c *Chart) SaveFile(path string) error {
	format := chartFormat(path)
	if format != "png" && format != "svg" {
		return fmt.Errorf("save the chart as .png or .svg, not %q", filepath.Base(path))
	}
	var b bytes.Buffer
	if err := c.Save(&b, format); err != nil {
		return err
	}
	// as every output: a new file renamed into place, never through a
	// link, the file there kept whole when anything fails
	return profiles.WriteFile(path, b.Bytes())
}

// saveDialog asks for a .png or .svg file and saves the chart there.
func (c *Chart) saveDialog(win fyne.Window) {
	if win == nil {
		return
	}
	d := dialog.NewFileSave(func(w fyne.URIWriteCloser, err error) {
		if err != nil || w == nil {
			return
		}
		path := w.URI().Path()
		format := chartFormat(path)
		if format != "png" && format != "svg" {
			w.Close()
			os.Remove(path)
			showError(fmt.Errorf("save the chart as .png or .svg, not %q", filepath.Base(path)), win)
			return
		}
		err = c.Save(w, format)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			showError(err, win)
		}
	}, win)
	d.SetFileName(c.Name + ".png")
	startIn(d, "")
	d.Show()
}

// View is the chart with its buttons in a column at its right: zoom out
// and show all (zoomable charts), and save as PNG or SVG.
func (c *Chart) View(win fyne.Window) fyne.CanvasObject {
	btn := func(icon fyne.Resource, f func()) *widget.Button {
		b := widget.NewButtonWithIcon("", icon, f)
		b.Importance = widget.LowImportance
		return b
	}
	tools := container.NewVBox(btn(theme.DocumentSaveIcon(), func() { c.saveDialog(win) }))
	if c.Zoomable {
		tools.Add(btn(theme.ZoomOutIcon(), c.ZoomOut))
		tools.Add(btn(theme.ZoomFitIcon(), c.ResetZoom))
	}
	for _, o := range tools.Objects {
		c.tools = append(c.tools, o.(*widget.Button))
	}
	c.enableTools()
	return container.NewBorder(nil, nil, nil, tools, c)
}

// enableTools enables Save and the zoom buttons while the chart draws
// something: beside an empty chart (Compare's load chart before any load
// test) a Save button offered to save nothing.
func (c *Chart) enableTools() {
	for _, b := range c.tools {
		if c.Image == nil {
			b.Disable()
		} else {
			b.Enable()
		}
	}
}

// MinSize is the size the chart was made with.
func (c *Chart) MinSize() fyne.Size { return c.min }

// CreateRenderer draws the image with the tip and the zoom selection
// above it.
func (c *Chart) CreateRenderer() fyne.WidgetRenderer {
	return &chartRenderer{c: c, objs: []fyne.CanvasObject{c.raster, c.selection, c.tipBg, c.tipText}}
}

type chartRenderer struct {
	c    *Chart
	objs []fyne.CanvasObject
}

func (r *chartRenderer) Layout(size fyne.Size) {
	r.c.raster.Move(fyne.NewPos(0, 0))
	r.c.raster.Resize(size)
	// draw again at the new size (small changes are not worth it)
	c := r.c
	d := fyne.NewSize(float32(math.Round(float64(size.Width))), float32(math.Round(float64(size.Height))))
	if d.Width >= 160 && d.Height >= 100 && (abs32(d.Width-c.drawn.Width) >= 4 || abs32(d.Height-c.drawn.Height) >= 4) {
		c.drawn = d
		c.redraw()
	}
}

func abs32(v float32) float32 { return float32(math.Abs(float64(v))) }

func (r *chartRenderer) MinSize() fyne.Size { return r.c.min }

func (r *chartRenderer) Refresh() {
	r.c.raster.Image = r.c.Image
	r.c.raster.Refresh()
}

func (r *chartRenderer) Objects() []fyne.CanvasObject { return r.objs }

func (r *chartRenderer) Destroy() {}
