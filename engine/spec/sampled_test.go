package spec

import (
	"context"
	"math"
	"sort"
	"testing"

	"arborist/engine/drafter"
	"arborist/engine/hidden"
	"arborist/engine/model"
	"arborist/engine/sample"
	"arborist/engine/tree"
	"arborist/kernels"
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

// exactFirst returns the target's exact distribution of the next token
// after prompt under params, as exactJoint's cells {t1, -1} (those with an
// expected count of 5 or more over n draws) and the probability they cover.
func exactFirst(t *testing.T, m *model.Model, prompt []int, params sample.Params, n int) (map[[2]int]float64, float64) {
	var res model.Result
	c := m.NewCache(len(prompt))
	if err := m.Forward(context.Background(), c, model.Batch{Tokens: prompt, Want: []int{len(prompt) - 1}}, &res); err != nil {
		t.Fatal(err)
	}
	p1 := make([]float32, m.Vocab)
	sample.New(params).Probs(res.Logits, p1)
	cells, covered := map[[2]int]float64{}, 0.0
	for t1, p := range p1 {
		if float64(p)*float64(n) >= 5 {
			cells[[2]int{t1, -1}] = float64(p)
			covered += float64(p)
		}
	}
	return cells, covered
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

// sampledRule is a verification rule TestSampledLossless checks: a plan,
// and how it drafts.
type sampledRule struct {
	name   string
	cfg    Config
	hidden bool // draft with a hidden-state drafter (re-sampling on)
	twoDev bool // draft on the second device (the hidden drafter's layer there), concurrently with verification
}

// sampledRules lists every verification rule: each strategy's, the
// hidden-state drafter's, duo's, tails', on one device and on two.
func sampledRules() []sampledRule {
	shape, _ := tree.FromWidths([]int{3, 2})
	return []sampledRule{
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
}

// sampledCase is what the sampled tests run on.
type sampledCase struct {
	target *model.Model
	second *model.Model // a copy of the target on a device of its own
	prompt []int
	params sample.Params // the sampling, where a rule sets none
	n      int           // seeded runs per rule, and as many with the fault
	// drafter, when set, is the hidden-state drafter of the rules that
	// draft with one (else an untrained one, hiddenSource's)
	drafter *hidden.Drafter
	layers  int // the layer-skip drafter: the target's first layers
	ctx     int // the drafters' capacity
	// prefilled starts every run from the prompt prefilled once
	// (Engine.RunFrom), instead of prefilling it (Run)
	prefilled bool
}

// runs returns a function that generates with e after the case's prompt,
// prefilled once per engine where the case says so.
func (sc sampledCase) runs(t *testing.T, e *Engine) func(cfg Config) *Result {
	ctx := context.Background()
	var pre *Prefix
	if sc.prefilled {
		var err error
		if pre, err = e.Prefill(ctx, sc.prompt); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pre.Free)
	}
	return func(cfg Config) *Result {
		var res *Result
		var err error
		if pre != nil {
			res, err = e.RunFrom(ctx, pre, cfg)
		} else {
			res, err = e.Run(ctx, sc.prompt, cfg)
		}
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
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
	checkSampledLossless(t, sampledCase{
		target: p.target,
		second: loadOn(t, "stories260K.gguf", cpu.New(1)),
		prompt: p.target.Tok.Encode("Lily", true, false), // about 2 nats of entropy
		params: sample.Params{Temp: 1.0},
		n:      4000,
		layers: 4,
		ctx:    64,
	})
}

// checkSampledLossless runs every rule of sampledRules on sc, and each
// again with the residual step broken, which must be caught.
func checkSampledLossless(t *testing.T, sc sampledCase) {
	// params is a rule's sampling: its own transforms, at the case's
	// temperature
	params := func(cfg Config) sample.Params {
		if cfg.Sample.Temp == 0 {
			return sc.params
		}
		p := cfg.Sample
		p.Temp = sc.params.Temp
		return p
	}
	// the exact distributions, by sampling and runs (each costs a
	// prefill per likely first token): the first two tokens' joint, and
	// the first token's, which a broken residual step moves most (the
	// first draft's rejection), with fewer cells: one statistic each
	type exact struct {
		joint, first      map[[2]int]float64
		covered, covered1 float64
	}
	type key struct {
		p sample.Params
		n int
	}
	exacts := map[key]exact{}
	run := func(t *testing.T, cfg Config, useHidden, twoDev bool, n int, broken bool) [2]chiStat {
		k := key{params(cfg), n}
		x, ok := exacts[k]
		if !ok {
			x.joint, x.covered = exactJoint(t, sc.target, sc.prompt, k.p, n)
			x.first, x.covered1 = exactFirst(t, sc.target, sc.prompt, k.p, n)
			exacts[k] = x
		}
		obs, obs1 := map[[2]int]int{}, map[[2]int]int{}
		var src drafter.Source = drafter.NewModel(sc.target, sc.layers, sc.ctx, "layer-skip")
		switch {
		case useHidden && sc.drafter != nil:
			var dev kernels.Device
			if twoDev {
				dev = sc.second.Backend
			}
			hs, err := hidden.NewSource(sc.drafter, sc.target, hidden.Options{ResampleMin: 1e-9, Device: dev})
			if err != nil {
				t.Fatal(err)
			}
			src = hs
		case useHidden && twoDev:
			src = hiddenSourceOn(sc.target, 1e-9, sc.second.Backend)
		case useHidden:
			src = hiddenSource(sc.target, 1e-9)
		case twoDev:
			src = drafter.NewModel(sc.second, sc.layers, sc.ctx, "layer-skip on a second device")
		}
		e := &Engine{Target: sc.target, Source: src, Concurrent: twoDev, faults: faults{brokenResidual: broken}}
		generate := sc.runs(t, e)
		for i := 0; i < n; i++ {
			c := cfg
			c.MaxTokens = 3 // room for depth-2 drafts; the first two tokens are tested
			c.Sample = params(cfg)
			c.Sample.Seed = uint64(1000 + i)
			res := generate(c)
			obs[[2]int{res.Tokens[0], res.Tokens[1]}]++
			obs1[[2]int{res.Tokens[0], -1}]++
		}
		var st [2]chiStat
		st[0].chi, st[0].dof = chiSquare(x.joint, x.covered, obs, n)
		st[1].chi, st[1].dof = chiSquare(x.first, x.covered1, obs1, n)
		return st
	}
	names := [2]string{"the first two tokens", "the first token"}
	for _, rule := range sampledRules() {
		n := sc.n
		t.Run(rule.name, func(t *testing.T) {
			for i, st := range run(t, rule.cfg, rule.hidden, rule.twoDev, n, false) {
				if crit := chi2Crit(st.dof); st.chi > crit {
					t.Errorf("%s: chi-square %.1f > %.1f (dof %d): output does not follow the target", names[i], st.chi, crit, st.dof)
				} else {
					t.Logf("%s: chi-square %.1f <= %.1f (dof %d)", names[i], st.chi, crit, st.dof)
				}
			}
			// the fault must be caught by one statistic at least
			caught := false
			for i, st := range run(t, rule.cfg, rule.hidden, rule.twoDev, n, true) {
				crit := chi2Crit(st.dof)
				caught = caught || st.chi > crit
				t.Logf("broken residual, %s: chi-square %.1f against %.1f (dof %d)", names[i], st.chi, crit, st.dof)
			}
			if !caught {
				t.Errorf("with the residual step broken, no chi-square passed its critical value: the test has no teeth")
			}
		})
	}
}

// chiStat is a chi-square statistic and its degrees of freedom.
type chiStat struct {
	chi float64
	dof int
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
	checkSampledFullAcceptance(t, sampledCase{
		target: p.target,
		prompt: p.target.Tok.Encode("Lily", true, false),
		params: sample.Params{Temp: 1.0},
		n:      1500,
		ctx:    64,
	})
}

// checkSampledFullAcceptance is TestSampledFullAcceptance on sc (its
// drafter is the whole target, whatever sc.layers says).
func checkSampledFullAcceptance(t *testing.T, sc sampledCase) {
	params, prompt, n := sc.params, sc.prompt, sc.n
	target := sc.target
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
		c := target.NewCache(len(seq))
		if err := target.Forward(ctx, c, model.Batch{Tokens: seq, Want: []int{len(seq) - 1}}, &res); err != nil {
			t.Fatal(err)
		}
		d := make([]float32, target.Vocab)
		sample.New(params).Probs(res.Logits, d)
		cond[prefix] = d
		return d
	}
	run := func(t *testing.T, cfg Config, layers int, f faults) (chi float64, dof int, full float64) {
		obs := map[[3]int]map[int]int{}
		fulls := 0
		e := &Engine{Target: target, Source: drafter.NewModel(target, layers, sc.ctx, "self"), faults: f}
		generate := sc.runs(t, e)
		for i := 0; i < n; i++ {
			c := cfg
			c.MaxTokens = 4 // three drafts and the bonus
			c.Sample = params
			c.Sample.Seed = uint64(7000 + i)
			res := generate(c)
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
		return chi, dof, float64(fulls) / float64(n)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			chi, dof, full := run(t, tc.cfg, tc.layers, faults{})
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
			chi, dof, _ = run(t, tc.cfg, tc.layers, faults{staleBonus: true})
			if crit := chi2Crit(dof); chi <= crit {
				t.Errorf("with the bonus drawn from the previous row, chi-square %.1f <= %.1f (dof %d): the test has no teeth", chi, crit, dof)
			} else {
				t.Logf("stale bonus detected: chi-square %.1f > %.1f (dof %d)", chi, crit, dof)
			}
		})
	}
}
