package profiles

import (
	"testing"
	"time"

	"arborist/profiles/costmodel"
	"arborist/profiles/store"
)

// TestFamilies: a ranking splits into every family it holds, each with its
// best plan at every number of draft levels, in the strategies' order; the
// plan named as the best is on its family's line even where another plan
// of that family and level priced the same or more.
func TestFamilies(t *testing.T) {
	flat := []store.Point{{W: 1, Median: 10 * time.Millisecond}, {W: 64, Median: 14 * time.Millisecond}}
	ranked := costmodel.Search(costmodel.Uniform(0.8, 0.4, 8, 4), costmodel.Costs{Verify: flat, Draft: flat[:1]}, costmodel.SearchSpace{MaxGamma: 6, MaxDepth: 4, MaxNodes: 16})
	fams := Families(ranked, nil)
	strategies := map[string]bool{}
	for _, p := range ranked {
		strategies[p.Plan.Strategy] = true
	}
	if len(fams) != len(strategies) || len(fams) < 4 {
		t.Fatalf("%d families for %d strategies: %+v", len(fams), len(strategies), strategies)
	}
	order := map[string]int{}
	for i, s := range Strategies() {
		order[s] = i
	}
	for i, f := range fams {
		if i > 0 && order[fams[i-1].Strategy] >= order[f.Strategy] {
			t.Errorf("family %s listed after %s", f.Strategy, fams[i-1].Strategy)
		}
		for j, p := range f.Best {
			if j > 0 && Levels(f.Best[j-1]) >= Levels(p) {
				t.Errorf("%s: levels out of order", f.Strategy)
			}
			for _, q := range ranked {
				if q.Plan.Strategy == f.Strategy && Levels(q) == Levels(p) && q.Speedup > p.Speedup {
					t.Errorf("%s at %d levels: %s (%.3fx) drawn, %s priced %.3fx", f.Strategy, Levels(p), p.Plan, p.Speedup, q.Plan, q.Speedup)
				}
			}
		}
	}
	// the named best is drawn, even against a tie of its family and level
	named := ranked[len(ranked)/2]
	named.Speedup = 1e6
	found := false
	for _, f := range Families(ranked, &named) {
		for _, p := range f.Best {
			found = found || (p.Plan.String() == named.Plan.String() && p.Speedup == named.Speedup)
		}
	}
	if !found {
		t.Errorf("the named best %s is on no line", named.Plan)
	}
}
