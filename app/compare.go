package app

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/widget"

	"arborist/profiles"
)

// CompareScreen puts stored runs side by side: a table sortable by any
// column (click its header), runs picked by the check in the first column
// for the charts or for deleting, and the table as CSV.
type CompareScreen struct {
	s        *Session
	Runs     []profiles.Run // in the table's order
	Selected map[int64]bool
	Table    *widget.Table
	Chart    *Chart // tokens/s of the picked runs
	AALChart *Chart // AAL of the picked runs: one unit per chart
	RefreshB *widget.Button
	Delete   *widget.Button
	CSV      *widget.Button
	Status   *widget.Label
	SortCol  int  // index into compareCols
	SortDesc bool // descending
}

// compareCol is one column of the Compare table: its header, its cell
// text, and the value it sorts by (numbers sort as numbers).
type compareCol struct {
	name  string
	width float32
	text  func(r profiles.Run) string
	num   func(r profiles.Run) float64 // nil: sort by text
}

// colPick is the check column; it is neither sorted nor exported.
const colPick = 0

var compareCols = []compareCol{
	{name: "", width: 36},
	{name: "run", width: 56, text: func(r profiles.Run) string { return strconv.FormatInt(r.ID, 10) }, num: func(r profiles.Run) float64 { return float64(r.ID) }},
	{name: "date", width: 140, text: func(r profiles.Run) string { return r.Created.Local().Format("2006-01-02 15:04") },
		num: func(r profiles.Run) float64 { return float64(r.Created.UnixNano()) }},
	{name: "target", width: 150, text: func(r profiles.Run) string { return filepath.Base(r.Target) }},
	{name: "drafter", width: 170, text: runDrafter},
	{name: "plan", width: 220, text: runPlan},
	{name: "status", width: 90, text: func(r profiles.Run) string { return r.Status }},
	{name: "tokens", width: 70, text: func(r profiles.Run) string { return running(r, strconv.Itoa(r.Tokens)) }, num: func(r profiles.Run) float64 { return float64(r.Tokens) }},
	{name: "tokens/s", width: 80, text: func(r profiles.Run) string { return running(r, fmt.Sprintf("%.1f", r.TokensPerSecond)) },
		num: func(r profiles.Run) float64 { return r.TokensPerSecond }},
	{name: "AAL", width: 60, text: func(r profiles.Run) string { return running(r, fmt.Sprintf("%.2f", r.AAL)) }, num: func(r profiles.Run) float64 { return r.AAL }},
	{name: "acceptance", width: 90, text: func(r profiles.Run) string { return running(r, fmt.Sprintf("%.1f%%", 100*r.Acceptance)) },
		num: func(r profiles.Run) float64 { return r.Acceptance }},
	{name: "predicted", width: 80, text: func(r profiles.Run) string { return speedup(r.PredictedSpeedup) }, num: func(r profiles.Run) float64 { return r.PredictedSpeedup }},
	{name: "measured", width: 80, text: func(r profiles.Run) string { return running(r, speedup(r.MeasuredSpeedup)) },
		num: func(r profiles.Run) float64 { return r.MeasuredSpeedup }},
}

// runDrafter names a run's draft source; plain decoding uses none, whatever
// pair it was started from.
func runDrafter(r profiles.Run) string {
	if r.Strategy == "ar" || r.Drafter == "" {
		return "-"
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

// runPlan is the stored run's strategy with the shape settings it ran
// with (the decoding config stored with the run; zero settings omitted).
func runPlan(r profiles.Run) string {
	m, ok := r.Settings.(map[string]any)
	if !ok {
		return r.Strategy
	}
	if st, ok := m["Static"].(map[string]any); ok {
		m["Parents"] = st["Parents"]
	}
	parts := []string{r.Strategy}
	for _, f := range []struct{ key, name string }{{"Gamma", "gamma"}, {"Widths", "widths"}, {"Parents", "parents"}, {"Branch", "branch"},
		{"WMax", "w-max"}, {"MaxSeqs", "sequences"}, {"Pad", "pad"}, {"AOT", "aot"}} {
		switch v := m[f.key].(type) {
		case float64:
			if v != 0 {
				parts = append(parts, fmt.Sprintf("%s=%g", f.name, v))
			}
		case bool:
			if v {
				parts = append(parts, f.name)
			}
		case []any:
			if len(v) > 0 {
				var xs []string
				for _, x := range v {
					xs = append(xs, fmt.Sprint(x))
				}
				parts = append(parts, f.name+"="+strings.Join(xs, ","))
			}
		}
	}
	return strings.Join(parts, " ")
}

// NewCompareScreen builds the screen.
func NewCompareScreen(s *Session) *CompareScreen {
	c := &CompareScreen{s: s, Selected: map[int64]bool{}, SortCol: 1, SortDesc: true}
	c.Table = widget.NewTable(
		func() (int, int) { return len(c.Runs), len(compareCols) },
		func() fyne.CanvasObject {
			return container.NewStack(widget.NewCheck("", nil), widget.NewLabel(""))
		},
		func(id widget.TableCellID, o fyne.CanvasObject) {
			st := o.(*fyne.Container)
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
			l.Truncation = fyne.TextTruncateEllipsis
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
	for i, col := range compareCols {
		c.Table.SetColumnWidth(i, col.width)
	}
	c.Chart = newChart(320, 240)
	c.AALChart = newChart(320, 240)
	c.RefreshB = widget.NewButton("Refresh", c.Refresh)
	c.Delete = widget.NewButton("Delete picked runs", c.confirmDelete)
	c.CSV = widget.NewButton("Export CSV...", c.saveCSV)
	c.Status = widget.NewLabel("")
	s.OnChange(c.Refresh)
	s.OnPair(func(st *profiles.PairState, err error) {
		if st == nil && err == nil {
			c.Selected = map[int64]bool{} // the previous pair's picks
		}
	})
	return c
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
	top := container.NewHBox(c.RefreshB, c.Delete, c.CSV, c.Status)
	hint := container.NewVBox(widget.NewLabel("Click a header to sort; tick runs to chart or delete them."),
		metricHelp(metricTPS, metricAAL, metricAcceptance, metricSpeedup))
	charts := container.NewGridWithColumns(2, c.Chart.View(c.s.Win), c.AALChart.View(c.s.Win))
	split := container.NewVSplit(c.Table, charts)
	split.Offset = 0.55
	return container.NewBorder(container.NewVBox(top, hint), nil, nil, nil, split)
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
	c.Runs = runs
	for id := range c.Selected { // forget runs deleted elsewhere
		if !containsRun(runs, id) {
			delete(c.Selected, id)
		}
	}
	c.Status.SetText(fmt.Sprintf("%d stored runs", len(runs)))
	c.sort()
	c.update()
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

func (c *CompareScreen) update() {
	sel := c.picked()
	if len(sel) == 0 {
		c.Delete.Disable()
	} else {
		c.Delete.Enable()
	}
	if len(sel) == 0 {
		c.Chart.Clear()
		c.AALChart.Clear()
		return
	}
	var labels []string
	tps := Series{Name: "tokens/s"}
	aal := Series{Name: "AAL"}
	for _, r := range sel {
		labels = append(labels, fmt.Sprintf("#%d %s", r.ID, r.Strategy))
		tps.Y = append(tps.Y, r.TokensPerSecond)
		aal.Y = append(aal.Y, r.AAL)
	}
	c.Chart.SetBars(BarSpec{Title: "Decode speed", YLabel: "tokens/s", Labels: labels, Groups: []Series{tps}, Width: 420, Height: 300})
	c.AALChart.SetBars(BarSpec{Title: "Tokens per target pass", YLabel: "AAL", Labels: labels, Groups: []Series{aal}, Width: 420, Height: 300})
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

// WriteCSV writes the table, in its order, as CSV.
func (c *CompareScreen) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	var head []string
	for _, col := range compareCols[1:] {
		head = append(head, col.name)
	}
	cw.Write(head)
	for _, r := range c.Runs {
		var row []string
		for _, col := range compareCols[1:] {
			row = append(row, col.text(r))
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
