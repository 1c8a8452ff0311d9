package predictor

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"arborist/engine/spec"
	"arborist/profiles/costmodel"
)

// TestGradients checks the hand-written backward pass against central
// finite differences for every parameter block, trunk and path included.
func TestGradients(t *testing.T) {
	p := newPredictor([]string{Confidence, Hidden}, true, 3, 6, 4, 1)
	rng := rand.New(rand.NewPCG(2, 3))
	var data []example
	for i := 0; i < 6; i++ {
		e := example{x: make([]float64, p.In), path: make([]float64, 3), y: make([]float64, 3)}
		for j := range e.x {
			e.x[j] = rng.NormFloat64()
		}
		for k := range e.y {
			e.path[k] = rng.NormFloat64()
			e.y[k] = float64((i + k) % 2)
		}
		e.y[2] = -1 // a head the step does not reach
		data = append(data, e)
	}
	for k := range p.U {
		p.U[k] = rng.NormFloat64()
	}
	heads := 3
	g := p.zero()
	z, a, da := make([]float64, p.Units), make([]float64, p.Units), make([]float64, p.Units)
	for _, e := range data {
		p.grads(e, heads, g, z, a, da)
	}
	analytic, _ := g.params()
	params, weight := p.params()
	for bi, block := range params {
		for j := range block {
			orig := block[j]
			const eps = 1e-6
			block[j] = orig + eps
			up := p.loss(data, heads)
			block[j] = orig - eps
			down := p.loss(data, heads)
			block[j] = orig
			num := (up - down) / (2 * eps)
			an := analytic[bi][j] / float64(len(data))
			if weight[bi] {
				an += 2 * l2 * orig
			}
			if math.Abs(num-an) > 1e-5*math.Max(1, math.Abs(num)) {
				t.Fatalf("block %d [%d]: analytic %.8f, numeric %.8f", bi, j, an, num)
			}
		}
	}
}

// steps makes recorded steps of a 4-level chain over prompts. With
// signal, the target accepts the whole chain when the state's first
// feature is positive and nothing otherwise; without, at random. The path
// probabilities say nothing either way.
func steps(prompts, each int, signal bool, seed uint64) []Step {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	var out []Step
	for p := 0; p < prompts; p++ {
		for i := 0; i < each; i++ {
			h := make([]float32, 6)
			for j := range h {
				h[j] = float32(rng.NormFloat64())
			}
			a := 0
			if (signal && h[0] > 0) || (!signal && rng.IntN(2) == 0) {
				a = 4
			}
			s := Step{Prompt: p, Hidden: h, Top1: rng.Float64(), Entropy: rng.Float64() * 3}
			best := 1.0
			for l := 1; l <= 4; l++ {
				best *= 0.5 + 0.5*rng.Float64()
				s.Best = append(s.Best, best)
				s.Kept = append(s.Kept, min(a, l))
			}
			out = append(out, s)
		}
	}
	return out
}

// evenMix weighs every step the same.
func evenMix(_ []bool, levels, kept []int) (float64, []float64) {
	shares := make([]float64, 5)
	aal := 1.0
	for i := range levels {
		shares[levels[i]] += 1 / float64(len(levels))
		aal += float64(kept[i]) / float64(len(levels))
	}
	return aal, shares
}

var chain4 = costmodel.Plan{Strategy: "egt", EGT: []int{1, 1, 1, 1}, Branch: 1, WMax: 4}

func chainCosts() Costs {
	return Costs{Step: []time.Duration{1400 * time.Microsecond, 1800 * time.Microsecond, 2200 * time.Microsecond, 2600 * time.Microsecond}, Plain: time.Millisecond}
}

// TestFitFindsSignal: where the target's state decides how deep a draft is
// accepted and the path does not, the predictor chosen on the validation
// prompts reads the state, and on held-out prompts it beats every fixed
// depth, the threshold policies and the most common best depth; the
// oracle bounds it.
func TestFitFindsSignal(t *testing.T) {
	p, err := Fit(steps(12, 40, true, 1), chain4, chainCosts(), evenMix, FitOptions{Epochs: 20, Units: 16, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	st := p.Stats
	if !strings.Contains(st.Chosen, Hidden) {
		t.Errorf("chose %q (variants %+v)", st.Chosen, st.Variants)
	}
	if !st.Beats || st.Predictor <= st.Fixed[st.BestFixed-1]*1.1 || st.Predictor <= st.ThresholdSpeedup || st.Predictor <= st.CommonSpeedup {
		t.Errorf("predictor %.3f against fixed %v (best %d), threshold %.3f, most common %.3f", st.Predictor, st.Fixed, st.BestFixed, st.ThresholdSpeedup, st.CommonSpeedup)
	}
	if st.Oracle < st.Predictor {
		t.Errorf("oracle %.3f below the predictor %.3f", st.Oracle, st.Predictor)
	}
	if st.Prompts != [3]int{8, 1, 3} || st.Steps[2] != 120 {
		t.Errorf("split %v prompts, %v steps", st.Prompts, st.Steps)
	}
	for k, a := range st.Accuracy {
		if a < st.Majority[k]+0.2 {
			t.Errorf("decision %d: accuracy %.2f against %.2f for the most common answer", k, a, st.Majority[k])
		}
	}
	sum := 0.0
	for _, v := range st.Levels {
		sum += v
	}
	if math.Abs(sum-1) > 1e-9 || st.Share <= 0 || st.Share > 1 || st.Infer <= 0 {
		t.Errorf("priced with levels %v, share %g, inference %v", st.Levels, st.Share, st.Infer)
	}
	// stored and read back, it decides the same, and at run time as the
	// fit simulated
	b, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	q, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	test := steps(2, 30, true, 9)
	want := p.decide(test)
	pol := &Policy{P: q}
	for i, s := range test {
		l := 1
		for pol.Next(spec.DepthState{Depth: l, Best: s.Best[l-1], Hidden: s.Hidden, Top1: s.Top1, Entropy: s.Entropy}) {
			l++
		}
		if !pol.Next(spec.DepthState{Depth: 0}) || l != want[i] {
			t.Fatalf("step %d: the policy drafts %d levels, the fit simulated %d", i, l, want[i])
		}
	}
}

// TestFitStatsAreConsistent: without any signal the figures still hold
// together, and Beats says exactly whether the predictor was at least as
// fast as the best fixed depth and the best threshold.
func TestFitStatsAreConsistent(t *testing.T) {
	p, err := Fit(steps(8, 30, false, 5), chain4, chainCosts(), evenMix, FitOptions{Epochs: 10, Units: 8, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	st := p.Stats
	best := st.Fixed[st.BestFixed-1]
	for _, f := range st.Fixed {
		if f > best {
			t.Errorf("best fixed %d (%.3f) is not the best of %v", st.BestFixed, best, st.Fixed)
		}
	}
	if st.Beats != (st.Predictor >= best && st.Predictor >= st.ThresholdSpeedup) {
		t.Errorf("beats %v with predictor %.3f, fixed %.3f, threshold %.3f", st.Beats, st.Predictor, best, st.ThresholdSpeedup)
	}
	if st.Oracle < best || st.Oracle < st.ThresholdSpeedup {
		t.Errorf("oracle %.3f below a policy (%.3f, %.3f)", st.Oracle, best, st.ThresholdSpeedup)
	}
	if len(st.Variants) != len(variants) {
		t.Errorf("%d variants in the ablation, want %d", len(st.Variants), len(variants))
	}
}

// TestFitRefusesWhatItCannotLearn: too few prompts, a plan that is not a
// deep enough EGT, and costs that do not fit are refused.
func TestFitRefusesWhatItCannotLearn(t *testing.T) {
	for name, c := range map[string]func() error{
		"two prompts": func() error {
			_, err := Fit(steps(2, 10, true, 1), chain4, chainCosts(), evenMix, FitOptions{Epochs: 1})
			return err
		},
		"one level": func() error {
			_, err := Fit(steps(6, 10, true, 1), costmodel.Plan{Strategy: "egt", EGT: []int{1}, Branch: 1, WMax: 1}, Costs{Step: []time.Duration{1}, Plain: 1}, evenMix, FitOptions{Epochs: 1})
			return err
		},
		"chain": func() error {
			_, err := Fit(steps(6, 10, true, 1), costmodel.Plan{Strategy: "chain", Gamma: 4}, chainCosts(), evenMix, FitOptions{Epochs: 1})
			return err
		},
		"costs": func() error {
			_, err := Fit(steps(6, 10, true, 1), chain4, Costs{Step: chainCosts().Step[:3], Plain: time.Millisecond}, evenMix, FitOptions{Epochs: 1})
			return err
		},
	} {
		if c() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := Unmarshal([]byte(`{"In":3,"Hidden":2,"Depth":1}`)); err == nil || !strings.Contains(err.Error(), "older format") {
		t.Errorf("a predictor of the older format: %v", err)
	}
	if _, err := Unmarshal([]byte(`{"Version":2,"In":3,"Units":2,"Depth":3}`)); err == nil {
		t.Error("an inconsistent predictor was accepted")
	}
}
