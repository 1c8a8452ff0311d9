package app

import (
	"context"
	"fmt"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"arborist/profiles/store"
)

// CompareScreen puts stored runs side by side: a table of settings and
// figures, and overlaid charts.
type CompareScreen struct {
	s        *Session
	Runs     []store.Run
	Selected map[int64]bool
	List     *widget.List
	Table    *widget.Label
	Chart    *canvas.Image
	RefreshB *widget.Button
	Status   *widget.Label
}

// NewCompareScreen builds the screen.
func NewCompareScreen(s *Session) *CompareScreen {
	c := &CompareScreen{s: s, Selected: map[int64]bool{}}
	c.List = widget.NewList(func() int { return len(c.Runs) },
		func() fyne.CanvasObject { return widget.NewCheck("run", nil) },
		func(i widget.ListItemID, o fyne.CanvasObject) {
			r := c.Runs[i]
			ch := o.(*widget.Check)
			ch.OnChanged = nil
			ch.Text = fmt.Sprintf("#%d %s %s, %.1f tok/s", r.ID, r.Strategy, r.Drafter, r.TokensPerSecond)
			ch.Checked = c.Selected[r.ID]
			ch.OnChanged = func(on bool) { c.Toggle(r.ID, on) }
			ch.Refresh()
		})
	c.Table = widget.NewLabel("Pick two or more stored runs.")
	c.Table.TextStyle = fyne.TextStyle{Monospace: true}
	c.Chart = newChart(520, 300)
	c.RefreshB = widget.NewButton("Refresh", c.Refresh)
	c.Status = widget.NewLabel("")
	s.OnChange(c.Refresh)
	return c
}

// Title is the tab name.
func (c *CompareScreen) Title() string { return "Compare" }

// Content lays the screen out.
func (c *CompareScreen) Content() fyne.CanvasObject {
	left := container.NewBorder(container.NewHBox(c.RefreshB, c.Status), nil, nil, nil, c.List)
	right := container.NewVSplit(container.NewScroll(c.Table), c.Chart)
	split := container.NewHSplit(left, right)
	split.Offset = 0.35
	return split
}

// Refresh reloads the stored runs.
func (c *CompareScreen) Refresh() {
	st, err := c.s.Store(context.Background())
	if err != nil {
		c.Status.SetText(err.Error())
		return
	}
	runs, err := st.Runs(context.Background(), 200)
	if err != nil {
		c.Status.SetText(err.Error())
		return
	}
	c.Runs = runs
	c.Status.SetText(fmt.Sprintf("%d stored runs", len(runs)))
	c.List.Refresh()
	c.update()
}

// Toggle selects or deselects a run.
func (c *CompareScreen) Toggle(id int64, on bool) {
	if on {
		c.Selected[id] = true
	} else {
		delete(c.Selected, id)
	}
	c.update()
}

func (c *CompareScreen) update() {
	var sel []store.Run
	for _, r := range c.Runs {
		if c.Selected[r.ID] {
			sel = append(sel, r)
		}
	}
	if len(sel) == 0 {
		c.Table.SetText("Pick two or more stored runs.")
		c.Chart.Image = nil
		c.Chart.Refresh()
		return
	}
	t := fmt.Sprintf("%-5s %-7s %-26s %8s %6s %7s %9s %9s\n", "run", "strat", "drafter", "tok/s", "AAL", "accept", "speedup", "predicted")
	var labels []string
	tps := Series{Name: "tokens/s"}
	aal := Series{Name: "AAL x 10"}
	for _, r := range sel {
		sp, pr := "-", "-"
		if r.MeasuredSpeedup > 0 {
			sp = fmt.Sprintf("%.2fx", r.MeasuredSpeedup)
		}
		if r.PredictedSpeedup > 0 {
			pr = fmt.Sprintf("%.2fx", r.PredictedSpeedup)
		}
		t += fmt.Sprintf("%-5d %-7s %-26s %8.1f %6.2f %6.1f%% %9s %9s\n", r.ID, r.Strategy, trim(r.Drafter, 26), r.TokensPerSecond, r.AAL, 100*r.Acceptance, sp, pr)
		labels = append(labels, fmt.Sprintf("#%d %s", r.ID, r.Strategy))
		tps.Y = append(tps.Y, r.TokensPerSecond)
		aal.Y = append(aal.Y, 10*r.AAL)
	}
	c.Table.SetText(t)
	c.Chart.Image = RenderBars(BarSpec{Title: "Selected runs", YLabel: "tokens/s; AAL x 10", Labels: labels, Groups: []Series{tps, aal}, Width: 620, Height: 320})
	c.Chart.Refresh()
}

func trim(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "~"
}
