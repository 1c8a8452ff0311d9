package spec

import (
	"context"
	"fmt"
	"testing"
	"time"

	"arborist/engine/drafter"
	"arborist/engine/sample"
	"arborist/engine/tree"
	"arborist/kernels/quant"
)

// TestBatchSampledLossless: in a batch, each request's first two tokens
// follow the target's exact joint distribution (chi-square at
// significance 0.001, TestSampledLossless's machinery) at concurrency 1, 2
// and 4, while the budgets its steps get cycle from none to its whole
// plan (each step verified with the same rules, whatever it drafted); the
// same test catches a verifier whose residual step is broken. Each
// request drafts with its own instance of the target's first four layers.
func TestBatchSampledLossless(t *testing.T) {
	if testing.Short() {
		t.Skip("statistical test: thousands of seeded runs")
	}
	p := loadPair(t, "stories260K.gguf", "bench/draft-noisy-0.05.gguf")
	params := sample.Params{Temp: 1.0}
	prompt := p.target.Tok.Encode("Lily", true, false)
	const n = 4000
	joint, covered := exactJoint(t, p.target, prompt, params, n)
	shape, _ := tree.FromWidths([]int{3, 2})
	base := drafter.NewModel(p.target, 4, 64, "layers:4")
	rules := []struct {
		name   string
		plan   Plan
		seqs   []int
		policy string // cycled budgets (""), the plan's whole ("fixed"), or goodput's
	}{
		{"chain", Plan{Strategy: "chain", Gamma: 3}, []int{1, 2, 4}, ""},
		{"sampled tree", Plan{Strategy: "tree", Parents: shape.Parents, SampleChildren: true}, []int{4}, ""},
		{"ranked tree", Plan{Strategy: "egt", EGT: []int{1, 3}, Branch: 3, WMax: 8}, []int{2, 4}, ""},
		{"duo", Plan{Strategy: "duo", Gamma: 6, MaxSeqs: 3}, []int{4}, ""},
		{"chain, the whole plan each step", Plan{Strategy: "chain", Gamma: 3}, []int{4}, "fixed"},
		// a pass costing 1 ms and 0.3 ms a row: the budgets follow each
		// request's running acceptance
		{"ranked tree, goodput's budgets", Plan{Strategy: "egt", EGT: []int{1, 3}, Branch: 3, WMax: 8}, []int{4}, "goodput"},
	}
	run := func(t *testing.T, plan Plan, seqs int, policyName string, f faults) (float64, int) {
		obs := map[[2]int]int{}
		pass := 0
		var policy Policy = cycleBudgets{&pass}
		switch policyName {
		case "fixed":
			policy = Fixed{}
		case "goodput":
			policy = Goodput{Latency: func(rows int) time.Duration { return time.Millisecond + time.Duration(rows)*300*time.Microsecond }}
		}
		b := NewBatch(p.target, BatchOptions{Policy: policy, MaxSeqs: seqs})
		b.faults = f
		batchWaves(t, b, base, n, seqs, Request{Prompt: prompt, Config: Config{Plan: plan, MaxTokens: 3, Sample: params}}, func(res *Result) {
			obs[[2]int{res.Tokens[0], res.Tokens[1]}]++
		})
		return chiSquare(joint, covered, obs, n)
	}
	for _, rule := range rules {
		for _, seqs := range rule.seqs {
			t.Run(fmt.Sprintf("%s/concurrency %d", rule.name, seqs), func(t *testing.T) {
				chi, dof := run(t, rule.plan, seqs, rule.policy, faults{})
				if crit := chi2Crit(dof); chi > crit {
					t.Errorf("chi-square %.1f > %.1f (dof %d): output does not follow the target", chi, crit, dof)
				} else {
					t.Logf("chi-square %.1f <= %.1f (dof %d)", chi, crit, dof)
				}
				if seqs != 4 {
					return
				}
				chi, dof = run(t, rule.plan, seqs, rule.policy, faults{brokenResidual: true})
				if crit := chi2Crit(dof); chi <= crit {
					t.Errorf("with the residual step broken, chi-square %.1f <= %.1f (dof %d): the test has no teeth", chi, crit, dof)
				} else {
					t.Logf("broken residual detected: chi-square %.1f > %.1f", chi, crit)
				}
			})
		}
	}
}

// TestBatchSampledLosslessLongContext is TestBatchSampledLossless after a
// prompt longer than an attention chunk (each verification row's softmax
// spans two chunks), in float32 and float16 caches: four requests a pass,
// their budgets cycling from none to the whole plan, each started from
// the prompt prefilled once (Request.From); a chain and a ranked tree,
// each with a broken residual step that must be caught.
func TestBatchSampledLosslessLongContext(t *testing.T) {
	if testing.Short() {
		t.Skip("statistical test: thousands of seeded runs after a long prompt")
	}
	sc := longSampledCase(t, 600, false)
	ctx := context.Background()
	const seqs = 4
	plans := []struct {
		name string
		plan Plan
	}{
		{"chain", Plan{Strategy: "chain", Gamma: 3}},
		{"ranked tree", Plan{Strategy: "egt", EGT: []int{1, 3}, Branch: 3, WMax: 8}},
	}
	for _, kv := range []quant.Type{quant.F32, quant.F16} {
		t.Run(kv.String(), func(t *testing.T) {
			sc.target.KVType = kv
			joint, covered := exactJoint(t, sc.target, sc.prompt, sc.params, sc.n)
			first, covered1 := exactFirst(t, sc.target, sc.prompt, sc.params, sc.n)
			base := drafter.NewModel(sc.target, sc.layers, sc.ctx, "layer-skip")
			pre, err := (&Engine{Target: sc.target, Source: base}).Prefill(ctx, sc.prompt)
			if err != nil {
				t.Fatal(err)
			}
			defer pre.Free()
			run := func(t *testing.T, plan Plan, f faults) [2]chiStat {
				obs, obs1 := map[[2]int]int{}, map[[2]int]int{}
				pass := 0
				b := NewBatch(sc.target, BatchOptions{Policy: cycleBudgets{&pass}, MaxSeqs: seqs})
				b.faults = f
				req := Request{Prompt: sc.prompt, Config: Config{Plan: plan, MaxTokens: 3, Sample: sc.params}, From: pre}
				batchWaves(t, b, base, sc.n, seqs, req, func(res *Result) {
					obs[[2]int{res.Tokens[0], res.Tokens[1]}]++
					obs1[[2]int{res.Tokens[0], -1}]++
				})
				var st [2]chiStat
				st[0].chi, st[0].dof = chiSquare(joint, covered, obs, sc.n)
				st[1].chi, st[1].dof = chiSquare(first, covered1, obs1, sc.n)
				return st
			}
			names := [2]string{"the first two tokens", "the first token"}
			for _, p := range plans {
				t.Run(p.name, func(t *testing.T) {
					for i, st := range run(t, p.plan, faults{}) {
						if crit := chi2Crit(st.dof); st.chi > crit {
							t.Errorf("%s: chi-square %.1f > %.1f (dof %d): output does not follow the target", names[i], st.chi, crit, st.dof)
						} else {
							t.Logf("%s: chi-square %.1f <= %.1f (dof %d)", names[i], st.chi, crit, st.dof)
						}
					}
					caught := false // by one statistic at least
					for i, st := range run(t, p.plan, faults{brokenResidual: true}) {
						crit := chi2Crit(st.dof)
						caught = caught || st.chi > crit
						t.Logf("broken residual, %s: chi-square %.1f against %.1f (dof %d)", names[i], st.chi, crit, st.dof)
					}
					if !caught {
						t.Errorf("with the residual step broken, no chi-square passed its critical value: the test has no teeth")
					}
				})
			}
		})
	}
}

// batchWaves submits n requests like req to b, seqs at a time, each with
// a fork of base as its source and seed 1000 + its number, runs each wave
// to its end and hands every result to seen.
func batchWaves(t *testing.T, b *Batch, base drafter.Source, n, seqs int, req Request, seen func(*Result)) {
	t.Helper()
	for i := 0; i < n; i += seqs {
		var hs []*Handle
		for k := i; k < min(i+seqs, n); k++ {
			src, err := drafter.Fork(base)
			if err != nil {
				t.Fatal(err)
			}
			r := req
			r.Source = src
			r.Config.Sample.Seed = uint64(1000 + k)
			h, err := b.Submit(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			hs = append(hs, h)
		}
		stepAll(t, b)
		for _, h := range hs {
			res, err := h.Result()
			if err != nil {
				t.Fatal(err)
			}
			seen(res)
		}
	}
}
