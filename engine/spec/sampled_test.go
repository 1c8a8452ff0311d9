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
	"arborist/kernels/cpu"
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
	// a copy of the target on a second device, for duo on two devices
	second := loadOn(t, "stories260K.gguf", cpu.New(1))
	rules := []struct {
		name   string
		cfg    Config
		hidden bool // draft with a hidden-state drafter (re-sampling on)
		twoDev bool // draft on the second device (the hidden drafter's layer there), concurrently with verification
	}{
		{"chain (min(1,p/q), residual, bonus)", Config{Plan: Plan{Strategy: "chain", Gamma: 3}}, false, false},
		{"chain with top-k 20 and top-p 0.9", Config{Plan: Plan{Strategy: "chain", Gamma: 3}, Sample: sample.Params{Temp: 1, TopK: 20, TopP: 0.9}}, false, false},
		{"sampled tree (multi-draft rule)", Config{Plan: Plan{Strategy: "tree", Parents: shape.Parents, SampleChildren: true}}, false, false},
		{"ranked tree (point-mass rule)", Config{Plan: Plan{Strategy: "egt", EGT: []int{1, 3}, Branch: 3, WMax: 8}}, false, false},
		{"duo (ranked roots, sampled chains)", Config{Plan: Plan{Strategy: "duo", Gamma: 6, MaxSeqs: 3}}, false, false},
		{"duo on two devices (the drafter concurrent, on its own device)", Config{Plan: Plan{Strategy: "duo", Gamma: 6, MaxSeqs: 3}}, false, true},
		{"hidden-state drafter, chain", Config{Plan: Plan{Strategy: "chain", Gamma: 3}}, true, false},
		{"hidden-state drafter, ranked tree", Config{Plan: Plan{Strategy: "egt", EGT: []int{1, 3}, Branch: 3, WMax: 8}}, true, false},
		// tail drafting: the next draft prepared at several ends while the
		// target verifies, on every source that drafts concurrently
		{"chain with a tail at every end, on two devices", Config{Plan: Plan{Strategy: "chain", Gamma: 3, Tail: 4}}, false, true},
		{"ranked tree with a tail, on two devices", Config{Plan: Plan{Strategy: "egt", EGT: []int{1, 3}, Branch: 3, WMax: 8, Tail: 3}}, false, true},
		{"duo with a tail, on two devices", Config{Plan: Plan{Strategy: "duo", Gamma: 6, MaxSeqs: 3, Tail: 3}}, false, true},
		{"hidden-state drafter on its own device, chain with a tail", Config{Plan: Plan{Strategy: "chain", Gamma: 3, Tail: 4}}, true, true},
	}
	run := func(cfg Config, useHidden, twoDev bool, joint map[[2]int]float64, covered float64, broken bool) (float64, int) {
		obs := map[[2]int]int{}
		params := params
		if cfg.Sample.Temp > 0 {
			params = cfg.Sample
		}
		var src drafter.Source = drafter.NewModel(p.target, 4, 64, "layers:4")
		switch {
		case useHidden && twoDev:
			src = hiddenSourceOn(p.target, 1e-9, second.Backend)
		case useHidden:
			src = hiddenSource(p.target, 1e-9)
		case twoDev:
			src = drafter.NewModel(second, 4, 64, "layers:4 on a second device")
		}
		e := &Engine{Target: p.target, Source: src, Concurrent: twoDev, faults: faults{brokenResidual: broken}}
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
			chi, dof := run(rule.cfg, rule.hidden, rule.twoDev, joint, covered, false)
			if crit := chi2Crit(dof); chi > crit {
				t.Errorf("chi-square %.1f > %.1f (dof %d): output does not follow the target", chi, crit, dof)
			} else {
				t.Logf("chi-square %.1f <= %.1f (dof %d)", chi, crit, dof)
			}
			chi, dof = run(rule.cfg, rule.hidden, rule.twoDev, joint, covered, true)
			if crit := chi2Crit(dof); chi <= crit {
				t.Errorf("with the residual step broken, chi-square %.1f <= %.1f (dof %d): the test has no teeth", chi, crit, dof)
			} else {
				t.Logf("broken residual detected: chi-square %.1f > %.1f", chi, crit)
			}
		})
	}
}

// TestSampledFullAcceptance closes the hole TestSampledLossless leaves: with
// three-token drafts and four tokens emitted, the fourth token is the bonus
// the target contributes after the whole draft was accepted, and it must be
// distributed as the target's p after the three accepted tokens. The test
// groups the runs by their first three tokens and compares each group's
// fourth tokens with the exact conditional distribution (one chi-square over
// all groups); whatever happened in the step, a lossless engine emits the
// fourth token from P(. | first three). The drafters make full acceptance
// certain (the drafter is the whole target, so q = p and every draft token
// passes min(1, p/q)), the test checks that it happened, and a verifier
// that draws the bonus from the previous row's distribution must be caught.
// (A layer-skip drafter reaches full acceptance in about 10% of runs here,
// too few for a few-second test.)
func TestSampledFullAcceptance(t *testing.T) {
	if testing.Short() {
		t.Skip("statistical test: thousands of seeded runs")
	}
	p := loadPair(t, "stories260K.gguf", "bench/draft-noisy-0.05.gguf")
	params := sample.Params{Temp: 1.0}
	prompt := p.target.Tok.Encode("Lily", true, false)
	const n = 1500
	shape, _ := tree.FromWidths([]int{2, 1, 1})
	cases := []struct {
		name    string
		cfg     Config
		layers  int     // drafter: the target's first layers (0: all of it, q = p)
		minFull float64 // share of runs whose first step accepted all three drafts
	}{
		{"chain gamma=3, drafter = target", Config{Plan: Plan{Strategy: "chain", Gamma: 3}}, 0, 0.99},
		{"sampled tree 2,1,1, drafter = target", Config{Plan: Plan{Strategy: "tree", Parents: shape.Parents, SampleChildren: true}}, 0, 0.99},
	}
	ctx := context.Background()
	// cond caches the target's exact P(. | prompt + prefix)
	cond := map[[3]int][]float32{}
	exact := func(prefix [3]int) []float32 {
		if d, ok := cond[prefix]; ok {
			return d
		}
		seq := append(append([]int(nil), prompt...), prefix[:]...)
		var res model.Result
		c := p.target.NewCache(len(seq))
		if err := p.target.Forward(ctx, c, model.Batch{Tokens: seq, Want: []int{len(seq) - 1}}, &res); err != nil {
			t.Fatal(err)
		}
		d := make([]float32, p.target.Vocab)
		sample.New(params).Probs(res.Logits, d)
		cond[prefix] = d
		return d
	}
	run := func(cfg Config, layers int, f faults) (chi float64, dof int, full float64) {
		obs := map[[3]int]map[int]int{}
		fulls := 0
		e := &Engine{Target: p.target, Source: drafter.NewModel(p.target, layers, 64, "self"), faults: f}
		for i := 0; i < n; i++ {
			c := cfg
			c.MaxTokens = 4 // three drafts and the bonus
			c.Sample = params
			c.Sample.Seed = uint64(7000 + i)
			res, err := e.Run(ctx, prompt, c)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Tokens) < 4 {
				continue // an end of text inside the prefix (none in practice)
			}
			if res.Steps[0].Accepted == 3 {
				fulls++
			}
			k := [3]int{res.Tokens[0], res.Tokens[1], res.Tokens[2]}
			if obs[k] == nil {
				obs[k] = map[int]int{}
			}
			obs[k][res.Tokens[3]]++
		}
		// independent multinomials, one per prefix seen often enough
		for k, cnt := range obs {
			m := 0
			for _, c := range cnt {
				m += c
			}
			if m < 40 {
				continue
			}
			d := exact(k)
			cells, rest, restE := 0, m, float64(m)
			for tok, pv := range d {
				e := float64(pv) * float64(m)
				if e < 5 {
					continue
				}
				o := float64(cnt[tok])
				chi += (o - e) * (o - e) / e
				rest -= cnt[tok]
				restE -= e
				cells++
			}
			if restE >= 5 {
				chi += (float64(rest) - restE) * (float64(rest) - restE) / restE
				cells++
			}
			dof += cells - 1
		}
		return chi, dof, float64(fulls) / n
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			chi, dof, full := run(tc.cfg, tc.layers, faults{})
			if full < tc.minFull {
				t.Fatalf("the whole draft was accepted in %.0f%% of the runs, want at least %.0f%%: the test would not reach the bonus", 100*full, 100*tc.minFull)
			}
			if dof < 5 {
				t.Fatalf("only %d degrees of freedom: too few prefixes seen often enough", dof)
			}
			if crit := chi2Crit(dof); chi > crit {
				t.Errorf("chi-square %.1f > %.1f (dof %d): the bonus after a fully accepted draft does not follow the target", chi, crit, dof)
			} else {
				t.Logf("full acceptance in %.0f%% of runs; chi-square %.1f <= %.1f (dof %d)", 100*full, chi, crit, dof)
			}
			chi, dof, _ = run(tc.cfg, tc.layers, faults{staleBonus: true})
			if crit := chi2Crit(dof); chi <= crit {
				t.Errorf("with the bonus drawn from the previous row, chi-square %.1f <= %.1f (dof %d): the test has no teeth", chi, crit, dof)
			} else {
				t.Logf("stale bonus detected: chi-square %.1f > %.1f (dof %d)", chi, crit, dof)
			}
		})
	}
}
