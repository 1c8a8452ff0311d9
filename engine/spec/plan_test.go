package spec

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"arborist/engine/tree"
)

func TestRegistry(t *testing.T) {
	if got := Strategies(); !slices.Equal(got, []string{"ar", "chain", "tree", "egt", "duo", "sequoia"}) {
		t.Errorf("strategies %v", got)
	}
	if _, err := Lookup("warp"); err == nil || !strings.Contains(err.Error(), "chain") {
		t.Errorf("unknown strategy: %v", err)
	}
	if n := len(Candidates(Space{})); n < 100 {
		t.Errorf("only %d candidate plans", n)
	}
}

// TestPlanConfig: a plan keeps only the fields its strategy reads, becomes
// the engine configuration, and impossible or oversized shapes are refused.
func TestPlanConfig(t *testing.T) {
	all := Plan{Gamma: 3, Widths: []int{2, 1}, Parents: []int{-1, -1, 0}, EGT: []int{1, 2}, Branch: 2, WMax: 4, AOT: true, DepthPolicy: "threshold", DepthMin: 0.3, MaxSeqs: 2}
	for _, name := range Strategies() {
		p := all
		p.Strategy = name
		p = p.Trim()
		c, err := p.Config()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		c.MaxTokens = 8
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if p.Concurrent() != (name == "duo" || name == "egt") {
			t.Errorf("%s: concurrent %v", name, p.Concurrent())
		}
		// a tail budget makes every strategy that reads it draft while
		// the target verifies
		p.Tail = 2
		if p.Concurrent() != (name == "duo" || name == "egt" || name == "chain") {
			t.Errorf("%s with a tail: concurrent %v", name, p.Concurrent())
		}
	}
	if p := (Plan{Strategy: "chain", Gamma: 3, WMax: 9}).Trim(); p.WMax != 0 || p.Gamma != 3 || p.String() != "chain gamma=3" {
		t.Errorf("trimmed chain %+v %q", p, p)
	}
	c, _ := Plan{Strategy: "egt", EGT: []int{1, 2}, Branch: 2, WMax: 4, DepthPolicy: "threshold", DepthMin: 0.3}.Config()
	if th, ok := c.Depth.(Threshold); !ok || th.Min != 0.3 || th.Max != 2 {
		t.Errorf("threshold policy %#v", c.Depth)
	}
	for _, bad := range []Plan{
		{Strategy: "chain"},
		{Strategy: "tree"},
		{Strategy: "sequoia"},
		{Strategy: "sequoia", Parents: []int{-1, 2}},
		{Strategy: "tree", Widths: []int{2, 0}},
		{Strategy: "egt", EGT: []int{1}, Branch: 0, WMax: 4},
		{Strategy: "duo", Gamma: 2, MaxSeqs: 5},
		{Strategy: "tree", Widths: []int{64, 64, 64}},
		{Strategy: "chain", Gamma: MaxTreeNodes + 1},
		{Strategy: "egt", EGT: []int{1}, Branch: 1, WMax: 1, DepthPolicy: "sometimes"},
		{Strategy: "chain", Gamma: 2, Tail: -1},
		{Strategy: "chain", Gamma: 2, Tail: MaxTreeNodes + 1},
		{Strategy: "chain", Gamma: 200, Tail: 200}, // 201 ends, 200 levels each: too much ahead
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// TestTreeExpectParents: a tree given as a parent list is priced as the
// same tree given by widths.
func TestTreeExpectParents(t *testing.T) {
	at := func(d, r int) float64 { return math.Pow(0.7, float64(d+1)) * math.Pow(0.5, float64(r)) }
	widths := []int{3, 2, 1}
	st, err := tree.FromWidths(widths)
	if err != nil {
		t.Fatal(err)
	}
	a, err := Plan{Strategy: "tree", Widths: widths}.Expect(at)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Plan{Strategy: "tree", Parents: st.Parents}.Expect(at)
	if err != nil {
		t.Fatal(err)
	}
	sum := func(xs []float64) float64 {
		s := 0.0
		for _, x := range xs {
			s += x
		}
		return s
	}
	if len(a.Values) != len(b.Values) || math.Abs(sum(a.Values)-sum(b.Values)) > 1e-12 || !slices.Equal(a.PerDepth, b.PerDepth) {
		t.Errorf("widths %v %v, parents %v %v", a.Values, a.PerDepth, b.Values, b.PerDepth)
	}
}

// TestSequoiaCandidates: with an acceptance model the search gets the
// DP-optimal tree of every size; each is priced by the cost model as the
// DP valued it, and no chain or static tree of the same size is worth more.
func TestSequoiaCandidates(t *testing.T) {
	at := func(d, r int) float64 { return []float64{0.6, 0.2, 0.1, 0.05}[min(r, 3)] * math.Pow(0.9, float64(d)) }
	if n := len(Candidates(Space{})); n != len(Candidates(Space{OptimalNodes: 30})) {
		t.Errorf("sequoia plans without an acceptance model")
	}
	sp := Space{Accept: at, OptimalNodes: 30}
	best := map[int]float64{} // nodes -> expected accepted length of the DP tree
	worth := func(p Plan) (int, float64) {
		e, err := p.Expect(at)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		s := 0.0
		for _, v := range e.Values {
			s += v
		}
		return len(e.Values), s
	}
	_, values, err := tree.Optimal(at, 30, 12, sequoiaRanks)
	if err != nil {
		t.Fatal(err)
	}
	all := Candidates(sp)
	for _, p := range all {
		if p.Strategy != "sequoia" {
			continue
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		n, v := worth(p)
		if math.Abs(v-values[n-1]) > 1e-9 {
			t.Errorf("%s priced %.6f, DP %.6f", p, v, values[n-1])
		}
		best[n] = v
	}
	if len(best) != 30 {
		t.Fatalf("%d sequoia sizes, want 30", len(best))
	}
	for _, p := range all {
		if p.Strategy != "chain" && p.Strategy != "tree" {
			continue
		}
		if n, v := worth(p); n <= 30 && v > best[n]+1e-9 {
			t.Errorf("%s (%d nodes) is worth %.6f, more than the DP tree's %.6f", p, n, v, best[n])
		}
	}
}

// TestEGTCandidatesAreSearched: the EGT family is a search over widths
// (not a handful of templates): no plan twice, every one within the
// limits and priced by its cost model, shapes beyond the old templates,
// ahead-of-time and padded variants, and padding only where it adds nodes.
func TestEGTCandidatesAreSearched(t *testing.T) {
	sp := Space{}
	sp.defaults()
	seen := map[string]bool{}
	var aot, pad int
	wide := false
	for _, p := range egtCandidates(sp) {
		s := p.String()
		if seen[s] {
			t.Fatalf("%s listed twice", s)
		}
		seen[s] = true
		if err := p.bounded(); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		e, err := p.Expect(func(d, r int) float64 { return 0.5 })
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if p.Pad {
			pad++
			if e.Verified != p.WMax || len(e.Values) >= p.WMax {
				t.Fatalf("%s pads %d nodes to %d", s, len(e.Values), e.Verified)
			}
		}
		if p.AOT {
			aot++
			if e.Ahead != 1 || !(e.AheadHit > 0 && e.AheadHit < 1) {
				t.Fatalf("%s: ahead %d, hit %v", s, e.Ahead, e.AheadHit)
			}
		}
		if Ints(p.EGT) == "1,3,4" {
			wide = true
		}
	}
	if len(seen) < 2000 || aot == 0 || pad == 0 || !wide {
		t.Fatalf("%d plans (%d AOT, %d padded, widths 1,3,4 present: %v)", len(seen), aot, pad, wide)
	}
}

// TestTailExpect: a tail budget prices what the engine prepares. The
// chance a prepared end is of use never falls as the budget grows, never
// exceeds one, and with every end of a chain prepared it is the chance
// that the bonus is the drafter's best token that is not the rejected
// one (or, after a full acceptance, its best): the sum over the ends of
// reaching each and guessing right there. Without a tail nothing changes
// (egt keeps its head's figure), and the work beside verification is a
// pass for the prepared leaves' bonus guesses and one a level, each as
// wide as the ends prepared.
func TestTailExpect(t *testing.T) {
	at := func(d, r int) float64 {
		return []float64{0.7, 0.15, 0.05, 0.02}[min(r, 3)] * math.Pow(0.95, float64(d))
	}
	for _, base := range []Plan{
		{Strategy: "chain", Gamma: 4},
		{Strategy: "egt", EGT: []int{1, 2, 2}, Branch: 2, WMax: 6, AOT: true},
		{Strategy: "duo", Gamma: 5, MaxSeqs: 1},
	} {
		ex0, err := base.Expect(at)
		if err != nil {
			t.Fatal(err)
		}
		prev := 0.0
		for tail := 1; tail <= 16; tail++ {
			p := base
			p.Tail = tail
			ex, err := p.Expect(at)
			if err != nil {
				t.Fatal(err)
			}
			if !ex.Overlap || ex.Ahead < 1 || ex.AheadHit < prev-1e-12 || ex.AheadHit > 1 {
				t.Fatalf("%s: overlap %v, ahead %d, hit %v (tail %d: %v)", p, ex.Overlap, ex.Ahead, ex.AheadHit, tail-1, prev)
			}
			if ex.AAL() != ex0.AAL() || !slices.Equal(ex.PerDepth, ex0.PerDepth) {
				t.Errorf("%s changes the tree: AAL %v / %v", p, ex.AAL(), ex0.AAL())
			}
			ends := min(tail, 1+len(ex.Values))
			for i, w := range ex.AheadWidths {
				if w < 1 || w > ends || (i > 0 && w != ends) {
					t.Errorf("%s: ahead widths %v with %d ends", p, ex.AheadWidths, ends)
				}
			}
			prev = ex.AheadHit
		}
		if base.Strategy == "egt" {
			p := base
			p.Tail = 0
			if ex, _ := p.Expect(at); ex.AheadHit != ex0.AheadHit || ex.AheadWidths != nil {
				t.Errorf("egt without a tail: hit %v, widths %v", ex.AheadHit, ex.AheadWidths)
			}
		}
	}
	// every end of a chain of two: stop at the root and guess rank 1,
	// stop after one token and guess rank 1, or accept both and guess rank 0
	ex, err := Plan{Strategy: "chain", Gamma: 2, Tail: 3}.Expect(at)
	if err != nil {
		t.Fatal(err)
	}
	want := at(0, 1) + at(0, 0)*at(1, 1) + at(0, 0)*at(1, 0)*at(2, 0)
	if math.Abs(ex.AheadHit-want) > 1e-12 || !slices.Equal(ex.AheadWidths, []int{1, 3, 3}) || ex.Ahead != 2 {
		t.Errorf("chain gamma=2 tail=3: hit %v want %v, widths %v, ahead %d", ex.AheadHit, want, ex.AheadWidths, ex.Ahead)
	}
}

// TestRoles: what the faces ask the registry instead of naming a
// strategy: where they start, plain decoding, the what-if screen's
// choices and how it reads "your plan".
func TestRoles(t *testing.T) {
	if DefaultStrategy() != "chain" || PlainStrategy() != "ar" || PlainPlan().Key() != (Plan{Strategy: "ar"}).Key() {
		t.Errorf("default %q, plain %q", DefaultStrategy(), PlainStrategy())
	}
	for name, plain := range map[string]bool{"ar": true, "chain": false, "duo": false, "nothing": false} {
		if IsPlain(name) != plain {
			t.Errorf("IsPlain(%q) = %v", name, !plain)
		}
	}
	names, start := WhatIfStrategies()
	if !slices.Equal(names, []string{"chain", "tree", "egt"}) || start != "egt" {
		t.Errorf("what-if strategies %v from %q", names, start)
	}
	for _, c := range []struct {
		strategy string
		want     Plan
	}{
		{"chain", Plan{Strategy: "chain", Gamma: 3}},
		{"tree", Plan{Strategy: "tree", Widths: []int{3, 2}}},
		{"egt", Plan{Strategy: "egt", EGT: []int{3, 2}, Branch: 2, WMax: 8}},
		{"duo", Plan{Strategy: "egt", EGT: []int{3, 2}, Branch: 2, WMax: 8}}, // read as the screen's start
	} {
		if got := WhatIfPlan(c.strategy, []int{3, 2}, 8); got.Key() != c.want.Key() {
			t.Errorf("what-if %s: %+v, want %+v", c.strategy, got, c.want)
		}
	}
}

// TestAsGrowing: a chain grows as the EGT of branch 1 whose canonical
// form is that chain again (the one conversion both ways); an EGT is
// itself; a static tree or duo has no growing form.
func TestAsGrowing(t *testing.T) {
	for g := 1; g <= 8; g++ {
		p, ok := ChainPlan(g).AsGrowing()
		if !ok || !p.Grows() || p.Key() != (Plan{Strategy: "egt", EGT: slices.Repeat([]int{1}, g), Branch: 1, WMax: g}).Key() {
			t.Fatalf("chain gamma=%d grows as %s (%v)", g, p, ok)
		}
		if c := p.Canonical(); c.Key() != ChainPlan(g).Key() {
			t.Errorf("chain gamma=%d -> %s -> %s", g, p, c)
		}
	}
	e := Plan{Strategy: "egt", EGT: []int{1, 2}, Branch: 2, WMax: 4, DepthPolicy: "threshold", DepthMin: 0.2}
	if p, ok := e.AsGrowing(); !ok || p.Key() != e.Key() {
		t.Errorf("%s grows as %s (%v)", e, p, ok)
	}
	for _, p := range []Plan{TreePlan([]int{2, 1}), {Strategy: "duo", Gamma: 4}, PlainPlan(), {Strategy: "nothing"}} {
		if _, ok := p.AsGrowing(); ok {
			t.Errorf("%s has a growing form", p)
		}
	}
}

// TestParseInts: a comma-separated list with spaces around its items
// reads as its integers, a blank string as none, and an empty item, a
// word or a fraction is refused, naming the list.
func TestParseInts(t *testing.T) {
	for in, want := range map[string][]int{"3,2,1": {3, 2, 1}, " 1, 4 ,8 ": {1, 4, 8}, "-2": {-2}, "": nil, "  ": nil} {
		got, err := ParseInts(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("ParseInts(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"1,,2", "3,", ",3", "1, ,2", "a", "1.5", "2;3"} {
		if got, err := ParseInts(in); err == nil || !strings.Contains(err.Error(), strconv.Quote(in)) {
			t.Errorf("ParseInts(%q) = %v, %v; want an error naming it", in, got, err)
		}
	}
}
