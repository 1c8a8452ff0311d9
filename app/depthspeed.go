package app

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"arborist/profiles"
	"arborist/profiles/jobs"
)

// DepthSpeed is the Profile screen's speed of the target at the context
// users have, as `arborist bench --ctx` measures it: decode tokens/s at a
// short context and after each depth, against the roofline that counts
// the KV cache a step reads beside the weights, the prefill of each depth
// and the passes there. A plan's curves are timed after a short context;
// this says how much a long prompt costs on this machine, and how far
// the engine is from the memory's limit there.
type DepthSpeed struct {
	s        *Session
	Contexts *widget.Entry // the depths, "1024,4096"; filled with the target's defaults
	Start    *widget.Button
	Cancel   *widget.Button
	Status   *widget.Label // one line: what runs, how far, or why not
	Summary  *widget.Label // the figures, a line a context, beside the chart
	Chart    *Chart
	cancel   context.CancelFunc // the measurement under way (UI goroutine); nil when none
}

// depthHint is the status before a measurement, and depthAbout the
// summary's place before its figures.
const (
	depthHint  = "Decode and prefill speed after long contexts, against the memory's limit."
	depthAbout = "Measure at depth times decode\nat a short context and after\neach depth, with the depth's\nprefill, against the roofline\nthat reads the weights and\nthe KV cache a step attends\nover. The default depths are\nthose the target holds of\n1024 and 4096."
)

// depthChartW and depthChartH are the chart's least room: it shares the
// family chart's place (see profileChartW).
const depthChartW, depthChartH = familyChartW, familyChartH - 30

func newDepthSpeed(s *Session) *DepthSpeed {
	d := &DepthSpeed{s: s, Contexts: widget.NewEntry(), Status: widget.NewLabel(depthHint), Summary: widget.NewLabel(depthAbout), Chart: newChart(depthChartW, depthChartH)}
	d.Contexts.SetPlaceHolder("1024,4096")
	d.Status.Truncation = fyne.TextTruncateEllipsis
	d.Summary.Selectable = true // the figures copied into a report or an issue
	d.Chart.Name = "speed-at-depth"
	d.Start = widget.NewButton("Measure at depth", d.start)
	d.Cancel = widget.NewButton("Cancel", func() {
		if d.cancel != nil {
			d.cancel()
		}
	})
	d.Cancel.Disable()
	s.OnPair(d.pairShown)
	return d
}

// View lays the panel out: its controls and a line of status over the
// chart, the figures beside it (the lower half of the Profile screen
// leaves no room for lines of figures over the chart at 1366x768).
func (d *DepthSpeed) View(win fyne.Window) fyne.CanvasObject {
	depths := container.NewGridWrap(fyne.NewSize(130, d.Contexts.MinSize().Height), d.Contexts)
	controls := container.NewBorder(nil, nil, container.NewHBox(widget.NewLabel("Context depths"), depths, d.Start, d.Cancel), nil, d.Status)
	return container.NewBorder(controls, nil, nil, d.Summary, d.Chart.View(win))
}

// pairShown clears the previous pair's figures and fills the depths in
// with the new target's defaults (read off the UI goroutine: the model
// file's header); once the pair's state is read, it shows the target's
// newest stored measurement at depth, if there is one and none runs.
func (d *DepthSpeed) pairShown(st *profiles.PairState, err error) {
	if err != nil {
		return
	}
	if st != nil {
		if st.Depth != nil && d.cancel == nil {
			d.show(st.Depth, len(st.Depth.Decode), st.DepthAt)
		}
		return
	}
	d.Chart.Clear()
	d.Status.SetText(depthHint)
	d.Summary.SetText(depthAbout)
	target, pair := d.s.Spec.Target, d.s.pairNow()
	if target == "" {
		d.Contexts.SetText("")
		return
	}
	def := profiles.BenchDefaults()
	d.s.Go(func(context.Context) {
		depths, err := profiles.BenchDepths(target, def.Tokens, slices.Max(def.Widths))
		d.s.UI(func() {
			if d.s.samePair(pair) && err == nil && d.cancel == nil {
				d.Contexts.SetText(profiles.FormatInts(depths))
			}
		})
	})
}

// start measures the chosen target at the depths asked for, as a heavy
// job: it waits behind a profile or a calibration, the job bar shows how
// far it is with what is left, and Cancel stops it.
func (d *DepthSpeed) start() {
	spec := d.s.Spec
	if spec.Target == "" {
		d.s.ShowError(fmt.Errorf("choose and load a target on the Models screen first"))
		return
	}
	opt := profiles.BenchDefaults()
	opt.Model, opt.Backend, opt.Threads, opt.KV = spec.Target, spec.Backend, spec.Threads, spec.KV
	var err error
	if strings.TrimSpace(d.Contexts.Text) == "" {
		opt.Ctx, err = profiles.BenchDepths(spec.Target, opt.Tokens, slices.Max(opt.Widths))
	} else {
		opt.Ctx, err = profiles.ParseInts(d.Contexts.Text)
		if err == nil && len(opt.Ctx) == 0 {
			err = fmt.Errorf("want depths such as 1024,4096")
		}
	}
	if err != nil {
		d.Status.SetText("Not started: context depths: " + err.Error())
		return
	}
	pair := d.s.pairNow()
	stages := profiles.BenchStages(opt) // the job bar's share of the work done rests on them
	d.Start.Disable()
	d.Cancel.Enable()
	d.Status.SetText(fmt.Sprintf("Measuring %s at %s positions ...", filepath.Base(spec.Target), profiles.FormatInts(opt.Ctx)))
	done := make(chan struct{}) // the job's end waits until Cancel is wired
	defer close(done)
	job, err := d.s.startJob(jobDepth, true, func(ctx context.Context, j *jobs.Job) (any, error) {
		opt.Progress = func(e profiles.Event) {
			frac := profiles.BenchDone(stages, e)
			status := fmt.Sprintf("%s: %d of %d, %s", e.Stage, e.Done, e.Total, e.Detail)
			j.Progress(frac, status)
			d.s.UI(func() {
				if d.s.samePair(pair) {
					d.Status.SetText(status)
				}
			})
		}
		r, err := profiles.BenchModel(ctx, opt)
		<-done
		return r, err
	}, func(v jobs.View) {
		d.Start.Enable()
		d.Cancel.Disable()
		d.cancel = nil
		if !d.s.samePair(pair) {
			return // the pair chosen since shows its own
		}
		r, _ := v.Result.(*profiles.BenchReport)
		switch {
		case v.State == jobs.Cancelled:
			d.Status.SetText("Cancelled; nothing of the unfinished measurement is shown.")
		case v.Err != nil:
			d.Status.SetText("Failed: " + v.Err.Error())
			d.s.ShowError(v.Err)
		case r != nil:
			d.show(r, opt.Reps, time.Time{})
			d.keep(r, pair)
		}
	})
	if err != nil { // refused
		d.Start.Enable()
		d.Cancel.Disable()
		d.Status.SetText("Not started: " + err.Error())
		return
	}
	d.cancel = job.Cancel
}

// keep stores a measurement as the target's newest at depth (off the UI
// goroutine), so choosing the pair again shows it; the status says when
// it could not be kept.
func (d *DepthSpeed) keep(r *profiles.BenchReport, pair int) {
	d.s.Go(func(ctx context.Context) {
		b, err := d.s.Bench(ctx)
		if err == nil {
			err = b.SaveBenchReport(ctx, r)
		}
		if err != nil {
			d.s.UI(func() {
				if d.s.samePair(pair) && d.cancel == nil {
					d.Status.SetText(d.Status.Text + " Not kept: " + err.Error())
				}
			})
		}
	})
}

// show draws a measurement: the chart of tokens/s over context and its
// figures; at is when a stored one was measured (zero: just now).
func (d *DepthSpeed) show(r *profiles.BenchReport, reps int, at time.Time) {
	spec, figures := depthSpec(r, reps)
	d.Chart.SetSpec(spec)
	d.Summary.SetText(figures)
	when := ""
	if !at.IsZero() {
		when = " on " + at.Local().Format("2 Jan 2006 15:04")
	}
	d.Status.SetText(fmt.Sprintf("Measured %s%s: %d threads, kernels %s.", filepath.Base(r.Model), when, r.Threads, r.Kernels))
}

// depthSpec is a measurement's chart, tokens/s over the context a step
// attends over (the short runs at their mean context, then each depth),
// and its figures, a few short lines a context.
func depthSpec(r *profiles.BenchReport, reps int) (ChartSpec, string) {
	decode := Series{Name: fmt.Sprintf("decode, median of %d runs (bars: their range)", reps)}
	roof := Series{Name: fmt.Sprintf("roofline: weights + KV cache read at %.1f GB/s", r.Bandwidth/1e9), Dashed: true}
	prefill := Series{Name: "prefill of the depth"}
	add := func(x float64, runs []float64, med, roofline float64) {
		decode.X, decode.Y = append(decode.X, x), append(decode.Y, med)
		decode.Err = append(decode.Err, max(med-runs[0], runs[len(runs)-1]-med))
		roof.X, roof.Y = append(roof.X, x), append(roof.Y, roofline)
	}
	var b strings.Builder
	if len(r.Decode) > 0 {
		add(max(1, r.Context), r.Decode, r.Median, r.Roofline)
		fmt.Fprintf(&b, "At %.0f positions: decode %.1f\ntokens/s, %.0f%% of its roofline (%.0f)", r.Context, r.Median, 100*r.Median/r.Roofline, r.Roofline)
	}
	for _, dr := range r.Depths {
		add(float64(dr.Context), dr.Decode, dr.Median, dr.Roofline)
		prefill.X, prefill.Y = append(prefill.X, float64(dr.Context)), append(prefill.Y, dr.Prefill)
		fmt.Fprintf(&b, "\nAfter %d: decode %.1f (%.1f-%.1f),\n%.0f%% of %.0f; prefill %.1f tokens/s", dr.Context, dr.Median, dr.Decode[0], dr.Decode[len(dr.Decode)-1], 100*dr.Share, dr.Roofline, dr.Prefill)
	}
	series := []Series{decode, roof}
	if len(prefill.X) > 0 {
		series = append(series, prefill)
	}
	return ChartSpec{Title: "Speed over context", XLabel: "context (positions a step attends over)", YLabel: "tokens/s",
		LogX: true, LogY: true, Series: series, Width: 480, Height: 260}, b.String()
}
