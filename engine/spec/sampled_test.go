package spec

import (
	"context"
	"math"
	"sort"
	"testing"

	"arborist/engine/drafter"
	"arborist/engine/model"
	"arborist/engine/sample"
	"arborist/engine/tree"
)

// chi2Crit approximates the chi-square critical value for dof degrees of
// freedom at significance 0.001 (Wilson-Hilferty; z = 3.090).
func chi2Crit(dof int) float64 {
	k := float64(dof)
	a := 2 / (9 * k)
	return k * math.Pow(1-a+3.090*math.Sqrt(a), 3)
}

// exactJoint returns the target's exact distribution of the next two tokens
// after prompt under params: P(t1) for every t1, and P(t2 | t1) for the t1
// that matter (expected count >= 5 over n draws).
func exactJoint(t *testing.T, m *model.Model, prompt []int, params sample.Params, n int) (map[[2]int]float64, float64) {
	ctx := context.Background()
	smp := sample.New(params)
	var res model.Result
	c := m.NewCache(len(prompt) + 2)
	if err := m.Forward(ctx, c, model.Batch{Tokens: prompt, Want: []int{len(prompt) - 1}}, &res); err != nil {
		t.Fatal(err)
	}
	p1 := make([]float32, m.Vocab)
	smp.Probs(res.Logits, p1)
	joint := map[[2]int]float64{}
	covered := 0.0
	for t1, pt1 := range p1 {
		if float64(pt1)*float64(n) < 5 {
			continue
		}
		c2 := m.NewCache(len(prompt) + 2)
		seq := append(append([]int(nil), prompt...), t1)
		if err := m.Forward(ctx, c2, model.Batch{Tokens: seq, Want: []int{len(seq) - 1}}, &res); err != nil {
			t.Fatal(err)
		}
		p2 := make([]float32, m.Vocab)
		smp.Probs(res.Logits, p2)
		for t2, pt2 := range p2 {
			if pj := float64(pt1) * float64(pt2); pj*float64(n) >= 5 {
				joint[[2]int{t1, t2}] = pj
				covered += pj
			}
		}
	}
	return joint, covered
}

// chiSquare compares observed pairs with the exact joint distribution; cells
// with small expected counts are pooled into one remainder cell.
func chiSquare(joint map[[2]int]float64, covered float64, obs map[[2]int]int, n int) (float64, int) {
	chi := 0.0
	rest := n
	keys := make([][2]int, 0, len(joint))
	for k := range joint {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool { return keys[a][0]*1e6+keys[a][1] < keys[b][0]*1e6+keys[b][1] })
	for _, k := range keys {
		e := joint[k] * float64(n)
		o := float64(obs[k])
		rest -= obs[k]
		chi += (o - e) * (o - e) / e
	}
	dof := len(keys) - 1
	if e := (1 - covered) * float64(n); e >= 5 {
		chi += (float64(rest) - e) * (float64(rest) - e) / e
		dof++
	}
	return chi, dof
}

// TestSampledLossless checks, for each verification rule, that the first two
// emitted tokens follow the target's exact joint distribution (chi-square at
// significance 0.001), and that the same test catches a verifier whose
// residual step is broken. The drafter is the target's first four layers (layer-skip), so
// q differs from p enough (about 30% acceptance) for a broken rule to show.
func TestSampledLossless(t *testing.T) {
	if testing.Short() {
		t.Skip("statistical test: thousands of seeded runs")
	}
	p := loadPair(t, "stories260K.gguf", "bench/draft-noisy-0.05.gguf")
	params := sample.Params{Temp: 1.0}
	prompt := p.target.Tok.Encode("Lily", true, false) // about 2 nats of entropy
	const n = 4000
	baseJoint, baseCovered := exactJoint(t, p.target, prompt, params, n)
	shape, _ := tree.FromWidths([]int{3, 2})
	rules := []struct {
		name   string
		cfg    Config
		hidden bool // draft with a hidden-state drafter (re-sampling on)
	}{
		{"chain (min(1,p/q), residual, bonus)", Config{Strategy: "chain", Gamma: 3}, false},
		{"chain with top-k 20 and top-p 0.9", Config{Strategy: "chain", Gamma: 3, Sample: sample.Params{Temp: 1, TopK: 20, TopP: 0.9}}, false},
		{"sampled tree (multi-draft rule)", Config{Strategy: "tree", Static: shape, SampleChildren: true}, false},
		{"ranked tree (point-mass rule)", Config{Strategy: "egt", Widths: []int{1, 3}, Branch: 3, WMax: 8}, false},
		{"duo (ranked roots, sampled chains)", Config{Strategy: "duo", Gamma: 6, MaxSeqs: 3}, false},
		{"hidden-state drafter, chain", Config{Strategy: "chain", Gamma: 3}, true},
		{"hidden-state drafter, ranked tree", Config{Strategy: "egt", Widths: []int{1, 3}, Branch: 3, WMax: 8}, true},
	}
	run := func(cfg Config, useHidden bool, joint map[[2]int]float64, covered float64, broken bool) (float64, int) {
		obs := map[[2]int]int{}
		params := params
		if cfg.Sample.Temp > 0 {
			params = cfg.Sample
		}
		var src drafter.Source = drafter.NewModel(p.target, 4, 64, params, "layers:4")
		if useHidden {
			src = hiddenSource(p.target, params, 1e-9)
		}
		e := &Engine{Target: p.target, Source: src, brokenResidual: broken}
		for i := 0; i < n; i++ {
			c := cfg
			c.MaxTokens = 3 // room for depth-2 drafts; the first two tokens are tested
			c.Sample = params
			c.Sample.Seed = uint64(1000 + i)
			res, err := e.Run(context.Background(), prompt, c)
			if err != nil {
				t.Fatal(err)
			}
			obs[[2]int{res.Tokens[0], res.Tokens[1]}]++
		}
		return chiSquare(joint, covered, obs, n)
	}
	for _, rule := range rules {
		joint, covered := baseJoint, baseCovered
		if rule.cfg.Sample.Temp > 0 {
			joint, covered = exactJoint(t, p.target, prompt, rule.cfg.Sample, n)
		}
		t.Run(rule.name, func(t *testing.T) {
			chi, dof := run(rule.cfg, rule.hidden, joint, covered, false)
			if crit := chi2Crit(dof); chi > crit {
				t.Errorf("chi-square %.1f > %.1f (dof %d): output does not follow the target", chi, crit, dof)
			} else {
				t.Logf("chi-square %.1f <= %.1f (dof %d)", chi, crit, dof)
			}
			chi, dof = run(rule.cfg, rule.hidden, joint, covered, true)
			if crit := chi2Crit(dof); chi <= crit {
				t.Errorf("with the residual step broken, chi-square %.1f <= %.1f (dof %d): the test has no teeth", chi, crit, dof)
			} else {
				t.Logf("broken residual detected: chi-square %.1f > %.1f", chi, crit)
			}
		})
	}
}
