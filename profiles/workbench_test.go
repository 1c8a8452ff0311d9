package profiles

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"arborist/engine/model/modeltest"
	"arborist/engine/sample"
	"arborist/engine/spec"
	"arborist/profiles/config"
	"arborist/profiles/costmodel"
	"arborist/profiles/measure"
)

// storiesPair is stories260K with its noisy drafter, on two threads (both
// there without ../shared: modeltest builds them from the embedded model).
func storiesPair(t *testing.T) PairSpec {
	t.Helper()
	return PairSpec{Target: modeltest.Stories260K(t), Draft: modeltest.NoisyDraft(t), Threads: 2}
}

// openBench opens a workbench on a new database in the test's temporary
// folder, closed when the test ends.
func openBench(t *testing.T) *Bench {
	t.Helper()
	b, err := Open(context.Background(), filepath.Join(t.TempDir(), "w.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestRunEveryStrategyLossless: every registered strategy, run through the
// core with a baseline, gives plain decoding's greedy tokens, and the run
// is stored with its steps.
func TestRunEveryStrategyLossless(t *testing.T) {
	ps := storiesPair(t)
	ctx := context.Background()
	b := openBench(t)
	plans := map[string]spec.Plan{
		"ar":      {Strategy: "ar"},
		"chain":   {Strategy: "chain", Gamma: 3},
		"tree":    {Strategy: "tree", Widths: []int{2, 2, 1}},
		"egt":     {Strategy: "egt", EGT: []int{1, 2, 2}, Branch: 2, WMax: 6, AOT: true},
		"duo":     {Strategy: "duo", Gamma: 4, MaxSeqs: 2},
		"sequoia": {Strategy: "sequoia", Parents: []int{-1, -1, 0, 0, 2}},
	}
	for i, name := range spec.Strategies() {
		p, ok := plans[name]
		if !ok {
			t.Fatalf("no test plan for strategy %s", name)
		}
		var pieces strings.Builder
		steps := 0
		res, err := b.Run(ctx, ps, RunOptions{Plan: p, Sample: sample.Params{TopP: 1, Seed: 1}, MaxTokens: 24, Prompts: []string{"Once upon a time", "The cat"},
			Baseline: true, OnToken: func(_ int, s string, _ bool) { pieces.WriteString(s) }, OnStep: func(int, spec.Step) { steps++ }})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if name != "ar" && (!res.Identical || res.Base == nil || res.Speedup <= 0) {
			t.Errorf("%s: identical %v, speedup %v", name, res.Identical, res.Speedup)
		}
		if res.Totals.Tokens != 48 || steps != res.Totals.Steps || pieces.Len() == 0 || res.RunID != int64(i+1) {
			t.Errorf("%s: %d tokens, %d steps seen of %d, run %d", name, res.Totals.Tokens, steps, res.Totals.Steps, res.RunID)
		}
	}
}

// TestTuneExportRunTunedPlan: tune (assumed acceptance) stores its best
// plan, export renders it from the database and replays as the same plan,
// and the tuned plan runs as it is with its prediction stored.
func TestTuneExportRunTunedPlan(t *testing.T) {
	ps := storiesPair(t)
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "w.db")
	b, err := Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Tune(ctx, ps, TuneOptions{}, nil); err == nil || !strings.Contains(err.Error(), "calibrate first") {
		t.Fatalf("tune without calibration: %v", err)
	}
	tr, err := b.Tune(ctx, ps, TuneOptions{Alpha: 0.7, Space: costmodel.SearchSpace{MaxGamma: 4, MaxDepth: 3, MaxNodes: 12}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Inputs.Describe() != "assumed values" || tr.PlanID != 1 {
		t.Errorf("inputs %q, plan %d", tr.Inputs.Describe(), tr.PlanID)
	}
	ex, err := b.Export(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := b.Write(ctx, ex.PlanID, ex.YAML, path); err != nil {
		t.Fatal(err)
	}
	again, err := b.Export(ctx, ps)
	if err != nil || string(again.YAML) != string(ex.YAML) {
		t.Errorf("a second export differs: %v", err)
	}
	// the plan belongs to its pair: the same target with another draft
	// source has no tuned plan, exports none and counts no export
	ngram := PairSpec{Target: ps.Target, NGram: 3, Threads: 2}
	if _, err := b.Export(ctx, ngram); err == nil {
		t.Error("the n-gram pair exported the model drafter's plan")
	}
	if st, err := b.Steps(ctx, ngram); err != nil || st.PlanID != 0 || st.Exports != 0 {
		t.Errorf("the n-gram pair's steps %+v (%v)", st, err)
	}
	if st, err := b.Steps(ctx, ps); err != nil || st.PlanID != tr.PlanID || st.Exports != 1 {
		t.Errorf("the tuned pair's steps %+v (%v)", st, err)
	}
	r, err := loadReplay(ctx, path, "", false)
	if err != nil {
		t.Fatal(err)
	}
	if r.Plan.String() != tr.Best().Plan.String() || (r.Plan.NeedsSource() && r.Pair.Draft == "") || r.Predicted <= 0 {
		t.Errorf("replay %+v, tuned %v", r, tr.Best().Plan)
	}
	res, err := b.Run(ctx, r.Pair, RunOptions{Plan: r.Plan, Sample: r.Sample, MaxTokens: 16, Prompts: []string{"Once upon a time"}, Predicted: r.Predicted})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := b.db(ctx)
	run, err := st.Run(ctx, res.RunID)
	if err != nil || run.PredictedSpeedup != r.Predicted || run.Strategy != r.Plan.Strategy {
		t.Errorf("stored run %+v: %v", run, err)
	}
}

// TestValidateTop: the top plans of a tune and plain decoding run
// interleaved over the prompts; each plan gets a measured speedup per round,
// greedy output identical to plain decoding, its own stored run with the
// predicted and measured speedups, and exactly the fastest one is marked.
func TestValidateTop(t *testing.T) {
	ps := storiesPair(t)
	ctx := context.Background()
	b := openBench(t)
	tr, err := b.Tune(ctx, ps, TuneOptions{Alpha: 0.7, Space: costmodel.SearchSpace{MaxGamma: 4, MaxDepth: 3, MaxNodes: 12}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var order []int
	prompts := []string{"Once upon a time", "The cat"}
	v, err := b.Validate(ctx, ps, ValidateOptions{Plans: tr.Ranked[:3], MaxTokens: 16, Prompts: prompts, Rounds: 2,
		OnRun: func(round, prompt, plan int) { order = append(order, plan) }})
	if err != nil {
		t.Fatal(err)
	}
	// A, B, C, D per prompt, each round
	if want := []int{-1, 0, 1, 2, -1, 0, 1, 2, -1, 0, 1, 2, -1, 0, 1, 2}; !slices.Equal(order, want) {
		t.Errorf("run order %v, want %v", order, want)
	}
	if len(v.Plans) != 3 || v.Base.Tokens != 2*2*16 || v.BaseRunID == 0 {
		t.Fatalf("validation %+v", v)
	}
	st, _ := b.db(ctx)
	best := 0
	for i, p := range v.Plans {
		if !p.Identical || len(p.Rounds) != 2 || p.Measured <= 0 || p.Predicted != tr.Ranked[i].Speedup || p.Totals.Tokens != 64 {
			t.Errorf("plan %d: %+v", i, p)
		}
		if p.Measured > v.Plans[best].Measured {
			best = i
		}
		// the error split: the prediction's parts against the runs'
		sp, pr := p.Split, tr.Ranked[i]
		if sp.AALPredicted != pr.AAL || sp.StepPredicted != pr.Step || sp.AALMeasured != float64(p.Totals.Tokens)/float64(p.Totals.Steps) ||
			sp.StepMeasured != p.Totals.Decode/time.Duration(p.Totals.Steps) || sp.BaseMeasured != v.Base.Decode/time.Duration(v.Base.Steps) ||
			sp.BasePredicted <= 0 {
			t.Errorf("plan %d's error split %+v", i, sp)
		}
		run, err := st.Run(ctx, p.RunID)
		if err != nil || run.PredictedSpeedup != p.Predicted || run.MeasuredSpeedup != p.Measured || run.Tokens != 64 || run.Status != "done" {
			t.Errorf("stored run of %s: %+v %v", p.Label, run, err)
		}
	}
	if v.Best != best || !v.Plans[best].Best {
		t.Errorf("best %d marked, measured best %d", v.Best, best)
	}
	if _, err := b.Validate(ctx, ps, ValidateOptions{MaxTokens: 16, Prompts: prompts}); err == nil {
		t.Error("validation without plans accepted")
	}
}

// TestDemoPairNotice: the demo pair is written with the licence notice of
// the model it is built from, and a second call reuses the pair.
func TestDemoPairNotice(t *testing.T) {
	dir := t.TempDir()
	target, draft, err := DemoPair(context.Background(), dir, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, demoNoticeName))
	if err != nil || !strings.Contains(string(b), "MIT License") {
		t.Fatalf("notice beside the pair: %v %q", err, b)
	}
	st, _ := os.Stat(target)
	t2, d2, err := DemoPair(context.Background(), dir, false, nil)
	st2, _ := os.Stat(t2)
	if err != nil || t2 != target || d2 != draft || !st2.ModTime().Equal(st.ModTime()) {
		t.Fatalf("second call: %v %s %s (target rewritten: %v)", err, t2, d2, !st2.ModTime().Equal(st.ModTime()))
	}
}

// TestThreadSplitValidatesAndExports: on four threads the search prices a
// plan that drafts while the target verifies on each split of them (one
// or two drafter threads), validation runs each split it is given on a
// pair opened that way, and config.yaml keeps the split for a replay.
func TestThreadSplitValidatesAndExports(t *testing.T) {
	ps := storiesPair(t)
	ps.Threads = 4
	ctx := context.Background()
	b := openBench(t)
	tr, err := b.Tune(ctx, ps, TuneOptions{Alpha: 0.7, Space: costmodel.SearchSpace{MaxGamma: 4, MaxDepth: 3, MaxNodes: 12}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(tr.Inputs.Costs.Splits); n != 2 {
		t.Fatalf("%d splits measured on 4 threads, want 2 (1 and 2 drafter threads)", n)
	}
	var duo *costmodel.Prediction
	for i, pr := range tr.Ranked {
		if pr.Plan.Concurrent() != (pr.DraftThreads > 0) || pr.DraftThreads > 2 {
			t.Errorf("%s priced on %d drafter threads", pr.Plan, pr.DraftThreads)
		}
		if duo == nil && pr.Plan.Strategy == "duo" {
			duo = &tr.Ranked[i]
		}
	}
	if duo == nil {
		t.Fatal("no duo plan ranked")
	}
	one, two := *duo, *duo
	one.DraftThreads, two.DraftThreads = 1, 2
	v, err := b.Validate(ctx, ps, ValidateOptions{Plans: []costmodel.Prediction{one, two}, MaxTokens: 12, Prompts: []string{"Once upon a time"}, NoStore: true})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"drafter on 1 thread", "drafter on 2 threads"} {
		if p := v.Plans[i]; !strings.HasSuffix(p.Label, want) || !p.Identical || p.DraftThreads != i+1 {
			t.Errorf("plan %d: label %q, identical %v, %d drafter threads", i, p.Label, p.Identical, p.DraftThreads)
		}
	}
	tr.Ranked[0] = one
	ex, err := b.tuneExport(ctx, ps, tr)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, ex.YAML, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := loadReplay(ctx, path, "", false)
	if err != nil {
		t.Fatal(err)
	}
	if r.Pair.DraftThreads != 1 || r.Pair.Threads != 4 || r.Plan.String() != duo.Plan.Trim().String() {
		t.Errorf("replay: %d of %d threads for the drafter, plan %s (want 1 of 4, %s)\n%s", r.Pair.DraftThreads, r.Pair.Threads, r.Plan, duo.Plan, ex.YAML)
	}
}

// TestCalibrationPricesThresholdPlans: a calibration records each step's
// best path probability by depth (never rising with depth) and its
// accepted length; tune then ranks EGT plans with a threshold depth
// policy beside the rest, and such a plan validates token for token.
func TestCalibrationPricesThresholdPlans(t *testing.T) {
	ps := storiesPair(t)
	ctx := context.Background()
	b := openBench(t)
	cal, err := b.Calibrate(ctx, ps, []string{"Once upon a time", "The little dog"}, "", 24, SampleParams{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// its generation length is stored with it, for a run's length caveat
	if in, err := b.Inputs(ctx, ps, InputsOptions{}, nil); err != nil || in.Acc == nil || in.Acc.MaxTokens != 24 {
		t.Fatalf("the stored calibration's generation length: %+v, %v", in, err)
	}
	if len(cal.Acc.Depths) != cal.Acc.Steps || cal.Acc.Steps == 0 {
		t.Fatalf("%d depth samples for %d steps", len(cal.Acc.Depths), cal.Acc.Steps)
	}
	for _, s := range cal.Acc.Depths {
		if len(s.Best) == 0 || len(s.Best) > len(costmodel.CalibrationWidths) || s.Accepted < 0 || s.Accepted > len(s.Best) {
			t.Fatalf("sample %+v", s)
		}
		for d, p := range s.Best {
			if p < 0 || p > 1 || (d > 0 && p > s.Best[d-1]) {
				t.Fatalf("best path probabilities %v", s.Best)
			}
		}
	}
	// the re-check's shape was read before the first prompt and after each
	// one, and tune's re-check pools those three moments with its own
	w := cal.Acc.Window
	if w == nil || len(w.Slots) != 3 || !slices.Equal(w.Widths, measure.RecheckAnchors(8)) || w.End.Before(w.Start) {
		t.Fatalf("calibration window %+v", w)
	}
	for _, slot := range w.Slots {
		// one ratio a width, each a time over a time: positive and finite
		// (their sizes follow the machine's load, which a test must not
		// bound: a preempted moment read 81.8 plain tokens)
		if len(slot) != len(w.Widths) {
			t.Fatalf("window moment %v for widths %v", slot, w.Widths)
		}
		for _, r := range slot {
			if !(r > 0) || math.IsInf(r, 0) {
				t.Fatalf("window moment %v: T_verify(W) over plain decoding's token", slot)
			}
		}
	}
	tr, err := b.Tune(ctx, ps, TuneOptions{Space: costmodel.SearchSpace{MaxGamma: 4, MaxDepth: 4, MaxNodes: 12}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rc := tr.Inputs.Recheck; rc == nil || rc.WindowMoments != 3 || !strings.Contains(rc.String(), "3 over the calibration's") {
		t.Fatalf("tune's re-check did not pool the calibration's window: %+v", rc)
	}
	var th *costmodel.Prediction
	for i, pr := range tr.Ranked {
		if pr.Plan.DepthPolicy == "threshold" {
			th = &tr.Ranked[i]
			break
		}
	}
	if th == nil || !strings.Contains(th.Plan.String(), "threshold=") || th.Speedup <= 0 {
		t.Fatalf("no threshold plan ranked: %+v", th)
	}
	v, err := b.Validate(ctx, ps, ValidateOptions{Plans: []costmodel.Prediction{*th}, MaxTokens: 24, Prompts: []string{"Once upon a time"}, NoStore: true})
	if err != nil || !v.Plans[0].Identical {
		t.Fatalf("validating %s: %v", th.Plan, err)
	}
}

// TestSampledCalibrationTunesAndExportsItsSampling: a calibration at
// temperature 0.8 stores that sampling with its acceptance; tune names it,
// its validations run at it, and the exported config.yaml carries it, so
// a plan tuned for sampled decoding is not priced, checked or deployed
// greedily.
func TestSampledCalibrationTunesAndExportsItsSampling(t *testing.T) {
	ps := storiesPair(t)
	ctx := context.Background()
	b := openBench(t)
	if _, err := b.Calibrate(ctx, ps, []string{"Once upon a time"}, "", 8, SampleParams{Temp: -1}, nil); err == nil {
		t.Fatal("a negative temperature was accepted")
	}
	smp := SampleParams{Temp: 0.8, TopP: 0.95, Seed: 7}
	cal, err := b.Calibrate(ctx, ps, []string{"Once upon a time", "The little dog"}, "", 24, smp, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cal.Acc.Sample != smp {
		t.Fatalf("calibration stored sampling %+v, ran %+v", cal.Acc.Sample, smp)
	}
	tr, err := b.Tune(ctx, ps, TuneOptions{Space: costmodel.SearchSpace{MaxGamma: 4, MaxDepth: 3, MaxNodes: 12}, NoRecheck: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := tr.Inputs.sampling(); got != smp {
		t.Errorf("tune's inputs sample at %+v, calibrated at %+v", got, smp)
	}
	if d := tr.Inputs.Describe(); !strings.Contains(d, "temperature 0.8, top-p 0.95") {
		t.Errorf("tune does not name its sampling: %q", d)
	}
	ex, err := b.tuneExport(ctx, ps, tr)
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Parse("config.yaml", ex.YAML)
	if err != nil {
		t.Fatal(err)
	}
	if c.Sampling.Temperature != 0.8 || c.Sampling.TopP != 0.95 || c.Sampling.Seed != 7 {
		t.Errorf("exported sampling %+v, tuned at %+v\n%s", c.Sampling, smp, ex.YAML)
	}
	// a greedy calibration exports greedy sampling
	if _, err := b.Calibrate(ctx, ps, []string{"Once upon a time"}, "", 16, SampleParams{}, nil); err != nil {
		t.Fatal(err)
	}
	tr, err = b.Tune(ctx, ps, TuneOptions{Space: costmodel.SearchSpace{MaxGamma: 4, MaxDepth: 3, MaxNodes: 12}, NoRecheck: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := tr.Inputs.sampling(); !got.Greedy() {
		t.Errorf("greedy calibration tunes at %+v", got)
	}
}

// TestTuneExportsAndValidates: one tune writes its best plan's
// config.yaml (never onto an input) and validates the ranking: its best
// distinct plans against plain decoding and each other, or the best plan
// alone against plain decoding with its prediction.
func TestTuneExportsAndValidates(t *testing.T) {
	ps := storiesPair(t)
	ctx := context.Background()
	b := openBench(t)
	dir := t.TempDir()
	suite := filepath.Join(dir, "prompts.txt")
	if err := os.WriteFile(suite, []byte("Once upon a time\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	space := costmodel.SearchSpace{MaxGamma: 4, MaxDepth: 3, MaxNodes: 12}
	val := &ValidateOptions{MaxTokens: 16, Prompts: []string{"Once upon a time", "The cat"}, Rounds: 1}
	// never onto an input: the tune ranks, then refuses to write
	tr, err := b.Tune(ctx, ps, TuneOptions{Alpha: 0.7, Space: space, NoRecheck: true, Export: suite, Inputs: []string{suite}, Validate: val}, nil)
	if err == nil || tr == nil || tr.Export != nil || len(tr.Ranked) == 0 || tr.Validation != nil || tr.Run != nil {
		t.Fatalf("export onto the suite: %v, %+v", err, tr)
	}
	out := filepath.Join(dir, "config.yaml")
	tr, err = b.Tune(ctx, ps, TuneOptions{Alpha: 0.7, Space: space, NoRecheck: true, Export: out, Inputs: []string{suite}, Validate: val, ValidateTop: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	written, err := os.ReadFile(out)
	if err != nil || tr.Export == nil || string(written) != string(tr.Export.YAML) || tr.Export.PlanID != tr.PlanID {
		t.Fatalf("export: %v, %+v", err, tr.Export)
	}
	if v := tr.Validation; v == nil || len(v.Plans) != 2 || tr.Run != nil || tr.ValidateErr != nil || !v.Plans[0].Identical || v.Plans[0].Predicted != tr.Ranked[0].Speedup {
		t.Fatalf("validation of the top 2: %+v", tr.Validation)
	}
	tr, err = b.Tune(ctx, ps, TuneOptions{Alpha: 0.7, Space: space, NoRecheck: true, Validate: val}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := tr.Run; r == nil || tr.Validation != nil || tr.Export != nil || r.Base == nil || !r.Identical || r.Predicted != tr.Best().Speedup || r.RunID == 0 {
		t.Fatalf("validation of the best: %+v", tr.Run)
	}
}
