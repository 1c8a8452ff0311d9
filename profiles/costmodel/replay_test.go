package costmodel

import (
	"math"
	"testing"
	"time"
)

// TestReplayEGT: an EGT plan is priced on the calibration's probe trees as
// the engine grows and prunes it. Three recorded steps over one small
// probe (root children 0: 0.6 and 1: 0.3; under 0, 2: 0.33 and 3: 0.24;
// under 1, 4: 0.27 and 5: 0.015), worked by hand:
//   - widths 1,1, branch 2: depth 2 expands node 0 only; by path
//     probability the tree is 0, 2, 1, 3. With w-max 3, the accepted paths
//     1-4, 0-3 and 0-2 keep 1, 1 and 2 tokens; with w-max 4, 1, 2 and 2.
//   - widths 2,2, branch 2, w-max 8: both first nodes expand, and every
//     path keeps 2.
//
// A plan wider than the probe deep down is priced on the tables, scaled as
// the replay scales the same shape with the widest branch the probe holds.
func TestReplayEGT(t *testing.T) {
	probe := []int16{-1, -1, 0, 0, 1, 1}
	pathP := []float32{0.6, 0.3, 0.33, 0.24, 0.27, 0.015}
	acc := Uniform(0.7, 0.5, 8, 4)
	for _, path := range [][]int16{{1, 4}, {0, 3}, {0, 2}} {
		acc.Depths = append(acc.Depths, DepthSample{Best: []float64{0.6, 0.33}, Accepted: len(path), Parents: probe, PathP: pathP, Path: path})
	}
	c := Costs{Verify: flat(time.Millisecond), Draft: flat(50 * time.Microsecond)}
	for _, tc := range []struct {
		widths  []int
		branch  int
		wmax    int
		want    float64
		replays bool
	}{
		{[]int{1, 1}, 2, 3, 1 + 4.0/3, true},
		{[]int{1, 1}, 2, 4, 1 + 5.0/3, true},
		{[]int{2, 2}, 2, 8, 3, true},
		{[]int{1, 1, 1}, 3, 8, 0, false}, // three children at depth 3, where the probe drafts two
	} {
		p := Plan{Strategy: "egt", EGT: tc.widths, Branch: tc.branch, WMax: tc.wmax}
		pr, err := Predict(p, acc, c)
		if err != nil {
			t.Fatal(err)
		}
		if replayable(p) != tc.replays {
			t.Fatalf("%s: replayable %v", p, !tc.replays)
		}
		table, _ := Predict(p, Uniform(0.7, 0.5, 8, 4), c)
		if !tc.replays {
			// the tables' figure, scaled as the replay scales the same
			// shape's with branch 2 (the widest the probe holds at depth 3)
			q := p
			q.Branch = 2
			rq, _ := Predict(q, acc, c)
			tq, _ := Predict(q, Uniform(0.7, 0.5, 8, 4), c)
			if want := 1 + (table.AAL-1)*(rq.AAL-1)/(tq.AAL-1); math.Abs(pr.AAL-want) > 1e-9 || pr.AAL == table.AAL {
				t.Errorf("%s: AAL %v, want the tables' %v scaled by the replay of branch 2 (%v against %v): %v", p, pr.AAL, table.AAL, rq.AAL, tq.AAL, want)
			}
			continue
		}
		if math.Abs(pr.AAL-tc.want) > 1e-9 || math.Abs(pr.Speedup-table.Speedup*tc.want/table.AAL) > 1e-9 {
			t.Errorf("%s: AAL %v (speedup %v), want %v replayed (tables: %v)", p, pr.AAL, pr.Speedup, tc.want, table.AAL)
		}
	}
	// the search's memo gives the same figures as pricing one plan alone
	for _, pr := range Search(acc, c, SearchSpace{MaxDepth: 2, MaxNodes: 8}) {
		if pr.Plan.Strategy != "egt" || pr.Plan.DepthPolicy != "" {
			continue
		}
		one, _ := Predict(pr.Plan, acc, c)
		if one.AAL != pr.AAL {
			t.Fatalf("%s: %v in the search, %v alone", pr.Plan, pr.AAL, one.AAL)
		}
	}
}

// TestReplayMalformedProbes: probe records read back from a damaged
// database (parents pointing forward or out of range, accepted nodes out
// of range, probabilities missing) are replayed without a panic, a parent
// that cannot be one counting as the root, a path node that is no node
// ending the path, and a record without its probabilities left out.
func TestReplayMalformedProbes(t *testing.T) {
	acc := Uniform(0.7, 0.5, 8, 4)
	acc.Depths = []DepthSample{
		{Parents: []int16{5, -7, 0}, PathP: []float32{0.5, 0.4, 0.2}, Path: []int16{0, 2}},    // forward and negative parents: roots
		{Parents: []int16{-1, 0}, PathP: []float32{0.9, 0.8}, Path: []int16{0, 1, 9, -3}},     // the path runs off the tree
		{Parents: []int16{-1, 0}, PathP: []float32{0.9}, Path: []int16{0}},                    // probabilities missing: left out
		{Parents: []int16{-1, 0, 1}, PathP: []float32{0.9, 0.8, 0.7}, Path: []int16{0, 1, 2}}, // whole
	}
	if n := acc.Probes(); n != 3 {
		t.Fatalf("%d probes counted, want 3", n)
	}
	p := Plan{Strategy: "egt", EGT: []int{1, 1, 1}, Branch: 1, WMax: 4}
	g := replayGrowth(probesOf(acc.Depths), p.EGT, p.Branch)
	// step 1: nodes 0 and 1 are the root's children (their parents cannot
	// be), node 2 is node 0's; branch 1 grows 0 then 2, so the path 0-2
	// keeps 2; step 2: 0-1 keeps 2 (node 9 ends it); step 4: 3
	if want := 1 + (2.0+2+3)/3; len(g) != 3 || g.aal(4) != want {
		t.Fatalf("replayed %v (AAL %v), want 3 steps, AAL %v", g, g.aal(4), want)
	}
	if _, err := Predict(p, acc, Costs{Verify: flat(time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
}

// TestReplayThresholdWeighsKinds: on steps of both kinds, a threshold
// replay weighs them as steadyMix's model meets them: a regular step that
// keeps at most L-2 of its L levels is followed, at the calibration's
// re-sampling rate, by a re-sampled one; the level weights sum to 1 and
// the tokens a step are their weighted sum; with one kind, every step
// weighs the same.
func TestReplayThresholdWeighsKinds(t *testing.T) {
	// chains of three nodes: regular steps confident to depth 3 (path
	// probabilities 0.9, 0.8, 0.7), half accepted in full and half
	// rejected at once; re-sampled steps unsure at once (0.3), keeping
	// their one token
	full := DepthSample{Parents: []int16{-1, 0, 1}, PathP: []float32{0.9, 0.8, 0.7}, Path: []int16{0, 1, 2}}
	zero := DepthSample{Parents: []int16{-1, 0, 1}, PathP: []float32{0.9, 0.8, 0.7}}
	one := DepthSample{Parents: []int16{-1, 0, 1}, PathP: []float32{0.3, 0.2, 0.1}, Path: []int16{0}, Resampled: true}
	acc := &Acceptance{} // no rank table: every step that could re-sample did (rate 1)
	for i := 0; i < 10; i++ {
		acc.Depths = append(acc.Depths, full, zero, one)
	}
	p := Plan{Strategy: "egt", EGT: []int{1, 1, 1}, Branch: 1, WMax: 4, DepthPolicy: "threshold", DepthMin: 0.5}
	rp, ok := replayThreshold(p, acc, nil)
	if !ok {
		t.Fatal("not replayed")
	}
	// half the regular steps keep 0 <= 3-2: q = 0.5, so regular steps
	// weigh 2/3 (3 levels; 3 and 0 tokens) and re-sampled ones 1/3 (1
	// level, 1 token): 1 + 2/3*1.5 + 1/3*1 tokens a step
	sum := 0.0
	for _, w := range rp.steps {
		sum += w
	}
	if math.Abs(sum-1) > 1e-9 || math.Abs(rp.steps[3]-2.0/3) > 1e-9 || math.Abs(rp.steps[1]-1.0/3) > 1e-9 || math.Abs(rp.aal-(1+1+1.0/3)) > 1e-9 {
		t.Fatalf("levels %v, tokens %v; want 2/3 on 3 levels, 1/3 on 1, %.4f tokens a step", rp.steps, rp.aal, 1+1+1.0/3)
	}
	// regular steps that all keep their tokens never lead to re-sampling
	acc.Depths = acc.Depths[:0]
	for i := 0; i < 10; i++ {
		acc.Depths = append(acc.Depths, full, one)
	}
	if rp, _ = replayThreshold(p, acc, nil); math.Abs(rp.steps[3]-1) > 1e-9 || math.Abs(rp.aal-4) > 1e-9 {
		t.Fatalf("levels %v, tokens %v; want every step regular, 4 tokens", rp.steps, rp.aal)
	}
	// one kind: every step weighs the same (full, zero, one: 2:1 by count)
	acc.Depths = acc.Depths[:0]
	for i := 0; i < 10; i++ {
		acc.Depths = append(acc.Depths, full, zero, one)
	}
	for i := range acc.Depths {
		acc.Depths[i].Resampled = false
	}
	if rp, _ = replayThreshold(p, acc, nil); math.Abs(rp.steps[3]-2.0/3) > 1e-9 || math.Abs(rp.aal-(1+4.0/3)) > 1e-9 {
		t.Fatalf("one kind: levels %v, tokens %v, want 2/3 on 3 levels, %.4f tokens", rp.steps, rp.aal, 1+4.0/3)
	}
	// a fixed-depth EGT is not a threshold plan
	p.DepthPolicy, p.DepthMin = "", 0
	if _, ok := replayThreshold(p, acc, nil); ok {
		t.Error("a fixed EGT was replayed as a threshold plan")
	}
}
