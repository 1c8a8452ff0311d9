package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"image/color"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"arborist/app/present"
	"arborist/profiles"
)

// SpeedupScreen is the interactive latency-aware speedup model: move the
// acceptance assumptions and the plan bounds, see predicted speedup against
// depth for each width, the best plan, and its tree.
type SpeedupScreen struct {
	s        *Session
	controls *container.Scroll // the scrolling column of controls (the screenshot tour scrolls it)
	Alpha    *widget.Slider
	Decay    *widget.Slider
	MaxDepth *widget.Slider
	UseCal   *widget.Check
	// Mode says whether the acceptance sliders show the stored
	// calibration's measured values (and are disabled) or are what-if
	// values the user sets (UseCal unticked, or no calibration).
	Mode     *widget.Label
	measured bool       // the sliders show a calibration's values
	whatIf   [2]float64 // the user's alpha and decay, kept while measured values are shown
	syncing  bool       // the sliders are being set to measured values
	// Place makes Tune search where each model runs as well (every
	// available device); disabled where only one device is available
	// (SetBackends)
	Place   *widget.Check
	Plan    *widget.Select // your plan's strategy
	Shape   *widget.Entry  // gamma, or widths per depth
	WMax    *widget.Slider // egt pruning budget
	Mine    *widget.Label  // your plan's prediction
	Curve   *Chart         // T_verify(W) the model reasons with
	Labels  *widget.Label
	Best    *widget.Label
	Timing  *widget.Label
	Chart   *Chart          // speedup against depth: tap a point to pick its plan
	TreeBox *fyne.Container // the best plan's tree, drawn to fit its room (treeLayout)
	last    time.Duration

	// calibrate, train the depth predictor and tune the pair in the core
	Prompts      *widget.Entry // prompt suite file
	PromptsCheck *fileCheck    // the remembered suite is gone: pick it again
	CalTokens    *widget.Entry // tokens per prompt
	Calibrate    *widget.Button
	TrainPred    *widget.Button
	Tune         *widget.Button
	// Validate runs the tune's five best distinct plans and plain decoding
	// interleaved on the prompt suite; Validation shows predicted against
	// measured, the measured best marked (and picked for Run and Export).
	Validate      *widget.Button
	Validation    *widget.Label
	pendingChoice *profiles.Prediction // picked once the running work has reported
	Work          *widget.ProgressBar
	WorkStatus    *widget.Label
	Ranked        *widget.Select        // the last tune's plans, best first: pick one
	Loads         *ConcurrencyCharts    // the plans over concurrency
	ranked        []profiles.Prediction // the tuned plans listed (the best 25)
	candidates    []profiles.Prediction // every tuned plan, best first: Validate top 5 picks the distinct ones from here
	// chartPlans are the speedup chart's plans: [series][point]
	chartPlans [][]profiles.Prediction
	// explored is the last what-if the core answered (Update), asked the
	// question it answered, and searched the ranking its best comes from
	explored *profiles.Exploration
	asked    asked
	searched []profiles.Prediction
	// stored is the plan the database holds as the pair's newest (what
	// Export renders), so picking it again stores nothing
	stored string
	busy   bool
	doing  string // the work in progress ("Calibrating", "Tuning", ...)
	// Values shows each slider's value beside it.
	Values map[*widget.Slider]*widget.Label
}

// valued puts a label showing the slider's current value beside it.
func (sp *SpeedupScreen) valued(sl *widget.Slider, format func(float64) string) fyne.CanvasObject {
	if sp.Values == nil {
		sp.Values = map[*widget.Slider]*widget.Label{}
	}
	l := widget.NewLabel(format(sl.Value))
	sp.Values[sl] = l
	prev := sl.OnChanged
	sl.OnChanged = func(v float64) {
		if sp.syncing {
			return // showing measured values: labelled by showAcceptance
		}
		l.SetText(format(v))
		if prev != nil {
			prev(v)
		}
	}
	return container.NewBorder(nil, nil, nil, l, sl)
}

// The calibration box's text, with a calibration stored and without.
const (
	useCalText = "use the stored calibration of this pair (untick for what-if values)"
	useCalNone = "use the stored calibration (none stored yet: calibrate first)"
)

// NewSpeedupScreen builds the screen.
func NewSpeedupScreen(s *Session) *SpeedupScreen {
	sp := &SpeedupScreen{s: s}
	sp.Alpha = widget.NewSlider(0.05, 0.98)
	sp.Alpha.Step = 0.01
	sp.Alpha.SetValue(0.75)
	sp.Decay = widget.NewSlider(0.05, 1)
	sp.Decay.Step = 0.05
	sp.Decay.SetValue(0.4)
	sp.MaxDepth = widget.NewSlider(1, 12)
	sp.MaxDepth.Step = 1
	sp.MaxDepth.SetValue(8)
	sp.UseCal = widget.NewCheck(useCalNone, nil)
	sp.UseCal.Disable() // until a calibration is stored (showAcceptance)
	sp.UseCal.OnChanged = func(bool) { sp.Update() }
	sp.Mode = widget.NewLabel("")
	sp.Mode.Wrapping = fyne.TextWrapWord
	sp.Mode.TextStyle = fyne.TextStyle{Italic: true}
	sp.Place = widget.NewCheck("tune also places each model on a device (checking the devices)", nil)
	sp.Place.Disable() // until SetBackends says there is more than one
	choices := profiles.Choices()
	whatIf, start := choices.WhatIf, choices.WhatIfStart
	sp.Plan = widget.NewSelect(whatIf, nil)
	sp.Plan.SetSelected(start)
	sp.Shape = widget.NewEntry()
	sp.Shape.SetText("1,2,2,2")
	sp.Shape.OnChanged = func(string) { sp.updateMine() }
	sp.WMax = widget.NewSlider(1, 64)
	sp.WMax.Step = 1
	sp.WMax.SetValue(8)
	sp.WMax.OnChanged = func(float64) { sp.updateMine() }
	sp.Mine = widget.NewLabel("")
	sp.Mine.Wrapping = fyne.TextWrapWord
	sp.Curve = newChart(240, 140)
	sp.Curve.Name, sp.Curve.Zoomable = "verify-latency", true
	sp.Labels = widget.NewLabel("")
	sp.Labels.Wrapping = fyne.TextWrapWord
	sp.Best = widget.NewLabel("")
	sp.Best.Wrapping = fyne.TextWrapWord
	sp.Best.TextStyle = fyne.TextStyle{Bold: true}
	sp.Timing = widget.NewLabel("")
	sp.Timing.Wrapping = fyne.TextWrapWord
	sp.Chart = newChart(360, 220)
	sp.Chart.Name = "speedup"
	sp.Chart.OnTapped = sp.choosePoint
	sp.TreeBox = container.New(&treeLayout{})
	for _, sl := range []*widget.Slider{sp.Alpha, sp.Decay, sp.MaxDepth} {
		sl.OnChanged = func(float64) { sp.Update() }
	}
	sp.Plan.OnChanged = func(string) { sp.updateMine() }
	sp.Prompts = widget.NewEntry()
	sp.Prompts.SetPlaceHolder("prompt suite file, e.g. ../shared/prompts/stories.txt")
	sp.Prompts.SetText(s.Prompts())
	sp.PromptsCheck = newFileCheck(sp.Prompts, "prompt suite", nil, s.Win)
	sp.CalTokens = widget.NewEntry()
	sp.CalTokens.SetText("64")
	sp.Calibrate = widget.NewButton("Calibrate", sp.calibrate)
	sp.TrainPred = widget.NewButton("Train depth predictor", sp.trainPredictor)
	sp.Tune = widget.NewButton("Tune", sp.tune)
	sp.Tune.Importance = widget.HighImportance
	sp.Validate = widget.NewButton("Validate top 5", sp.validate)
	sp.Validate.Disable() // until a tune has ranked plans
	sp.Validation = widget.NewLabel("")
	sp.Validation.Wrapping = fyne.TextWrapWord
	sp.Work = widget.NewProgressBar()
	sp.WorkStatus = widget.NewLabel(workHint)
	sp.WorkStatus.Wrapping = fyne.TextWrapWord
	sp.Ranked = widget.NewSelect(nil, sp.pick)
	sp.Ranked.PlaceHolder = "(tune first)"
	s.OnChange(sp.Update)
	s.OnPair(sp.pairShown)
	sp.Loads = newConcurrencyCharts(s)
	sp.Update()
	return sp
}

// Title is the tab name.
func (sp *SpeedupScreen) Title() string { return "Speedup model" }

// Content lays the screen out.
func (sp *SpeedupScreen) Content() fyne.CanvasObject {
	form := widget.NewForm(
		widget.NewFormItem("top draft token accepted", sp.valued(sp.Alpha, func(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) })),
		widget.NewFormItem("each lower rank (x)", sp.valued(sp.Decay, func(v float64) string { return fmt.Sprintf("x %.2f", v) })),
		widget.NewFormItem("deepest plan", sp.valued(sp.MaxDepth, func(v float64) string { return fmt.Sprintf("%.0f tokens", v) })),
		widget.NewFormItem("W_max (egt pruning)", sp.valued(sp.WMax, func(v float64) string { return fmt.Sprintf("%.0f nodes", v) })),
	)
	mine := container.NewBorder(nil, nil, container.NewHBox(widget.NewLabel("your plan"), sp.Plan), nil, sp.Shape)
	tree := container.NewBorder(widget.NewLabel("Best plan's tree (root at left):"), nil, nil, nil, sp.TreeBox)
	work := container.NewVBox(
		container.NewBorder(nil, nil, widget.NewLabel("prompt suite"), nil, sp.Prompts),
		container.NewHBox(widget.NewLabel("tokens"), fitChars(sp.CalTokens, 5), sp.Calibrate, sp.Tune),
		container.NewHBox(sp.TrainPred),
		sp.PromptsCheck.Box, sp.Work, sp.WorkStatus,
		container.NewBorder(nil, nil, widget.NewLabel("tuned plans"), nil, sp.Ranked),
		container.NewHBox(sp.Validate), sp.Validation)
	// the controls scroll in a column of their own, so the charts keep
	// the window's height whatever its size
	controls := container.NewVScroll(container.NewVBox(sp.Mode, form, mine, sp.UseCal, sp.Place, sp.Labels, sp.Best, sp.Mine, sp.Timing, widget.NewSeparator(), work,
		metricHelp(metricSpeedup, metricTVerify, metricAAL, metricAcceptance)))
	sp.controls = controls
	bottom := container.NewHSplit(sp.Curve.View(sp.s.Win), container.NewAppTabs(container.NewTabItem("tree", tree), container.NewTabItem("concurrency", sp.Loads.View(sp.s.Win))))
	bottom.Offset = 0.6
	charts := container.NewVSplit(sp.Chart.View(sp.s.Win), bottom)
	charts.Offset = 0.62
	split := container.NewHSplit(newMinWidth(controls, 330), charts)
	split.Offset = 0.42
	return split
}

// Update recomputes the predictions and redraws (on the UI goroutine).
// The speedup chart draws every plan family the search ranks, each
// family's best plan at each number of draft levels, and rings the
// search's best: the plan the text names.
func (sp *SpeedupScreen) Update() {
	if sp.syncing {
		return
	}
	start := time.Now()
	sp.showAcceptance()
	o := profiles.ExploreOptions{Alpha: sp.Alpha.Value, Decay: sp.Decay.Value, Depth: int(sp.MaxDepth.Value), Calibrated: sp.UseCal.Checked,
		Inputs: sp.s.Inputs, Verify: sp.s.Verify, Draft: sp.s.Draft, Overhead: sp.s.Overhead}
	// the search again only when its question changed: the session
	// changes often (a run ends, a plan is picked) without changing it
	x, ranked := sp.explored, sp.searched
	if key := askedOf(o); x == nil || key != sp.asked {
		x = profiles.Explore(o)
		ranked = x.Ranked
		sp.explored, sp.searched, sp.asked = x, ranked, key
	}
	fams := present.Families(ranked, x.Best, profiles.Choices().Strategies)
	var names []string
	for _, f := range fams {
		names = append(names, familyName(f.Strategy))
	}
	sp.Labels.SetText(fmt.Sprintf("Predictions from %s and %s. The chart draws the best plan of each family the search ranks (%s) at each number of draft levels; the ring marks the best of all.",
		x.Acceptance, x.Curve, strings.Join(names, ", ")))
	var series []Series
	sp.chartPlans = nil
	for _, f := range fams {
		s := Series{Name: familyName(f.Strategy)}
		for _, pr := range f.Best {
			s.X = append(s.X, float64(present.Levels(pr)))
			s.Y = append(s.Y, pr.Speedup)
		}
		series = append(series, s)
		sp.chartPlans = append(sp.chartPlans, f.Best)
	}
	var mark *[2]float64
	sp.Best.SetText("")
	if b := x.Best; b != nil {
		sp.s.Best = b
		mark = &[2]float64{float64(present.Levels(*b)), b.Speedup}
		basis := ""
		if !sp.measured {
			basis = ", assumed acceptance"
		}
		sp.Best.SetText(fmt.Sprintf("Best of %d plans: %s, predicted %.2fx (AAL %.2f, %d nodes, step %v%s)",
			x.Searched, b.Plan, b.Speedup, b.AAL, b.Nodes, b.Step.Round(time.Microsecond), basis))
		sp.drawTree(x.BestShape)
	}
	sp.Mine.SetText(sp.mine())
	var cs Series
	cs.Name = "T_verify(W)"
	for _, pt := range x.Verify {
		cs.X = append(cs.X, float64(pt.W))
		cs.Y = append(cs.Y, float64(pt.Median)/1e6)
	}
	sp.Curve.SetSpec(ChartSpec{Title: "Verification latency", XLabel: "W", YLabel: "ms", LogX: true, LogY: true, Series: []Series{cs}, Width: 420, Height: 220})
	sp.Chart.SetSpec(ChartSpec{Title: "Best predicted speedup of each plan family", XLabel: "draft levels a step (drafter passes)", YLabel: "speedup over plain decoding",
		Series: series, Mark: mark, Width: 620, Height: 380})
	sp.last = time.Since(start)
	sp.Timing.SetText(fmt.Sprintf("redrawn in %v", sp.last.Round(time.Millisecond)))
}

// showAcceptance sets the acceptance sliders for the mode the screen is
// in: with the stored calibration in use, they show its measured values
// (the top candidate's acceptance at depth 1, the second's share of it)
// and are disabled, since the model reads the calibration, not them;
// otherwise they are the user's what-if values, kept across the switch.
func (sp *SpeedupScreen) showAcceptance() {
	in := sp.s.Inputs
	// nothing stored: the box is unticked and disabled (ticked, it priced
	// every plan on no acceptance); a calibration arriving ticks it
	switch has := in.Calibrated(); {
	case !has && !sp.UseCal.Disabled():
		sp.UseCal.Checked = false
		sp.UseCal.Text = useCalNone
		sp.UseCal.Disable()
		sp.UseCal.Refresh()
	case has && sp.UseCal.Disabled():
		sp.UseCal.Checked = true
		sp.UseCal.Text = useCalText
		sp.UseCal.Enable()
		sp.UseCal.Refresh()
	}
	measured := sp.UseCal.Checked && in.Calibrated()
	switch {
	case measured:
		if !sp.measured {
			sp.whatIf = [2]float64{sp.Alpha.Value, sp.Decay.Value}
		}
		top, second := in.Acc.At(0, 0), in.Acc.At(0, 1)
		decay := 0.0
		if top > 0 {
			decay = second / top
		}
		sp.syncing = true
		sp.Alpha.SetValue(top)
		sp.Decay.SetValue(decay)
		sp.syncing = false
		if l := sp.Values[sp.Alpha]; l != nil {
			l.SetText(fmt.Sprintf("%.0f%% measured", 100*top))
		}
		if l := sp.Values[sp.Decay]; l != nil {
			l.SetText(fmt.Sprintf("x %.2f measured", decay))
		}
		sp.Alpha.Disable()
		sp.Decay.Disable()
		sp.Mode.SetText(fmt.Sprintf("Acceptance measured on calibration %d: the sliders show it at depth 1 (the model reads every depth and rank). Untick the calibration below to try what-if values.", in.CalID))
	case sp.measured: // back to what-if values
		sp.syncing = true
		sp.Alpha.SetValue(sp.whatIf[0])
		sp.Decay.SetValue(sp.whatIf[1])
		sp.syncing = false
		fallthrough
	default:
		if l := sp.Values[sp.Alpha]; l != nil {
			l.SetText(fmt.Sprintf("%.0f%%", 100*sp.Alpha.Value))
		}
		if l := sp.Values[sp.Decay]; l != nil {
			l.SetText(fmt.Sprintf("x %.2f", sp.Decay.Value))
		}
		sp.Alpha.Enable()
		sp.Decay.Enable()
		if in.Calibrated() {
			sp.Mode.SetText(fmt.Sprintf("What-if: the model prices every plan with the acceptance the sliders set (calibration %d is not used).", in.CalID))
		} else {
			sp.Mode.SetText("Assumed: the model prices every plan with the acceptance the sliders set (this pair has no stored calibration); calibrate for measured figures.")
		}
	}
	sp.measured = measured
}

// asked is the what-if question Update last put to the core.
type asked struct {
	alpha, decay  float64
	depth         int
	calibrated    bool
	inputs        *profiles.Inputs
	verify, draft *profiles.Profile
	overhead      time.Duration
}

func askedOf(o profiles.ExploreOptions) asked {
	return asked{o.Alpha, o.Decay, o.Depth, o.Calibrated, o.Inputs, o.Verify, o.Draft, o.Overhead}
}

// familyName names a plan family on the chart.
func familyName(strategy string) string {
	if strategy == profiles.Choices().PlainStrategy {
		return strategy + " (plain decoding)"
	}
	return strategy
}

// LastRedraw is how long the last update took (the screen must feel live).
func (sp *SpeedupScreen) LastRedraw() time.Duration { return sp.last }

// drawTree draws a parent list as circles by depth, root at the left,
// scaled to the room the tree has (treeLayout).
func (sp *SpeedupScreen) drawTree(parents []int) {
	var objs []fyne.CanvasObject
	for range parents {
		l := canvas.NewLine(color.NRGBA{120, 120, 120, 255})
		l.StrokeWidth = 1.5
		objs = append(objs, l)
	}
	for i := -1; i < len(parents); i++ {
		c := canvas.NewCircle(color.NRGBA{44, 160, 44, 255})
		if i < 0 {
			c.FillColor = color.NRGBA{31, 119, 180, 255}
		}
		objs = append(objs, c)
	}
	sp.TreeBox.Layout.(*treeLayout).parents = slices.Clone(parents)
	sp.TreeBox.Objects = objs
	sp.TreeBox.Refresh()
}

// treeLayout places a tree's lines (one per node, from its parent) and
// circles (the root's, then one per node) by depth and row, spaced to fit
// the size it is given: the whole tree shows in a narrow window instead
// of being cut off in a scroll.
type treeLayout struct{ parents []int }

// grid is each node's depth and row, and the tree's depths and widest row.
func (t *treeLayout) grid() (depth, row []int, depths, rows int) {
	depth, row = make([]int, len(t.parents)), make([]int, len(t.parents))
	perDepth := map[int]int{}
	for i, p := range t.parents {
		if p >= 0 && p < i {
			depth[i] = depth[p] + 1
		}
		row[i] = perDepth[depth[i]]
		perDepth[depth[i]]++
		depths, rows = max(depths, depth[i]+1), max(rows, perDepth[depth[i]])
	}
	return depth, row, depths, max(rows, 1)
}

func (t *treeLayout) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	n := len(t.parents)
	if len(objs) != 2*n+1 {
		return
	}
	depth, row, depths, rows := t.grid()
	const margin = 12
	dx := min(70, (size.Width-2*margin)/float32(depths+1))
	dy := min(26, (size.Height-2*margin)/float32(rows))
	r := max(2, min(8, dx/3, dy/2.4))
	pos := func(i int) fyne.Position {
		if i < 0 {
			return fyne.NewPos(margin+r, margin+r)
		}
		return fyne.NewPos(margin+r+dx*float32(depth[i]+1), margin+r+dy*float32(row[i]))
	}
	for i, p := range t.parents {
		l := objs[i].(*canvas.Line)
		l.Position1, l.Position2 = pos(p), pos(i)
	}
	for i := -1; i < n; i++ {
		c := objs[n+1+i]
		p := pos(i)
		c.Move(fyne.NewPos(p.X-r, p.Y-r))
		c.Resize(fyne.NewSize(2*r, 2*r))
	}
}

func (t *treeLayout) MinSize([]fyne.CanvasObject) fyne.Size { return fyne.NewSize(120, 60) }

// updateMine re-prices your plan alone (the search's answer stays).
func (sp *SpeedupScreen) updateMine() {
	if sp.explored == nil {
		sp.Update()
		return
	}
	sp.Mine.SetText(sp.mine())
}

// mine scores the plan typed into "your plan": a gamma for chain, widths per
// depth for tree and egt (egt expands that many nodes per depth, two
// children each, pruned to W_max).
func (sp *SpeedupScreen) mine() string {
	p, pr, err := sp.explored.Price(sp.Plan.Selected, sp.Shape.Text, int(sp.WMax.Value))
	if err != nil {
		return "Your plan: " + err.Error()
	}
	return fmt.Sprintf("Your plan: %s, predicted %.2fx (AAL %.2f, %d nodes)", p, pr.Speedup, pr.AAL, pr.Nodes)
}

// work runs a core workflow off the UI goroutine with the buttons
// disabled, reporting progress; done runs on the UI goroutine. With
// reload, the session's inputs are read again from the store afterwards
// (the workflow stored new ones). A tune hands back its own, re-checked,
// and a validation stores only runs: a reload after either had put the
// stored curves back in place of the ones the tune re-checked.
func (sp *SpeedupScreen) work(what string, reload bool, fn func(ctx context.Context, b *profiles.Bench, ps profiles.PairSpec, progress profiles.Progress) (string, error), done func()) {
	ps := sp.s.PairSpec()
	if ps.Target == "" || ps.Sources() == 0 {
		sp.s.ShowError(fmt.Errorf("%s needs a target and a draft source: choose them on the Models screen", what))
		return
	}
	if sp.busy {
		return
	}
	pair := sp.s.pairNow()
	sp.busy, sp.doing = true, what
	for _, btn := range []*widget.Button{sp.Calibrate, sp.TrainPred, sp.Tune, sp.Validate} {
		btn.Disable()
	}
	sp.WorkStatus.SetText(what + " ...")
	sp.Work.SetValue(0)
	var msg string
	_, err := sp.s.startJob(what, true, func(ctx context.Context, job *profiles.Job) (any, error) {
		b, err := sp.s.Bench(ctx)
		if err == nil {
			msg, err = fn(ctx, b, ps, func(e profiles.Event) {
				frac := -1.0
				if e.Total > 0 {
					frac = float64(e.Done) / float64(e.Total)
				}
				job.Progress(frac, fmt.Sprintf("%s %d of %d %s", e.Stage, e.Done, e.Total, e.Detail))
				sp.s.UI(func() {
					if !sp.busy || !sp.s.samePair(pair) {
						return // a late event after the end, or of the pair chosen before
					}
					if e.Total > 0 {
						sp.Work.SetValue(float64(e.Done) / float64(e.Total))
					}
					sp.WorkStatus.SetText(fmt.Sprintf("%s: %s %d of %d %s", what, e.Stage, e.Done, e.Total, e.Detail))
				})
			})
		}
		if err == nil && reload {
			err = sp.s.LoadInputs(ctx, pair)
		}
		return msg, err
	}, func(v profiles.JobView) {
		err := v.Err
		{
			defer func() { sp.busy, sp.doing = false, ""; sp.s.Busy() }() // last: tests and users read it as "done"
			for _, btn := range []*widget.Button{sp.Calibrate, sp.TrainPred, sp.Tune} {
				btn.Enable()
			}
			sp.Validate.Disable()
			defer func() { // after done, which may have ranked the first plans
				if len(sp.ranked) > 0 {
					sp.Validate.Enable()
				}
			}()
			if !sp.s.samePair(pair) { // its results belong to the pair chosen before
				sp.pendingChoice = nil
				state := "finished"
				if err != nil {
					state = "failed"
				}
				sp.WorkStatus.SetText(fmt.Sprintf("%s %s for %s, the pair chosen before; what it stored shows when that pair is chosen again.", what, state, pairName(ps)))
				return
			}
			if v.State == profiles.JobCancelled {
				sp.WorkStatus.SetText(what + " cancelled.")
				return
			}
			if err != nil {
				sp.WorkStatus.SetText(what + " failed: " + err.Error())
				sp.s.ShowError(err)
				return
			}
			sp.Work.SetValue(1)
			if done != nil {
				done()
			}
			sp.WorkStatus.SetText(msg)
			if p := sp.pendingChoice; p != nil { // after the status: choose reports on it
				sp.pendingChoice = nil
				sp.choose(*p, msg)
			}
		}
	})
	if err != nil { // refused: another heavy job runs (said in a dialog and on the job bar)
		sp.busy, sp.doing = false, ""
		for _, btn := range []*widget.Button{sp.Calibrate, sp.TrainPred, sp.Tune} {
			btn.Enable()
		}
		if len(sp.ranked) > 0 {
			sp.Validate.Enable()
		}
		sp.WorkStatus.SetText(what + " not started: " + err.Error())
	}
}

// suite reads the prompt suite and the tokens per prompt.
func (sp *SpeedupScreen) suite() (string, []string, int, error) {
	path := strings.TrimSpace(sp.Prompts.Text)
	n, err := strconv.Atoi(strings.TrimSpace(sp.CalTokens.Text))
	if err != nil || n < 2 {
		return "", nil, 0, fmt.Errorf("tokens %q must be a number above 1", sp.CalTokens.Text)
	}
	if path == "" {
		return "", nil, 0, fmt.Errorf("give a prompt suite file")
	}
	texts, err := profiles.ReadPrompts(path)
	if err == nil {
		sp.s.SetPrompts(path)
	}
	return path, texts, n, err
}

func (sp *SpeedupScreen) calibrate() {
	path, texts, n, err := sp.suite()
	if err != nil {
		sp.s.ShowError(err)
		return
	}
	sp.work(jobCalibrate, true, func(ctx context.Context, b *profiles.Bench, ps profiles.PairSpec, pr profiles.Progress) (string, error) {
		c, err := b.Calibrate(ctx, ps, texts, path, n, profiles.SampleParams{}, pr)
		if err != nil {
			return "", err
		}
		msg := fmt.Sprintf("Calibration %d stored: %d prompts, %d steps, top-candidate acceptance %.0f%% at depth 1.", c.ID, c.Prompts, c.Acc.Steps, 100*c.Acc.At(0, 0))
		if c.Acc.Window != nil {
			msg += " Between prompts, " + c.Acc.Window.String() + "."
		}
		return msg, nil
	}, nil)
}

func (sp *SpeedupScreen) trainPredictor() {
	_, texts, n, err := sp.suite()
	if err != nil {
		sp.s.ShowError(err)
		return
	}
	sp.work(jobPredictor, true, func(ctx context.Context, b *profiles.Bench, ps profiles.PairSpec, pr profiles.Progress) (string, error) {
		r, err := b.TrainPredictor(ctx, ps, profiles.PredictorOptions{Prompts: texts, Tokens: n, Corpus: true}, pr)
		if err != nil {
			return "", err
		}
		return present.PredictorSummary(r), nil
	}, nil)
}

// tune ranks every plan in the core with the pair's stored calibration (or
// the sliders' assumed values when there is none) and lists them.
func (sp *SpeedupScreen) tune() {
	alpha := 0.0
	if sp.s.Acc == nil || !sp.UseCal.Checked {
		alpha = sp.Alpha.Value
	}
	var res *profiles.TuneResult
	sp.work(jobTune, false, func(ctx context.Context, b *profiles.Bench, ps profiles.PairSpec, pr profiles.Progress) (string, error) {
		t, err := b.Tune(ctx, ps, profiles.TuneOptions{Alpha: alpha, Place: sp.Place.Checked}, pr)
		if err != nil {
			return "", err
		}
		res = t
		best := t.Best()
		msg := fmt.Sprintf("Tuned: %d plans ranked (acceptance %s); best %s, predicted %.2fx, stored as plan %d. Pick a plan, then Run it.",
			len(t.Ranked), t.Inputs.Describe(), best.Plan, best.Speedup, t.PlanID)
		if rc := t.Inputs.Recheck.Brief(); rc != "" {
			msg += " " + rc
		}
		return msg, nil
	}, func() {
		sp.stored = res.Best().Plan.String() // Tune stored it
		// from now on the chart and its best plan read the tune's inputs,
		// whose costs the tune re-checked against the machine of this
		// minute (so they are not read back from the store after it): read
		// from the stored curves, the screen's best plan had been predicted
		// at 2.50x beside the tune's 2.30x for the same plan
		sp.s.SetInputs(res.Inputs)
		sp.SetRanked(res.Ranked)
		sp.Loads.Show(res.Loads)
	})
}

// validate measures the tune's five best distinct plans (plans doing the
// same work under other names count once) against plain decoding,
// interleaved prompt by prompt, as `arborist tune --validate --top 5`
// does, shows predicted against measured and picks the measured best.
func (sp *SpeedupScreen) validate() {
	_, texts, n, err := sp.suite()
	if err != nil {
		sp.s.ShowError(err)
		return
	}
	// from every tuned plan, as tune --validate --top 5 does: the 25
	// listed can all be one plan under other names (on the demo pair only
	// one distinct plan was validated)
	plans, err := profiles.ValidationPlans(sp.candidates, 5)
	switch {
	case errors.Is(err, profiles.ErrPlacedValidation):
		sp.s.ShowError(fmt.Errorf("%w, and these plans were ranked across devices: choose the device and draft device of the plan you want on the Models screen, then tune without placing and validate", err))
		return
	case errors.Is(err, profiles.ErrNotTuned):
		sp.s.ShowError(fmt.Errorf("%w: there are no ranked plans to validate", err))
		return
	}
	var v *profiles.Validation
	sp.work(jobValidate, false, func(ctx context.Context, b *profiles.Bench, ps profiles.PairSpec, pr profiles.Progress) (string, error) {
		rounds := profiles.Choices().Rounds
		total := rounds * len(texts) * (len(plans) + 1)
		done := 0
		var err error
		v, err = b.Validate(ctx, ps, profiles.ValidateOptions{Plans: plans, MaxTokens: n, Prompts: texts, Rounds: rounds,
			OnRun: func(round, prompt, plan int) {
				done++
				pr(profiles.Event{Stage: "run", Done: done, Total: total, Detail: fmt.Sprintf("round %d, prompt %d", round+1, prompt+1)})
			}})
		if err != nil {
			return "", err
		}
		best := v.Plans[v.Best]
		noun := "plans"
		if len(v.Plans) == 1 {
			noun = "plan"
		}
		return fmt.Sprintf("Validated %d %s against plain decoding (%.1f tokens/s): the measured best is %s at %.2fx%s, predicted %.2fx; the predicted best reached %.0f%% of it.",
			len(v.Plans), noun, v.Base.TPS(), best.Label, best.Measured, spread(best.Rounds), best.Predicted, 100*v.Plans[0].Measured/max(best.Measured, 1e-9)), nil
	}, func() {
		sp.Validation.SetText(describeValidation(v))
		sp.keepValidation(v)
		best := v.Plans[v.Best]
		for _, p := range plans {
			if p.Plan.String() == best.Plan.String() {
				sp.pendingChoice = &p
			}
		}
	})
}

// describeValidation lists each validated plan, predicted against measured.
func describeValidation(v *profiles.Validation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "plain decoding: %.1f tokens/s\n", v.Base.TPS())
	for i, p := range v.Plans {
		mark := ""
		if p.Best {
			mark = "  <- measured best"
		}
		fmt.Fprintf(&b, "%d. %s: predicted %.2fx, measured %.2fx%s (%.1f tokens/s)%s\n", i+1, p.Plan, p.Predicted, p.Measured, spread(p.Rounds), p.Totals.TPS(), mark)
		if s := present.Split(p.Split); s != "" {
			fmt.Fprintf(&b, "    predicted against measured: %s\n", s)
		}
	}
	return strings.TrimSpace(b.String())
}

// spread says how a median speedup moved over its rounds: "median of 3
// rounds, range 1.95-2.30x" ("" for a single round).
func spread(rounds []float64) string {
	if len(rounds) < 2 {
		return ""
	}
	return fmt.Sprintf(" (median of %d rounds, range %.2f-%.2fx)", len(rounds), slices.Min(rounds), slices.Max(rounds))
}

// SetRanked lists a tune's plans and picks the best.
func (sp *SpeedupScreen) SetRanked(preds []profiles.Prediction) {
	sp.list(preds)
	if len(sp.ranked) > 0 {
		sp.Ranked.SetSelectedIndex(0)
	}
}

// list shows the plans ranked (the best 25) and enables their validation.
func (sp *SpeedupScreen) list(preds []profiles.Prediction) {
	listed := profiles.Twinless(preds) // each plan once, under its first name
	sp.ranked, sp.candidates = listed[:min(len(listed), 25)], preds
	var opts []string
	for i, p := range sp.ranked {
		o := fmt.Sprintf("%d. %s: %.2fx (AAL %.2f, %d nodes)", i+1, p.Plan, p.Speedup, p.AAL, p.Nodes)
		if where := p.Where(); where != "" {
			o += ", " + where
		}
		opts = append(opts, o)
	}
	sp.Ranked.Options = opts
	if len(opts) > 0 && !sp.busy {
		sp.Validate.Enable()
	}
	sp.Ranked.Refresh()
}

// workHint is the work status before anything is done for a pair.
const workHint = "Calibrate the pair on a prompt suite, then Tune: the ranked plans appear below; the chosen one runs on the Run screen."

// pairShown clears the previous pair's results (its ranking, chosen plan,
// validation, work status and the curve's zoom) and shows the new pair's
// stored ones: its newest plan, picked again without storing it again, in
// a tune's ranking scored again on the stored curves and calibration, and
// the last validation while its runs are stored.
func (sp *SpeedupScreen) pairShown(st *profiles.PairState, err error) {
	if st == nil {
		if err != nil {
			return
		}
		sp.ranked, sp.candidates, sp.pendingChoice, sp.stored = nil, nil, nil, ""
		sp.Ranked.Options = nil
		sp.Ranked.ClearSelected()
		sp.Ranked.Refresh()
		sp.Validate.Disable()
		sp.Validation.SetText("")
		sp.Work.SetValue(0)
		sp.WorkStatus.SetText(workHint)
		sp.Curve.ResetZoom() // the session's Changed that follows redraws the model
		return
	}
	if st.PlanID == 0 || sp.busy || len(sp.ranked) > 0 || sp.s.Tuned != nil {
		return // nothing stored, or work since the pair was chosen shows its own
	}
	ranked, at := profiles.Twinless(st.Ranked), -1
	for i, p := range ranked[:min(len(ranked), 25)] {
		if samePlan(p.Plan, st.Plan.Plan) {
			at = i
			break
		}
	}
	if at < 0 { // picked from the chart, or beyond the best 25
		ranked, at = profiles.Twinless(append([]profiles.Prediction{st.Plan}, st.Ranked...)), 0
	}
	sp.stored = st.Plan.Plan.String() // the database holds it: picking it stores nothing
	sp.list(ranked)
	sp.Ranked.SetSelectedIndex(at)
	msg := fmt.Sprintf("Stored plan %d, the pair's newest (Run and Export use it): %s.", st.PlanID, st.Plan.Plan)
	if len(st.Ranked) > 0 {
		msg += " The list is a tune's ranking scored again on the stored curves and calibration; Tune again to re-check this machine."
	}
	sp.WorkStatus.SetText(msg)
	if text := sp.keptValidation(st); text != "" && sp.Validation.Text == "" {
		sp.Validation.SetText(text)
	}
}

// samePlan says whether two plans are the same in every field their
// strategy reads.
func samePlan(a, b profiles.Plan) bool {
	ja, _ := json.Marshal(a.Trim())
	jb, _ := json.Marshal(b.Trim())
	return string(ja) == string(jb)
}

// pairName names a pair in messages.
func pairName(ps profiles.PairSpec) string {
	name := filepath.Base(ps.Target)
	if src := ps.SourceName(); src != "" {
		name += " with " + src
	}
	return name
}

// keptValidation is what the GUI keeps of a validation across restarts
// (the core stores its runs, not the validation): the text shown, and the
// runs it stored, without which it is not shown again.
type keptValidation struct {
	Text string  `json:"text"`
	Runs []int64 `json:"runs"`
}

// prefValidation prefixes the preference keeping a pair's last validation.
const prefValidation = "validation."

// pairKey names the chosen pair in the database, for preferences.
func (s *Session) pairKey() string {
	ps := s.PairSpec()
	h := fnv.New64a()
	for _, f := range []string{s.DBPath, ps.Target, ps.SourceName(), ps.Backend, ps.DraftBackend} {
		h.Write([]byte(f))
		h.Write([]byte{0})
	}
	return fmt.Sprintf("%016x", h.Sum64())
}

// keepValidation remembers the validation shown, for the pair.
func (sp *SpeedupScreen) keepValidation(v *profiles.Validation) {
	k := keptValidation{Text: sp.Validation.Text}
	if v.BaseRunID > 0 {
		k.Runs = append(k.Runs, v.BaseRunID)
	}
	for _, p := range v.Plans {
		if p.RunID > 0 {
			k.Runs = append(k.Runs, p.RunID)
		}
	}
	if len(k.Runs) == 0 {
		return // nothing stored: nothing to show again
	}
	b, err := json.Marshal(k)
	if err == nil {
		sp.s.App.Preferences().SetString(prefValidation+sp.s.pairKey(), string(b))
	}
}

// keptValidation is the pair's last validation while all its runs are
// still stored ("" otherwise).
func (sp *SpeedupScreen) keptValidation(st *profiles.PairState) string {
	var k keptValidation
	if json.Unmarshal([]byte(sp.s.App.Preferences().String(prefValidation+sp.s.pairKey())), &k) != nil || len(k.Runs) == 0 {
		return ""
	}
	have := map[int64]bool{}
	for _, r := range st.Runs {
		have[r.ID] = true
	}
	for _, id := range k.Runs {
		if !have[id] {
			return ""
		}
	}
	return k.Text
}

// pick makes the chosen ranked plan the session's tuned plan.
func (sp *SpeedupScreen) pick(string) {
	i := sp.Ranked.SelectedIndex()
	if i < 0 || i >= len(sp.ranked) {
		return
	}
	p := sp.ranked[i]
	sp.choose(p, fmt.Sprintf("Picked plan %d of the tune: %s, predicted %.2fx.", i+1, p.Plan, p.Speedup))
}

// choosePoint picks the plan of a tapped point of the speedup chart, as
// picking it from the tuned plans does.
func (sp *SpeedupScreen) choosePoint(pt ChartPoint) {
	if pt.S >= len(sp.chartPlans) || pt.I >= len(sp.chartPlans[pt.S]) {
		return
	}
	p := sp.chartPlans[pt.S][pt.I]
	sp.choose(p, fmt.Sprintf("Picked from the chart: %s, predicted %.2fx.", p.Plan, p.Speedup))
}

// choose makes p the plan Run and Export use: the session's tuned plan at
// once, and the pair's newest stored plan (what Export renders, in the GUI
// and `arborist export`) once the core has stored it.
func (sp *SpeedupScreen) choose(p profiles.Prediction, msg string) {
	sp.s.Tuned = &p
	sp.s.Changed()
	ps := sp.s.PairSpec()
	if ps.Target == "" || ps.Sources() == 0 {
		sp.WorkStatus.SetText(msg + " Run can use it; load a pair on the Models screen to export it.")
		return
	}
	key := p.Plan.String()
	if key == sp.stored {
		sp.WorkStatus.SetText(msg + " Run and Export use it.")
		return
	}
	sp.WorkStatus.SetText(msg + " Run can use it; storing it for Export ...")
	sp.s.Write(func() {
		ctx := context.Background()
		b, err := sp.s.Bench(ctx)
		var id int64
		if err == nil {
			id, err = b.Choose(ctx, ps, p)
		}
		sp.s.UI(func() {
			if sp.s.Tuned == nil || sp.s.Tuned.Plan.String() != key {
				return // another plan was picked meanwhile
			}
			if err != nil {
				sp.WorkStatus.SetText(msg + " Run can use it; it could not be stored for Export: " + err.Error())
				return
			}
			sp.stored = key
			sp.WorkStatus.SetText(fmt.Sprintf("%s Stored as plan %d: Run and Export use it.", msg, id))
		})
	})
}

// SetBackends takes the registry's backends as checked on this machine:
// placing models on devices is offered where more than one can run.
func (sp *SpeedupScreen) SetBackends(st []profiles.BackendStatus) {
	n := 0
	for _, b := range st {
		if b.Err == "" {
			n++
		}
	}
	if n < 2 {
		sp.Place.SetText("tune also places each model on a device (one device here)")
		sp.Place.SetChecked(false)
		sp.Place.Disable()
		return
	}
	sp.Place.SetText("tune also places each model on a device")
	sp.Place.Enable()
}
