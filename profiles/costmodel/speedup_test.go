package costmodel

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"arborist/engine/tree"
	"arborist/profiles/latency"
)

// profiledWidths are the widths a profile of W up to 64 times.
var profiledWidths = []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 48}

func flat(d time.Duration) []latency.Point {
	return []latency.Point{{W: 1, Median: d}, {W: 64, Median: d}}
}

func TestPredictChain(t *testing.T) {
	acc := Uniform(0.8, 0.4, 8, 3)
	pr, err := Predict(Plan{Strategy: "chain", Gamma: 4}, acc, Costs{Verify: flat(10 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	want := 1 + 0.8 + 0.64 + 0.512 + 0.4096
	if math.Abs(pr.AAL-want) > 1e-9 || math.Abs(pr.Speedup-want) > 1e-9 {
		t.Errorf("AAL %v speedup %v, want both %v (free drafting, flat verify)", pr.AAL, pr.Speedup, want)
	}
	// a verification pass that costs W times more erases the gain
	linear := []latency.Point{{W: 1, Median: time.Millisecond}, {W: 2, Median: 2 * time.Millisecond}}
	pr, _ = Predict(Plan{Strategy: "chain", Gamma: 4}, acc, Costs{Verify: linear})
	if pr.Speedup >= 1 {
		t.Errorf("linear verify cost: speedup %v, want < 1", pr.Speedup)
	}
}

func TestPredictTreeAndEGT(t *testing.T) {
	acc := Uniform(0.6, 0.5, 8, 3)
	c := Costs{Verify: flat(time.Millisecond), Draft: flat(50 * time.Microsecond)}
	tr, err := Predict(Plan{Strategy: "tree", Widths: []int{2, 1}}, acc, c)
	if err != nil {
		t.Fatal(err)
	}
	// depth 1: ranks 0 and 1 (0.6, then 0.6*0.5 = 0.3); depth 2: rank 0 under each (x 0.6)
	want := 1 + 0.6 + 0.3 + 0.6*0.6 + 0.3*0.6
	if math.Abs(tr.AAL-want) > 1e-9 || tr.Nodes != 4 || len(tr.PerDepth) != 2 {
		t.Errorf("tree AAL %v nodes %d passes %v; want %v, 4, 2 passes", tr.AAL, tr.Nodes, tr.PerDepth, want)
	}
	egt, err := Predict(Plan{Strategy: "egt", EGT: []int{1, 2}, Branch: 2, WMax: 3}, acc, c)
	if err != nil || egt.Nodes != 3 {
		t.Fatalf("egt: %+v %v", egt, err)
	}
	if _, err := Predict(Plan{Strategy: "warp"}, acc, c); err == nil {
		t.Error("unknown strategy scored")
	}
}

func TestSearchPrefersShortChainsWhenVerifyGrows(t *testing.T) {
	acc := Uniform(0.7, 0.4, 8, 3)
	// verification cost grows steeply with W, as on a 2-core CPU
	steep := []latency.Point{{W: 1, Median: 10 * time.Millisecond}, {W: 2, Median: 12 * time.Millisecond}, {W: 4, Median: 16 * time.Millisecond}, {W: 8, Median: 30 * time.Millisecond}, {W: 16, Median: 55 * time.Millisecond}}
	preds := Search(acc, Costs{Verify: steep, Draft: flat(300 * time.Microsecond)}, SearchSpace{})
	if len(preds) < 100 {
		t.Fatalf("only %d plans", len(preds))
	}
	best := preds[0]
	if best.Nodes > 8 || best.Speedup <= 1 {
		t.Errorf("best plan %s verifies %d nodes at %.2fx", best.Plan, best.Nodes, best.Speedup)
	}
	for i := 1; i < len(preds); i++ {
		if preds[i].Speedup > preds[i-1].Speedup {
			t.Fatal("plans not sorted by speedup")
		}
	}
}

func TestInterp(t *testing.T) {
	pts := []latency.Point{{W: 1, Median: 10}, {W: 3, Median: 30}, {W: 5, Median: 70}}
	for _, c := range []struct {
		w    int
		want time.Duration
	}{{1, 10}, {2, 20}, {4, 50}, {7, 110}, {0, 10}} {
		if got := Interp(pts, c.w); got != c.want {
			t.Errorf("Interp(%d) = %v, want %v", c.w, got, c.want)
		}
	}
	// a last segment sloping down (a noisy minute) prices a wider pass at
	// the widest measured, never less, never below zero
	noisy := []latency.Point{{W: 1, Median: 10}, {W: 32, Median: 60}, {W: 48, Median: 40}}
	if got := Interp(noisy, 200); got != 40 {
		t.Errorf("past a curve sloping down: Interp(200) = %v, want the widest's 40", got)
	}
}

// ExamplePredict scores a chain of 4 with 80% acceptance per token, a
// drafter pass of 0.5 ms and a verification curve that grows with W.
func ExamplePredict() {
	verify := []latency.Point{{W: 1, Median: 10 * time.Millisecond}, {W: 5, Median: 18 * time.Millisecond}}
	draft := []latency.Point{{W: 1, Median: 500 * time.Microsecond}}
	pr, _ := Predict(Plan{Strategy: "chain", Gamma: 4}, Uniform(0.8, 0.4, 8, 2), Costs{Verify: verify, Draft: draft})
	fmt.Printf("AAL %.2f, step %v, speedup %.2fx\n", pr.AAL, pr.Step, pr.Speedup)
	// Output: AAL 3.36, step 20ms, speedup 1.68x
}

// TestSearchSequoia: the search scores the DP-optimal tree of every size up
// to the largest profiled width (one row is the root), under its canonical
// name where it is a chain or a tree of widths, and at each size it
// expects at least as many accepted tokens as any chain or static tree.
func TestSearchSequoia(t *testing.T) {
	acc := Uniform(0.7, 0.4, 8, 3)
	verify := []latency.Point{{W: 1, Median: 10 * time.Millisecond}, {W: 8, Median: 14 * time.Millisecond}, {W: 24, Median: 30 * time.Millisecond}}
	preds := Search(acc, Costs{Verify: verify, Draft: flat(300 * time.Microsecond)}, SearchSpace{})
	shapes, _, err := tree.Optimal(acc.At, 23, 12, 8) // as the search builds them: depth max(MaxDepth, MaxGamma)
	if err != nil {
		t.Fatal(err)
	}
	seq := map[int]float64{}
	for n, s := range shapes {
		found := false
		for _, p := range preds {
			if p.Nodes == n+1 && slices.Equal(Shape(p.Plan, acc), s.Parents) {
				seq[p.Nodes], found = p.AAL, true
				break
			}
		}
		if !found {
			t.Errorf("the DP tree of %d nodes was not scored", n+1)
		}
	}
	sequoias := 0
	for _, p := range preds {
		if p.Plan.Strategy == "sequoia" {
			sequoias++
		}
		if (p.Plan.Strategy == "chain" || p.Plan.Strategy == "tree") && p.Nodes <= 23 && p.AAL > seq[p.Nodes]+1e-9 {
			t.Errorf("%s expects %.4f tokens, the sequoia tree of %d nodes %.4f", p.Plan, p.AAL, p.Nodes, seq[p.Nodes])
		}
	}
	if sequoias == 0 || sequoias == 23 {
		t.Errorf("%d plans named sequoia: the DP trees that are chains or trees of widths go by those names", sequoias)
	}
}

// BenchmarkSearch times one whole search (every strategy's candidates,
// the Sequoia DP up to W = 64 included) against a profiled-like curve of
// 1..32 and 48, 64, and reports how many plans it scores.
func BenchmarkSearch(b *testing.B) {
	acc := Uniform(0.7, 0.4, 8, 4)
	var verify []latency.Point
	for _, w := range profiledWidths {
		verify = append(verify, latency.Point{W: w, Median: time.Duration(8000+300*w) * time.Microsecond})
	}
	c := Costs{Verify: verify, Draft: flat(300 * time.Microsecond), Overhead: 100 * time.Microsecond, OneDevice: true}
	// the whole space: threshold depth policies and duo's several
	// sequences priced on 300 recorded calibration steps, concurrent plans
	// on three splits of the threads
	for i := range 300 {
		best := make([]float64, 8)
		for d := range best {
			best[d] = math.Pow(0.5+0.45*float64(i%10)/10, float64(d+1))
		}
		q := best[0]
		acc.Depths = append(acc.Depths, probeSample(i, DepthSample{Best: best, Accepted: i % 7, Top: []float64{q, (1 - q) / 2, (1 - q) / 4, (1 - q) / 8}, P21: best[1] / q}))
	}
	for _, d := range []int{1, 4, 8} {
		var v []latency.Point
		for _, p := range verify {
			p.Median = p.Median * time.Duration(16) / time.Duration(16-d)
			v = append(v, p)
		}
		c.Splits = append(c.Splits, SplitCosts{TargetThreads: 16 - d, DraftThreads: d, Verify: v, Draft: flat(time.Duration(600/d) * time.Microsecond)})
	}
	n := 0
	for b.Loop() {
		n = len(Search(acc, c, SearchSpace{}))
	}
	b.ReportMetric(float64(n), "plans")
}

// probeSample gives s a probe tree of the calibration's shape whose
// children have decreasing probabilities (varying with i) and an accepted
// path of s.Accepted nodes along sibling ranks that vary with i, so EGT
// plans are replayed on it as on a real calibration's steps.
func probeSample(i int, s DepthSample) DepthSample {
	shape, _ := tree.FromWidths(CalibrationWidths)
	s.Parents, s.PathP = make([]int16, len(shape.Parents)), make([]float32, len(shape.Parents))
	rank := map[int]int{}
	kids := map[int][]int{}
	for n, par := range shape.Parents {
		s.Parents[n] = int16(par)
		pp := float32(1)
		if par >= 0 {
			pp = s.PathP[par]
		}
		r := len(kids[par])
		kids[par], rank[n] = append(kids[par], n), r
		s.PathP[n] = pp * float32(0.3+0.6*float64((i+n)%7)/7) / float32(r+1)
	}
	at := -1
	for k := 0; k < s.Accepted && len(kids[at]) > 0; k++ {
		c := kids[at][(i+k)%2%len(kids[at])]
		s.Path, at = append(s.Path, int16(c)), c
	}
	s.Accepted = len(s.Path)
	return s
}

// BenchmarkSearchResampling times a search for a source that re-samples
// after a rejection (the steady mix of regular and re-sampled steps) on
// the largest calibration a pair keeps (MaxDepthSamples steps), where
// threshold policies weigh every recorded step.
func BenchmarkSearchResampling(b *testing.B) {
	acc := Uniform(0.7, 0.4, 8, 4)
	acc.Regular, acc.Resampled = Uniform(0.8, 0.4, 8, 4).Rank, Uniform(0.5, 0.4, 8, 4).Rank
	counts := [][]int{{100, 100, 100, 100}}
	acc.RegularCounts, acc.ResampledCounts = counts, counts
	var verify []latency.Point
	for _, w := range profiledWidths {
		verify = append(verify, latency.Point{W: w, Median: time.Duration(8000+300*w) * time.Microsecond})
	}
	c := Costs{Verify: verify, Draft: flat(300 * time.Microsecond), Overhead: 100 * time.Microsecond, OneDevice: true,
		DraftPerChild: true, Resample: 4, ResampleLevel: 40 * time.Microsecond}
	for i := range MaxDepthSamples {
		best := make([]float64, 8)
		for d := range best {
			best[d] = math.Pow(0.5+0.45*float64(i%10)/10, float64(d+1))
		}
		acc.Depths = append(acc.Depths, DepthSample{Best: best, Accepted: i % 7, Resampled: i%3 == 0})
	}
	n := 0
	for b.Loop() {
		n = len(Search(acc, c, SearchSpace{}))
	}
	b.ReportMetric(float64(n), "plans")
}

// TestDistinct: plans doing the same work (a chain and the one-wide tree
// of its length) count once among the top plans.
func TestDistinct(t *testing.T) {
	acc := Uniform(0.8, 0.4, 8, 3)
	c := Costs{Verify: []latency.Point{{W: 1, Median: 10 * time.Millisecond}, {W: 9, Median: 20 * time.Millisecond}}, Draft: flat(time.Millisecond)}
	var preds []Prediction
	for _, p := range []Plan{{Strategy: "chain", Gamma: 4}, {Strategy: "tree", Widths: []int{1, 1, 1, 1}}, {Strategy: "chain", Gamma: 3}, {Strategy: "tree", Widths: []int{2, 1}}} {
		pr, err := Predict(p, acc, c)
		if err != nil {
			t.Fatal(err)
		}
		preds = append(preds, pr)
	}
	got := Distinct(preds, 3)
	if len(got) != 3 || got[0].Plan.String() != "chain gamma=4" || got[1].Plan.String() != "chain gamma=3" || got[2].Plan.String() != "tree 2,1" {
		var names []string
		for _, p := range got {
			names = append(names, p.Plan.String())
		}
		t.Errorf("distinct plans %v", names)
	}
}

// TestPredictAheadOfTime: an AOT plan's first drafter pass overlaps the
// verification and is redone only when the guess missed: with certain
// acceptance the step is rest + max(verify, ahead) + overhead; with
// uncertain acceptance the miss share of the ahead pass is added.
func TestPredictAheadOfTime(t *testing.T) {
	ms := time.Millisecond
	c := Costs{Verify: flat(10 * ms), Draft: flat(2 * ms), Overhead: ms}
	p := Plan{Strategy: "egt", EGT: []int{1, 1, 1}, Branch: 1, WMax: 3}
	plain, err := Predict(p, Uniform(1, 0.5, 8, 2), c)
	if err != nil {
		t.Fatal(err)
	}
	p.AOT = true
	sure, _ := Predict(p, Uniform(1, 0.5, 8, 2), c)
	if plain.Step != 6*ms+10*ms+ms || sure.Step != 4*ms+10*ms+ms {
		t.Fatalf("steps %v (plain) and %v (AOT, always hit), want 17ms and 15ms", plain.Step, sure.Step)
	}
	unsure, _ := Predict(p, Uniform(0.5, 0.5, 8, 2), c)
	// hit = the 3-node path accepted (0.125) times the bonus guess (0.5)
	want := 4*ms + time.Duration((1-0.0625)*float64(2*ms)) + 10*ms + ms
	if d := unsure.Step - want; d > time.Microsecond || d < -time.Microsecond {
		t.Fatalf("AOT step at alpha 0.5: %v, want %v", unsure.Step, want)
	}
}

// TestSearchChoosesTheThreadSplit: with curves for several splits of the
// threads, a concurrent plan is priced on each and keeps the best, which
// names the drafter's threads; moving the better curves to the other split
// moves the choice, and sequential plans carry no split.
func TestSearchChoosesTheThreadSplit(t *testing.T) {
	ms := time.Millisecond
	acc := Uniform(0.8, 0.4, 8, 2)
	c := Costs{Verify: flat(10 * ms), Draft: flat(ms), OneDevice: true}
	slowT := SplitCosts{TargetThreads: 4, DraftThreads: 4, Verify: flat(16 * ms), Draft: flat(ms / 4)}
	fastT := SplitCosts{TargetThreads: 7, DraftThreads: 1, Verify: flat(11 * ms), Draft: flat(ms)}
	duo := Plan{Strategy: "duo", Gamma: 4}
	for _, tc := range []struct {
		splits []SplitCosts
		want   int
	}{{[]SplitCosts{slowT, fastT}, 1}, {[]SplitCosts{fastT, slowT}, 1}} {
		c.Splits = tc.splits
		pr, err := Predict(duo, acc, c)
		if err != nil {
			t.Fatal(err)
		}
		if pr.DraftThreads != tc.want || pr.Threads() != "drafter on 1 thread" {
			t.Errorf("duo priced on %d drafter threads (%q), want %d", pr.DraftThreads, pr.Threads(), tc.want)
		}
		only, _ := Predict(duo, acc, Costs{Verify: c.Verify, Draft: c.Draft, OneDevice: true, Splits: []SplitCosts{fastT}})
		if only.Speedup != pr.Speedup {
			t.Errorf("best split %.3fx, the same split alone %.3fx", pr.Speedup, only.Speedup)
		}
	}
	// a split where the drafter's own threads pay: the target barely slows
	c.Splits = []SplitCosts{fastT, {TargetThreads: 6, DraftThreads: 2, Verify: flat(11 * ms), Draft: flat(ms / 3)}}
	var saw bool
	for _, pr := range Search(acc, c, SearchSpace{MaxGamma: 6, MaxDepth: 3, MaxNodes: 8}) {
		if pr.Plan.Concurrent() && pr.DraftThreads != 2 {
			t.Errorf("%s priced on %d drafter threads, want 2", pr.Plan, pr.DraftThreads)
		}
		if !pr.Plan.Concurrent() && pr.DraftThreads != 0 {
			t.Errorf("sequential %s carries a split (%d)", pr.Plan, pr.DraftThreads)
		}
		saw = saw || pr.Plan.Concurrent()
	}
	if !saw {
		t.Error("the search priced no concurrent plan")
	}
	for _, tc := range []struct {
		total, pinned int
		want          []int
	}{
		{1, 0, nil}, {2, 0, []int{1}}, {4, 0, []int{1, 2}}, {8, 0, []int{1, 2, 4}}, {16, 0, []int{1, 4, 8}}, {16, 3, []int{3}},
	} {
		if got := SplitChoices(tc.total, tc.pinned); !slices.Equal(got, tc.want) {
			t.Errorf("SplitChoices(%d, %d) = %v, want %v", tc.total, tc.pinned, got, tc.want)
		}
	}
}

// TestPredictConcurrentOnSplitCurves: plans that draft while the target
// verifies are priced on the split curves when they were measured, while
// the baseline and sequential plans keep the full-thread curves.
func TestPredictConcurrentOnSplitCurves(t *testing.T) {
	ms := time.Millisecond
	acc := Uniform(0.8, 0.4, 8, 2)
	c := Costs{Verify: flat(10 * ms), Draft: flat(ms)}
	duo := Plan{Strategy: "duo", Gamma: 4}
	chain := Plan{Strategy: "chain", Gamma: 4}
	d0, _ := Predict(duo, acc, c)
	c0, _ := Predict(chain, acc, c)
	c.Splits = []SplitCosts{{TargetThreads: 1, DraftThreads: 1, Verify: flat(18 * ms), Draft: flat(2 * ms)}}
	d1, _ := Predict(duo, acc, c)
	c1, _ := Predict(chain, acc, c)
	if c1.Speedup != c0.Speedup {
		t.Errorf("a sequential plan moved with the split curves: %v -> %v", c0.Speedup, c1.Speedup)
	}
	if !(d1.Speedup < d0.Speedup*0.7) || d1.Verify != 18*ms {
		t.Errorf("duo on split curves: %.2fx (verify %v), on full-thread ones %.2fx", d1.Speedup, d1.Verify, d0.Speedup)
	}
}

// TestDuoGammaFollowsTheCostRatio: the model prices duo at the gamma its
// run-time rule settles on, round(T_verify(gamma+1) / T_draft), capped by
// the plan.
func TestDuoGammaFollowsTheCostRatio(t *testing.T) {
	ms := time.Millisecond
	acc := Uniform(0.8, 0.4, 8, 2)
	c := Costs{Verify: flat(10 * ms), Draft: flat(2500 * time.Microsecond)}
	for _, tc := range []struct{ cap, want int }{{12, 4}, {3, 3}, {1, 1}} {
		pr, err := Predict(Plan{Strategy: "duo", Gamma: tc.cap}, acc, c)
		if err != nil || pr.Plan.Gamma != tc.want || len(pr.PerDepth) != tc.want {
			t.Errorf("cap %d: priced at gamma %d (%d passes), want %d (%v)", tc.cap, pr.Plan.Gamma, len(pr.PerDepth), tc.want, err)
		}
	}
}

// Plain decoding is the baseline: its plan predicts exactly 1x, whatever
// the per-step bookkeeping of speculative plans costs.
func TestPredictPlainDecodingIsTheBaseline(t *testing.T) {
	c := Costs{
		Verify:   []latency.Point{{W: 1, Median: 8 * time.Millisecond}, {W: 8, Median: 10 * time.Millisecond}},
		Draft:    []latency.Point{{W: 1, Median: time.Millisecond}},
		Overhead: 2 * time.Millisecond,
	}
	pr, err := Predict(Plan{Strategy: "ar"}, &Acceptance{}, c)
	if err != nil {
		t.Fatal(err)
	}
	if pr.Speedup != 1 || pr.Step != 8*time.Millisecond || pr.AAL != 1 {
		t.Fatalf("ar: speedup %v, step %v, AAL %v; want 1x, 8ms, 1", pr.Speedup, pr.Step, pr.AAL)
	}
	ch, err := Predict(Plan{Strategy: "chain", Gamma: 2}, &Acceptance{}, c)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Step < ch.Verify+c.Overhead {
		t.Fatalf("chain: step %v leaves out the overhead (verify %v)", ch.Step, ch.Verify)
	}
}

// Where the re-check timed plain decoding's token (Costs.Plain), that is
// the baseline: plain decoding stays exactly 1x, and a plan's speedup
// scales by Plain / T_verify(1) with its step unchanged; the search ranks
// alike.
func TestPredictAgainstMeasuredPlainDecoding(t *testing.T) {
	acc := Uniform(0.8, 0.4, 8, 3)
	c := Costs{Verify: []latency.Point{{W: 1, Median: 8 * time.Millisecond}, {W: 8, Median: 10 * time.Millisecond}}, Draft: flat(200 * time.Microsecond)}
	if c.PlainToken() != 8*time.Millisecond {
		t.Fatalf("unmeasured plain decoding: %v, want T_verify(1) 8ms", c.PlainToken())
	}
	before, _ := Predict(Plan{Strategy: "chain", Gamma: 3}, acc, c)
	c.Plain = 6 * time.Millisecond
	ar, _ := Predict(Plan{Strategy: "ar"}, acc, c)
	if ar.Speedup != 1 || ar.Step != c.Plain {
		t.Fatalf("ar against measured plain decoding: %vx, step %v; want 1x, %v", ar.Speedup, ar.Step, c.Plain)
	}
	after, _ := Predict(Plan{Strategy: "chain", Gamma: 3}, acc, c)
	if after.Step != before.Step || math.Abs(after.Speedup-before.Speedup*6/8) > 1e-9 {
		t.Fatalf("chain: %vx (step %v) against %vx (step %v) with T_verify(1) as baseline; want x0.75, same step", after.Speedup, after.Step, before.Speedup, before.Step)
	}
	ranked := Search(acc, c, SearchSpace{MaxDepth: 4, MaxNodes: 8})
	for _, pr := range ranked {
		if pr.Plan.Strategy == "ar" && pr.Speedup != 1 {
			t.Fatalf("search: plain decoding at %vx", pr.Speedup)
		}
	}
}

// The drafter's passes right after the target's are charged what the
// profile measured beyond its back-to-back curve (passes beyond the
// curve's last point that point's cost); a plan that drafts while
// the target verifies is not.
func TestPredictDraftAfterTarget(t *testing.T) {
	c := Costs{
		Verify: []latency.Point{{W: 1, Median: 8 * time.Millisecond}, {W: 8, Median: 10 * time.Millisecond}},
		Draft:  []latency.Point{{W: 1, Median: 100 * time.Microsecond}, {W: 8, Median: 200 * time.Microsecond}},
	}
	acc := &Acceptance{}
	chain := Plan{Strategy: "chain", Gamma: 4}
	before, err := Predict(chain, acc, c)
	if err != nil {
		t.Fatal(err)
	}
	c.DraftAfter = []latency.Point{{W: 1, Median: 200 * time.Microsecond}, {W: 2, Median: 50 * time.Microsecond}, {W: 3, Median: 10 * time.Microsecond}}
	after, err := Predict(chain, acc, c)
	if err != nil {
		t.Fatal(err)
	}
	// passes 1-3 their points, pass 4 the last point again
	if d := after.Draft - before.Draft; d != 270*time.Microsecond || after.Step-before.Step != d {
		t.Fatalf("chain of 4: draft %v -> %v, step %v -> %v; want 270µs more", before.Draft, after.Draft, before.Step, after.Step)
	}
	one, _ := Predict(Plan{Strategy: "chain", Gamma: 1}, acc, c)
	if one.Draft != 300*time.Microsecond {
		t.Fatalf("chain of 1: draft %v, want 300µs", one.Draft)
	}
	duo := Plan{Strategy: "duo", Gamma: 4}
	c2 := c
	c2.DraftAfter = nil
	a, _ := Predict(duo, acc, c)
	b, _ := Predict(duo, acc, c2)
	if a.Draft != b.Draft {
		t.Fatalf("duo charged for passes after the target's: %v vs %v", a.Draft, b.Draft)
	}
}

// A plan that drafts while the target verifies on the same device is
// priced only on curves measured with the threads split: without them it
// is refused, and the search leaves it out; on two devices, or with split
// curves, it is priced.
func TestConcurrentPlansNeedSplitCurves(t *testing.T) {
	c := Costs{
		Verify:    []latency.Point{{W: 1, Median: 8 * time.Millisecond}, {W: 8, Median: 10 * time.Millisecond}},
		Draft:     []latency.Point{{W: 1, Median: time.Millisecond}},
		OneDevice: true,
	}
	acc := &Acceptance{}
	duo := Plan{Strategy: "duo", Gamma: 3}
	if _, err := Predict(duo, acc, c); err == nil {
		t.Fatal("duo on one device without split curves was priced")
	}
	for _, pr := range Search(acc, c, SearchSpace{MaxGamma: 4, MaxDepth: 3, MaxNodes: 8}) {
		if pr.Plan.Concurrent() {
			t.Fatalf("the search ranked %s", pr.Plan)
		}
	}
	two := c
	two.OneDevice = false
	if _, err := Predict(duo, acc, two); err != nil {
		t.Fatalf("duo on two devices: %v", err)
	}
	split := c
	split.Splits = []SplitCosts{{TargetThreads: 1, DraftThreads: 1, Verify: c.Verify, Draft: c.Draft}}
	if _, err := Predict(duo, acc, split); err != nil {
		t.Fatalf("duo with split curves: %v", err)
	}
	if _, err := Predict(Plan{Strategy: "chain", Gamma: 3}, acc, c); err != nil {
		t.Fatalf("chain: %v", err)
	}
}

// TestDraftPerChild: a source whose drafting cost grows with the nodes a
// level adds (the hidden-state drafter) is charged by them: a tree of two
// first tokens one further node more than a chain of one, an EGT its
// expanded nodes times its branch; a draft model, charged by the nodes a
// pass expands, pays the same for both.
func TestDraftPerChild(t *testing.T) {
	ms := time.Millisecond
	draft := []latency.Point{{W: 1, Median: ms}, {W: 2, Median: 1400 * time.Microsecond}, {W: 64, Median: 26200 * time.Microsecond}}
	c := Costs{Verify: flat(10 * ms), Draft: draft}
	acc := Uniform(0.8, 0.4, 8, 3)
	chain, tree2 := Plan{Strategy: "chain", Gamma: 1}, Plan{Strategy: "tree", Widths: []int{2}}
	egt := Plan{Strategy: "egt", EGT: []int{1, 1}, Branch: 2, WMax: 4}
	if a, b := mustPredict(t, chain, acc, c), mustPredict(t, tree2, acc, c); a.Draft != b.Draft {
		t.Errorf("draft model: chain 1 drafts %v, tree 2 %v, want the same pass", a.Draft, b.Draft)
	}
	c.DraftPerChild = true
	if a, b := mustPredict(t, chain, acc, c), mustPredict(t, tree2, acc, c); a.Draft != ms || b.Draft != 1400*time.Microsecond {
		t.Errorf("per child: chain 1 drafts %v (want 1ms), tree 2 %v (want 1.4ms)", a.Draft, b.Draft)
	}
	if e := mustPredict(t, egt, acc, c); e.Draft != 2800*time.Microsecond {
		t.Errorf("per child: EGT 1,1 branch 2 drafts %v, want two levels of two new nodes (2.8ms)", e.Draft)
	}
}
