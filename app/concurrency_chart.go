package app

import (
	"context"
	"fmt"
	"math"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"arborist/profiles"
)

// ConcurrencyCharts are the Speedup screen's charts of what plans are
// predicted to give when several requests share each pass: speedup over
// plain batching, and a request's time per output token, against the
// concurrency, one line per plan and policy (plain batching, the best
// plans fixed and under the goodput policy), each point with its
// interval. They show the last tune's ranking (Show) or, for a pair
// chosen with a stored plan, its stored ranking priced again.
type ConcurrencyCharts struct {
	s       *Session
	Speedup *Chart
	TPOT    *Chart
	Note    *widget.Label
}

// loadChartPlans is how many of the best plans the charts draw, each
// fixed and under the goodput policy, beside plain batching.
const loadChartPlans = 2

// newConcurrencyCharts builds the charts and follows the chosen pair.
func newConcurrencyCharts(s *Session) *ConcurrencyCharts {
	c := &ConcurrencyCharts{s: s, Speedup: newChart(200, 150), TPOT: newChart(200, 150), Note: widget.NewLabel("Tune to see plans over concurrency.")}
	c.Note.Wrapping = fyne.TextWrapWord
	c.Speedup.Name, c.TPOT.Name = "concurrency-speedup", "concurrency-tpot"
	c.Note.Wrapping = fyne.TextWrapWord
	s.OnPair(c.pairShown)
	return c
}

// View lays the two charts out side by side under the note.
func (c *ConcurrencyCharts) View(win fyne.Window) fyne.CanvasObject {
	return container.NewBorder(c.Note, nil, nil, nil, container.NewGridWithRows(2, c.Speedup.View(win), c.TPOT.View(win)))
}

// pairShown clears the charts for a new pair, then prices its stored
// ranking at the default concurrencies off the UI goroutine.
func (c *ConcurrencyCharts) pairShown(st *profiles.PairState, err error) {
	if st == nil {
		c.Speedup.Clear()
		c.TPOT.Clear()
		c.Note.SetText("Tune to see plans over concurrency.")
		return
	}
	if st.Inputs == nil || len(st.Ranked) == 0 {
		return
	}
	pair := c.s.pairNow()
	in, ranked := st.Inputs, st.Ranked
	c.s.Go(func(context.Context) {
		levels := in.Loads(ranked, profiles.Choices().Concurrency)
		c.s.UI(func() {
			if c.s.samePair(pair) {
				c.Show(levels)
			}
		})
	})
}

// Show draws a ranking over concurrency (a tune's Loads). On the UI
// goroutine.
func (c *ConcurrencyCharts) Show(levels []profiles.LoadRanking) {
	sp, tp, note := concurrencySpecs(levels)
	if len(sp.Series) == 0 {
		return
	}
	c.Speedup.SetSpec(sp)
	c.TPOT.SetSpec(tp)
	c.Note.SetText(note)
}

// concurrencySpecs are the two charts of levels and their note: plain
// batching and the first loadChartPlans plans the lowest concurrency
// ranks (other than plain batching), fixed and under goodput, each a line
// over the concurrencies priced; the error bars cover the intervals.
func concurrencySpecs(levels []profiles.LoadRanking) (speedup, tpot ChartSpec, note string) {
	type key struct{ plan, policy string }
	var order []key
	var skipped []string
	for _, lv := range levels {
		if lv.Err != "" {
			skipped = append(skipped, fmt.Sprintf("C=%d (%s)", lv.Concurrency, lv.Err))
			continue
		}
		if order != nil {
			continue
		}
		plans := 0
		seen := map[string]bool{}
		for _, lp := range lv.Ranked {
			name := lp.Plan.String()
			if lp.Policy == "plain" {
				order = append(order, key{name, lp.Policy})
				continue
			}
			if !seen[name] && plans < loadChartPlans {
				seen[name] = true
				plans++
				order = append(order, key{name, "fixed"}, key{name, "goodput"})
			}
		}
	}
	speedup = ChartSpec{Title: "Predicted speedup over plain batching", XLabel: "concurrency (requests a pass)", YLabel: "x plain batching", LogX: true, Width: 320, Height: 200}
	tpot = ChartSpec{Title: "Predicted time per output token", XLabel: "concurrency (requests a pass)", YLabel: "ms a token, a request", LogX: true, Width: 320, Height: 200}
	for _, k := range order {
		name := k.plan + ", " + k.policy
		if k.policy == "plain" {
			name = "plain batching"
		}
		s, t := Series{Name: name}, Series{Name: name}
		for _, lv := range levels {
			for _, lp := range lv.Ranked {
				if lp.Plan.String() != k.plan || lp.Policy != k.policy {
					continue
				}
				x := float64(lv.Concurrency)
				s.X, s.Y = append(s.X, x), append(s.Y, lp.Speedup)
				s.Err = append(s.Err, math.Max(lp.Speedup-lp.Low, lp.High-lp.Speedup))
				// a request's time a token moves inversely to the speedup
				lo, hi := ms(lp.TPOT), ms(lp.TPOT)
				if lp.Low > 0 && lp.High > 0 {
					lo, hi = ms(lp.TPOT)*lp.Speedup/lp.High, ms(lp.TPOT)*lp.Speedup/lp.Low
				}
				t.X, t.Y = append(t.X, x), append(t.Y, ms(lp.TPOT))
				t.Err = append(t.Err, math.Max(ms(lp.TPOT)-lo, hi-ms(lp.TPOT)))
				break
			}
		}
		if len(s.X) > 0 {
			speedup.Series, tpot.Series = append(speedup.Series, s), append(tpot.Series, t)
		}
	}
	note = "Each request's drafting runs before one shared pass of every request's rows, priced on the curve of passes of that many sequences; bars cover each prediction's interval."
	if len(skipped) > 0 {
		note += fmt.Sprintf(" Not priced: %v.", skipped)
	}
	return speedup, tpot, note
}
