package profiles

import (
	"context"
	"encoding/json"
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
	if p, ok := RunPlan(&s.Runs[0]); !ok || !reflect.DeepEqual(p, tr.Best().Plan.Trim()) {
		t.Errorf("run 2 ran %+v (%v), the tuned plan is %+v", p, ok, tr.Best().Plan)
	}
}

// TestRunPlan: the plan a run stored its settings for reads back, field
// for field but a depth predictor's id: a tree by widths as widths, one by
// parents as parents, a depth policy by its kind.
func TestRunPlan(t *testing.T) {
	for _, p := range []Plan{
		{Strategy: "ar"},
		{Strategy: "chain", Gamma: 4},
		{Strategy: "tree", Widths: []int{3, 2, 1}},
		{Strategy: "tree", Parents: []int{-1, -1, 0}},
		{Strategy: "tree", Widths: []int{2}, SampleChildren: true},
		{Strategy: "egt", EGT: []int{1, 2, 3}, Branch: 2, WMax: 8, Pad: true, AOT: true},
		{Strategy: "egt", EGT: []int{2, 2}, Branch: 2, WMax: 4, DepthPolicy: "threshold", DepthMin: 0.3},
		{Strategy: "duo", Gamma: 6, MaxSeqs: 2},
		{Strategy: "sequoia", Parents: []int{-1, -1, 0, 1}},
	} {
		cfg, err := p.Config()
		if err != nil {
			t.Fatal(err)
		}
		// as the store hands it back: JSON decoded into plain values
		raw, _ := json.Marshal(cfg)
		var settings any
		json.Unmarshal(raw, &settings)
		got, ok := RunPlan(&Run{Strategy: p.Strategy, Settings: settings})
		if !ok || !reflect.DeepEqual(got, p) {
			t.Errorf("%s: read back %+v (%v), want %+v", p, got, ok, p)
		}
	}
	if _, ok := RunPlan(&Run{Strategy: "chain", Settings: "junk"}); ok {
		t.Error("junk settings read as a plan")
	}
}

// TestRunPlanOldSettings: engine settings stored before the engine's
// configuration embedded its plan (the plan's fields under the engine's
// own names: an EGT's widths as Widths, a tree as its Static parent list)
// still read back as the plan that ran, so no stored run loses its plan.
func TestRunPlanOldSettings(t *testing.T) {
	const rest = `"Sample":{"Temp":0.7,"TopK":0,"TopP":1,"MinP":0,"Seed":1},"MaxTokens":64,"StopAtEOS":true,"RecordHidden":false,"Ctx":0}`
	for _, c := range []struct {
		settings string
		want     Plan
	}{
		{`{"Strategy":"ar","Gamma":0,"Static":{"Parents":null},"SampleChildren":false,"Widths":null,"Branch":0,"WMax":0,"Pad":false,"Depth":null,"AOT":false,"MaxSeqs":0,"Tail":0,`,
			Plan{Strategy: "ar"}},
		{`{"Strategy":"chain","Gamma":4,"Static":{"Parents":null},"SampleChildren":false,"Widths":null,"Branch":0,"WMax":0,"Pad":false,"Depth":null,"AOT":false,"MaxSeqs":0,"Tail":2,`,
			Plan{Strategy: "chain", Gamma: 4, Tail: 2}},
		{`{"Strategy":"tree","Gamma":0,"Static":{"Parents":[-1,-1,-1,0,0,1,1,2,2,3,4,5,6,7,8]},"SampleChildren":false,"Widths":null,"Branch":0,"WMax":0,"Pad":false,"Depth":null,"AOT":false,"MaxSeqs":0,"Tail":0,`,
			Plan{Strategy: "tree", Widths: []int{3, 2, 1}}},
		{`{"Strategy":"tree","Gamma":0,"Static":{"Parents":[-1,-1,0]},"SampleChildren":false,"Widths":null,"Branch":0,"WMax":0,"Pad":false,"Depth":null,"AOT":false,"MaxSeqs":0,"Tail":0,`,
			Plan{Strategy: "tree", Parents: []int{-1, -1, 0}}},
		{`{"Strategy":"tree","Gamma":0,"Static":{"Parents":[-1,-1]},"SampleChildren":true,"Widths":null,"Branch":0,"WMax":0,"Pad":false,"Depth":null,"AOT":false,"MaxSeqs":0,"Tail":0,`,
			Plan{Strategy: "tree", Widths: []int{2}, SampleChildren: true}},
		{`{"Strategy":"egt","Gamma":0,"Static":{"Parents":null},"SampleChildren":false,"Widths":[1,2,3],"Branch":2,"WMax":8,"Pad":true,"Depth":null,"AOT":true,"MaxSeqs":0,"Tail":0,`,
			Plan{Strategy: "egt", EGT: []int{1, 2, 3}, Branch: 2, WMax: 8, Pad: true, AOT: true}},
		{`{"Strategy":"egt","Gamma":0,"Static":{"Parents":null},"SampleChildren":false,"Widths":[2,2],"Branch":2,"WMax":4,"Pad":false,"Depth":{"Max":2,"Min":0.3},"AOT":false,"MaxSeqs":0,"Tail":0,`,
			Plan{Strategy: "egt", EGT: []int{2, 2}, Branch: 2, WMax: 4, DepthPolicy: "threshold", DepthMin: 0.3}},
		{`{"Strategy":"duo","Gamma":6,"Static":{"Parents":null},"SampleChildren":false,"Widths":null,"Branch":0,"WMax":0,"Pad":false,"Depth":null,"AOT":false,"MaxSeqs":2,"Tail":0,`,
			Plan{Strategy: "duo", Gamma: 6, MaxSeqs: 2}},
		{`{"Strategy":"sequoia","Gamma":0,"Static":{"Parents":[-1,-1,0,1]},"SampleChildren":false,"Widths":null,"Branch":0,"WMax":0,"Pad":false,"Depth":null,"AOT":false,"MaxSeqs":0,"Tail":0,`,
			Plan{Strategy: "sequoia", Parents: []int{-1, -1, 0, 1}}},
	} {
		// as the store hands it back: JSON decoded into plain values
		var settings any
		if err := json.Unmarshal([]byte(c.settings+rest), &settings); err != nil {
			t.Fatal(err)
		}
		got, ok := RunPlan(&Run{Strategy: c.want.Strategy, Settings: settings})
		if !ok || !reflect.DeepEqual(got, c.want) {
			t.Errorf("read back %+v (%v), want %+v", got, ok, c.want)
		}
	}
}
