package profiles

import (
	"context"
	"reflect"
	"testing"

	"arborist/engine/model/modeltest"
)

// TestPairState: a pair's state reads what is stored and measures nothing:
// nothing for a fresh pair; then its profile, calibration, newest plan
// with a ranking, and its runs (plain decoding's of its target included,
// another draft source's not), each as the guide's steps count them.
func TestPairState(t *testing.T) {
	ps := PairSpec{Target: modeltest.Stories260K(t), Draft: modeltest.NoisyDraft(t), Threads: 2}
	ctx := context.Background()
	b := openBench(t)
	s, err := b.PairState(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	if s.Verify != nil || s.PlanID != 0 || len(s.Runs) != 0 || s.Ranked != nil || s.Steps != (Steps{}) {
		t.Fatalf("fresh pair: %+v", s)
	}
	if _, err := b.Profile(ctx, ps, ProfileOptions{MaxW: 8}, nil); err != nil {
		t.Fatal(err)
	}
	prompts := []string{"Once upon a time", "The cat"}
	if _, err := b.Calibrate(ctx, ps, prompts, "", 16, SampleParams{}, nil); err != nil {
		t.Fatal(err)
	}
	tr, err := b.Tune(ctx, ps, TuneOptions{NoRecheck: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []Plan{{Strategy: "ar"}, tr.Best().Plan} {
		if _, err := b.Run(ctx, ps, RunOptions{Plan: p, MaxTokens: 8, Prompts: prompts[:1]}); err != nil {
			t.Fatal(err)
		}
	}
	other := ps
	other.Draft, other.NGram = "", 2
	if _, err := b.Run(ctx, other, RunOptions{Plan: Plan{Strategy: "chain", Gamma: 2}, MaxTokens: 8, Prompts: prompts[:1]}); err != nil {
		t.Fatal(err)
	}
	s, err = b.PairState(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	want, err := b.Steps(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	if s.Steps != want {
		t.Errorf("steps %+v, Bench.Steps %+v", s.Steps, want)
	}
	if s.Verify == nil || len(s.Verify.Curve.Points) == 0 || s.Draft == nil || s.Limits.Bandwidth <= 0 || s.Limits.WeightBytes <= 0 {
		t.Errorf("stored profile: %+v %+v %+v", s.Verify, s.Draft, s.Limits)
	}
	if s.Inputs == nil || s.Inputs.CalID != 1 || !s.Inputs.Profiled {
		t.Errorf("inputs: %+v", s.Inputs)
	}
	if s.PlanID != tr.PlanID || s.Plan.Plan.String() != tr.Best().Plan.String() || len(s.Ranked) == 0 {
		t.Errorf("plan %d %s (ranked %d), tuned %d %s", s.PlanID, s.Plan.Plan, len(s.Ranked), tr.PlanID, tr.Best().Plan)
	}
	if len(s.Runs) != 2 || s.Runs[0].ID != 2 || s.Runs[1].Strategy != "ar" || len(s.LastSteps) == 0 {
		t.Errorf("runs %+v, %d steps", s.Runs, len(s.LastSteps))
	}
	if p, ok := s.Runs[0].RanPlan(); !ok || !reflect.DeepEqual(p, tr.Best().Plan.Trim()) {
		t.Errorf("run 2 ran %+v (%v), the tuned plan is %+v", p, ok, tr.Best().Plan)
	}
}
