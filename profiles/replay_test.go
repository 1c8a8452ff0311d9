package profiles

import (
	"context"
	"math"
	"path/filepath"
	"testing"
	"time"

	"arborist/engine/drafter"
	"arborist/engine/model"
	"arborist/engine/sample"
	"arborist/engine/spec"
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

// TestReplayMatchesTheEngine: on the first step of a prompt, the EGT the
// engine runs and the EGT replayed on the calibration's probe tree of that
// same step (the same context, so the same drafter and target) accept
// exactly the same number of tokens, for plans of every branch the probe
// holds: the replay is the engine's growth, pruning and verification, not
// an estimate of them. Bench target and its noisy drafter, greedy.
func TestReplayMatchesTheEngine(t *testing.T) {
	target := benchModel(t)
	draft, err := model.Load(filepath.Join("..", "..", "shared", "models", "bench", "draft-noisy-0.05.gguf"), target.Backend)
	if err != nil {
		t.Skipf("noisy drafter: %v", err)
	}
	t.Cleanup(func() { draft.Close() })
	ctx := context.Background()
	plans := []Plan{
		{Strategy: "egt", EGT: []int{1, 2, 2}, Branch: 2, WMax: 6},
		{Strategy: "egt", EGT: []int{2, 2, 2, 2}, Branch: 2, WMax: 12},
		{Strategy: "egt", EGT: []int{1, 1, 1, 1, 1, 1}, Branch: 1, WMax: 4},
		{Strategy: "egt", EGT: []int{1, 3}, Branch: 3, WMax: 5},
		{Strategy: "egt", EGT: []int{1, 1, 2, 2}, Branch: 2, WMax: 4},
	}
	mismatch := 0
	for _, prompt := range []string{"Once upon a time", "The little dog ran", "Lily and Ben", "One day, a bird"} {
		ids := target.Tok.Encode(prompt, true, false)
		eng := &spec.Engine{Target: target, Source: drafter.NewModel(draft, 0, target.CtxLen, sample.Params{}, "noisy")}
		acc, err := Calibrate(ctx, eng, [][]int{ids}, 16, nil)
		if err != nil {
			t.Fatal(err)
		}
		first := acc.Depths[:1]
		if len(first[0].Parents) == 0 || len(first[0].Path) != first[0].Accepted {
			t.Fatalf("%q: the probe was not recorded (%d nodes, path %v, %d accepted)", prompt, len(first[0].Parents), first[0].Path, first[0].Accepted)
		}
		for _, p := range plans {
			eng := &spec.Engine{Target: target, Source: drafter.NewModel(draft, 0, target.CtxLen, sample.Params{}, "noisy")}
			res, err := eng.Run(ctx, ids, spec.Config{Strategy: "egt", Widths: p.EGT, Branch: p.Branch, WMax: p.WMax, MaxTokens: 16})
			if err != nil {
				t.Fatal(err)
			}
			got := replayGrowth(probesOf(first), p.EGT, p.Branch).aal(p.WMax) - 1
			t.Logf("%q, %s: %v accepted", prompt, p, got)
			if want := float64(res.Steps[0].Accepted); got != want {
				t.Errorf("%q, %s: replayed %v accepted, the engine %v", prompt, p, got, want)
				mismatch++
			}
		}
	}
	if mismatch > 0 {
		t.Fatalf("%d of the replays differ from the engine", mismatch)
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
