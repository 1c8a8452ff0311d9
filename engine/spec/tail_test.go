package spec

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"arborist/engine/drafter"
	"arborist/engine/tree"
	"arborist/kernels/cpu"
	"arborist/kernels/devicetest"
)

// TestTailEnds: the end positions tail drafting prepares are the root and
// the nodes (never a pad), ranked by the chance verification stops there
// (path probability times the chance none of the children is accepted),
// each with its path and the children its bonus cannot be.
func TestTailEnds(t *testing.T) {
	tr := &tree.Tree{}
	a := tr.Add(tree.Root, 10, 0.6) // stops with 0.6 * (1 - 0.5) = 0.3
	b := tr.Add(tree.Root, 11, 0.3) // a leaf: 0.3
	c := tr.Add(a, 12, 0.5)         // a leaf: 0.3
	tr.Pad(5, 99)
	var fresh acceptStats // nothing seen yet: a token's chance is its probability
	ends := tailEnds(tr, 10, &fresh)
	// the root stops with 1 - 0.6 - 0.3 = 0.1, last; ties keep tree order
	want := []struct {
		path, not []int
	}{{[]int{10}, []int{12}}, {[]int{11}, nil}, {[]int{10, 12}, nil}, {nil, []int{10, 11}}}
	if len(ends) != len(want) {
		t.Fatalf("%d ends, want %d (the root and three nodes; pads are none): %+v", len(ends), len(want), ends)
	}
	for i, w := range want {
		if !slices.Equal(ends[i].path, w.path) || !slices.Equal(ends[i].not, w.not) {
			t.Errorf("end %d: path %v not %v, want %v not %v", i, ends[i].path, ends[i].not, w.path, w.not)
		}
	}
	if got := tailEnds(tr, 2, &fresh); len(got) != 2 || !slices.Equal(got[1].path, []int{11}) {
		t.Errorf("two most likely ends: %+v", got)
	}
	// a run that saw its tokens of probability 0.5-0.6 accepted every
	// time ranks the leaf below them first
	var seen acceptStats
	for range 20 {
		seen.add([]Try{{Q: 0.55, Accepted: true}, {Q: 0.65, Accepted: true}})
	}
	if got := tailEnds(tr, 1, &seen); !slices.Equal(got[0].path, []int{10, 12}) {
		t.Errorf("after a run of accepted tokens the likeliest end is %v, want the leaf 10,12", got[0].path)
	}
	_, _ = b, c
}

// TestTailChangesNoDraft: tail drafting only prepares work: with model
// drafters (the draft model, and the target's first layers on a copy of
// their own) every step drafts and accepts exactly what it does without
// it, greedy output is plain decoding's, every step with a draft records
// the ends it prepared (up to the budget), and some of them hit. A
// drafter whose prepared continuations sat at wrong positions or leaked
// into the next step would change the drafts.
func TestTailChangesNoDraft(t *testing.T) {
	p := loadPair(t, "stories260K.gguf", "bench/draft-noisy-0.05.gguf")
	ctx := context.Background()
	ids := p.target.Tok.Encode("Tom and his dog went to the park", true, false)
	srcs := map[string]func() drafter.Source{
		"draft":      func() drafter.Source { return drafter.NewModel(p.draft, 0, 512, "draft") },
		"layers-own": func() drafter.Source { return drafter.NewModel(p.own(), 2, 512, "layers:2") },
	}
	for _, tc := range []struct {
		name       string
		base, tail Config
		ends       int // the most ends a step prepares
	}{
		{"chain", Config{Plan: Plan{Strategy: "chain", Gamma: 4}}, Config{Plan: Plan{Strategy: "chain", Gamma: 4, Tail: 5}}, 5},
		{"chain, one end", Config{Plan: Plan{Strategy: "chain", Gamma: 4}}, Config{Plan: Plan{Strategy: "chain", Gamma: 4, Tail: 1}}, 1},
		{"egt", Config{Plan: Plan{Strategy: "egt", EGT: []int{1, 2, 2}, Branch: 2, WMax: 6}}, Config{Plan: Plan{Strategy: "egt", EGT: []int{1, 2, 2}, Branch: 2, WMax: 6, Tail: 3}}, 3},
		{"egt with aot", Config{Plan: Plan{Strategy: "egt", EGT: []int{1, 2, 2}, Branch: 2, WMax: 6, AOT: true}}, Config{Plan: Plan{Strategy: "egt", EGT: []int{1, 2, 2}, Branch: 2, WMax: 6, Tail: 7}}, 7},
	} {
		for sname, mk := range srcs {
			t.Run(tc.name+"/"+sname, func(t *testing.T) {
				run := func(cfg Config, conc bool) *Result {
					cfg.MaxTokens = 80
					res, err := (&Engine{Target: p.target, Source: mk(), Concurrent: conc}).Run(ctx, ids, cfg)
					if err != nil {
						t.Fatal(err)
					}
					return res
				}
				base, tail := run(tc.base, false), run(tc.tail, true)
				if !slices.Equal(base.Tokens, tail.Tokens) {
					t.Fatalf("tokens differ:\n%v\n%v", base.Tokens, tail.Tokens)
				}
				steps := func(r *Result) string {
					var s []string
					for _, st := range r.Steps {
						s = append(s, fmt.Sprintf("%d/%d/%d", st.Drafted, st.Depth, st.Accepted))
					}
					return fmt.Sprint(s)
				}
				if a, b := steps(base), steps(tail); a != b {
					t.Fatalf("drafted/depth/accepted per step differ:\nwithout %s\n   with %s", a, b)
				}
				hits := 0
				for _, st := range tail.Steps {
					if st.Drafted > 0 && (st.Ahead < 1 || st.Ahead > tc.ends) {
						t.Errorf("step %d prepared %d ends, want 1..%d", st.Index, st.Ahead, tc.ends)
					}
					if st.AheadHit {
						hits++
					}
				}
				if hits == 0 {
					t.Errorf("no step's verdict matched a prepared end in %d steps", len(tail.Steps))
				}
				t.Logf("%d steps, %d hits", len(tail.Steps), hits)
			})
		}
	}
}

// BenchmarkTailOnTwoDevices measures what a tail buys where drafter and
// target do not compete for the host: each on a stand-in device with
// scripted latencies (devicetest.Slow: sleeping takes no CPU, as a GPU
// target beside a CPU drafter runs), the drafter the target's first four
// layers (a pass a sixth of the target's). Each plan and the same plan
// with a tail run in turn, interleaved over rounds; the benchmark reports
// each one's median tokens/s, the median ratio and the hit rates. Output
// must be plain decoding's.
//
//	go test -run - -bench TailOnTwoDevices -benchtime 1x ./engine/spec
func BenchmarkTailOnTwoDevices(b *testing.B) {
	const n, rounds = 64, 5
	plain := loadOn(b, "stories260K.gguf", cpu.New(1))
	ctx := context.Background()
	prompt := plain.Tok.Encode("Once upon a time", true, false)
	want, err := (&Engine{Target: plain}).Run(ctx, prompt, Config{Plan: Plan{Strategy: "ar"}, MaxTokens: n})
	if err != nil {
		b.Fatal(err)
	}
	target := loadOn(b, "stories260K.gguf", devicetest.NewSlow(cpu.New(1), time.Millisecond, 100*time.Microsecond))
	self := loadOn(b, "stories260K.gguf", devicetest.NewSlow(cpu.New(1), 150*time.Microsecond, 50*time.Microsecond))
	for _, tc := range []struct {
		name       string
		base, tail Config
	}{
		{"chain", Config{Plan: Plan{Strategy: "chain", Gamma: 4}}, Config{Plan: Plan{Strategy: "chain", Gamma: 4, Tail: 2}}},
		{"egt", Config{Plan: Plan{Strategy: "egt", EGT: []int{1, 2, 2}, Branch: 2, WMax: 6, AOT: true}}, Config{Plan: Plan{Strategy: "egt", EGT: []int{1, 2, 2}, Branch: 2, WMax: 6, Tail: 4}}},
		{"duo", Config{Plan: Plan{Strategy: "duo", Gamma: 8, MaxSeqs: 1}}, Config{Plan: Plan{Strategy: "duo", Gamma: 8, MaxSeqs: 1, Tail: 3}}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var tps [2][]float64
			var hits, ahead [2]int
			for b.Loop() {
				for r := 0; r < rounds; r++ {
					for k, cfg := range []Config{tc.base, tc.tail} {
						cfg.MaxTokens = n
						src := drafter.NewModel(self, 4, target.CtxLen, "layers:4")
						res, err := (&Engine{Target: target, Source: src, Concurrent: true}).Run(ctx, prompt, cfg)
						if err != nil {
							b.Fatal(err)
						}
						if !slices.Equal(res.Tokens, want.Tokens) {
							b.Fatalf("%+v wrote %v, plain decoding %v", cfg, res.Tokens, want.Tokens)
						}
						tps[k] = append(tps[k], res.TokensPerSecond())
						for _, s := range res.Steps {
							if s.Ahead > 0 {
								ahead[k]++
							}
							if s.AheadHit {
								hits[k]++
							}
						}
					}
				}
			}
			ratios := make([]float64, len(tps[0]))
			for i := range ratios {
				ratios[i] = tps[1][i] / tps[0][i]
			}
			med := func(xs []float64) float64 {
				s := slices.Sorted(slices.Values(xs))
				return s[len(s)/2]
			}
			b.ReportMetric(med(tps[0]), "tok/s")
			b.ReportMetric(med(tps[1]), "tail-tok/s")
			b.ReportMetric(med(ratios), "tail/none")
			b.ReportMetric(float64(hits[0])/float64(max(1, ahead[0])), "hit-rate")
			b.ReportMetric(float64(hits[1])/float64(max(1, ahead[1])), "tail-hit-rate")
		})
	}
}
