package spec

import (
	"math"
	"slices"
	"testing"
)

// TestCanonicalSameWork: every plan a search offers prices the same
// after Canonical (its tree, the acceptance of every node and its drafter
// passes), so ranking by the canonical form changes no figure; and the
// plans that do a chain's work are named as that chain.
func TestCanonicalSameWork(t *testing.T) {
	at := func(d, r int) float64 { return 0.8 * math.Pow(0.4, float64(r)) / float64(d+1) }
	sp := Space{Accept: at, Thresholds: []float64{0.2}, Sequences: []int{2}, Tails: []int{2, 4}}
	changed := 0
	for _, p := range Candidates(sp) {
		c := p.Canonical()
		if c.Key() != p.Key() {
			changed++
		}
		a, err1 := p.Expect(at)
		b, err2 := c.Expect(at)
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("%s -> %s: %v / %v", p, c, err1, err2)
		}
		if err1 != nil {
			continue
		}
		if math.Abs(a.AAL()-b.AAL()) > 1e-12 || len(a.Values) != len(b.Values) || !slices.Equal(a.PerDepth, b.PerDepth) ||
			a.Overlap != b.Overlap || a.Ahead != b.Ahead || math.Abs(a.AheadHit-b.AheadHit) > 1e-12 || !slices.Equal(a.AheadWidths, b.AheadWidths) ||
			max(a.Verified, len(a.Values)) != max(b.Verified, len(b.Values)) || p.Concurrent() != c.Concurrent() {
			t.Errorf("%s -> %s changes the work: AAL %v/%v, nodes %d/%d, passes %v/%v", p, c, a.AAL(), b.AAL(), len(a.Values), len(b.Values), a.PerDepth, b.PerDepth)
		}
		if c.Canonical().Key() != c.Key() {
			t.Errorf("%s is not a fixed point: %s", c, c.Canonical())
		}
	}
	if changed == 0 {
		t.Fatal("no candidate had another canonical form: too weak a test")
	}
	for _, p := range []Plan{
		{Strategy: "tree", Widths: []int{1, 1, 1}},
		{Strategy: "tree", Parents: []int{-1, 0, 1}},
		{Strategy: "sequoia", Parents: []int{-1, 0, 1}},
		{Strategy: "egt", EGT: []int{1, 1, 1}, Branch: 1, WMax: 8},
		{Strategy: "egt", EGT: []int{1, 2, 4}, Branch: 1, WMax: 3, DepthPolicy: "fixed"},
	} {
		if c := p.Canonical(); c.String() != "chain gamma=3" {
			t.Errorf("%s is named %s, want chain gamma=3", p, c)
		}
	}
	if c := (Plan{Strategy: "egt", EGT: []int{1, 2, 4}, Branch: 2, WMax: 64}).Canonical(); c.String() != "tree 2,2,2" {
		t.Errorf("a full EGT of branch 2 is named %s", c)
	}
	if c := (Plan{Strategy: "egt", EGT: []int{1, 1, 1}, Branch: 1, WMax: 2}).Canonical(); c.Strategy != "egt" {
		t.Errorf("an EGT pruned below what it drafts is a %s", c)
	}
	if c := (Plan{Strategy: "egt", EGT: []int{1, 1, 1}, Branch: 1, WMax: 3, DepthPolicy: "threshold", DepthMin: 0.2}).Canonical(); c.Strategy != "egt" {
		t.Errorf("a threshold EGT is a %s", c)
	}
	if d := (Plan{Strategy: "duo", Gamma: 3, MaxSeqs: 4}).String(); d != "duo gamma=3 sequences=4" {
		t.Errorf("duo is named %q", d)
	}
	// a tail is held to the ends a draft has; an EGT's implies aot, and
	// an EGT drafting ahead is no static tree
	for p, want := range map[string]Plan{
		"chain tail 9":    {Strategy: "chain", Gamma: 4, Tail: 9},
		"duo tail 9":      {Strategy: "duo", Gamma: 2, MaxSeqs: 2, Tail: 9},
		"egt tail 2":      {Strategy: "egt", EGT: []int{1, 2, 4}, Branch: 2, WMax: 64, Tail: 2},
		"egt tail 99":     {Strategy: "egt", EGT: []int{1, 2}, Branch: 2, WMax: 4, Tail: 99},
		"egt pad tail 99": {Strategy: "egt", EGT: []int{1, 2}, Branch: 2, WMax: 9, Pad: true, Tail: 99},
	} {
		c := want.Canonical()
		switch p {
		case "chain tail 9":
			if c.String() != "chain gamma=4 tail=5" {
				t.Errorf("%s: %s", p, c)
			}
		case "duo tail 9":
			if c.String() != "duo gamma=2 sequences=2 tail=3" {
				t.Errorf("%s: %s", p, c)
			}
		case "egt tail 2":
			if c.String() != "egt widths=1,2,4 branch=2 w-max=14 aot tail=2" {
				t.Errorf("%s: %s", p, c)
			}
		case "egt tail 99", "egt pad tail 99":
			// two levels of branch 2 grow six nodes: seven ends at most
			// (five when pruned to four), pads being none
			if w := map[string]int{"egt tail 99": 5, "egt pad tail 99": 7}[p]; c.Tail != w || !c.AOT {
				t.Errorf("%s: %s, want tail=%d with aot", p, c, w)
			}
		}
	}
}
