package costmodel

import (
	"slices"
	"strings"
	"testing"
	"time"

	"arborist/engine/spec"
	"arborist/profiles/latency"
)

// TestThresholdPricedOnCalibrationSteps: a threshold depth policy is priced
// on the calibration's recorded steps: at threshold 0 it is the fixed
// plan; when the drafter's confidence foretells rejections, stopping early
// keeps nearly every accepted token and saves the deep levels' cost, so
// it beats the fixed plan; when confidence tells nothing, it loses tokens
// in proportion; without recorded steps it is refused and not searched.
func TestThresholdPricedOnCalibrationSteps(t *testing.T) {
	ms := time.Millisecond
	verify := []latency.Point{{W: 1, Median: 10 * ms}, {W: 64, Median: 73 * ms}} // 1 ms a row beyond the first
	c := Costs{Verify: verify, Draft: flat(ms)}
	acc := Uniform(0.8, 0.4, 8, 2)
	plan := Plan{Strategy: "egt", EGT: []int{1, 1, 1, 1, 1, 1}, Branch: 1, WMax: 6}
	th := plan
	th.DepthPolicy, th.DepthMin = "threshold", 0.3
	if _, err := Predict(th, acc, c); err == nil || !strings.Contains(err.Error(), "calibrate again") {
		t.Fatalf("threshold without recorded steps: %v", err)
	}
	for _, pr := range Search(acc, c, SearchSpace{MaxGamma: 4, MaxDepth: 4, MaxNodes: 8}) {
		if pr.Plan.DepthPolicy == "threshold" {
			t.Fatalf("searched %s without recorded steps", pr.Plan)
		}
	}
	// half the steps: a confident drafter, every level accepted; half: an
	// unsure one (best path 0.2 from depth 1), nothing accepted
	sure := DepthSample{Best: []float64{0.9, 0.8, 0.7, 0.6, 0.5, 0.45, 0.4, 0.35}, Accepted: 6}
	unsure := DepthSample{Best: []float64{0.2, 0.05, 0.01, 0.01, 0.01, 0.01, 0.01, 0.01}, Accepted: 0}
	acc.Depths = []DepthSample{sure, unsure, sure, unsure}
	fixed, err := Predict(plan, acc, c)
	if err != nil {
		t.Fatal(err)
	}
	zero := th
	zero.DepthMin = 0
	if p0, _ := Predict(zero, acc, c); p0.Speedup != fixed.Speedup || p0.AAL != fixed.AAL {
		t.Errorf("threshold 0: %.4fx AAL %.3f, fixed %.4fx AAL %.3f", p0.Speedup, p0.AAL, fixed.Speedup, fixed.AAL)
	}
	p, err := Predict(th, acc, c)
	if err != nil {
		t.Fatal(err)
	}
	// the unsure steps stop after one level, the sure ones draft all six
	if p.AAL != fixed.AAL || !(p.Step < fixed.Step) || !(p.Speedup > fixed.Speedup) || p.Plan.DepthMin != 0.3 {
		t.Errorf("foretelling confidence: threshold %.3fx (AAL %.3f, step %v), fixed %.3fx (AAL %.3f, step %v)", p.Speedup, p.AAL, p.Step, fixed.Speedup, fixed.AAL, fixed.Step)
	}
	wantStep := (fixed.Step + mustPredict(t, Plan{Strategy: "egt", EGT: []int{1}, Branch: 1, WMax: 6}, acc, c).Step) / 2
	if d := p.Step - wantStep; d < -time.Microsecond || d > time.Microsecond {
		t.Errorf("step %v, want the mean of the six-level and one-level steps %v", p.Step, wantStep)
	}
	// confidence that tells nothing: the same best paths, acceptance swapped
	acc.Depths = []DepthSample{{Best: sure.Best, Accepted: 0}, {Best: unsure.Best, Accepted: 6}}
	q, _ := Predict(th, acc, c)
	if want := 1 + (fixed.AAL-1)*(0+1)/(0+6); abs(q.AAL-want) > 1e-9 || !(q.Speedup < fixed.Speedup) {
		t.Errorf("uninformative confidence: AAL %.4f (want %.4f), %.3fx against fixed %.3fx", q.AAL, want, q.Speedup, fixed.Speedup)
	}
	var saw bool
	for _, pr := range Search(acc, c, SearchSpace{MaxGamma: 4, MaxDepth: 4, MaxNodes: 8}) {
		saw = saw || pr.Plan.DepthPolicy == "threshold"
	}
	if !saw {
		t.Error("the search priced no threshold plan with recorded steps")
	}
}

func mustPredict(t *testing.T, p Plan, acc *Acceptance, c Costs) Prediction {
	t.Helper()
	pr, err := Predict(p, acc, c)
	if err != nil {
		t.Fatal(err)
	}
	return pr
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// TestSteadyAALMixesRegularAndResampledSteps: with tables for regular and
// re-sampled steps, a plan's AAL is the mix its own full acceptance
// settles on (a chain of one at 0.8 and 0.5: regular steps are 1/1.2 of
// all); equal tables give the one-table AAL, and too few steps of either
// kind leave the one table in charge.
func TestSteadyAALMixesRegularAndResampledSteps(t *testing.T) {
	c := Costs{Verify: flat(10 * time.Millisecond)}
	acc := Uniform(0.65, 0.4, 4, 2)
	acc.Regular, acc.Resampled = Uniform(0.8, 0.4, 4, 2).Rank, Uniform(0.5, 0.4, 4, 2).Rank
	counts := [][]int{{100, 100}}
	acc.RegularCounts, acc.ResampledCounts = counts, counts
	one := mustPredict(t, Plan{Strategy: "chain", Gamma: 1}, acc, c)
	if want := (1.8 + 0.2*1.5) / 1.2; abs(one.AAL-want) > 1e-9 {
		t.Errorf("chain of 1: AAL %.4f, want %.4f", one.AAL, want)
	}
	two := mustPredict(t, Plan{Strategy: "chain", Gamma: 2}, acc, c)
	share := 1 / (2 - 0.64)
	if want := share*(1+0.8+0.64) + (1-share)*(1+0.5+0.25); abs(two.AAL-want) > 1e-9 {
		t.Errorf("chain of 2: AAL %.4f, want %.4f", two.AAL, want)
	}
	same := Uniform(0.65, 0.4, 4, 2)
	same.Regular, same.Resampled, same.RegularCounts, same.ResampledCounts = same.Rank, same.Rank, counts, counts
	tree := Plan{Strategy: "tree", Widths: []int{2, 1}}
	if a, b := mustPredict(t, tree, same, c).AAL, mustPredict(t, tree, Uniform(0.65, 0.4, 4, 2), c).AAL; abs(a-b) > 1e-9 {
		t.Errorf("equal tables: AAL %.4f against one table's %.4f", a, b)
	}
	acc.ResampledCounts = [][]int{{5, 5}}
	if few := mustPredict(t, Plan{Strategy: "chain", Gamma: 1}, acc, c); abs(few.AAL-1.65) > 1e-9 {
		t.Errorf("5 re-sampled steps: AAL %.4f, want the one table's 1.65", few.AAL)
	}
}

// TestSteadyMixPricesResampledSteps: with a source that re-samples
// (Costs.Resample), a plan is the steady mix of its regular steps and the
// re-sampled ones that follow a rejection two levels or more above its
// deepest, as often as the calibration saw the source re-sample: a chain
// of one never re-samples; a chain of two re-samples one level after a
// rejection at its first, at a re-sampled level's cost and verifying two
// rows; without Resample the tokens alone are mixed, as before.
func TestSteadyMixPricesResampledSteps(t *testing.T) {
	ms := time.Millisecond
	c := Costs{Verify: []latency.Point{{W: 1, Median: 10 * ms}, {W: 64, Median: 73 * ms}}, Draft: flat(ms), Resample: 4, ResampleLevel: 100 * time.Microsecond}
	acc := Uniform(0.65, 0.4, 4, 2)
	acc.Regular, acc.Resampled = Uniform(0.8, 0.4, 4, 2).Rank, Uniform(0.5, 0.4, 4, 2).Rank
	counts := [][]int{{100, 100}}
	acc.RegularCounts, acc.ResampledCounts = counts, counts
	// four regular steps that could have been followed by a re-sampled one,
	// two that were, one accepted too deep to re-sample: a rate of 1/2
	for _, s := range []DepthSample{{Accepted: 0}, {Accepted: 1}, {Resampled: true}, {Accepted: 2}, {Resampled: true}, {Accepted: 0}, {Accepted: 3}} {
		acc.Depths = append(acc.Depths, s)
	}
	if r := acc.resampleRate(); abs(r-0.5) > 1e-12 {
		t.Fatalf("re-sample rate %v, want 0.5", r)
	}
	one := mustPredict(t, Plan{Strategy: "chain", Gamma: 1}, acc, c)
	if abs(one.AAL-1.8) > 1e-9 || one.Step != 12*ms {
		t.Errorf("chain of 1: AAL %.4f step %v, want the regular 1.8 and 12ms", one.AAL, one.Step)
	}
	two := mustPredict(t, Plan{Strategy: "chain", Gamma: 2}, acc, c)
	// regular: 2 passes + T(3) = 14ms, 2.44 tokens; after a rejection at
	// depth 1 (0.2, re-sampled half the time): 100µs + T(2) = 11.1ms, 1.5
	// tokens; regular steps are 1/1.1 of all
	ns := 14e6 + 0.1*11.1e6
	wantAAL, wantStep := (2.44+0.1*1.5)/1.1, time.Duration(ns/1.1)
	if abs(two.AAL-wantAAL) > 1e-9 || (two.Step-wantStep).Abs() > time.Microsecond {
		t.Errorf("chain of 2: AAL %.4f step %v, want %.4f and %v", two.AAL, two.Step, wantAAL, wantStep)
	}
	c.Resample = 0
	if old := mustPredict(t, Plan{Strategy: "chain", Gamma: 2}, acc, c); old.Step != 14*ms {
		t.Errorf("no re-sampling source: step %v, want every step regular (14ms)", old.Step)
	}
}

// TestDuoSequencesPricedOnCalibrationSteps: duo with several sequences is
// priced as the mix of the trees duo's rule picks on the calibration's
// steps: confident steps draft one chain (plus the rule's probe pass),
// unsure ones two sequences; without recorded first-level candidates the
// plan is refused and left out of the search.
func TestDuoSequencesPricedOnCalibrationSteps(t *testing.T) {
	ms := time.Millisecond
	c := Costs{Verify: []latency.Point{{W: 1, Median: 10 * ms}, {W: 64, Median: 73 * ms}}, Draft: flat(ms), Splits: []SplitCosts{{TargetThreads: 1, DraftThreads: 1, Verify: []latency.Point{{W: 1, Median: 10 * ms}, {W: 64, Median: 73 * ms}}, Draft: flat(ms)}}}
	acc := Uniform(0.6, 0.5, 8, 4)
	duo := Plan{Strategy: "duo", Gamma: 4, MaxSeqs: 2}
	if _, err := Predict(duo, acc, c); err == nil || !strings.Contains(err.Error(), "calibrate again") {
		t.Fatalf("several sequences without recorded steps: %v", err)
	}
	sure := DepthSample{Best: []float64{0.9}, Top: []float64{0.9, 0.05, 0.03}, P21: 0.9}  // theta 0.81: one sequence
	unsure := DepthSample{Best: []float64{0.4}, Top: []float64{0.4, 0.35, 0.1}, P21: 0.5} // theta 0.2: two above it
	at := acc.At
	price := func(k int) Prediction {
		return priceExpected(duo, spec.DuoExpect(4, k, true, 0, at), c, curves{verify: c.Splits[0].Verify, draft: c.Splits[0].Draft, split: 0})
	}
	for _, tc := range []struct {
		samples []DepthSample
		one     float64 // share of steps with one sequence
	}{{[]DepthSample{sure, sure}, 1}, {[]DepthSample{unsure, unsure}, 0}, {[]DepthSample{sure, unsure, sure, sure}, 0.75}} {
		acc.Depths = tc.samples
		pr, err := Predict(duo, acc, c)
		if err != nil {
			t.Fatal(err)
		}
		one, two := price(1), price(2)
		wantAAL := tc.one*one.AAL + (1-tc.one)*two.AAL
		wantStep := tc.one*float64(one.Step) + (1-tc.one)*float64(two.Step)
		if abs(pr.AAL-wantAAL) > 1e-9 || abs(float64(pr.Step)-wantStep) > 1e3 || pr.DraftThreads != 1 {
			t.Errorf("%v of steps with one sequence: AAL %.4f step %v, want %.4f %v", tc.one, pr.AAL, pr.Step, wantAAL, time.Duration(wantStep))
		}
	}
	// two sequences of two: the best two first tokens, each with a child;
	// passes: the root's, one a sequence after the first token, the probe
	e := spec.DuoExpect(4, 2, true, 0, at)
	if want := []int{-1, 0, -1, 2}; !slices.Equal(e.Parents, want) || len(e.PerDepth) != 4 || abs(e.Values[2]-at(0, 1)) > 1e-12 || abs(e.Values[3]-at(0, 1)*at(1, 0)) > 1e-12 {
		t.Errorf("two sequences of two: parents %v, values %v, passes %v", e.Parents, e.Values, e.PerDepth)
	}
	var saw bool
	for _, pr := range Search(acc, c, SearchSpace{MaxGamma: 4, MaxDepth: 3, MaxNodes: 8}) {
		saw = saw || (pr.Plan.Strategy == "duo" && pr.Plan.MaxSeqs > 1)
	}
	if !saw {
		t.Error("the search priced no duo plan with several sequences")
	}
}

// TestThresholdWeighsStepKinds: with a source that re-samples after a
// rejection, the calibration's steps are weighed by how often the plan
// itself meets each kind (a re-sampled step follows exactly a step not
// accepted in full). Here every regular step is confident and accepted in
// full, and re-sampled steps are half unsure (rejected at once) and half
// confident: the plan, once in a regular step, stays there (r = f_res /
// (1 - f_reg + f_res) = 0.5 / 0.5 = 1), so it drafts every level every
// step, where the recorded mix (five re-sampled steps for one regular)
// priced a third of its steps as stopping after one level.
func TestThresholdWeighsStepKinds(t *testing.T) {
	ms := time.Millisecond
	c := Costs{Verify: []latency.Point{{W: 1, Median: 10 * ms}, {W: 64, Median: 73 * ms}}, Draft: flat(ms)}
	acc := Uniform(0.8, 0.4, 8, 2)
	plan := Plan{Strategy: "egt", EGT: []int{1, 1, 1, 1}, Branch: 1, WMax: 4, DepthPolicy: "threshold", DepthMin: 0.3}
	sure := DepthSample{Best: []float64{0.9, 0.8, 0.7, 0.6}, Accepted: 4}
	unsure := DepthSample{Best: []float64{0.2, 0.05, 0.01, 0.01}, Accepted: 0, Resampled: true}
	lucky := sure
	lucky.Resampled = true
	var samples []DepthSample
	for range 20 {
		samples = append(samples, sure, unsure, unsure, lucky, lucky, unsure)
	}
	levels := func(s DepthSample) int {
		if s.Best[0] < 0.3 {
			return 1
		}
		return 4
	}
	w := sampleWeights(samples, levels)
	var reg, sum float64
	for i, s := range samples {
		sum += w[i]
		if !s.Resampled {
			reg += w[i]
		}
	}
	if reg < 0.999 || reg > 1.001 || sum < 0.999 || sum > 1.001 {
		t.Errorf("regular steps weigh %.3f of %.3f, want all of 1 (f_reg = 1)", reg, sum)
	}
	acc.Depths = samples
	weighed := mustPredict(t, plan, acc, c)
	same := *acc
	same.Depths = nil
	for _, s := range samples {
		s.Resampled = false
		same.Depths = append(same.Depths, s)
	}
	even := mustPredict(t, plan, &same, c)
	full := plan
	full.DepthPolicy, full.DepthMin = "", 0
	if fixed := mustPredict(t, full, acc, c); weighed.Step != fixed.Step || !(even.Step < weighed.Step) {
		t.Errorf("weighed by kind: step %v (every level every step: %v); every sample alike: %v, want less", weighed.Step, fixed.Step, even.Step)
	}
	// fewer than minSplitSteps of a kind: every step weighs the same
	for i, x := range sampleWeights(samples[:12], levels) {
		if x != 1.0/12 {
			t.Fatalf("sample %d weighs %v with few steps of each kind, want 1/12", i, x)
		}
	}
}
