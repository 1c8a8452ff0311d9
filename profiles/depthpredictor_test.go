package profiles

import (
	"context"
	"strings"
	"testing"
	"time"

	"arborist/engine/model/modeltest"
	"arborist/profiles/costmodel"
)

// TestDepthPredictorWorkflow: a depth predictor trained on the pair's
// calibration is reported against the policies it must beat, priced by
// tune beside every other plan and offered exactly when it beat them, runs
// token for token as plain decoding, and refuses to run a shape it was
// not trained for.
func TestDepthPredictorWorkflow(t *testing.T) {
	ps := storiesPair(t)
	ctx := context.Background()
	b := openBench(t)
	prompts := modeltest.StoryPrompts(t)
	if _, err := b.TrainPredictor(ctx, ps, PredictorOptions{Prompts: prompts, Tokens: 24}, nil); err == nil || !strings.Contains(err.Error(), "calibrat") {
		t.Fatalf("trained without a calibration: %v", err)
	}
	// before calibration nothing prices the decoding: the counts alone
	opt := PredictorOptions{Prompts: prompts, Tokens: 40}
	if cost, err := b.PredictorCost(ctx, ps, opt, nil); err != nil || cost.Prompts != len(prompts) || cost.Decoded != 40*len(prompts) || cost.Estimate != 0 || !strings.Contains(cost.String(), "after the first batch") {
		t.Fatalf("cost before calibration: %+v (%v)", cost, err)
	}
	if _, err := b.Calibrate(ctx, ps, prompts[:4], "stories", 32, SampleParams{}, nil); err != nil {
		t.Fatal(err)
	}
	// then the stored curve and calibration price the probe tree's steps
	cost, err := b.PredictorCost(ctx, ps, opt, nil)
	in, ierr := b.Inputs(ctx, ps, InputsOptions{}, nil)
	if err != nil || ierr != nil {
		t.Fatal(err, ierr)
	}
	per, perr := probeStepCost(in)
	if perr != nil || per <= 0 || cost.PerToken != per || cost.Estimate != per*time.Duration(cost.Decoded) || !strings.Contains(cost.String(), "estimated") || !strings.Contains(cost.Basis, "curve") {
		t.Fatalf("cost after calibration: %+v, probe step %v (%v)", cost, per, perr)
	}
	if _, err := b.TrainPredictor(ctx, ps, PredictorOptions{Prompts: prompts[:2], Tokens: 24}, nil); err == nil {
		t.Fatal("trained on two prompts")
	}
	var priced bool // the decoding shows the time left from its start
	r, err := b.TrainPredictor(ctx, ps, PredictorOptions{Prompts: prompts, Tokens: 40, Epochs: 10}, func(e Event) {
		priced = priced || (e.Stage == "collecting" && e.Done == 0 && strings.Contains(e.Detail, "left"))
	})
	if err != nil || !priced {
		t.Fatalf("trained: %v; priced before the first prompt: %v", err, priced)
	}
	st := r.Stats
	depth := len(r.Plan.EGT)
	if r.Plan.DepthPolicy != "predictor" || r.Plan.PredictorID != r.ID || depth < 2 || len(st.Fixed) != depth || st.BestFixed < 1 || st.Steps[2] == 0 {
		t.Fatalf("report %+v for %s", st, r.Plan)
	}
	if st.Beats != (st.Predictor >= st.Fixed[st.BestFixed-1] && st.Predictor >= st.ThresholdSpeedup) {
		t.Errorf("beats %v: predictor %.3f, fixed %.3f, threshold %.3f", st.Beats, st.Predictor, st.Fixed[st.BestFixed-1], st.ThresholdSpeedup)
	}
	// a retrain (here with fewer epochs) reads the decoded steps back
	var stored bool
	again, err := b.TrainPredictor(ctx, ps, PredictorOptions{Prompts: prompts, Tokens: 40, Epochs: 5}, func(e Event) {
		stored = stored || (e.Stage == "collecting" && strings.Contains(e.Detail, "stored"))
	})
	if err != nil || !stored || again.Stats.Steps != st.Steps {
		t.Fatalf("retrain: stored data read %v, steps %v against %v (%v)", stored, again.Stats.Steps, st.Steps, err)
	}
	in, err = b.Inputs(ctx, ps, InputsOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Acc.Learned) != 2 || in.Acc.Learned[0].Plan.PredictorID != r.ID || in.Acc.Learned[0].Beats != st.Beats {
		t.Fatalf("the calibration's predictors: %+v", in.Acc.Learned)
	}
	// offered exactly when it beat them: force both ways on the same inputs
	for _, beats := range []bool{true, false} {
		in.Acc.Learned[0].Beats = beats
		found := false
		for _, pr := range costmodel.SearchAll(in.Acc, in.Costs, costmodel.SearchSpace{}).Ranked {
			found = found || (pr.Plan.DepthPolicy == "predictor" && pr.Plan.PredictorID == r.ID)
		}
		if found != beats {
			t.Errorf("beats %v: offered %v", beats, found)
		}
	}
	res, err := b.Run(ctx, ps, RunOptions{Plan: r.Plan, MaxTokens: 32, Prompts: prompts[:2], Baseline: true})
	if err != nil || !res.Identical {
		t.Fatalf("running %s: %v", r.Plan, err)
	}
	other := r.Plan
	other.EGT = other.EGT[:depth-1]
	if _, err := b.Run(ctx, ps, RunOptions{Plan: other, MaxTokens: 8, Prompts: prompts[:1], NoStore: true}); err == nil || !strings.Contains(err.Error(), "decides the depth of") {
		t.Errorf("ran a shape the predictor was not trained for: %v", err)
	}
}
