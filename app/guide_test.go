package app

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"arborist/engine/model/modeltest"
	"arborist/profiles"
)

func states(wb *Workbench) []StepState {
	wb.Guide.Reload()
	return wb.Guide.States()
}

// TestGuideStates: the first-run guide shows every step to do on a fresh
// workbench (Models first, standing out), a step running while it runs,
// and done once the database holds its result; a click opens its screen.
func TestGuideStates(t *testing.T) {
	wb := newBench(t)
	g := wb.Guide
	for i, st := range states(wb) {
		if st != StepToDo {
			t.Errorf("fresh: step %s is %s", guideSteps[i].name, st)
		}
	}
	if g.Buttons[0].Importance != widget.HighImportance || g.Buttons[1].Importance == widget.HighImportance {
		t.Error("the first step to do does not stand out alone")
	}
	test.Tap(g.Buttons[4])
	if wb.Tabs.Selected().Text != wb.Run.Title() {
		t.Errorf("Run step opened tab %q", wb.Tabs.Selected().Text)
	}

	// the strip as it stands whenever work starts or ends (Busy runs on the
	// UI goroutine as a screen changes state): a step seen running there
	// was running, however quickly the work then finished
	var mu sync.Mutex
	type snapshot struct {
		states []StepState
		marked []widget.Importance
	}
	var seen []snapshot
	wb.Session.OnBusy(func() { // after the guide's own Show
		sn := snapshot{states: g.States()}
		for _, b := range g.Buttons {
			sn.marked = append(sn.marked, b.Importance)
		}
		mu.Lock()
		seen = append(seen, sn)
		mu.Unlock()
	})
	wasRunning := func(step int) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, sn := range seen {
			if sn.states[step] == StepRunning && sn.marked[step] == widget.WarningImportance {
				return true
			}
		}
		return false
	}
	dir := modeltest.ModelsDir(t)
	m := wb.Models
	m.Target.SetText(filepath.Join(dir, "stories260K.gguf"))
	m.Draft.SetText(modeltest.NoisyDraft(t))
	test.Tap(m.Load)
	waitFor(t, "loading", func() bool { return wasRunning(0) && m.s.idle() && strings.Contains(m.Status.Text, "Loaded") })
	if st := states(wb); st[0] != StepDone || st[1] != StepToDo {
		t.Fatalf("loaded: %v", st)
	}
	if g.Buttons[1].Importance != widget.HighImportance {
		t.Error("Profile, the next step, does not stand out")
	}
	p := wb.Profile
	p.MaxW.SetSelected("16")
	test.Tap(p.Start)
	waitFor(t, "the profile", func() bool { return wasRunning(1) && p.s.idle() && !p.Start.Disabled() && p.cancel == nil })
	if st := states(wb); st[1] != StepDone || st[2] != StepToDo {
		t.Errorf("profiled: %v", st)
	}
	r := wb.Run
	r.Strategy.SetSelected("ar")
	r.Tokens.SetText("8")
	test.Tap(r.Start)
	waitFor(t, "the run to start", func() bool { return wasRunning(4) })
	r.Wait()
	waitFor(t, "the run", func() bool { return wb.Session.idle() && !r.Start.Disabled() })
	if st := states(wb); st[4] != StepDone || st[3] != StepToDo || st[5] != StepToDo {
		t.Errorf("after a run: %v", st)
	}
}

// TestGuideAsksTheScreens: the guide finds each step's screen in the
// screens table (its button opens that screen's tab, whatever its index)
// and reads a step running from the screen's own state: a job of the
// chosen pair, not one of another pair.
func TestGuideAsksTheScreens(t *testing.T) {
	wb := newBench(t)
	want := map[Step]string{StepModels: wb.Models.Title(), StepProfile: wb.Profile.Title(), StepCalibrate: wb.Speedup.Title(),
		StepTune: wb.Speedup.Title(), StepRun: wb.Run.Title(), StepExport: wb.Export.Title()}
	for i, gs := range guideSteps {
		test.Tap(wb.Guide.Buttons[i])
		if got := wb.Tabs.Selected().Text; got != want[gs.step] {
			t.Errorf("step %s opened %q, want %q", gs.name, got, want[gs.step])
		}
	}
	s := wb.Session
	other := (&profiles.PairSpec{Target: "/m/other.gguf", NGram: 2}).Key()
	elsewhere, _, err := s.Jobs.Start(context.Background(), jobCalibrate, other, true)
	if err != nil {
		t.Fatal(err)
	}
	if st := wb.Guide.States(); st[StepCalibrate] != StepToDo {
		t.Errorf("another pair's calibration shows running here: %v", st)
	}
	elsewhere.Finish(nil, nil)
	job, _, err := s.Jobs.Start(context.Background(), jobCalibrate, s.Spec.Key(), true)
	if err != nil {
		t.Fatal(err)
	}
	if st := wb.Guide.States(); st[StepCalibrate] != StepRunning || st[StepTune] != StepToDo {
		t.Errorf("calibrating: %v", st)
	}
	job.Finish(nil, nil)
	if st := wb.Guide.States(); st[StepCalibrate] != StepToDo {
		t.Errorf("after the calibration: %v", st)
	}
}
