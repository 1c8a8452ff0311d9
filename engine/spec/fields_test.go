package spec

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestPlanFieldsRoundTrip: every field a strategy offers reads back what
// Get writes, for a plan of every strategy, and ParsePlan rebuilds the
// trimmed plan from its fields' values.
func TestPlanFieldsRoundTrip(t *testing.T) {
	plans := []Plan{
		{Strategy: "ar"},
		{Strategy: "chain", Gamma: 5},
		{Strategy: "tree", Widths: []int{3, 2, 1}, SampleChildren: true},
		{Strategy: "tree", Parents: []int{-1, -1, 0, 0, 2}},
		{Strategy: "egt", EGT: []int{1, 2, 3}, Branch: 3, WMax: 10, Pad: true, DepthPolicy: "threshold", DepthMin: 0.35},
		{Strategy: "egt", EGT: []int{1, 1}, Branch: 1, WMax: 2, AOT: true, DepthPolicy: "predictor", PredictorID: 7},
		{Strategy: "duo", Gamma: 6, MaxSeqs: 4},
		{Strategy: "sequoia", Parents: []int{-1, 0, 0}},
		{Strategy: "chain", Gamma: 4, Tail: 5},
		{Strategy: "egt", EGT: []int{1, 2}, Branch: 2, WMax: 4, Tail: 3},
		{Strategy: "duo", Gamma: 6, MaxSeqs: 2, Tail: 2},
	}
	for _, want := range plans {
		s, err := Lookup(want.Strategy)
		if err != nil {
			t.Fatal(err)
		}
		values := want.Values()
		if len(values) != len(s.Fields) {
			t.Errorf("%s: values %v", want, values)
		}
		got, err := ParsePlan(want.Strategy, values)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: ParsePlan(%v) = %+v, %v; want %+v", want, values, got, err, want)
		}
	}
}

// TestParsePlanErrors: a value that cannot be read names its field, a
// plan that cannot run is refused by Validate, and fields the strategy
// does not read are ignored; a parent list wins over widths.
func TestParsePlanErrors(t *testing.T) {
	_, err := ParsePlan("tree", map[string]string{"widths": "3,x"})
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "widths" || !strings.Contains(err.Error(), "not an integer list") {
		t.Errorf("bad widths: %v", err)
	}
	if _, err := ParsePlan("chain", map[string]string{"gamma": "four"}); !errors.As(err, &fe) || fe.Field != "gamma" {
		t.Errorf("bad gamma: %v", err)
	}
	if _, err := ParsePlan("chain", map[string]string{"gamma": "0"}); err == nil || !strings.Contains(err.Error(), "gamma >= 1") {
		t.Errorf("gamma 0: %v", err)
	}
	p, err := ParsePlan("chain", map[string]string{"gamma": "3", "egt_widths": "x", "branch": "9"})
	if err != nil || !reflect.DeepEqual(p, Plan{Strategy: "chain", Gamma: 3}) {
		t.Errorf("chain with egt fields: %+v %v", p, err)
	}
	p, err = ParsePlan("tree", map[string]string{"widths": "2,1,1", "parents": "-1,-1,0"})
	if err != nil || p.Widths != nil || len(p.Parents) != 3 {
		t.Errorf("widths and parents: %+v %v", p, err)
	}
	if _, err := ParsePlan("nope", nil); err == nil {
		t.Error("an unknown strategy parsed")
	}
}

// TestPlanFieldsOffered: the faces offer each field once, with its
// strategies' help joined, its flag name, and none of the hidden ones.
func TestPlanFieldsOffered(t *testing.T) {
	by := map[string]PlanField{}
	for _, f := range PlanFields() {
		if _, dup := by[f.Name]; dup {
			t.Errorf("field %s offered twice", f.Name)
		}
		by[f.Name] = f
	}
	if g := by["gamma"]; g.Help != "chain: draft length; duo: largest draft budget" || g.Kind != IntField || g.Default != "4" {
		t.Errorf("gamma: %+v", g)
	}
	if w := by["w_max"]; w.Flag != "w-max" || w.Kind != IntField {
		t.Errorf("w_max: %+v", w)
	}
	if p := by["parents"]; !reflect.DeepEqual(p.Strategies, []string{"tree", "sequoia"}) || p.Kind != IntListField || strings.Contains(p.Help, "sequoia") {
		t.Errorf("parents: %+v", p)
	}
	if d := by["depth_policy"]; d.Kind != TextField || len(d.Choices) != 3 {
		t.Errorf("depth_policy: %+v", d)
	}
	if p := by["predictor_id"]; p.Flag != "predictor-id" || p.Kind != IntField || p.Default != "0" {
		t.Errorf("predictor_id: %+v", p)
	}
	if tl := by["tail"]; !reflect.DeepEqual(tl.Strategies, []string{"chain", "egt", "duo"}) || tl.Kind != IntField || tl.Default != "0" || tl.Flag != "tail" {
		t.Errorf("tail: %+v", tl)
	}
}
