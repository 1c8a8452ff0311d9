package modeltest

import (
	"context"
	"fmt"
	"testing"

	"arborist/engine/drafter"
	"arborist/engine/generate"
	"arborist/engine/hidden"
	"arborist/engine/model"
	"arborist/engine/sample"
	"arborist/engine/spec"
	"arborist/kernels/quant"
)

// Strategies: greedy speculative output of every registered strategy
// (engine/spec) equals plain decoding on the device, run alone and as the
// requests of one batch (every strategy's steps in one pass), with a
// draft model on a second device (the target's own weights: long accepted paths; duo,
// AOT and tails draft concurrently), the target's first layer (frequent rejections)
// and a hidden-state drafter (its layer on the target's device), on a
// plain, a soft-capped sliding-window and a quantised model, and with an
// F16 KV cache.
func Strategies(t *testing.T, dev Device) { strategies(t, dev, Options{}) }

func strategies(t *testing.T, dev Device, o Options) {
	ctx := context.Background()
	// every registered strategy's own examples (Strategy.Examples): a
	// strategy without any fails the suite, so none goes untested on a
	// device
	plans := map[string][]spec.Plan{}
	for _, name := range spec.Strategies() {
		s, err := spec.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		if s.Examples != nil {
			plans[name] = s.Examples()
		}
		if len(plans[name]) == 0 {
			t.Errorf("strategy %s has no Examples for the model-level suite", name)
		}
	}
	prompts := [][]int{{1, 17, 99, 250, 3}, {1, 200, 5}}
	const n = 24
	d, dd := open(t, dev), open(t, dev)
	for _, s := range []struct {
		name string
		kv   quant.Type
	}{{"llama", quant.F32}, {"gemma2-window", quant.F32}, {"llama-q8", quant.F32}, {"llama-q4k", quant.F32}, {"llama", quant.F16}} {
		if o.Small && (s.name == "llama-q8" || s.name == "llama-q4k" || s.kv != quant.F32) {
			continue // the weight and cache types are the other checks' business
		}
		shape, typ := "", quant.F32
		for _, sh := range Shapes {
			if sh.Name == s.name {
				shape, typ = sh.Shape, sh.Type
			}
		}
		t.Run(fmt.Sprintf("%s/kv-%s", s.name, s.kv), func(t *testing.T) {
			target, path := Synth(t, d, shape, typ, 11)
			target.KVType = s.kv
			self := Load(t, dd, path)
			want := make([][]int, len(prompts))
			for i, pr := range prompts {
				out, _, err := generate.Run(ctx, target, pr, generate.Options{MaxTokens: n})
				if err != nil {
					t.Fatal(err)
				}
				want[i] = out
			}
			srcs := map[string]func() (drafter.Source, bool){
				"self": func() (drafter.Source, bool) { return drafter.NewModel(self, 0, 256, "self"), true },
				"layers": func() (drafter.Source, bool) {
					return drafter.NewModel(target, 1, 256, "layers:1"), false
				},
				// an untrained hidden-state drafter: its layer runs on the
				// target's device, fed the target's hidden states
				"hidden": func() (drafter.Source, bool) {
					hd, err := hidden.New(target, 8, -1, 1)
					if err != nil {
						t.Fatal(err)
					}
					src, err := hidden.NewSource(hd, target, hidden.Options{ResampleMin: 0.2})
					if err != nil {
						t.Fatal(err)
					}
					return src, false
				},
			}
			for _, name := range spec.Strategies() {
				for ci, plan := range plans[name] {
					for sname, mk := range srcs {
						if !plan.NeedsSource() && sname != "self" {
							continue // plain decoding: one source is enough
						}
						src, conc := mk()
						e := &spec.Engine{Target: target, Source: src, Concurrent: conc}
						if !plan.NeedsSource() {
							e.Source = nil
						}
						if plan.Concurrent() && !conc {
							continue // concurrent drafting needs the drafter's own device
						}
						for i, pr := range prompts {
							c := spec.Config{Plan: plan, MaxTokens: n}
							res, err := e.Run(ctx, pr, c)
							if err != nil {
								t.Fatalf("%s#%d/%s: %v", name, ci, sname, err)
							}
							if fmt.Sprint(res.Tokens) != fmt.Sprint(want[i]) {
								t.Fatalf("%s#%d/%s, prompt %v:\n got %v\nwant %v", name, ci, sname, pr, res.Tokens, want[i])
							}
						}
					}
				}
			}
			// the same plans and prompts as the requests of one batch,
			// all at once, each request with its own instance of the
			// source: one pass holds every strategy's steps
			for sname, mk := range srcs {
				base, conc := mk()
				b := spec.NewBatch(target, spec.BatchOptions{MaxSeqs: 64})
				type sub struct {
					h    *spec.Handle
					want []int
					what string
				}
				var subs []sub
				for _, name := range spec.Strategies() {
					for ci, plan := range plans[name] {
						if plan.Concurrent() && !conc {
							continue
						}
						for i, pr := range prompts {
							var src drafter.Source
							if plan.NeedsSource() {
								f, err := drafter.Fork(base)
								if err != nil {
									t.Fatal(err)
								}
								src = f
							}
							h, err := b.Submit(ctx, spec.Request{Prompt: pr, Config: spec.Config{Plan: plan, MaxTokens: n}, Source: src, Concurrent: conc})
							if err != nil {
								t.Fatalf("%s#%d/%s in a batch: %v", name, ci, sname, err)
							}
							subs = append(subs, sub{h, want[i], fmt.Sprintf("%s#%d/%s in a batch, prompt %v", name, ci, sname, pr)})
						}
					}
				}
				if len(subs) < 2*len(prompts) {
					t.Fatalf("%s: %d requests in the batch", sname, len(subs))
				}
				for {
					ran, err := b.Step(ctx)
					if err != nil {
						t.Fatal(err)
					}
					if ran == 0 {
						break
					}
				}
				for _, s := range subs {
					res, err := s.h.Result()
					if err != nil {
						t.Fatalf("%s: %v", s.what, err)
					}
					if fmt.Sprint(res.Tokens) != fmt.Sprint(s.want) {
						t.Fatalf("%s:\n got %v\nwant %v", s.what, res.Tokens, s.want)
					}
				}
				b.Close(nil)
				drafter.Free(base)
			}
		})
	}
}

// Argmax: a pass asked for its argmax only returns, for every wanted row,
// the index sample.Argmax picks from the same pass's logits; one asked for
// probabilities returns what the sampling transforms make of them.
func Argmax(t *testing.T, dev Device) {
	ctx := context.Background()
	d := open(t, dev)
	for _, s := range Shapes[:3] {
		t.Run(s.Name, func(t *testing.T) {
			m, _ := Synth(t, d, s.Shape, s.Type, 5)
			toks := []int{1, 17, 99, 250, 3}
			var full, am model.Result
			must(t, m.Forward(ctx, m.NewCache(8), model.Batch{Tokens: toks}, &full))
			must(t, m.Forward(ctx, m.NewCache(8), model.Batch{Tokens: toks, Want: []int{4, 0, 2}, Output: model.OutArgmax}, &am))
			for j, r := range []int{4, 0, 2} {
				if w := sample.Argmax(full.Logits[r*m.Vocab : (r+1)*m.Vocab]); am.Argmax[j] != w {
					t.Fatalf("row %d: argmax %d, want %d", r, am.Argmax[j], w)
				}
			}
			// probabilities after the sampling transforms: what sample.Probs
			// makes of the same logits, row by row
			params := sample.Params{Temp: 0.8, TopK: 20, TopP: 0.9}
			var pr model.Result
			must(t, m.Forward(ctx, m.NewCache(8), model.Batch{Tokens: toks, Want: []int{3, 1}, Output: model.OutProbs, Sample: params}, &pr))
			want := make([]float32, m.Vocab)
			for j, r := range []int{3, 1} {
				sample.New(params).Probs(full.Logits[r*m.Vocab:(r+1)*m.Vocab], want)
				got := pr.Probs[j*m.Vocab : (j+1)*m.Vocab]
				var sum float64
				for i := range want {
					if d := got[i] - want[i]; d > 1e-6 || d < -1e-6 {
						t.Fatalf("row %d token %d: probability %v, want %v", r, i, got[i], want[i])
					}
					sum += float64(got[i])
				}
				if sum < 0.999 || sum > 1.001 {
					t.Fatalf("row %d: probabilities sum to %v", r, sum)
				}
			}
		})
	}
}
