package profiles

import (
	"context"
	"reflect"
	"testing"

	"arborist/engine/model/modeltest"
)

// TestStoredRunIsThePlanRun: a run stores the plan it ran field for field
// (Run.RanPlan), for a plan of every strategy family and depth policy, the
// predictor policy with its predictor's id included, so what was tuned is
// what the database says ran.
func TestStoredRunIsThePlanRun(t *testing.T) {
	ps := storiesPair(t)
	ctx := context.Background()
	b := openBench(t)
	prompts := modeltest.StoryPrompts(t)[:3]
	if _, err := b.Calibrate(ctx, ps, prompts, "stories", 16, SampleParams{}, nil); err != nil {
		t.Fatal(err)
	}
	pred, err := b.TrainPredictor(ctx, ps, PredictorOptions{Prompts: prompts, Tokens: 16, Epochs: 2, Plan: Plan{Strategy: "egt", EGT: []int{1, 1, 1}, Branch: 2, WMax: 4}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []Plan{
		{Strategy: "ar"},
		{Strategy: "chain", Gamma: 3},
		{Strategy: "tree", Widths: []int{2, 1}},
		{Strategy: "tree", Parents: []int{-1, -1, 0}},
		{Strategy: "egt", EGT: []int{1, 2, 2}, Branch: 2, WMax: 6},
		{Strategy: "egt", EGT: []int{1, 2, 2}, Branch: 2, WMax: 8, Pad: true},
		{Strategy: "egt", EGT: []int{1, 1, 1, 1}, Branch: 1, WMax: 4, DepthPolicy: "threshold", DepthMin: 0.3},
		pred.Plan,
		{Strategy: "duo", Gamma: 4, MaxSeqs: 2},
		{Strategy: "sequoia", Parents: []int{-1, -1, 0, 1}},
	} {
		assumed := p.Strategy == "chain" // a prediction priced on the sliders' acceptance, stored so
		res, err := b.Run(ctx, ps, RunOptions{Plan: p, MaxTokens: 8, Prompts: prompts[:1], Predicted: 1.5, PredictedAssumed: assumed})
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		run, err := b.StoredRun(ctx, res.RunID)
		if err != nil {
			t.Fatal(err)
		}
		if run.PredictedSpeedup != 1.5 || run.PredictedAssumed != assumed {
			t.Errorf("%s: stored prediction %.2f (assumed %v), want 1.50 (assumed %v)", p, run.PredictedSpeedup, run.PredictedAssumed, assumed)
		}
		got, ok := run.RanPlan()
		if !ok || !reflect.DeepEqual(got, p) {
			t.Errorf("ran %+v, the database says %+v (%v)", p, got, ok)
		}
	}
}
