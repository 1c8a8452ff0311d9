package store

import (
	"encoding/json"
	"reflect"
	"testing"

	"arborist/engine/spec"
)

// TestRanPlan: the plan a run stored its settings for reads back, field
// for field but a depth predictor's id: a tree by widths as widths, one by
// parents as parents, a depth policy by its kind.
func TestRanPlan(t *testing.T) {
	for _, p := range []spec.Plan{
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
		got, ok := (Run{Strategy: p.Strategy, Settings: settings}).RanPlan()
		if !ok || !reflect.DeepEqual(got, p) {
			t.Errorf("%s: read back %+v (%v), want %+v", p, got, ok, p)
		}
	}
	if _, ok := (Run{Strategy: "chain", Settings: "junk"}).RanPlan(); ok {
		t.Error("junk settings read as a plan")
	}
}

// TestRanPlanOldSettings: engine settings stored before the engine's
// configuration embedded its plan (the plan's fields under the engine's
// own names: an EGT's widths as Widths, a tree as its Static parent list)
// still read back as the plan that ran, so no stored run loses its plan.
func TestRanPlanOldSettings(t *testing.T) {
	const rest = `"Sample":{"Temp":0.7,"TopK":0,"TopP":1,"MinP":0,"Seed":1},"MaxTokens":64,"StopAtEOS":true,"RecordHidden":false,"Ctx":0}`
	for _, c := range []struct {
		settings string
		want     spec.Plan
	}{
		{`{"Strategy":"ar","Gamma":0,"Static":{"Parents":null},"SampleChildren":false,"Widths":null,"Branch":0,"WMax":0,"Pad":false,"Depth":null,"AOT":false,"MaxSeqs":0,"Tail":0,`,
			spec.Plan{Strategy: "ar"}},
		{`{"Strategy":"chain","Gamma":4,"Static":{"Parents":null},"SampleChildren":false,"Widths":null,"Branch":0,"WMax":0,"Pad":false,"Depth":null,"AOT":false,"MaxSeqs":0,"Tail":2,`,
			spec.Plan{Strategy: "chain", Gamma: 4, Tail: 2}},
		{`{"Strategy":"tree","Gamma":0,"Static":{"Parents":[-1,-1,-1,0,0,1,1,2,2,3,4,5,6,7,8]},"SampleChildren":false,"Widths":null,"Branch":0,"WMax":0,"Pad":false,"Depth":null,"AOT":false,"MaxSeqs":0,"Tail":0,`,
			spec.Plan{Strategy: "tree", Widths: []int{3, 2, 1}}},
		{`{"Strategy":"tree","Gamma":0,"Static":{"Parents":[-1,-1,0]},"SampleChildren":false,"Widths":null,"Branch":0,"WMax":0,"Pad":false,"Depth":null,"AOT":false,"MaxSeqs":0,"Tail":0,`,
			spec.Plan{Strategy: "tree", Parents: []int{-1, -1, 0}}},
		{`{"Strategy":"tree","Gamma":0,"Static":{"Parents":[-1,-1]},"SampleChildren":true,"Widths":null,"Branch":0,"WMax":0,"Pad":false,"Depth":null,"AOT":false,"MaxSeqs":0,"Tail":0,`,
			spec.Plan{Strategy: "tree", Widths: []int{2}, SampleChildren: true}},
		{`{"Strategy":"egt","Gamma":0,"Static":{"Parents":null},"SampleChildren":false,"Widths":[1,2,3],"Branch":2,"WMax":8,"Pad":true,"Depth":null,"AOT":true,"MaxSeqs":0,"Tail":0,`,
			spec.Plan{Strategy: "egt", EGT: []int{1, 2, 3}, Branch: 2, WMax: 8, Pad: true, AOT: true}},
		{`{"Strategy":"egt","Gamma":0,"Static":{"Parents":null},"SampleChildren":false,"Widths":[2,2],"Branch":2,"WMax":4,"Pad":false,"Depth":{"Max":2,"Min":0.3},"AOT":false,"MaxSeqs":0,"Tail":0,`,
			spec.Plan{Strategy: "egt", EGT: []int{2, 2}, Branch: 2, WMax: 4, DepthPolicy: "threshold", DepthMin: 0.3}},
		{`{"Strategy":"duo","Gamma":6,"Static":{"Parents":null},"SampleChildren":false,"Widths":null,"Branch":0,"WMax":0,"Pad":false,"Depth":null,"AOT":false,"MaxSeqs":2,"Tail":0,`,
			spec.Plan{Strategy: "duo", Gamma: 6, MaxSeqs: 2}},
		{`{"Strategy":"sequoia","Gamma":0,"Static":{"Parents":[-1,-1,0,1]},"SampleChildren":false,"Widths":null,"Branch":0,"WMax":0,"Pad":false,"Depth":null,"AOT":false,"MaxSeqs":0,"Tail":0,`,
			spec.Plan{Strategy: "sequoia", Parents: []int{-1, -1, 0, 1}}},
	} {
		// as the store hands it back: JSON decoded into plain values
		var settings any
		if err := json.Unmarshal([]byte(c.settings+rest), &settings); err != nil {
			t.Fatal(err)
		}
		got, ok := (Run{Strategy: c.want.Strategy, Settings: settings}).RanPlan()
		if !ok || !reflect.DeepEqual(got, c.want) {
			t.Errorf("read back %+v (%v), want %+v", got, ok, c.want)
		}
	}
}
