package spec

import (
	"context"
	"fmt"
	"testing"
	"time"

	"arborist/engine/drafter"
	"arborist/engine/sample"
	"arborist/engine/tree"
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
		ctx := context.Background()
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
		for i := 0; i < n; i += seqs {
			var hs []*Handle
			for k := i; k < min(i+seqs, n); k++ {
				src, err := drafter.Fork(base)
				if err != nil {
					t.Fatal(err)
				}
				cfg := Config{Plan: plan, MaxTokens: 3, Sample: params}
				cfg.Sample.Seed = uint64(1000 + k)
				h, err := b.Submit(ctx, Request{Prompt: prompt, Config: cfg, Source: src})
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
				obs[[2]int{res.Tokens[0], res.Tokens[1]}]++
			}
		}
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
