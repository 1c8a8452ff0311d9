package app

import (
	"fmt"
	"image/color"
	"slices"
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
	// Temp is the temperature Calibrate measures at, and Tune asks its
	// calibration to have been measured at (0: greedy).
	Temp      *widget.Entry
	Calibrate *widget.Button
	TrainPred *widget.Button
	Tune      *widget.Button
	// Validate runs the tune's five best distinct plans and plain decoding
	// interleaved on the prompt suite; Validation shows predicted against
	// measured, the measured best marked (and picked for Run and Export).
	Validate *widget.Button
	// Reprofile shows when a tune's re-check disagreed with the stored
	// curve beyond its spread: it opens the Profile screen and profiles
	// the machine as it is now (OnReprofile, set by the workbench).
	Reprofile   *widget.Button
	OnReprofile func()
	// Disagreement says how the re-check disagreed (shown with
	// Reprofile, kept whatever status follows, until the user acts)
	Disagreement  *widget.Label
	offered       *profiles.Inputs // the session's Rechecked they were shown for
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
	stored    string
	selecting bool // choose is marking its plan in the list: not a pick
	busy      bool
	doing     string // the work in progress ("Calibrating", "Tuning", ...)
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
	sp.Temp = widget.NewEntry()
	sp.Temp.SetText("0")
	sp.Calibrate = widget.NewButton("Calibrate", sp.calibrate)
	sp.TrainPred = widget.NewButton("Train depth predictor", sp.trainPredictor)
	sp.Tune = widget.NewButton("Tune", sp.tune)
	sp.Tune.Importance = widget.HighImportance
	sp.Validate = widget.NewButton("Validate top 5", sp.validate)
	sp.Validate.Disable() // until a tune has ranked plans
	sp.Validation = widget.NewLabel("")
	sp.Validation.Wrapping = fyne.TextWrapWord
	sp.Work = widget.NewProgressBar()
	sp.Reprofile = widget.NewButton("Profile again", func() {
		sp.Reprofile.Hide()
		sp.Disagreement.Hide()
		if sp.OnReprofile != nil {
			sp.OnReprofile()
		}
	})
	sp.Reprofile.Hide()
	sp.Disagreement = widget.NewLabel("")
	sp.Disagreement.Wrapping = fyne.TextWrapWord
	sp.Disagreement.Hide()
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
		container.NewHBox(widget.NewLabel("tokens"), fitChars(sp.CalTokens, 5), widget.NewLabel("temperature"), fitChars(sp.Temp, 4)),
		container.NewHBox(sp.Calibrate, sp.Tune),
		container.NewHBox(sp.TrainPred),
		sp.PromptsCheck.Box, sp.Work, sp.WorkStatus, sp.Disagreement, container.NewHBox(sp.Reprofile),
		container.NewBorder(nil, nil, widget.NewLabel("tuned plans"), nil, sp.Ranked),
		container.NewHBox(sp.Validate), sp.Validation)
	// the controls scroll in a column of their own, so the charts keep
	// the window's height whatever its size
	controls := container.NewVScroll(container.NewVBox(sp.Mode, form, mine, sp.UseCal, sp.Place, sp.Labels, sp.Best, sp.Mine, sp.Timing, widget.NewSeparator(), work,
		metricHelp(metricSpeedup, metricTVerify, metricAAL, metricAcceptance)))
	sp.controls = controls
	bottom := container.NewHSplit(sp.Curve.View(sp.s.Win), container.NewAppTabs(container.NewTabItem("draft tree", tree), container.NewTabItem("concurrency", sp.Loads.View(sp.s.Win))))
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
	if sp.offered != nil && sp.s.Rechecked != sp.offered {
		// the user profiled again, re-tuned, or chose another pair: the
		// disagreement is answered
		sp.offered = nil
		sp.Disagreement.Hide()
		sp.Reprofile.Hide()
	}
	start := time.Now()
	sp.showAcceptance()
	o := profiles.ExploreOptions{Alpha: sp.Alpha.Value, Decay: sp.Decay.Value, Depth: int(sp.MaxDepth.Value), Calibrated: sp.UseCal.Checked,
		Inputs: sp.inputs(), Verify: sp.s.Verify, Draft: sp.s.Draft, Overhead: sp.s.Overhead}
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
		sp.Best.SetText(fmt.Sprintf("Best of %d plans: %s, predicted %s (AAL %.2f, %d nodes, step %v%s)",
			x.Searched, b.Plan, present.Price(*b), b.AAL, b.Nodes, b.Step.Round(time.Microsecond), basis))
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

// choosePoint picks the plan of a tapped point of the speedup chart, as
// picking it from the tuned plans does.
func (sp *SpeedupScreen) choosePoint(pt ChartPoint) {
	if pt.S >= len(sp.chartPlans) || pt.I >= len(sp.chartPlans[pt.S]) {
		return
	}
	p := sp.chartPlans[pt.S][pt.I]
	sp.choose(p, fmt.Sprintf("Picked from the chart: %s, predicted %.2fx.", p.Plan, p.Speedup))
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
