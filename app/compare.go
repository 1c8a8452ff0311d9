package app

import (
	"context"
	"encoding/csv"
	"fmt"
	"image/color"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"arborist/profiles"
)

// CompareScreen puts stored runs side by side: a table sortable by any
// column (click its header), filtered by pair, its columns sized to the
// width it has; runs picked by the check in the first column are charted
// (speedup, tokens/s and AAL, a colour per plan, the plans named in a
// legend, values on hover) or deleted; the table saves as CSV.
type CompareScreen struct {
	s        *Session
	all      []profiles.Run // every stored run read
	Runs     []profiles.Run // the pair's (Filter), in the table's order
	Selected map[int64]bool
	// Filter shows the runs of one pair (the chosen one by default) or of
	// all pairs.
	Filter   *widget.Select
	filterBy []pairFilter // Filter's options after the first, all pairs
	Table    *widget.Table
	Speedup  *Chart // measured speedup of the picked runs, predicted marked
	Chart    *Chart // tokens/s of the picked runs
	AALChart *Chart // AAL of the picked runs: one unit per chart
	// LoadChart is aggregate tokens/s against concurrency of the load
	// runs, a line per server (loadtest.go)
	LoadChart *Chart
	Legend    *fyne.Container
	RefreshB  *widget.Button
	Delete    *widget.Button
	CSV       *widget.Button
	Status    *widget.Label
	SortCol   int  // index into compareCols
	SortDesc  bool // descending
	widths    []float32
}

// pairFilter is a pair the runs can be filtered by: a target with a draft
// source ("" for a target run with plain decoding only).
type pairFilter struct{ target, drafter string }

func (f pairFilter) String() string {
	if f.drafter == "" {
		return filepath.Base(f.target) + ", plain decoding"
	}
	return filepath.Base(f.target) + " with " + f.drafter
}

// holds says whether run r is of the pair: its draft source's, or plain
// decoding of its target (every pair's baseline), as the core says.
func (f pairFilter) holds(r profiles.Run) bool { return r.InPair(f.target, f.drafter) }

// allPairs is the filter's first option.
const allPairs = "all pairs"

// compareCol is one column of the Compare table: its header, its cell
// text (up to two lines), the value it sorts by (numbers sort as
// numbers), and its CSV columns, numbers without units (the units are in
// the CSV header).
type compareCol struct {
	name string
	text func(r profiles.Run) string
	num  func(r profiles.Run) float64 // nil: sort by text
	// flex columns share the width left by the others and wrap to two
	// lines where it is short
	flex bool
	csv  []csvCol
}

type csvCol struct {
	head string
	cell func(r profiles.Run) string
}

// colPick is the check column; it is neither sorted nor exported.
const colPick = 0

// number writes v for a CSV cell: plain digits, empty for a run still
// running or a figure it does not have.
func number(r profiles.Run, v float64, prec int, none bool) string {
	if r.Status == "running" || none {
		return ""
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

var compareCols = []compareCol{
	{name: ""},
	{name: "run", text: func(r profiles.Run) string {
		if r.Status != "done" {
			return fmt.Sprintf("%d\n%s", r.ID, r.Status)
		}
		return strconv.FormatInt(r.ID, 10)
	}, num: func(r profiles.Run) float64 { return float64(r.ID) },
		csv: []csvCol{{"run", func(r profiles.Run) string { return strconv.FormatInt(r.ID, 10) }}, {"status", func(r profiles.Run) string { return r.Status }}}},
	{name: "date", text: func(r profiles.Run) string { return r.Created.Local().Format("Jan 2\n15:04") },
		num: func(r profiles.Run) float64 { return float64(r.Created.UnixNano()) },
		csv: []csvCol{{"date", func(r profiles.Run) string { return r.Created.Local().Format(time.RFC3339) }}}},
	{name: "pair", text: func(r profiles.Run) string { return filepath.Base(r.Target) + "\n" + runDrafter(r) },
		csv: []csvCol{{"target", func(r profiles.Run) string { return filepath.Base(r.Target) }}, {"drafter", runDrafter}}},
	{name: "plan", text: runPlan, flex: true, csv: []csvCol{{"plan", runPlan}}},
	// the temperature each run sampled at, under its tokens: a column of
	// its own left the plan too little room at 1024 wide
	{name: "tokens", text: func(r profiles.Run) string { return running(r, strconv.Itoa(r.Tokens)) + runSampling(r) },
		num: func(r profiles.Run) float64 { return float64(r.Tokens) },
		csv: []csvCol{{"tokens", func(r profiles.Run) string { return number(r, float64(r.Tokens), 0, false) }},
			{"temperature", func(r profiles.Run) string {
				t, ok := runTemp(r)
				return number(r, t, 3, !ok)
			}}}},
	{name: "tokens/s", text: func(r profiles.Run) string {
		v := fmt.Sprintf("%.1f", r.TokensPerSecond)
		if lo, hi, ok := tpsRange(r); ok {
			v += fmt.Sprintf("\n%.0f-%.0f", lo, hi)
		}
		return running(r, v)
	}, num: func(r profiles.Run) float64 { return r.TokensPerSecond },
		csv: []csvCol{{"speed (tokens/s)", func(r profiles.Run) string { return number(r, r.TokensPerSecond, 2, false) }},
			{"speed low (tokens/s)", func(r profiles.Run) string { lo, _, ok := tpsRange(r); return number(r, lo, 2, !ok) }},
			{"speed high (tokens/s)", func(r profiles.Run) string { _, hi, ok := tpsRange(r); return number(r, hi, 2, !ok) }}}},
	{name: "AAL", text: func(r profiles.Run) string {
		if r.AAL == 0 { // not measured (a run in llama.cpp): any decoding emits a token a pass
			return running(r, "-")
		}
		return running(r, fmt.Sprintf("%.2f", r.AAL))
	}, num: func(r profiles.Run) float64 { return r.AAL },
		csv: []csvCol{{"AAL (tokens per step)", func(r profiles.Run) string { return number(r, r.AAL, 3, false) }}}},
	{name: "accepted", text: func(r profiles.Run) string {
		if noAcceptance(r) {
			return running(r, "-")
		}
		return running(r, fmt.Sprintf("%.1f%%", 100*r.Acceptance))
	}, num: func(r profiles.Run) float64 { return r.Acceptance },
		csv: []csvCol{{"acceptance (%)", func(r profiles.Run) string { return number(r, 100*r.Acceptance, 1, noAcceptance(r)) }}}},
	{name: "predicted", text: func(r profiles.Run) string {
		v := speedup(r.PredictedSpeedup)
		if r.PredictedAssumed && r.PredictedSpeedup > 0 {
			v += "\nassumed" // priced on the sliders' acceptance, before any calibration
		}
		return v
	}, num: func(r profiles.Run) float64 { return r.PredictedSpeedup },
		csv: []csvCol{{"predicted speedup (x)", func(r profiles.Run) string { return number(r, r.PredictedSpeedup, 3, r.PredictedSpeedup <= 0) }},
			{"prediction on assumed acceptance", func(r profiles.Run) string {
				if r.PredictedAssumed && r.PredictedSpeedup > 0 {
					return "yes"
				}
				return ""
			}}}},
	{name: "measured", text: func(r profiles.Run) string {
		v := speedup(r.MeasuredSpeedup)
		if lo, hi, ok := measuredRange(r); ok {
			v += fmt.Sprintf("\n%.2f-%.2fx", lo, hi)
		}
		return running(r, v)
	}, num: func(r profiles.Run) float64 { return r.MeasuredSpeedup },
		csv: []csvCol{{"measured speedup (x)", func(r profiles.Run) string { return number(r, r.MeasuredSpeedup, 3, r.MeasuredSpeedup <= 0) }},
			{"measured speedup low (x)", func(r profiles.Run) string { lo, _, ok := measuredRange(r); return number(r, lo, 3, !ok) }},
			{"measured speedup high (x)", func(r profiles.Run) string { _, hi, ok := measuredRange(r); return number(r, hi, 3, !ok) }}}},
}

// noAcceptance says a run has no acceptance to show: plain decoding
// drafts nothing (its "0.0%" read as a drafter that never hit), and a
// run in llama.cpp does not report one.
func noAcceptance(r profiles.Run) bool { return r.Plain() || r.AAL == 0 }

// runTemp is the temperature a run sampled at, as stored with it (false:
// not stored, as for a llama.cpp run).
func runTemp(r profiles.Run) (float64, bool) {
	smp, _, ok := r.RanSampling()
	t, _ := strconv.ParseFloat(strconv.FormatFloat(float64(smp.Temp), 'g', -1, 32), 64) // 0.8, not 0.800000011920929
	return t, ok
}

// runSampling is the second line of a run's tokens cell: greedy, or the
// temperature it sampled at ("" where not stored).
func runSampling(r profiles.Run) string {
	switch t, ok := runTemp(r); {
	case !ok:
		return ""
	case t == 0:
		return "\ngreedy"
	default:
		return "\ntemp " + strconv.FormatFloat(t, 'g', 3, 64)
	}
}

// tpsRange is the spread of a run's tokens/s: its lowest and highest round
// against plain decoding, or a load test's 10th to 90th percentile round
// (false: a single round).
func tpsRange(r profiles.Run) (lo, hi float64, ok bool) {
	if l := r.Load; l != nil && l.TPSP90 > 0 {
		return l.TPSP10, l.TPSP90, true
	}
	return r.TPSLow, r.TPSHigh, r.TPSHigh > 0
}

// measuredRange is the spread of a run's measured speedup over its rounds
// (false: a single round, or none measured).
func measuredRange(r profiles.Run) (lo, hi float64, ok bool) {
	return r.MeasuredLow, r.MeasuredHigh, r.MeasuredHigh > 0 && !r.Plain()
}

// runDetails describe a run as a chart's hover names it: its id, plan and
// temperature, and the spread of the chart's figure where the run stored
// one (spread: nil for none).
func runDetails(r profiles.Run, spread func(profiles.Run) (float64, float64, bool), unit string) string {
	d := fmt.Sprintf("run %d, %s", r.ID, runPlan(r))
	if t, ok := runTemp(r); ok {
		d += fmt.Sprintf(", temperature %g", t)
	}
	if spread != nil {
		if lo, hi, ok := spread(r); ok {
			d += fmt.Sprintf(" (rounds %s-%s%s)", strconv.FormatFloat(lo, 'g', 4, 64), strconv.FormatFloat(hi, 'g', 4, 64), unit)
		}
	}
	return d
}

// runDrafter names a run's draft source; plain decoding uses none, whatever
// pair it was started from.
func runDrafter(r profiles.Run) string {
	if r.Plain() || r.Drafter == "" {
		return "plain decoding"
	}
	return filepath.Base(r.Drafter)
}

// running shows a run in progress as such, not as zeros.
func running(r profiles.Run, v string) string {
	if r.Status == "running" {
		return "running"
	}
	return v
}

func speedup(v float64) string {
	if v <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", v)
}

// runPlan is the plan the stored run ran, named as a tune names it (its
// strategy where its settings cannot be read).
func runPlan(r profiles.Run) string {
	p, ok := r.RanPlan()
	if !ok {
		return r.Strategy
	}
	return p.String()
}

// NewCompareScreen builds the screen.
func NewCompareScreen(s *Session) *CompareScreen {
	c := &CompareScreen{s: s, Selected: map[int64]bool{}, SortCol: 1, SortDesc: true}
	c.Table = widget.NewTable(
		func() (int, int) { return len(c.Runs), len(compareCols) },
		func() fyne.CanvasObject {
			l := widget.NewLabel("")
			l.Wrapping, l.Truncation = fyne.TextWrapWord, fyne.TextTruncateEllipsis
			// rows of two lines: a run's status, a date's time, a pair's
			// drafter and a long plan take the second
			return newMinSize(container.NewStack(widget.NewCheck("", nil), l), fyne.NewSize(0, c.rowHeight()))
		},
		func(id widget.TableCellID, o fyne.CanvasObject) {
			st := o.(*fyne.Container).Objects[0].(*fyne.Container)
			ch, l := st.Objects[0].(*widget.Check), st.Objects[1].(*widget.Label)
			if id.Row >= len(c.Runs) {
				return
			}
			r := c.Runs[id.Row]
			if id.Col == colPick {
				l.Hide()
				ch.Show()
				ch.OnChanged = nil
				ch.SetChecked(c.Selected[r.ID])
				ch.OnChanged = func(on bool) { c.Toggle(r.ID, on) }
				return
			}
			ch.Hide()
			l.Show()
			l.SetText(compareCols[id.Col].text(r))
		})
	c.Table.ShowHeaderRow = true
	c.Table.CreateHeader = func() fyne.CanvasObject {
		b := widget.NewButton("", nil)
		b.Importance = widget.LowImportance
		b.Alignment = widget.ButtonAlignLeading
		return b
	}
	c.Table.UpdateHeader = func(id widget.TableCellID, o fyne.CanvasObject) {
		b := o.(*widget.Button)
		b.SetText(c.header(id.Col))
		col := id.Col
		b.OnTapped = func() { c.SortBy(col) }
	}
	c.fitColumns(1000)
	c.Filter = widget.NewSelect([]string{allPairs}, nil)
	c.filterPair(s.Spec) // the chosen pair's runs, or all
	c.Filter.OnChanged = func(string) { c.Refresh() }
	c.Speedup = newChart(220, 160)
	c.Speedup.Name = "speedup"
	c.Chart = newChart(220, 160)
	c.Chart.Name = "tokens-per-second"
	c.AALChart = newChart(220, 160)
	c.AALChart.Name = "aal"
	c.LoadChart = newChart(220, 160)
	c.LoadChart.Name = "load"
	c.Legend = container.NewVBox()
	c.RefreshB = widget.NewButton("Refresh", c.Refresh)
	c.Delete = widget.NewButton("Delete picked runs", c.confirmDelete)
	c.CSV = widget.NewButton("Export CSV...", c.saveCSV)
	c.Status = widget.NewLabel("")
	s.OnChange(c.Refresh)
	s.OnPair(func(st *profiles.PairState, err error) {
		if st == nil && err == nil {
			c.Selected = map[int64]bool{} // the previous pair's picks
			c.filterPair(s.Spec)
		}
	})
	return c
}

// filterPair shows the runs of the pair ps (all pairs when none is chosen).
func (c *CompareScreen) filterPair(ps profiles.PairSpec) {
	want := allPairs
	if ps.Target != "" {
		want = pairFilter{ps.Target, ps.SourceName()}.String()
		if !containsString(c.Filter.Options, want) {
			c.Filter.Options = append(c.Filter.Options, want)
			c.filterBy = append(c.filterBy, pairFilter{ps.Target, ps.SourceName()})
		}
	}
	c.Filter.SetSelected(want)
}

func containsString(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// header names a column, marking the sort column and direction.
func (c *CompareScreen) header(col int) string {
	name := compareCols[col].name
	if col == c.SortCol && col != colPick {
		if c.SortDesc {
			return name + " ▼"
		}
		return name + " ▲"
	}
	return name
}

// Title is the tab name.
func (c *CompareScreen) Title() string { return "Compare" }

// Content lays the screen out.
func (c *CompareScreen) Content() fyne.CanvasObject {
	top := container.NewBorder(nil, nil, container.NewHBox(c.RefreshB, c.Delete, c.CSV, widget.NewLabel("runs of")), c.Status, c.Filter)
	hint := container.NewVBox(widget.NewLabel("Click a header to sort; tick runs to chart or delete them; hover a bar for its values."),
		metricHelp(metricTPS, metricAAL, metricAcceptance, metricSpeedup))
	charts := container.NewGridWithColumns(2, c.Speedup.View(c.s.Win), c.Chart.View(c.s.Win), c.AALChart.View(c.s.Win), c.LoadChart.View(c.s.Win))
	table := &fyne.Container{Layout: fitTable{c}, Objects: []fyne.CanvasObject{c.Table}}
	split := container.NewVSplit(table, container.NewBorder(nil, c.Legend, nil, nil, charts))
	split.Offset = 0.5
	return container.NewBorder(container.NewVBox(top, hint), nil, nil, nil, split)
}

// fitTable lays the table out at the width it is given and sizes its
// columns to that width (fitColumns).
type fitTable struct{ c *CompareScreen }

func (l fitTable) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	l.c.fitColumns(size.Width)
	for _, o := range objs {
		o.Move(fyne.NewPos(0, 0))
		o.Resize(size)
	}
}

func (l fitTable) MinSize(objs []fyne.CanvasObject) fyne.Size {
	return fyne.NewSize(320, 3*l.c.rowHeight())
}

// rowHeight is a row of two lines of text.
func (c *CompareScreen) rowHeight() float32 {
	return widget.NewLabel("1\n2").MinSize().Height
}

// cellWidth is what a column's header and cells need on one line each
// (the widest line of each), with the label's padding.
func (c *CompareScreen) cellWidth(col int) float32 {
	pad := 2 * theme.InnerPadding()
	measure := func(s string) float32 {
		w := float32(0)
		for _, line := range strings.Split(s, "\n") {
			w = max(w, fyne.MeasureText(line, theme.TextSize(), fyne.TextStyle{}).Width)
		}
		return w
	}
	if col == colPick {
		return widget.NewCheck("", nil).MinSize().Width + theme.Padding()
	}
	need := measure(c.header(col)) + pad + theme.Padding()
	for _, r := range c.Runs {
		need = max(need, measure(compareCols[col].text(r))+pad)
	}
	return need
}

// fitColumns sizes the columns to a table width: each column as wide as
// its header and cells need, the plan column taking what is left (all of
// it: a wide window shows a wide column, not an empty half) and wrapping
// to two lines where that is less than it needs.
func (c *CompareScreen) fitColumns(width float32) {
	// the vertical scroll bar's room, and the table's padding after each column
	width -= theme.ScrollBarSize() + theme.Padding()*float32(len(compareCols))
	need := make([]float32, len(compareCols))
	fixed, flex := float32(0), float32(0)
	for i, col := range compareCols {
		need[i] = c.cellWidth(i)
		if col.flex {
			flex += need[i]
		} else {
			fixed += need[i]
		}
	}
	left := width - fixed
	widths := slices.Clone(need)
	if left >= flex { // room for one line each, and the rest shared
		for i, col := range compareCols {
			if col.flex {
				widths[i] = need[i] + (left-flex)*need[i]/max(flex, 1)
			}
		}
	} else { // two lines each, at least: shared by need, none below that
		least := map[int]float32{}
		var spare, above float32 = left, 0
		for i, col := range compareCols {
			if col.flex {
				least[i] = max(need[i]/2+theme.InnerPadding(), 80)
				spare -= least[i]
			}
		}
		for i := range least {
			widths[i] = least[i]
			above += need[i] - least[i]
		}
		if spare > 0 && above > 0 {
			for i := range least {
				widths[i] += spare * (need[i] - least[i]) / above
			}
		}
	}
	if equalWidths(widths, c.widths) {
		return
	}
	c.widths = widths
	for i, w := range widths {
		c.Table.SetColumnWidth(i, w)
	}
}

func equalWidths(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if abs32(a[i]-b[i]) >= 0.5 {
			return false
		}
	}
	return true
}

// Refresh reloads the stored runs.
func (c *CompareScreen) Refresh() {
	b, err := c.s.Bench(context.Background())
	if err != nil {
		c.Status.SetText(err.Error())
		return
	}
	runs, err := b.Runs(context.Background(), 500)
	if err != nil {
		c.Status.SetText(err.Error())
		return
	}
	c.all = runs
	c.listPairs()
	c.Runs = nil
	f, filtered := c.filter()
	for _, r := range runs {
		if !filtered || f.holds(r) {
			c.Runs = append(c.Runs, r)
		}
	}
	for id := range c.Selected { // forget runs deleted elsewhere or filtered out
		if !containsRun(c.Runs, id) {
			delete(c.Selected, id)
		}
	}
	if filtered {
		c.Status.SetText(fmt.Sprintf("%d of %d stored runs", len(c.Runs), len(runs)))
	} else {
		c.Status.SetText(fmt.Sprintf("%d stored runs", len(runs)))
	}
	c.widths = nil // the cells changed: fit again
	if w := c.Table.Size().Width; w > 0 {
		c.fitColumns(w)
	}
	c.sort()
	c.update()
}

// listPairs offers the pairs of the stored runs (and the chosen pair) to
// the filter.
func (c *CompareScreen) listPairs() {
	seen := map[pairFilter]bool{}
	var pairs []pairFilter
	add := func(f pairFilter) {
		if !seen[f] {
			seen[f] = true
			pairs = append(pairs, f)
		}
	}
	if ps := c.s.Spec; ps.Target != "" {
		add(pairFilter{ps.Target, ps.SourceName()})
	}
	targets := map[string]bool{} // targets with a drafted run
	for _, r := range c.all {
		if !r.Plain() && r.Drafter != "" {
			add(pairFilter{r.Target, r.Drafter})
			targets[r.Target] = true
		}
	}
	for _, r := range c.all {
		if !targets[r.Target] {
			add(pairFilter{r.Target, ""})
		}
	}
	opts := []string{allPairs}
	for _, f := range pairs {
		opts = append(opts, f.String())
	}
	c.filterBy, c.Filter.Options = pairs, opts
	c.Filter.Refresh()
}

// filter is the pair the filter shows (false: all pairs).
func (c *CompareScreen) filter() (pairFilter, bool) {
	i := c.Filter.SelectedIndex()
	if i <= 0 || i > len(c.filterBy) {
		return pairFilter{}, false
	}
	return c.filterBy[i-1], true
}

func containsRun(runs []profiles.Run, id int64) bool {
	for _, r := range runs {
		if r.ID == id {
			return true
		}
	}
	return false
}

// SortBy sorts the table by a column; the same column again reverses it.
func (c *CompareScreen) SortBy(col int) {
	if col == colPick || col < 0 || col >= len(compareCols) {
		return
	}
	if col == c.SortCol {
		c.SortDesc = !c.SortDesc
	} else {
		c.SortCol, c.SortDesc = col, false
	}
	c.sort()
}

func (c *CompareScreen) sort() {
	col := compareCols[c.SortCol]
	less := func(a, b profiles.Run) bool {
		if col.num != nil {
			return col.num(a) < col.num(b)
		}
		return strings.ToLower(col.text(a)) < strings.ToLower(col.text(b))
	}
	sort.SliceStable(c.Runs, func(i, j int) bool {
		if c.SortDesc {
			return less(c.Runs[j], c.Runs[i])
		}
		return less(c.Runs[i], c.Runs[j])
	})
	if w := c.Table.Size().Width; w > 0 { // the sort mark moved to another header
		c.fitColumns(w)
	}
	c.Table.Refresh()
}

// Toggle picks or unpicks a run.
func (c *CompareScreen) Toggle(id int64, on bool) {
	if on {
		c.Selected[id] = true
	} else {
		delete(c.Selected, id)
	}
	c.update()
}

// picked lists the picked runs in table order.
func (c *CompareScreen) picked() []profiles.Run {
	var sel []profiles.Run
	for _, r := range c.Runs {
		if c.Selected[r.ID] {
			sel = append(sel, r)
		}
	}
	return sel
}

// planColors gives each plan of the picked runs a colour of its own (the
// same in every chart and the legend), plain decoding grey: the runs'
// plan names, in the order first picked, and the colour of each run.
func planColors(runs []profiles.Run) (plans []string, colors map[string]color.Color) {
	colors = map[string]color.Color{}
	next := 0
	for _, r := range runs {
		p := runPlan(r)
		if _, ok := colors[p]; ok {
			continue
		}
		plans = append(plans, p)
		if r.Plain() {
			colors[p] = plainColor
			continue
		}
		colors[p] = planPalette[next%len(planPalette)]
		next++
	}
	return plans, colors
}

// plainColor is plain decoding's colour in the Compare charts; planPalette
// the plans' (the chart palette and more, grey left out).
var (
	plainColor  = color.RGBA{127, 127, 127, 255}
	planPalette = []color.Color{
		color.RGBA{31, 119, 180, 255}, color.RGBA{214, 39, 40, 255}, color.RGBA{44, 160, 44, 255},
		color.RGBA{148, 103, 189, 255}, color.RGBA{255, 127, 14, 255}, color.RGBA{23, 190, 207, 255},
		color.RGBA{140, 86, 75, 255}, color.RGBA{227, 119, 194, 255}, color.RGBA{188, 189, 34, 255},
	}
)

func (c *CompareScreen) update() {
	c.updateLoad()
	sel := c.picked()
	if len(sel) == 0 {
		c.Delete.Disable()
		c.Speedup.Clear()
		c.Chart.Clear()
		c.AALChart.Clear()
		c.Legend.Objects = nil
		c.Legend.Refresh()
		return
	}
	c.Delete.Enable()
	plans, colors := planColors(sel)
	var labels, details, speedDetails, tpsDetails []string
	var cols []color.Color
	measured := Series{Name: "measured"}
	predicted := make([]float64, len(sel))
	tps := Series{Name: "tokens/s"}
	aal := Series{Name: "AAL"}
	for i, r := range sel {
		p := runPlan(r)
		labels = append(labels, fmt.Sprintf("#%d", r.ID))
		details = append(details, runDetails(r, nil, ""))
		speedDetails = append(speedDetails, runDetails(r, measuredRange, "x"))
		tpsDetails = append(tpsDetails, runDetails(r, tpsRange, " tokens/s"))
		cols = append(cols, colors[p])
		measured.Y = append(measured.Y, r.Speedup())
		predicted[i] = r.PredictedSpeedup
		tps.Y = append(tps.Y, r.TokensPerSecond)
		aal.Y = append(aal.Y, r.AAL)
	}
	c.Speedup.SetBars(BarSpec{Title: "Speedup (ring: predicted)", YLabel: "x over plain decoding", Labels: labels, Details: speedDetails, Colors: cols,
		Groups: []Series{measured}, Marks: predicted, MarkName: "predicted", Width: 420, Height: 300})
	c.Chart.SetBars(BarSpec{Title: "Decode speed", YLabel: "tokens/s", Labels: labels, Details: tpsDetails, Colors: cols, Groups: []Series{tps}, Width: 420, Height: 300})
	c.AALChart.SetBars(BarSpec{Title: "Tokens per target pass", YLabel: "AAL", Labels: labels, Details: details, Colors: cols, Groups: []Series{aal}, Width: 420, Height: 300})
	// the legend: each plan's colour, its name and its runs
	var rows []fyne.CanvasObject
	for _, p := range plans {
		var ids []string
		for _, r := range sel {
			if runPlan(r) == p {
				ids = append(ids, fmt.Sprintf("#%d", r.ID))
			}
		}
		sw := canvas.NewRectangle(colors[p])
		sw.SetMinSize(fyne.NewSize(14, 14))
		l := widget.NewLabel(fmt.Sprintf("%s (%s)", p, strings.Join(ids, ", ")))
		l.Wrapping = fyne.TextWrapWord
		rows = append(rows, container.NewBorder(nil, nil, container.NewCenter(sw), nil, l))
	}
	c.Legend.Objects = []fyne.CanvasObject{container.NewGridWithColumns(min(3, len(rows)), rows...)}
	c.Legend.Refresh()
}

// DeletePicked deletes the picked runs from the database.
func (c *CompareScreen) DeletePicked() error {
	var ids []int64
	for _, r := range c.picked() {
		ids = append(ids, r.ID)
	}
	if len(ids) == 0 {
		return nil
	}
	b, err := c.s.Bench(context.Background())
	if err != nil {
		return err
	}
	if err := b.DeleteRuns(context.Background(), ids); err != nil {
		return err
	}
	c.Selected = map[int64]bool{}
	c.Refresh()
	c.Status.SetText(fmt.Sprintf("deleted %d runs; %s", len(ids), c.Status.Text))
	return nil
}

func (c *CompareScreen) confirmDelete() {
	n := len(c.picked())
	if n == 0 || c.s.Win == nil {
		return
	}
	dialog.ShowConfirm("Delete runs", fmt.Sprintf("Delete %d picked runs and their steps from the database?", n), func(ok bool) {
		if ok {
			c.s.ShowError(c.DeletePicked())
		}
	}, c.s.Win)
}

// WriteCSV writes the table, in its order, as CSV: numbers without units
// in numeric cells (empty where a run has no such figure), the units in
// the header.
func (c *CompareScreen) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	var head []string
	for _, col := range compareCols {
		for _, cc := range col.csv {
			head = append(head, cc.head)
		}
	}
	cw.Write(head)
	for _, r := range c.Runs {
		var row []string
		for _, col := range compareCols {
			for _, cc := range col.csv {
				row = append(row, cc.cell(r))
			}
		}
		cw.Write(row)
	}
	cw.Flush()
	return cw.Error()
}

func (c *CompareScreen) saveCSV() {
	d := dialog.NewFileSave(func(w fyne.URIWriteCloser, err error) {
		if err != nil || w == nil {
			return
		}
		err = c.WriteCSV(w)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			c.Status.SetText("saved " + w.URI().Path())
		}
		c.s.ShowError(err)
	}, c.s.Win)
	d.SetFileName("runs.csv")
	startIn(d, "")
	d.Show()
}

// Shown reloads the stored runs when the tab is selected.
func (c *CompareScreen) Shown() { c.Refresh() }
