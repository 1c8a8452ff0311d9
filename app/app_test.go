package app

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"arborist/app/cli"
	"arborist/engine/hidden"
	"arborist/engine/model"
	"arborist/engine/model/modeltest"
	"arborist/engine/spec"
	"arborist/kernels/cpu"
	"arborist/profiles"
	"arborist/profiles/config"
	"arborist/profiles/costmodel"
	"arborist/profiles/latency"
	"arborist/profiles/pairs"
)

func newBench(t *testing.T) *Workbench {
	t.Helper()
	a := test.NewTempApp(t)
	a.Preferences().SetString(prefDB, filepath.Join(t.TempDir(), "gui.db"))
	return openBench(t, a, filepath.Join(t.TempDir(), "demo"))
}

// openBench opens the workbench in a new window of a, as a launch does:
// the database and the last pair come from a's preferences.
func openBench(t *testing.T, a fyne.App, demoDir string) *Workbench {
	t.Helper()
	w := a.NewWindow("Arborist")
	s := NewSession(a, w, demoDir)
	t.Cleanup(s.Close)
	wb := NewWorkbench(s)
	// the start-up work (the backends' check, the last pair) done first:
	// under Fyne's test driver its redraws run on its own goroutine, and
	// laying the window out beside them raced a label's text refresh
	waitFor(t, "the start-up work", s.idle)
	w.SetContent(wb.Root)
	w.Resize(fyne.NewSize(1100, 760))
	return wb
}

// restart closes the workbench, once its work is done, and opens it again
// over the same preferences and database, as quitting and launching do;
// it returns once the last pair's stored results are read back.
func restart(t *testing.T, wb *Workbench) *Workbench {
	t.Helper()
	waitFor(t, "the work to finish", wb.Session.idle)
	wb.Session.Close()
	wb.Session.Win.Close()
	nb := openBench(t, wb.Session.App, wb.Session.DemoDir)
	waitFor(t, "the restored pair", func() bool { return nb.Session.idle() && nb.Session.State != nil })
	return nb
}

// waitFor polls cond (read on the UI goroutine) until it holds. A
// condition on a status text that background work sets also asks for the
// session's idle(): under Fyne's test driver that work's UI updates run on
// its own goroutine, and the text can read "ready" while its label is
// still being redrawn; a test that then touched the same label crashed in
// Fyne's text refresh (slice bounds out of range) under make test's load.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitWithin(t, 90*time.Second, what, cond)
}

// waitWithin is waitFor for work that takes long on a loaded machine (it
// bounds a hang, not the work's speed).
func waitWithin(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		ok := false
		fyne.DoAndWait(func() { ok = cond() })
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDemoPair: with no models, the user builds the synthetic demo pair,
// loads it, and sees it labelled synthetic and compatible.
func TestDemoPair(t *testing.T) {
	wb := newBench(t)
	m := wb.Models
	test.Tap(m.DemoBtn)
	waitFor(t, "the demo pair", func() bool {
		return m.s.idle() && (strings.Contains(m.Status.Text, "ready") || strings.Contains(m.Status.Text, "failed"))
	})
	if !strings.Contains(m.Status.Text, "ready") {
		t.Fatal(m.Status.Text)
	}
	if !strings.HasSuffix(m.Target.Text, "demo-target.gguf") || !strings.HasSuffix(m.Draft.Text, "demo-drafter.gguf") {
		t.Fatalf("entries %q %q", m.Target.Text, m.Draft.Text)
	}
	test.Tap(m.Load)
	waitFor(t, "loading", func() bool {
		return m.s.idle() && (strings.Contains(m.Status.Text, "Loaded") || strings.Contains(m.Status.Text, "Not loaded"))
	})
	for _, want := range []string{"DEMO: Arborist's demo target", "Compatible: identical vocabularies (512 tokens)"} {
		if !strings.Contains(m.Info.Text, want) {
			t.Errorf("info lacks %q:\n%s", want, m.Info.Text)
		}
	}
	if wb.Session.Spec.Target != m.Target.Text {
		t.Error("session did not take the selection")
	}
	if got := wb.Session.App.Preferences().String(prefTarget); got != m.Target.Text {
		t.Errorf("last target not remembered: %q", got)
	}
	other := filepath.Join(t.TempDir(), "other.db")
	m.DB.SetText(other)
	m.DB.OnSubmitted(other)
	if wb.Session.DBPath != other || wb.Session.App.Preferences().String(prefDB) != other {
		t.Error("database path not switched and remembered")
	}
}

// TestIncompatiblePair: a drafter with another vocabulary is refused with
// the reason, and the session keeps its previous selection.
func TestIncompatiblePair(t *testing.T) {
	dir := modeltest.ModelsDir(t)
	wb := newBench(t)
	m := wb.Models
	m.Target.SetText(filepath.Join(dir, "stories260K.gguf"))
	m.Draft.SetText(modeltest.Shared(t, "models/llama-2-tiny-random.gguf"))
	test.Tap(m.Load)
	waitFor(t, "the check", func() bool {
		return strings.Contains(m.Status.Text, "Not loaded") || strings.Contains(m.Status.Text, "Loaded")
	})
	if !strings.Contains(m.Status.Text, "vocabulary mismatch") {
		t.Errorf("status: %s", m.Status.Text)
	}
	if wb.Session.Spec.Target != "" {
		t.Error("an incompatible pair was selected")
	}
}

// TestProfileRunCompareExport walks the workbench end to end on the real
// stories260K pair: profile (then reuse), the speedup model, two runs,
// their comparison, and the export.
func TestProfileRunCompareExport(t *testing.T) {
	dir := modeltest.ModelsDir(t)
	wb := newBench(t)
	s := wb.Session
	m := wb.Models
	m.Target.SetText(filepath.Join(dir, "stories260K.gguf"))
	m.Draft.SetText(modeltest.NoisyDraft(t))
	test.Tap(m.Load)
	waitFor(t, "loading", func() bool {
		return m.s.idle() && (strings.Contains(m.Status.Text, "Loaded") || strings.Contains(m.Status.Text, "Not loaded"))
	})
	if !strings.Contains(m.Status.Text, "Loaded") {
		t.Fatal(m.Status.Text)
	}

	p := wb.Profile
	p.MaxW.SetSelected("16")
	test.Tap(p.Start)
	// idle too: the profile's end loads the pair's inputs as work of its
	// own, which redraws the screens after Start is enabled again
	waitFor(t, "the profile", func() bool { return s.idle() && p.Start.Disabled() == false && p.Chart.Image != nil })
	if !strings.Contains(p.Status.Text, "measured now") || s.Verify == nil || len(s.Verify.Curve.Points) == 0 {
		t.Fatalf("profile status: %s", p.Status.Text)
	}
	t.Logf("profile status: %s", p.Status.Text)
	for _, want := range []string{"of the roofline", "Compute ceiling", "at W=16"} {
		if !strings.Contains(p.Status.Text, want) {
			t.Errorf("profile status lacks %q: %s", want, p.Status.Text)
		}
	}
	if p.Family.Chart.Image == nil || !strings.Contains(p.Family.Note.Text, "T_verify(W) at context 128 only") {
		t.Errorf("the curve over context: drawn %v, %q", p.Family.Chart.Image != nil, p.Family.Note.Text)
	}
	p.Chart.Image = nil
	test.Tap(p.Start)
	waitFor(t, "the second profile", func() bool { return s.idle() && p.Start.Disabled() == false && p.Chart.Image != nil })
	if !strings.Contains(p.Status.Text, "reused from the database") {
		t.Errorf("second profile: %s", p.Status.Text)
	}

	sp := wb.Speedup
	before := sp.Best.Text
	// after the profile's completion has finished redrawing this screen
	// (under the test driver its updates run on its own goroutine)
	waitFor(t, "the background work", s.idle)
	fyne.DoAndWait(func() { sp.Alpha.SetValue(0.95) })
	if sp.Best.Text == "" || sp.Chart.Image == nil || s.Best == nil {
		t.Fatal("no best plan after a change")
	}
	if sp.Best.Text == before {
		t.Log("best plan unchanged by the slider (possible, not an error)")
	}
	t.Logf("speedup screen redraw: %v", sp.LastRedraw())
	sp.Plan.SetSelected("chain")
	sp.Shape.SetText("4")
	if !strings.Contains(sp.Mine.Text, "chain gamma=4, predicted") || sp.Curve.Image == nil {
		t.Errorf("your plan: %q", sp.Mine.Text)
	}
	sp.Shape.SetText("x")
	if !strings.Contains(sp.Mine.Text, "not a list") {
		t.Errorf("bad plan text: %q", sp.Mine.Text)
	}
	if !strings.Contains(sp.Labels.Text, "measured T_verify") {
		t.Errorf("model does not use the profile: %s", sp.Labels.Text)
	}

	r := wb.Run
	for _, strat := range []string{"chain", "ar"} {
		r.Strategy.SetSelected(strat)
		r.Tokens.SetText("32")
		test.Tap(r.Start)
		time.Sleep(50 * time.Millisecond)
		r.Wait()
		waitFor(t, "the run to finish", func() bool { return s.idle() && !r.Start.Disabled() })
		if !strings.Contains(r.Stats.Text, "Stored as run") {
			t.Fatalf("%s run: %s", strat, r.Stats.Text)
		}
	}
	green := 0
	for _, seg := range r.Text.Segments {
		if ts, ok := seg.(*widget.TextSegment); ok && ts.Style.ColorName == colorAccepted {
			green++
		}
	}
	if green != 0 {
		t.Errorf("an ar run marked %d tokens as accepted drafts", green)
	}

	// a whole prompt suite in one stored run, against plain decoding
	r.Strategy.SetSelected("chain")
	r.Tokens.SetText("8")
	r.Baseline.SetChecked(true)
	r.Suite.SetText(filepath.Join(dir, "..", "prompts", "stories.txt"))
	r.Source.SetSelected(PromptSuite)
	test.Tap(r.Start)
	time.Sleep(50 * time.Millisecond)
	r.Wait()
	waitFor(t, "the suite run", func() bool { return s.idle() && !r.Start.Disabled() })
	if !strings.Contains(r.Stats.Text, "Stored as run 3") || !strings.Contains(r.Stats.Text, "48 tokens") ||
		!strings.Contains(r.Stats.Text, "Measured speedup") || !strings.Contains(r.Stats.Text, "identical") {
		t.Errorf("suite run: %s", r.Stats.Text)
	}
	if !regexp.MustCompile(`Measured speedup: [0-9.]+x over plain decoding, the median of 3 interleaved rounds \([0-9.]+-[0-9.]+x; medians [0-9.]+ against [0-9.]+ tokens/s\)`).MatchString(r.Stats.Text) {
		t.Errorf("the suite run does not show its rounds and plain decoding's speed beside the plan's: %s", r.Stats.Text)
	}

	c := wb.Compare
	c.Refresh()
	if len(c.Runs) != 3 {
		t.Fatalf("%d stored runs, want 3", len(c.Runs))
	}
	c.Toggle(c.Runs[0].ID, true)
	c.Toggle(c.Runs[1].ID, true)
	var table strings.Builder
	if err := c.WriteCSV(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "chain gamma=") || !strings.Contains(table.String(), ",ar,") || c.Chart.Image == nil || c.AALChart.Image == nil {
		t.Errorf("comparison:\n%s", table.String())
	}

	// calibrate, train the depth predictor and tune in the GUI; run the
	// tuned EGT plan; the export is byte-identical to `arborist export`
	prompts := filepath.Join(dir, "..", "prompts", "stories.txt")
	sp.Prompts.SetText(prompts)
	sp.CalTokens.SetText("32")
	test.Tap(sp.Calibrate)
	waitFor(t, "the calibration", func() bool { return s.idle() && !sp.busy && sp.Calibrate.Disabled() == false && s.Acc != nil })
	if !strings.HasPrefix(sp.WorkStatus.Text, "Calibration 1 stored") || !strings.Contains(sp.WorkStatus.Text, "Between prompts, T_verify(4) read") {
		t.Fatalf("calibrate: %s", sp.WorkStatus.Text)
	}
	waitFor(t, "the stored calibration in the model", func() bool { return s.idle() && strings.Contains(sp.Labels.Text, "measured on calibration 1, ") })
	test.Tap(sp.TrainPred)
	waitWithin(t, 15*time.Minute, "the depth predictor", func() bool { return !sp.busy })
	if !strings.HasPrefix(sp.WorkStatus.Text, "Depth predictor 1 for ") || !strings.Contains(sp.WorkStatus.Text, "held-out steps, against") {
		t.Fatalf("train predictor: %s", sp.WorkStatus.Text)
	}
	test.Tap(sp.Tune)
	waitFor(t, "the tune", func() bool { return s.idle() && !sp.busy })
	if !strings.HasPrefix(sp.WorkStatus.Text, "Tuned:") || len(sp.Ranked.Options) < 10 || s.Tuned == nil ||
		!strings.Contains(sp.WorkStatus.Text, "Re-checked against this minute's machine: plain decoding") || !strings.Contains(sp.WorkStatus.Text, "moments of the calibration's") {
		t.Fatalf("tune: %s (%d plans)", sp.WorkStatus.Text, len(sp.Ranked.Options))
	}
	if sp.Validate.Disabled() {
		t.Error("Validate top 5 stays disabled after the first tune")
	}
	if sp.Loads.Speedup.Image == nil || sp.Loads.TPOT.Image == nil || len(sp.Loads.Speedup.line.Series) < 3 {
		t.Error("the tune's plans over concurrency not drawn")
	}
	// the screen now prices plans on the tune's (re-checked) costs: the
	// tuned best plan reads as the tune predicted it; the session's are
	// those too unless the re-check disagreed with the stored curve
	// (then the other screens keep the stored curve)
	if best, in := sp.ranked[0], sp.inputs(); in == nil || in.Recheck == nil {
		t.Errorf("the screen kept inputs without the tune's re-check (inputs set: %v)", in != nil)
	} else if pr, err := costmodel.Predict(best.Plan, in.Acc, in.Costs); err != nil || math.Abs(pr.Speedup-best.Speedup) > 1e-9 {
		t.Errorf("the screen's costs price the tuned best at %.4fx (%v), the tune at %.4fx", pr.Speedup, err, best.Speedup)
	} else if _, disagreed := in.Disagreement(); disagreed == (s.Inputs == in) {
		t.Errorf("the re-check disagreed %v, the session took its inputs %v", disagreed, s.Inputs == in)
	}
	egt := -1
	for i, p := range sp.ranked {
		if p.Plan.Strategy == "egt" {
			egt = i
			break
		}
	}
	if egt < 0 {
		t.Fatalf("no egt plan among %q", sp.Ranked.Options)
	}
	sp.Ranked.SetSelectedIndex(egt)
	want := sp.ranked[egt]
	// the pick is stored as the pair's newest plan, which Export renders
	waitFor(t, "the picked plan stored", func() bool { return s.idle() && sp.stored == want.Plan.String() })
	if s.Tuned == nil || s.Tuned.Plan.String() != want.Plan.String() || r.UseTuned.Disabled() {
		t.Fatalf("picked plan not the session's tuned plan: %+v", s.Tuned)
	}
	test.Tap(r.UseTuned)
	got, err := r.Plan()
	if err != nil || got.String() != want.Plan.String() {
		t.Fatalf("run editor holds %v (%v), want %v", got, err, want.Plan)
	}
	r.Source.SetSelected(PromptOne)
	r.Tokens.SetText("24")
	r.Baseline.SetChecked(true)
	test.Tap(r.Start)
	time.Sleep(50 * time.Millisecond)
	r.Wait()
	waitFor(t, "the tuned run", func() bool { return s.idle() && !r.Start.Disabled() })
	if !strings.Contains(r.Stats.Text, "Stored as run 4") || !strings.Contains(r.Stats.Text, "Predicted speedup") || !strings.Contains(r.Stats.Text, "identical") {
		t.Fatalf("tuned egt run: %s", r.Stats.Text)
	}
	b, err := s.Bench(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	run4, err := b.StoredRun(context.Background(), 4)
	if err != nil || run4.Strategy != "egt" || run4.PredictedSpeedup <= 0 || run4.MeasuredSpeedup <= 0 {
		t.Fatalf("stored tuned run: %+v %v", run4, err)
	}
	ranPlan(t, run4, want.Plan) // the tuned plan ran, field for field
	// the trained depth predictor's plan (picked as the tuned plan, whether
	// or not the search offers it): it runs with that predictor
	in, err := b.Inputs(context.Background(), s.PairSpec(), profiles.InputsOptions{}, nil)
	if err != nil || len(in.Acc.Learned) != 1 {
		t.Fatalf("the calibration's depth predictors: %v", err)
	}
	pred := costmodel.Prediction{Plan: in.Acc.Learned[0].Plan, Speedup: 1.5}
	if pred.Plan.DepthPolicy != "predictor" || pred.Plan.PredictorID != 1 {
		t.Fatalf("depth predictor 1 runs as %s", pred.Plan)
	}
	fyne.DoAndWait(func() { s.Tuned = &pred; s.Changed() })
	test.Tap(r.UseTuned)
	if got, err := r.Plan(); err != nil || !reflect.DeepEqual(got, pred.Plan) {
		t.Fatalf("run editor holds %+v (%v), want %+v", got, err, pred.Plan)
	}
	r.Baseline.SetChecked(false)
	test.Tap(r.Start)
	time.Sleep(50 * time.Millisecond)
	r.Wait()
	waitFor(t, "the predictor run", func() bool { return s.idle() && !r.Start.Disabled() })
	if !strings.Contains(r.Stats.Text, "Stored as run 5") {
		t.Fatalf("predictor run: %s", r.Stats.Text)
	}
	run5, err := b.StoredRun(context.Background(), 5)
	if err != nil {
		t.Fatal(err)
	}
	ranPlan(t, run5, pred.Plan)

	e := wb.Export
	if err := e.Reload(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.YAML.Text, "speculation:") || !strings.Contains(e.Equivalents.Text, "llama-server") {
		t.Fatalf("export:\n%s\n%s", e.YAML.Text, e.Equivalents.Text)
	}
	for _, want := range []string{"Computed from: plan ", ", tuned ", "T_verify from the stored latency profile of this machine (", "acceptance measured on calibration 1, "} {
		if !strings.Contains(e.Provenance.Text, want) {
			t.Errorf("provenance lacks %q: %s", want, e.Provenance.Text)
		}
	}
	if strings.Contains(e.Provenance.Text, "ASSUMED") || e.Provenance.Importance == widget.WarningImportance {
		t.Errorf("a measured plan warned: %s", e.Provenance.Text)
	}
	out := filepath.Join(t.TempDir(), "config.yaml")
	if err := e.SaveTo(out); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(out); err != nil {
		t.Errorf("saved config does not load: %v", err)
	}
	for i, st := range states(wb) { // the whole first-run path is done
		if st != StepDone {
			t.Errorf("after the export, guide step %s is %s", guideSteps[i].name, st)
		}
	}
	cliOut := filepath.Join(t.TempDir(), "cli.yaml")
	var so, se strings.Builder
	if code := cli.Main(context.Background(), cli.Env{Stdout: &so, Stderr: &se}, []string{"export", "--target", s.Spec.Target, "--draft", s.Spec.Draft,
		"--db", s.DBPath, "-o", cliOut}); code != 0 {
		t.Fatalf("arborist export: %d %s", code, se.String())
	}
	gui, _ := os.ReadFile(out)
	cb, _ := os.ReadFile(cliOut)
	if string(gui) != string(cb) || len(gui) == 0 {
		t.Errorf("GUI and CLI exports differ:\n--- GUI\n%s\n--- CLI\n%s", gui, cb)
	}
	e.YAML.SetText("speculation: {strategy: warp}")
	if err := e.SaveTo(out); err == nil {
		t.Error("an invalid edited config was saved")
	}

	// quit and launch again: the last pair comes back with every result
	wb = restart(t, wb)
	s, sp, r, e = wb.Session, wb.Speedup, wb.Run, wb.Export
	p = wb.Profile
	if s.Spec.Target != m.Target.Text || s.Spec.Draft == "" {
		t.Fatalf("restored pair %+v", s.Spec)
	}
	if p.Chart.Image == nil || !strings.Contains(p.Status.Text, "reused from the database") {
		t.Errorf("restored profile: image %v, status %s", p.Chart.Image != nil, p.Status.Text)
	}
	if !strings.Contains(sp.Labels.Text, "measured on calibration 1, ") {
		t.Errorf("restored speedup model: %s", sp.Labels.Text)
	}
	if len(sp.ranked) == 0 || sp.Validate.Disabled() || s.Tuned == nil || !samePlan(s.Tuned.Plan, want.Plan) || r.UseTuned.Disabled() {
		t.Errorf("restored plans: %d ranked, validate disabled %v, tuned %v (want %s), use disabled %v",
			len(sp.ranked), sp.Validate.Disabled(), s.Tuned, want.Plan, r.UseTuned.Disabled())
	}
	if sp.stored != want.Plan.String() || !strings.Contains(sp.WorkStatus.Text, "Stored plan") {
		t.Errorf("the restored plan was stored again (%q) or not said: %s", sp.stored, sp.WorkStatus.Text)
	}
	if !strings.Contains(r.Stats.Text, "run 5 (done") || r.Timeline.Image == nil {
		t.Errorf("restored run: %s", r.Stats.Text)
	}
	waitFor(t, "the export", func() bool { return wb.Session.idle() && strings.Contains(e.YAML.Text, "speculation:") })
	if !strings.Contains(e.Status.Text, "exported 2 times before") { // the GUI's and the CLI's
		t.Errorf("export status %q", e.Status.Text)
	}
	for i, st := range states(wb) { // the guide ticks what the screens show
		if st != StepDone {
			t.Errorf("after the restart, guide step %s is %s", guideSteps[i].name, st)
		}
	}

	// another pair: nothing of this one stays on screen, zoom included
	fyne.DoAndWait(func() {
		p.Chart.SetZoom(2, 10)
		sp.Curve.SetZoom(2, 10)
		r.Timeline.SetZoom(2, 10)
		e.Status.SetText("saved /somewhere/config.yaml")
	})
	m = wb.Models
	m.Target.SetText(modeltest.Shared(t, "models/llama-2-tiny-random.gguf"))
	m.Source.SetSelected(SourceNGram)
	m.Fields["ngram"].SetText("2")
	test.Tap(m.Load)
	waitFor(t, "the other pair", func() bool { return s.idle() && s.State != nil && s.Spec.NGram == 2 })
	if !strings.Contains(m.Status.Text, "nothing stored yet") {
		t.Errorf("models status: %s", m.Status.Text)
	}
	if p.Chart.Image != nil || p.Chart.zoom != nil || p.Status.Text != profileHint {
		t.Errorf("the previous pair's profile stays: image %v, zoom %v, %s", p.Chart.Image != nil, p.Chart.zoom, p.Status.Text)
	}
	if len(sp.ranked) != 0 || len(sp.Ranked.Options) != 0 || sp.Validation.Text != "" || !sp.Validate.Disabled() || sp.WorkStatus.Text != workHint || sp.Curve.zoom != nil {
		t.Errorf("the previous pair's tune stays: %d ranked, validation %q, status %q, zoom %v", len(sp.ranked), sp.Validation.Text, sp.WorkStatus.Text, sp.Curve.zoom)
	}
	if strings.Contains(sp.Labels.Text, "calibration 1") {
		t.Errorf("the previous pair's calibration stays: %s", sp.Labels.Text)
	}
	if s.Tuned != nil || !r.UseTuned.Disabled() || r.Stats.Text != runHint || len(r.stream) != 0 || r.Timeline.Image != nil || r.Timeline.zoom != nil || r.PlanNote.Text != "" {
		t.Errorf("the previous pair's run stays: tuned %v, stats %q, %d pieces, timeline %v", s.Tuned, r.Stats.Text, len(r.stream), r.Timeline.Image != nil)
	}
	waitFor(t, "the export of the other pair", func() bool { return wb.Session.idle() && !strings.Contains(e.YAML.Text, "speculation:") })
	if e.Status.Text != "" {
		t.Errorf("the previous pair's export stays: %q\n%s", e.Status.Text, e.YAML.Text)
	}
	if got := states(wb); got[0] != StepDone || slices.ContainsFunc(got[1:], func(st StepState) bool { return st != StepToDo }) {
		t.Errorf("guide for the new pair: every step after Models to do; got %v", got)
	}
}

// ranPlan checks that a stored run ran plan: its engine settings are the
// plan's configuration in every field the plan sets (a predictor policy
// is filled in by the run, from the stored predictor).
func ranPlan(t *testing.T, run *profiles.Run, plan profiles.Plan) {
	t.Helper()
	cfg, err := plan.Config()
	if err != nil {
		t.Fatal(err)
	}
	asMap := func(v any) map[string]any {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]any{}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	want, got := asMap(cfg), asMap(run.Settings)
	for k, v := range want {
		switch k {
		case "Sample", "MaxTokens", "StopAtEOS", "RecordHidden", "Ctx": // the run's, not the plan's
			continue
		case "Depth":
			if plan.DepthPolicy == "predictor" {
				if got[k] == nil {
					t.Errorf("run %d ran %s without its depth predictor", run.ID, plan)
				}
				continue
			}
		}
		if !reflect.DeepEqual(got[k], v) {
			t.Errorf("run %d: %s is %v, the plan %s has %v", run.ID, k, got[k], plan, v)
		}
	}
}

// BenchmarkSpeedupRedraw measures one change of the speedup model screen
// (predictions, plan search, chart and tree): it must feel live.
func BenchmarkSpeedupRedraw(b *testing.B) {
	a := test.NewTempApp(b)
	w := a.NewWindow("x")
	s := NewSession(a, w, b.TempDir())
	sp := NewSpeedupScreen(s)
	w.SetContent(sp.Content())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		fyne.DoAndWait(func() { sp.Alpha.SetValue(0.5 + 0.4*float64(i%2)) })
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/redraw")
}

// TestHiddenDrafterSource: a hidden-state drafter file is chosen as the
// draft source, checked against the target, and drives a run.
func TestHiddenDrafterSource(t *testing.T) {
	dir := modeltest.ModelsDir(t)
	target := filepath.Join(dir, "stories260K.gguf")
	be := cpu.New(1)
	defer be.Close()
	tm, err := model.Load(target, be)
	if err != nil {
		t.Fatal(err)
	}
	d, err := hidden.New(tm, 16, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := pairs.DescribeModel(tm)
	tm.Close()
	if err != nil {
		t.Fatal(err)
	}
	d.Fingerprint = desc.Fingerprint
	file := filepath.Join(t.TempDir(), "hidden.gguf")
	if err := d.Save(file, nil); err != nil {
		t.Fatal(err)
	}
	wb := newBench(t)
	m := wb.Models
	m.Target.SetText(target)
	m.Source.SetSelected(SourceHidden)
	m.Draft.SetText(file)
	test.Tap(m.Load)
	waitFor(t, "loading", func() bool {
		return m.s.idle() && (strings.Contains(m.Status.Text, "Loaded") || strings.Contains(m.Status.Text, "Not loaded"))
	})
	if !strings.Contains(m.Status.Text, "Loaded") || !strings.Contains(m.Info.Text, "hidden-state drafter") {
		t.Fatalf("status %q\ninfo %s", m.Status.Text, m.Info.Text)
	}
	if wb.Session.Spec.DraftHidden != file || wb.Session.Spec.Draft != "" {
		t.Fatalf("session spec: %+v", wb.Session.Spec)
	}
	r := wb.Run
	r.Strategy.SetSelected("egt")
	r.Tokens.SetText("24")
	test.Tap(r.Start)
	time.Sleep(50 * time.Millisecond)
	r.Wait()
	waitFor(t, "the run to finish", func() bool { return m.s.idle() && !r.Start.Disabled() })
	if !strings.Contains(r.Stats.Text, "Stored as run") || !strings.Contains(r.Stats.Text, "Hidden drafter:") {
		t.Fatalf("run: %s", r.Stats.Text)
	}
	// a drafter for another target is refused with the reason
	m.Target.SetText(modeltest.Shared(t, "models/llama-2-tiny-random.gguf"))
	test.Tap(m.Load)
	waitFor(t, "the check", func() bool {
		return wb.Session.idle() && !m.Load.Disabled() && strings.Contains(m.Status.Text, "Not loaded")
	})
	if !strings.Contains(m.Status.Text, "does not fit") {
		t.Errorf("status: %s", m.Status.Text)
	}
}

// TestTrainHiddenDrafterInGUI: the Models screen trains a hidden-state
// drafter for the target, shows the per-epoch losses, and selects it.
func TestTrainHiddenDrafterInGUI(t *testing.T) {
	dir := modeltest.ModelsDir(t)
	wb := newBench(t)
	m := wb.Models
	m.Target.SetText(filepath.Join(dir, "stories260K.gguf"))
	m.TrainPrompts.SetText(filepath.Join(dir, "..", "prompts", "stories.txt"))
	m.TrainSettings.Tokens, m.TrainSettings.Samples, m.TrainSettings.Epochs, m.TrainSettings.D = 32, 1, 2, 16
	test.Tap(m.TrainBtn)
	waitFor(t, "training", func() bool { return m.s.idle() && !m.TrainBtn.Disabled() })
	if !strings.Contains(m.Status.Text, "Trained hidden drafter 1") || strings.Count(m.Info.Text, "held-out") != 2 {
		t.Fatalf("status %q\ninfo %s", m.Status.Text, m.Info.Text)
	}
	var chartH float32
	fyne.DoAndWait(func() { chartH = m.LossChart.Size().Height })
	if m.LossChart.Image == nil || !m.LossChart.Visible() || chartH < 100 {
		t.Errorf("no loss chart after training (height %v)", chartH)
	}
	if m.Source.Selected != SourceHidden || m.Draft.Text != "1" {
		t.Fatalf("the trained drafter was not selected: %q %q", m.Source.Selected, m.Draft.Text)
	}
	if len(m.Stored.Options) != 1 || !strings.HasPrefix(m.Stored.Options[0], "#1 for stories260K.gguf") {
		t.Fatalf("stored drafters: %q", m.Stored.Options)
	}
	m.Draft.SetText("")
	m.Source.SetSelected(SourceModel)
	m.Stored.SetSelected(m.Stored.Options[0])
	if m.Source.Selected != SourceHidden || m.Draft.Text != "1" {
		t.Fatalf("picking a stored drafter: %q %q", m.Source.Selected, m.Draft.Text)
	}
	test.Tap(m.Load)
	waitFor(t, "loading", func() bool {
		return m.s.idle() && (strings.Contains(m.Status.Text, "Loaded") || strings.Contains(m.Status.Text, "Not loaded"))
	})
	if !strings.Contains(m.Info.Text, "hidden-state drafter 1") {
		t.Fatalf("status %q\ninfo %s", m.Status.Text, m.Info.Text)
	}
}

// TestRunPlanEditor: the Run screen edits every field of a plan, enables
// only the editors its strategy reads, and round-trips plans.
func TestRunPlanEditor(t *testing.T) {
	r := newBench(t).Run
	r.Strategy.SetSelected("tree")
	if r.Fields["branch"].Widget().Disabled() == false || r.Fields["widths"].Widget().Disabled() || r.Fields["parents"].Widget().Disabled() {
		t.Error("tree enables the wrong editors")
	}
	r.Fields["widths"].set("2,1,1,1")
	r.Fields["parents"].set("-1,-1,0")
	p, err := r.Plan()
	if err != nil || len(p.Parents) != 3 || p.Widths != nil || p.Gamma != 0 {
		t.Fatalf("tree by parents: %+v %v", p, err)
	}
	r.Fields["parents"].set("-1,5")
	if _, err := r.Plan(); err == nil {
		t.Error("a parent list with a forward parent was accepted")
	}
	want := spec.Plan{Strategy: "egt", EGT: []int{1, 2, 3}, Branch: 3, WMax: 10, Pad: true, DepthPolicy: "threshold", DepthMin: 0.4}
	r.SetPlan(want)
	p, err = r.Plan()
	if err != nil || p.String() != want.String() || !p.Pad || p.DepthMin != 0.4 || p.Gamma != 0 {
		t.Errorf("egt round trip: %+v %v", p, err)
	}
	r.SetPlan(spec.Plan{Strategy: "duo", Gamma: 6, MaxSeqs: 5})
	if _, err := r.Plan(); err == nil || !strings.Contains(err.Error(), "max sequences") {
		t.Errorf("duo with 5 sequences: %v", err)
	}
	// a duo plan's sequences left 0 run as one: the editor says 1, not 0,
	// and the plan runs as given
	one := spec.Plan{Strategy: "duo", Gamma: 5, Tail: 2}
	r.SetPlan(one)
	if got := r.Fields["max_seqs"].value(); got != "1" {
		t.Errorf("%s shows sequences %q", one, got)
	}
	if p, err := r.Plan(); err != nil || p.String() != "duo gamma=5 sequences=1 tail=2" {
		t.Errorf("%s runs as %s (%v)", one, p, err)
	}
}

// TestRunKeepsTheGivenPlan: a plan put into the Run screen (the tuned
// plan) is the plan it runs, field for field, whatever the editors showed
// before: a plan of every family, zeros, an empty depth policy and a
// hidden predictor id included; an edit makes it the edited plan.
func TestRunKeepsTheGivenPlan(t *testing.T) {
	r := newBench(t).Run
	plans := []spec.Plan{
		{Strategy: "ar"},
		{Strategy: "chain", Gamma: 3},
		{Strategy: "tree", Widths: []int{3, 2, 1}},
		{Strategy: "tree", Parents: []int{-1, -1, 0}},
		{Strategy: "tree", Widths: []int{2, 1}, SampleChildren: true},
		{Strategy: "egt", EGT: []int{1, 2, 3}, Branch: 2, WMax: 8},
		{Strategy: "egt", EGT: []int{1, 2, 2}, Branch: 3, WMax: 6, Pad: true, AOT: true},
		{Strategy: "egt", EGT: []int{2, 2}, Branch: 2, WMax: 4, DepthPolicy: "threshold", DepthMin: 0.3},
		{Strategy: "egt", EGT: []int{1, 1, 1}, Branch: 1, WMax: 3, DepthPolicy: "predictor", PredictorID: 7},
		{Strategy: "duo", Gamma: 3},
		{Strategy: "duo", Gamma: 3, MaxSeqs: 1},
		{Strategy: "duo", Gamma: 6, MaxSeqs: 2},
		{Strategy: "sequoia", Parents: []int{-1, -1, 0, 1}},
	}
	// and the best plan of every family a search ranks
	flat := []latency.Point{{W: 1, Median: 10 * time.Millisecond}, {W: 64, Median: 14 * time.Millisecond}}
	best := map[string]bool{}
	for _, pr := range costmodel.Search(costmodel.Uniform(0.7, 0.4, 8, 3), costmodel.Costs{Verify: flat, Draft: flat[:1]}, costmodel.SearchSpace{MaxGamma: 6, MaxDepth: 4, MaxNodes: 16}) {
		if !best[pr.Plan.Strategy] {
			best[pr.Plan.Strategy] = true
			plans = append(plans, pr.Plan)
		}
	}
	for _, want := range plans {
		// what a user left in the editors before: other values everywhere
		fyne.DoAndWait(func() {
			r.Strategy.SetSelected(want.Strategy)
			for name, e := range r.Fields {
				switch e.field.Kind {
				case profiles.BoolField:
					e.set("true")
				case profiles.IntListField:
					e.set("4,4")
				case profiles.TextField:
					e.set("predictor")
				default:
					e.set("4")
				}
				_ = name
			}
			r.SetPlan(want)
		})
		got, err := r.Plan()
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%v: the Run screen holds %+v (%v), want %+v", want, got, err, want)
		}
	}
	// an edit is the edited plan; the given plan's hidden fields stay
	pred := spec.Plan{Strategy: "egt", EGT: []int{1, 1, 1}, Branch: 1, WMax: 3, DepthPolicy: "predictor", PredictorID: 7}
	fyne.DoAndWait(func() {
		r.SetPlan(pred)
		r.Fields["w_max"].set("2")
	})
	got, err := r.Plan()
	if want := (spec.Plan{Strategy: "egt", EGT: []int{1, 1, 1}, Branch: 1, WMax: 2, DepthPolicy: "predictor", PredictorID: 7}); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("edited: %+v (%v), want %+v", got, err, want)
	}
}

// TestFindModels: discovery looks in the user's usual model folders (a
// models folder, llama.cpp's cache, LM Studio's publisher/repository
// layout, the Hugging Face hub cache) and the demo folder, and lists each
// file once as an absolute path.
func TestFindModels(t *testing.T) {
	home, demo := t.TempDir(), t.TempDir()
	want := []string{
		filepath.Join(home, "models", "a.gguf"),
		filepath.Join(home, ".cache", "llama.cpp", "b.gguf"),
		filepath.Join(home, ".cache", "lm-studio", "models", "pub", "repo", "c.gguf"),
		filepath.Join(home, ".cache", "huggingface", "hub", "models--org--m", "snapshots", "rev", "d.gguf"),
		filepath.Join(demo, "e.gguf"),
	}
	for _, p := range append(want, filepath.Join(home, "models", "notes.txt")) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]bool{}
	for _, p := range findModels(home, demo) {
		if !filepath.IsAbs(p) {
			t.Errorf("relative path %q", p)
		}
		if got[p] {
			t.Errorf("%q listed twice", p)
		}
		got[p] = true
	}
	for _, w := range want {
		if !got[w] {
			t.Errorf("%s not found among %v", w, got)
		}
	}
	if got[filepath.Join(home, "models", "notes.txt")] {
		t.Error("a non-GGUF file was listed")
	}
}

// TestCloseCancelsAndWaitsForWork: Close cancels the session's background
// work, waits for it to return and for pending writes to finish, before it
// releases the database; after SetDBPath the session runs work again.
func TestCloseCancelsAndWaitsForWork(t *testing.T) {
	a := test.NewTempApp(t)
	s := NewSession(a, a.NewWindow("Arborist"), filepath.Join(t.TempDir(), "demo"))
	s.DBPath = filepath.Join(t.TempDir(), "gui.db")
	var worked, wrote atomic.Bool
	s.Go(func(ctx context.Context) {
		<-ctx.Done()
		time.Sleep(20 * time.Millisecond)
		worked.Store(true)
	})
	s.Write(func() {
		time.Sleep(30 * time.Millisecond)
		wrote.Store(true)
	})
	s.Close()
	if !worked.Load() || !wrote.Load() {
		t.Fatalf("Close returned before its work (%v) and write (%v) finished", worked.Load(), wrote.Load())
	}
	if _, err := s.Bench(context.Background()); err == nil {
		t.Error("the database opened after Close")
	}
	s.SetDBPath(filepath.Join(t.TempDir(), "other.db"))
	t.Cleanup(s.Close)
	done := make(chan error, 1)
	s.Go(func(ctx context.Context) { done <- ctx.Err() })
	if err := <-done; err != nil {
		t.Errorf("work after SetDBPath starts cancelled: %v", err)
	}
}
