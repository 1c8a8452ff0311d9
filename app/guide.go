package app

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"arborist/profiles"
)

// StepState is where one step of the workflow stands.
type StepState int

// The states a guide step shows.
const (
	StepToDo StepState = iota
	StepRunning
	StepDone
)

func (s StepState) String() string {
	return [...]string{"to do", "running", "done"}[s]
}

// Step is a step of the workflow the guide leads through.
type Step int

// The workflow's steps, in order.
const (
	StepModels Step = iota
	StepProfile
	StepCalibrate
	StepTune
	StepRun
	StepExport
)

// stepper is a screen's part in the guide: the steps it does, and
// whether one of them is under way for the chosen pair. The guide finds a
// step's screen by asking the screens of the workbench's table, so a
// screen owns its state and the guide reads none of its fields.
type stepper interface {
	Steps() []Step
	Running(Step) bool
}

// guideStep is one step of the first-run path as its button names it.
type guideStep struct {
	step Step
	name string
}

// guideSteps lead a new user through the workflow in order.
var guideSteps = []guideStep{
	{StepModels, "Models"}, {StepProfile, "Profile"}, {StepCalibrate, "Calibrate"}, {StepTune, "Tune"}, {StepRun, "Run"}, {StepExport, "Export"},
}

// screenOf is the screen that does step, and its tab's index (the
// screens table's order); -1 when none does.
func (wb *Workbench) screenOf(step Step) (stepper, int) {
	for i, sc := range wb.screens {
		if st, ok := sc.(stepper); ok && slices.Contains(st.Steps(), step) {
			return st, i
		}
	}
	return nil, -1
}

// Guide is the strip above the screens that leads Models -> Profile ->
// Calibrate -> Tune -> Run -> Export: each step shows whether it is done
// (the database has its result for the chosen pair), running, or still to
// do, the next step to do stands out, and a click opens its screen.
type Guide struct {
	wb      *Workbench
	Buttons []*widget.Button
	Box     *fyne.Container
	steps   profiles.Steps // what the database holds of the pair
	stepsOf string         // the pair steps was read for (stepsKey)
	// reads coalesce: a change during a read asks for one more, not a pile
	mu             sync.Mutex
	reading, stale bool
	// showing serialises Show: it runs on the UI goroutine under the
	// desktop driver, but Fyne's test driver runs a background job's UI
	// updates on the job's goroutine, and two redraws of the same
	// buttons at once crashed in Fyne's icon decoding
	showing sync.Mutex
}

// newGuide builds the strip; it follows the session's changes.
func newGuide(wb *Workbench) *Guide {
	g := &Guide{wb: wb}
	var objs []fyne.CanvasObject
	for i, st := range guideSteps {
		b := widget.NewButton(st.name, func() {
			if _, tab := wb.screenOf(guideSteps[i].step); tab >= 0 {
				wb.Tabs.SelectIndex(tab)
			}
		})
		g.Buttons = append(g.Buttons, b)
		objs = append(objs, b)
	}
	g.Box = container.NewGridWithColumns(len(objs), objs...)
	wb.Session.OnChange(func() { wb.Session.Go(func(context.Context) { g.reloadSoon() }) })
	wb.Session.OnBusy(g.Show)
	g.Show()
	return g
}

// States derives each step's state: running from the screens, done from
// the database (read by Reload), to do otherwise.
func (g *Guide) States() []StepState {
	wb := g.wb
	s := wb.Session
	loaded := s.Spec.Target != "" && g.stepsOf == stepsKey(s.Spec)
	done := []bool{
		s.Spec.Target != "",
		loaded && g.steps.Profiled,
		loaded && g.steps.Calibrated,
		loaded && g.steps.PlanID > 0,
		loaded && g.steps.Runs > 0,
		loaded && g.steps.Exports > 0,
	}
	out := make([]StepState, len(guideSteps))
	for i, gs := range guideSteps {
		sc, _ := wb.screenOf(gs.step)
		switch {
		case sc != nil && sc.Running(gs.step):
			out[i] = StepRunning
		case done[i]:
			out[i] = StepDone
		}
	}
	return out
}

// Show redraws the strip from the current states (on the UI goroutine).
func (g *Guide) Show() {
	g.showing.Lock()
	defer g.showing.Unlock()
	next := true
	for i, st := range g.States() {
		b := g.Buttons[i]
		label := fmt.Sprintf("%d %s", i+1, guideSteps[i].name)
		switch st {
		case StepDone:
			b.SetIcon(theme.ConfirmIcon())
			b.Importance = widget.LowImportance
			b.SetText(label)
		case StepRunning:
			b.SetIcon(theme.ViewRefreshIcon())
			b.Importance = widget.WarningImportance // the label keeps its width: the strip never widens the window
			b.SetText(label)
		default:
			b.SetIcon(theme.RadioButtonIcon())
			b.Importance = widget.MediumImportance
			if next {
				b.Importance = widget.HighImportance // the next step to take
				next = false
			}
			b.SetText(label)
		}
		b.Refresh()
	}
}

// reloadSoon reloads, or has the reload in progress go once more.
func (g *Guide) reloadSoon() {
	g.mu.Lock()
	if g.reading {
		g.stale = true
		g.mu.Unlock()
		return
	}
	g.reading = true
	g.mu.Unlock()
	for {
		g.Reload()
		g.mu.Lock()
		if !g.stale {
			g.reading = false
			g.mu.Unlock()
			return
		}
		g.stale = false
		g.mu.Unlock()
	}
}

// Reload reads the pair's progress from the database and redraws. It
// blocks; call it off the UI goroutine.
func (g *Guide) Reload() {
	var ps profiles.PairSpec
	g.wb.Session.UIWait(func() { ps = g.wb.Session.PairSpec() })
	var steps profiles.Steps
	err := fmt.Errorf("no pair")
	if ps.Target != "" {
		if b, e := g.wb.Session.Bench(context.Background()); e == nil {
			steps, err = b.Steps(context.Background(), ps)
		}
	}
	g.wb.Session.UIWait(func() {
		if err != nil {
			g.steps, g.stepsOf = profiles.Steps{}, ""
		} else {
			g.steps, g.stepsOf = steps, stepsKey(ps)
			if stepsKey(g.wb.Session.Spec) == g.stepsOf {
				for _, f := range g.wb.Session.stepHooks {
					f(steps)
				}
			}
		}
		g.Show()
	})
}

// stepsKey names a pair as the guide's steps are read for it: a change of
// draft source or device is another pair.
func stepsKey(ps profiles.PairSpec) string {
	return ps.Target + "\x00" + ps.SourceName() + "\x00" + ps.Backend + "\x00" + ps.DraftBackend
}
