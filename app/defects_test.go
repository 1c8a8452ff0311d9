package app

import (
	"strings"
	"testing"

	"fyne.io/fyne/v2"

	"arborist/profiles"
)

// TestModelsStatusFollowsSteps: the Models screen's "stored for it ...
// Next:" follows the steps done after the pair was loaded, instead of
// staying "nothing stored yet".
func TestModelsStatusFollowsSteps(t *testing.T) {
	wb := newBench(t)
	m, s := wb.Models, wb.Session
	fyne.DoAndWait(func() { m.pairShown(&profiles.PairState{}, nil) })
	if !strings.Contains(m.Status.Text, "nothing stored yet") {
		t.Fatalf("fresh: %q", m.Status.Text)
	}
	for _, f := range s.stepHooks {
		fyne.DoAndWait(func() { f(profiles.Steps{Profiled: true, Calibrated: true}) })
	}
	if strings.Contains(m.Status.Text, "nothing stored") || !strings.Contains(m.Status.Text, "a profile of this machine, a calibration") || !strings.Contains(m.Status.Text, "Next: Tune") {
		t.Errorf("after profile and calibration: %q", m.Status.Text)
	}
	for _, f := range s.stepHooks {
		fyne.DoAndWait(func() { f(profiles.Steps{Profiled: true, Calibrated: true, PlanID: 4, Runs: 1}) })
	}
	if !strings.Contains(m.Status.Text, "plan 4, 1 run.") || !strings.Contains(m.Status.Text, "Next: Export") {
		t.Errorf("after a tune and a run: %q", m.Status.Text)
	}
}

// TestExportWithoutPlan: with no plan shown, Serve, Check, Tune and Save
// are disabled (they failed with "invalid config: EOF"); a config
// enables them.
func TestExportWithoutPlan(t *testing.T) {
	wb, _ := standinExport(t)
	e := wb.Export
	fyne.DoAndWait(func() { e.YAML.SetText("# no plan yet") })
	for _, b := range []fyne.Disableable{e.Serve, e.Check, e.Tune, e.Save} {
		if !b.Disabled() {
			t.Error("a button enabled without a config")
		}
	}
	fyne.DoAndWait(func() {
		e.YAML.SetText("models:\n  target: {path: /m/t.gguf, device: cpu, threads: 2}\n  draft: {kind: model, path: /m/d.gguf, device: cpu}\nspeculation: {strategy: chain, gamma: 3}\nsampling: {temperature: 0, top_p: 1, seed: 1}\n")
	})
	for _, b := range []fyne.Disableable{e.Serve, e.Check, e.Tune, e.Save} {
		if b.Disabled() {
			t.Error("a button disabled with a config")
		}
	}
}

// TestChosenPlanMarkedInList: a plan chosen elsewhere than the list (a
// validation's measured best, the chart) is the one the list marks.
func TestChosenPlanMarkedInList(t *testing.T) {
	sp := newBench(t).Speedup
	ranked := profiles.Twinless(sp.explored.Ranked)[:5]
	fyne.DoAndWait(func() { sp.SetRanked(ranked) })
	if sp.Ranked.SelectedIndex() != 0 {
		t.Fatalf("after the tune: %d", sp.Ranked.SelectedIndex())
	}
	fyne.DoAndWait(func() { sp.choose(ranked[3], "Validated.") })
	if sp.Ranked.SelectedIndex() != 3 || sp.s.Tuned == nil || sp.s.Tuned.Plan.String() != ranked[3].Plan.String() {
		t.Errorf("chosen plan 4: list marks %d, session's plan %v", sp.Ranked.SelectedIndex(), sp.s.Tuned)
	}
}

// TestCompareAALNotMeasured: a run without a measured AAL (one in
// llama.cpp) reads "-", not "0.00"; a measured one its figure.
func TestCompareAALNotMeasured(t *testing.T) {
	for _, c := range compareCols {
		if c.name != "AAL" {
			continue
		}
		if got := c.text(profiles.Run{Status: "done"}); got != "-" {
			t.Errorf("unmeasured AAL: %q", got)
		}
		if got := c.text(profiles.Run{Status: "done", AAL: 3.5}); got != "3.50" {
			t.Errorf("AAL 3.5: %q", got)
		}
		return
	}
	t.Fatal("no AAL column")
}
