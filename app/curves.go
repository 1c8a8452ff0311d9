package app

import (
	"fmt"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"arborist/profiles"
)

// CurveFamily is the Profile screen's chart of the target's verification
// curve at every context measured (one line per context, over W), with
// the calibration suite's context range marked: the curve interpolated
// at the shortest and the longest context its steps reached (dashed, drawn
// over the measured lines: the shortest is often a measured context
// itself), so what a plan is priced at lies between them.
// It redraws whenever the session's inputs change (a profile, a
// calibration or a tune read them again).
type CurveFamily struct {
	s     *Session
	Chart *Chart
	Note  *widget.Label
}

// familyChartW and familyChartH are the family chart's least room (see
// profileChartW).
const familyChartW, familyChartH = 480, 190

// newCurveFamily builds the chart and follows the session's inputs.
func newCurveFamily(s *Session) *CurveFamily {
	f := &CurveFamily{s: s, Chart: newChart(familyChartW, familyChartH), Note: widget.NewLabel("")}
	f.Chart.Name, f.Chart.Zoomable = "latency-context", true
	f.Note.Wrapping = fyne.TextWrapWord
	s.OnChange(f.refresh)
	s.OnPair(func(st *profiles.PairState, err error) {
		if st == nil {
			f.Chart.Clear()
			f.Note.SetText("")
		}
	})
	return f
}

// View lays the chart out under its note.
func (f *CurveFamily) View(win fyne.Window) fyne.CanvasObject {
	return container.NewBorder(f.Note, nil, nil, nil, f.Chart.View(win))
}

// refresh draws the session's inputs' family (on the UI goroutine).
func (f *CurveFamily) refresh() {
	in := f.s.Inputs
	fam := in.Contexts()
	if len(fam) == 0 {
		return
	}
	var rng profiles.ContextRange // what the prices rest on, once profiled
	if in.Profiled {
		rng = in.Costs.Context
	}
	spec, note := familySpec(fam, rng)
	f.Chart.SetSpec(spec)
	f.Note.SetText(note)
}

// familySpec is the family's chart and its note: one line per measured
// context, and the suite's range rng marked by the curves at its ends
// (the longest left unmarked where it is past the longest measured,
// never extrapolated).
func familySpec(fam []profiles.ContextCurve, rng profiles.ContextRange) (ChartSpec, string) {
	var series []Series
	for _, c := range fam {
		s := Series{Name: fmt.Sprintf("context %d", c.Context)}
		for _, pt := range c.Verify {
			s.X = append(s.X, float64(pt.W))
			s.Y = append(s.Y, ms(pt.Median))
			s.Err = append(s.Err, ms(pt.Spread))
		}
		series = append(series, s)
	}
	note := fmt.Sprintf("T_verify(W) at %d contexts, %d to %d tokens.", len(fam), fam[0].Context, fam[len(fam)-1].Context)
	if len(fam) == 1 {
		note = fmt.Sprintf("T_verify(W) at context %d only: a profile after a calibration adds the contexts its prompts reach.", fam[0].Context)
	}
	if rng.First > 0 {
		mark := func(name string, n int) {
			s := Series{Name: name, Dashed: true}
			for _, pt := range fam[0].Verify {
				if t := profiles.AtContext(fam, pt.W, n); t > 0 {
					s.X = append(s.X, float64(pt.W))
					s.Y = append(s.Y, ms(t))
				}
			}
			if len(s.X) > 0 {
				series = append(series, s)
			}
		}
		mark(fmt.Sprintf("suite's shortest context, %d (interpolated, dashed)", rng.First), rng.First)
		last := rng.Last
		if last > fam[len(fam)-1].Context {
			last = fam[len(fam)-1].Context
			note += fmt.Sprintf(" The suite's steps reach %d tokens, past the longest measured (%d): profile --ctx %d prices them.", rng.Last, last, rng.Last)
		}
		mark(fmt.Sprintf("suite's longest context, %d (interpolated, dashed)", last), last)
	}
	if c := rng.String(); c != "" {
		note += " Plans are priced at " + c + "."
	}
	return ChartSpec{Title: "Verification latency over context", XLabel: "W (tokens per pass)", YLabel: "milliseconds",
		LogX: true, LogY: true, Series: series, Width: 480, Height: 260}, note
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / 1e6 }
