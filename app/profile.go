package app

import (
	"context"
	"fmt"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"arborist/profiles"
	"arborist/profiles/jobs"
	"arborist/profiles/latency"
)

// ProfileScreen measures this machine: hardware summary and the latency
// curves of the target (and drafter), stored and reused.
type ProfileScreen struct {
	s        *Session
	Hardware *widget.Label
	Fresh    *widget.Check
	MaxW     *widget.Select
	Start    *widget.Button
	Cancel   *widget.Button
	Progress *widget.ProgressBar
	Status   *widget.Label
	Chart    *Chart
	Family   *CurveFamily // the curve over context, the suite's range marked
	Depth    *DepthSpeed  // decode and prefill speed after long contexts
	Lower    *container.AppTabs
	cancel   context.CancelFunc
}

// NewProfileScreen builds the screen.
func NewProfileScreen(s *Session) *ProfileScreen {
	p := &ProfileScreen{s: s}
	hw := profiles.Machine(context.Background()) // once, as the screen is built
	desc := fmt.Sprintf("%s: %d cores / %d threads, %s, %.1f GiB RAM", hw.CPU, hw.Cores, hw.Threads, hw.SIMD, float64(hw.RAM)/(1<<30))
	if hw.GPUs != "" {
		desc += "; GPUs " + hw.GPUs
	}
	p.Hardware = widget.NewLabel(desc)
	p.Hardware.Wrapping = fyne.TextWrapWord
	p.Fresh = widget.NewCheck("measure again (ignore stored curves)", nil)
	p.MaxW = widget.NewSelect([]string{"16", "32", "64", "128"}, nil)
	p.MaxW.SetSelected("32")
	p.Start = widget.NewButton("Profile", p.start)
	p.Start.Importance = widget.HighImportance
	p.Cancel = widget.NewButton("Cancel", func() {
		if p.cancel != nil {
			p.cancel()
		}
	})
	p.Cancel.Disable()
	p.Progress = widget.NewProgressBar()
	p.Status = widget.NewLabel(profileHint)
	p.Status.Wrapping = fyne.TextWrapWord
	// both charts fit under the controls at 1366x768 (profileChartW)
	p.Chart = newChart(profileChartW, profileChartH)
	p.Chart.Name, p.Chart.Zoomable = "latency", true
	p.Family = newCurveFamily(s)
	p.Depth = newDepthSpeed(s)
	s.OnPair(p.pairShown)
	return p
}

// profileChartW and profileChartH are the least room of the latency
// chart; the context family's chart under it asks for familyChartW x
// familyChartH. Together with the controls they fit a 1366x768 window,
// and at 1920x1080 the split gives each about half of the rest.
const profileChartW, profileChartH = 560, 210

// profileHint is the status before anything is measured or stored.
const profileHint = "Choose models, then Profile: this times one target pass over W tokens for each W."

// pairShown clears the previous pair's curves (zoom included) and shows
// the new pair's stored ones.
func (p *ProfileScreen) pairShown(st *profiles.PairState, err error) {
	if st == nil {
		if err == nil {
			p.Chart.Clear()
			p.Progress.SetValue(0)
			p.Status.SetText(profileHint)
		}
		return
	}
	if st.Verify == nil || p.Chart.Image != nil || p.cancel != nil {
		return // nothing stored, or a profile since the pair was chosen shows its own
	}
	p.show(st.Verify, st.Draft, st.Limits)
}

// Title is the tab name.
func (p *ProfileScreen) Title() string { return "Profile" }

// Content lays the screen out.
func (p *ProfileScreen) Content() fyne.CanvasObject {
	// the progress bar fills the controls' row: on a row of its own it
	// pushed the second chart below the fold at 1366x768
	controls := container.NewBorder(nil, nil, container.NewHBox(p.Start, p.Cancel, widget.NewLabel("largest W"), p.MaxW, p.Fresh), nil, p.Progress)
	help := metricHelp(metricTVerify, "W: how many tokens one target pass verifies; speculation pays when T_verify grows slowly with W.")
	// the curves over context and the speed at depth share the lower half
	p.Lower = container.NewAppTabs(container.NewTabItem("Over context", p.Family.View(p.s.Win)), container.NewTabItem("Speed at depth", p.Depth.View(p.s.Win)))
	return container.NewBorder(container.NewVBox(p.Hardware, controls, p.Status), help, nil, nil, container.NewVSplit(p.Chart.View(p.s.Win), p.Lower))
}

func (p *ProfileScreen) start() {
	spec := p.s.Spec
	if spec.Target == "" {
		p.s.ShowError(fmt.Errorf("choose and load a target on the Models screen first"))
		return
	}
	maxW := 32
	fmt.Sscan(p.MaxW.Selected, &maxW)
	fresh := p.Fresh.Checked
	pair := p.s.pairNow()
	type measured struct {
		vp, dp *profiles.Profile
		lim    profiles.Limits
	}
	p.Start.Disable()
	p.Cancel.Enable()
	p.Progress.SetValue(0)
	p.Status.SetText("Measuring memory bandwidth ...")
	done := make(chan struct{}) // the job's end waits until Cancel is wired
	defer close(done)
	job, err := p.s.startJob(jobProfile, true, func(ctx context.Context, j *jobs.Job) (any, error) {
		vp, dp, lim, err := p.measure(ctx, j, spec, maxW, fresh, pair)
		<-done
		return measured{vp, dp, lim}, err
	}, func(v jobs.View) {
		{
			p.Start.Enable()
			p.Cancel.Disable()
			p.cancel = nil
			if !p.s.samePair(pair) {
				p.Status.SetText("The profile of the pair chosen before finished and is stored; this pair's is not shown until it is profiled.")
				return
			}
			err := v.Err
			m, _ := v.Result.(measured)
			vp, dp, lim := m.vp, m.dp, m.lim
			if err != nil {
				if v.State == jobs.Cancelled {
					p.Status.SetText("Cancelled; nothing was stored for the unfinished curve.")
				} else {
					p.Status.SetText("Failed: " + err.Error())
					p.s.ShowError(err)
				}
				return
			}
			p.s.Verify, p.s.Draft = vp, dp
			p.show(vp, dp, lim)
			p.s.Changed()
		}
	})
	if err != nil { // refused: another heavy job runs
		p.Start.Enable()
		p.Cancel.Disable()
		p.Status.SetText("Not started: " + err.Error())
		return
	}
	p.cancel = job.Cancel
}

func (p *ProfileScreen) measure(ctx context.Context, job *jobs.Job, spec profiles.PairSpec, maxW int, fresh bool, pair int) (vp, dp *profiles.Profile, lim profiles.Limits, err error) {
	b, err := p.s.Bench(ctx)
	if err != nil {
		return nil, nil, lim, err
	}
	spec.DB = p.s.DBPath
	share := map[string][2]float64{"verify curve": {0, 0.8}, "draft curve": {0.8, 0.2}}
	r, err := b.Profile(ctx, spec, profiles.ProfileOptions{MaxW: maxW, Fresh: fresh}, func(e profiles.Event) {
		if sh, ok := share[e.Stage]; ok && e.Total > 0 {
			job.Progress(sh[0]+sh[1]*float64(e.Done)/float64(e.Total), fmt.Sprintf("%s %d of at most %d", e.Stage, e.Done, e.Total))
		} else {
			job.Progress(-1, e.Stage)
		}
		p.s.UI(func() {
			if !p.s.samePair(pair) {
				return
			}
			if sh, ok := share[e.Stage]; ok && e.Total > 0 {
				p.Progress.SetValue(sh[0] + sh[1]*float64(e.Done)/float64(e.Total))
			}
			p.Status.SetText(fmt.Sprintf("%s: %d of at most %d (%s)", e.Stage, e.Done, e.Total, e.Detail))
		})
	})
	if err != nil {
		return nil, nil, lim, err
	}
	over := r.StepCost
	p.s.UI(func() {
		if p.s.samePair(pair) {
			p.s.Overhead = over
		}
	})
	p.s.Go(func(ctx context.Context) { p.s.LoadInputs(ctx, pair) }) // the model now has curves
	return r.Target, r.Draft, r.Limits, nil
}

func (p *ProfileScreen) show(vp, dp *profiles.Profile, lim profiles.Limits) {
	p.Progress.SetValue(1)
	note := "measured now"
	if vp.Cached {
		note = "reused from the database, measured " + vp.Curve.Created.Local().Format("2006-01-02 15:04") + " (tick 'measure again' to redo)"
	}
	p.Status.SetText(fmt.Sprintf("Target curve %s. %s", note, describeLimits(lim, vp.Curve.Points)))
	series := []Series{curveSeries("target T_verify(W)", vp)}
	if dp != nil {
		series = append(series, curveSeries("drafter T(W)", dp))
	}
	if roof := rooflineSeries(vp, lim); roof != nil {
		series = append(series, *roof)
	}
	p.Chart.SetSpec(ChartSpec{Title: "Latency of one forward pass over W tokens", XLabel: "W (tokens per pass)", YLabel: "milliseconds",
		LogX: true, LogY: true, Series: series, Width: 760, Height: 420})
}

// rooflineSeries is the least a pass can take at every width: the target's
// weights streamed once at the memory rate of the device it runs on (a
// GPU's own memory, or the host's), drawn across the curve's widths.
func rooflineSeries(vp *profiles.Profile, lim profiles.Limits) *Series {
	pts := vp.Curve.Points
	if len(pts) == 0 || lim.Bandwidth <= 0 || lim.WeightBytes <= 0 {
		return nil
	}
	where := "host memory"
	if lim.Memory != nil {
		where = lim.Memory.Description
	}
	ms := float64(lim.Roofline()) / 1e6
	return &Series{Name: fmt.Sprintf("roofline: weights read once at %.0f GB/s (%s)", lim.Bandwidth/1e9, where),
		X: []float64{float64(pts[0].W), float64(pts[len(pts)-1].W)}, Y: []float64{ms, ms}}
}

func curveSeries(name string, pr *profiles.Profile) Series {
	var s Series
	s.Name = fmt.Sprintf("%s, %d threads", name, pr.Curve.Key.Threads)
	for _, pt := range pr.Curve.Points {
		s.X = append(s.X, float64(pt.W))
		s.Y = append(s.Y, float64(pt.Median)/1e6)
		s.Err = append(s.Err, float64(pt.Spread)/1e6)
	}
	return s
}

// describeLimits sets a curve against the machine's limits; limits read
// from the store carry no compute ceiling (Profile measures it), and
// without a stored bandwidth there is no roofline to set it against.
func describeLimits(lim profiles.Limits, pts []latency.Point) string {
	switch {
	case len(pts) == 0:
		return ""
	case lim.Peak > 0 || lim.Memory != nil:
		return lim.Describe(pts)
	case lim.Bandwidth <= 0 || lim.WeightBytes <= 0:
		return "Profile measures this machine's read bandwidth and compute ceiling."
	}
	first := pts[0]
	return fmt.Sprintf("Read bandwidth %.1f GB/s (stored): T_verify(%d) = %v, %.0f%% of the roofline (%v to stream the weights once). Profile measures the compute ceiling.",
		lim.Bandwidth/1e9, first.W, first.Median.Round(time.Microsecond), 100*lim.Roofline().Seconds()/first.Median.Seconds(), lim.Roofline().Round(time.Microsecond))
}
