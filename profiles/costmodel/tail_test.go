package costmodel

import (
	"math/rand/v2"
	"testing"
	"time"

	"arborist/profiles/latency"
)

// TestPredictTail: a tail budget prices the next draft prepared at the
// most likely end positions. With certain acceptance and a drafter that
// always guesses the bonus, a chain with a tail at every end finds its
// whole draft done and pays only for what runs beside verification (the
// leaf's bonus guess and three levels at four ends: 4 passes of 2 ms);
// a source that keeps nothing it drafted ahead pays the whole draft on
// top; and drafting ahead that outlasts verification is waited for.
func TestPredictTail(t *testing.T) {
	ms := time.Millisecond
	c := Costs{Verify: flat(10 * ms), Draft: flat(2 * ms), Overhead: ms}
	sure := Uniform(1, 0.5, 8, 3)
	chain, err := Predict(Plan{Strategy: "chain", Gamma: 3}, sure, c)
	if err != nil {
		t.Fatal(err)
	}
	tail, err := Predict(Plan{Strategy: "chain", Gamma: 3, Tail: 4}, sure, c)
	if err != nil {
		t.Fatal(err)
	}
	if chain.Step != 6*ms+10*ms+ms || tail.Step != 10*ms+ms {
		t.Fatalf("steps %v (chain) and %v (every end prepared, always hit), want 17ms and 11ms", chain.Step, tail.Step)
	}
	c.Forgets = true
	forgot, _ := Predict(Plan{Strategy: "chain", Gamma: 3, Tail: 4}, sure, c)
	if forgot.Step != 6*ms+10*ms+ms {
		t.Errorf("a source that keeps nothing: step %v, want the whole draft and verification, 17ms", forgot.Step)
	}
	c.Forgets = false
	c.Verify = flat(5 * ms) // the ends' 8 ms of drafting outlast a 5 ms verification
	slow, _ := Predict(Plan{Strategy: "chain", Gamma: 3, Tail: 4}, sure, c)
	if slow.Step != 8*ms+ms {
		t.Errorf("drafting ahead outlasting verification: step %v, want 9ms", slow.Step)
	}
}

// TestTailWithinBounds: on random acceptance tables and noisy curves,
// every plan with a tail stays within what physics allows: its speedup is
// at most its tokens a step, it keeps its tokens a step and its nodes
// (a tail drafts, it verifies nothing), its step is at least verification
// and the overhead, and against the same plan without a tail it saves at
// most the drafting of the next step's levels it prepares (the work that
// comes off the critical path), never more.
func TestTailWithinBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	curve := func(base, slope float64) []latency.Point {
		var pts []latency.Point
		for w := 1; w <= 40; w++ {
			d := base + slope*float64(w) + rng.Float64()*0.3*base
			pts = append(pts, latency.Point{W: w, Median: time.Duration(d * float64(time.Microsecond)), Spread: time.Microsecond, Reps: 5})
		}
		return pts
	}
	plans := []Plan{
		{Strategy: "chain", Gamma: 4},
		{Strategy: "chain", Gamma: 7},
		{Strategy: "egt", EGT: []int{1, 2, 2, 3}, Branch: 2, WMax: 10, AOT: true},
		{Strategy: "duo", Gamma: 6},
	}
	for trial := 0; trial < 40; trial++ {
		acc := Uniform(0.3+0.69*rng.Float64(), 0.2+0.6*rng.Float64(), 8, 4)
		c := Costs{Verify: curve(2000+8000*rng.Float64(), 200*rng.Float64()), Draft: curve(50+1500*rng.Float64(), 100*rng.Float64()),
			Overhead: time.Duration(rng.IntN(300)) * time.Microsecond}
		c.Splits = []SplitCosts{{TargetThreads: 1, DraftThreads: 1, Verify: c.Verify, Draft: c.Draft}}
		for _, base := range plans {
			none, err := Predict(base, acc, c)
			if err != nil {
				t.Fatal(err)
			}
			for _, tl := range []int{1, 2, 4, 16} {
				p := base
				p.Tail = tl
				pr, err := Predict(p, acc, c)
				if err != nil {
					t.Fatal(err)
				}
				if pr.Speedup > pr.AAL*(1+1e-9) {
					t.Errorf("%s: %.3fx above its %.3f tokens a step", p, pr.Speedup, pr.AAL)
				}
				if pr.AAL != none.AAL || pr.Nodes != none.Nodes {
					t.Errorf("%s changes what a step verifies: AAL %v/%v, nodes %d/%d", p, pr.AAL, none.AAL, pr.Nodes, none.Nodes)
				}
				if pr.Step < pr.Verify+c.Overhead {
					t.Errorf("%s: step %v below verification and overhead %v", p, pr.Step, pr.Verify+c.Overhead)
				}
				// the most a tail can take off: the drafting it prepares
				// (every pass of the next step for a chain, its ahead
				// passes otherwise), wherever the plan without it stood
				ex, _ := p.Expect(acc.At)
				var prepared time.Duration
				for i, w := range pr.PerDepth {
					if i < ex.Ahead {
						prepared += Interp(c.Draft, w)
					}
				}
				if pr.Step < none.Step-prepared-time.Microsecond {
					t.Errorf("%s: step %v, more than the %v it prepares below %v without a tail", p, pr.Step, prepared, none.Step)
				}
			}
		}
	}
}

// TestTailOnTwoCores: where the target loses to the drafter's thread
// what the tail takes off its critical path (2 cores: the target on one
// thread verifies 60% slower than on two), a chain with a tail prices
// below the same chain drafted in turn on every thread, so the search
// ranks the chain first; the search offers tail plans, each once by its
// canonical form.
func TestTailOnTwoCores(t *testing.T) {
	ms := time.Millisecond
	acc := Uniform(0.8, 0.4, 8, 3)
	c := Costs{Verify: flat(10 * ms), Draft: flat(ms / 2), Overhead: ms / 4, OneDevice: true,
		Splits: []SplitCosts{{TargetThreads: 1, DraftThreads: 1, Verify: flat(16 * ms), Draft: flat(ms / 2)}}}
	chain, _ := Predict(Plan{Strategy: "chain", Gamma: 4}, acc, c)
	tail, _ := Predict(Plan{Strategy: "chain", Gamma: 4, Tail: 5}, acc, c)
	if tail.Speedup >= chain.Speedup {
		t.Errorf("on 2 cores chain with a tail %.3fx, without %.3fx: the split's slower target is not priced", tail.Speedup, chain.Speedup)
	}
	ranked := Search(acc, c, SearchSpace{MaxGamma: 6, MaxDepth: 3, MaxNodes: 12})
	seen := map[string]bool{}
	tails := 0
	for _, pr := range ranked {
		k := pr.Plan.Canonical().Key()
		if seen[k] && !pr.Plan.Adapts() {
			t.Errorf("%s ranked twice", pr.Plan)
		}
		seen[k] = true
		if pr.Plan.Tail > 0 {
			tails++
		}
	}
	if tails == 0 {
		t.Fatal("the search offered no plan with a tail")
	}
	if ranked[0].Plan.Tail > 0 {
		t.Errorf("best plan on 2 cores %s (%.3fx)", ranked[0].Plan, ranked[0].Speedup)
	}
	// with a drafter of its own (another device: the target keeps its
	// speed) the tail pays
	c.Splits[0].Verify = flat(10 * ms)
	tail, _ = Predict(Plan{Strategy: "chain", Gamma: 4, Tail: 5}, acc, c)
	if tail.Speedup <= chain.Speedup {
		t.Errorf("with the target at full speed chain with a tail %.3fx, without %.3fx", tail.Speedup, chain.Speedup)
	}
}

// TestPredictBesideTheDrafter: where the split's curves were also
// measured beside each other (SplitCosts.Beside: the target with the
// drafter drafting throughout; DraftBeside: the drafter with the target
// verifying throughout), the drafting beside a pass is priced on the
// drafter's beside curve and the pass pays the share of the difference
// that drafting runs through: a chain with a tail at every end drafts 4
// passes of 2 ms beside a pass of 10 ms alone and 16 ms beside a busy
// drafter, so half the 6 ms: a 14 ms step where the target alone would
// have made it 11 ms. A plan that drafts in turn pays nothing of it.
func TestPredictBesideTheDrafter(t *testing.T) {
	ms := time.Millisecond
	sure := Uniform(1, 0.5, 8, 3)
	split := SplitCosts{TargetThreads: 1, DraftThreads: 1, Verify: flat(10 * ms), Draft: flat(2 * ms)}
	c := Costs{Verify: flat(10 * ms), Draft: flat(2 * ms), Overhead: ms, OneDevice: true, Splits: []SplitCosts{split}}
	tail := Plan{Strategy: "chain", Gamma: 3, Tail: 4}
	alone, _ := Predict(tail, sure, c)
	c.Splits[0].Beside = flat(16 * ms)
	beside, _ := Predict(tail, sure, c)
	if alone.Step != 11*ms || beside.Step != 14*ms || beside.Verify != 13*ms {
		t.Errorf("steps %v alone and %v beside the drafter (verify %v), want 11ms, 14ms and 13ms", alone.Step, beside.Step, beside.Verify)
	}
	c.Splits[0].DraftBeside = flat(3 * ms) // 12 ms of drafting: 3/4 of the 16 ms pass
	slower, _ := Predict(tail, sure, c)
	if slower.Verify != 14500*time.Microsecond || slower.Step != 15500*time.Microsecond {
		t.Errorf("with the drafter slower beside the target: verify %v, step %v, want 14.5ms and 15.5ms", slower.Verify, slower.Step)
	}
	inTurn, _ := Predict(Plan{Strategy: "chain", Gamma: 3}, sure, c)
	if inTurn.Step != 6*ms+10*ms+ms {
		t.Errorf("a chain drafted in turn: step %v, want 17ms", inTurn.Step)
	}
	// 2 cores under other programs' load: the target alone on its thread
	// reads as fast as on both, the drafter's passes as cheap as ever,
	// and only beside each other do they show the loss; the chain with a
	// tail, priced ahead of the chain on the curves alone, falls behind
	acc := Uniform(0.8, 0.4, 8, 3)
	c = Costs{Verify: flat(8 * ms), Draft: flat(ms / 10), Overhead: ms / 10, OneDevice: true,
		Splits: []SplitCosts{{TargetThreads: 1, DraftThreads: 1, Verify: flat(8 * ms), Draft: flat(ms / 10)}}}
	chain, _ := Predict(Plan{Strategy: "chain", Gamma: 4}, acc, c)
	priced, _ := Predict(Plan{Strategy: "chain", Gamma: 4, Tail: 5}, acc, c)
	if priced.Speedup <= chain.Speedup {
		t.Fatalf("on the curves alone the tail %.3fx, the chain %.3fx: the case shows nothing", priced.Speedup, chain.Speedup)
	}
	c.Splits[0].Beside, c.Splits[0].DraftBeside = flat(12*ms), flat(ms)
	priced, _ = Predict(Plan{Strategy: "chain", Gamma: 4, Tail: 5}, acc, c)
	if priced.Speedup >= chain.Speedup {
		t.Errorf("beside each other the tail %.3fx, the chain drafted in turn %.3fx", priced.Speedup, chain.Speedup)
	}
}
