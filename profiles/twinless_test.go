package profiles

import (
	"testing"

	"arborist/engine/spec"
	"arborist/profiles/costmodel"
)

// TestTwinless: plans doing the same work under other names (a chain and
// its tree of widths 1; plans priced identically in every figure) are
// listed once, the first kept; a plan doing other work stays.
func TestTwinless(t *testing.T) {
	x := Explore(ExploreOptions{Alpha: 0.8, Decay: 0.4, Depth: 8})
	price := func(strategy string, v map[string]string) Prediction {
		t.Helper()
		p, err := spec.ParsePlan(strategy, v)
		if err != nil {
			t.Fatal(err)
		}
		pr, err := costmodel.Predict(p, x.acc, x.costs)
		if err != nil {
			t.Fatal(err)
		}
		return pr
	}
	chain := price("chain", map[string]string{"gamma": "3"})
	tree := price("tree", map[string]string{"widths": "1,1,1"})
	other := price("chain", map[string]string{"gamma": "5"})
	same := other
	same.Plan.Strategy, same.Plan.Tail = "duo", 2 // another name, the same figures
	got := Twinless([]Prediction{chain, tree, other, same})
	if len(got) != 2 || got[0].Plan.String() != chain.Plan.String() || got[1].Plan.String() != other.Plan.String() {
		var names []string
		for _, p := range got {
			names = append(names, p.Plan.String())
		}
		t.Errorf("twinless: %v", names)
	}
	if n := len(Twinless([]Prediction{chain, other})); n != 2 {
		t.Errorf("two different plans merged: %d", n)
	}
}
