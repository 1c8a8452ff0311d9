package hidden

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sort"
	"testing"
	"time"

	"arborist/engine/drafter"
	"arborist/engine/spec"
	"arborist/kernels/cpu"
)

// BenchmarkHiddenDrafter compares, on the bench target and in one process,
// a trained hidden-state drafter (ARBORIST_DRAFTER, a drafter GGUF from
// `arborist drafters export`) against the chain with the noisy draft model
// and against plain decoding: greedy, the shared story prompts, 256 tokens
// each, configurations interleaved over three rounds, medians reported.
//
//	ARBORIST_DRAFTER=/tmp/h.gguf go test -run - -bench HiddenDrafter -benchtime 1x ./engine/hidden
func BenchmarkHiddenDrafter(b *testing.B) {
	path := os.Getenv("ARBORIST_DRAFTER")
	if path == "" {
		b.Skip("set ARBORIST_DRAFTER to a drafter trained for bench/target-60m-q8_0.gguf (arborist train drafter, then drafters export)")
	}
	d, _, err := Load(path)
	if err != nil {
		b.Fatal(err)
	}
	target := loadTarget(b, "bench/target-60m-q8_0.gguf")
	draft := loadTarget(b, "bench/draft-noisy-0.05.gguf")
	prompts := storyPrompts(b, target)
	ctx := context.Background()
	gamma := 2
	type conf struct {
		name string
		cfg  spec.Config
		src  func() (drafter.Source, *Source)
	}
	hid := func(noResample bool) func() (drafter.Source, *Source) {
		return func() (drafter.Source, *Source) {
			s, err := NewSource(d, target, Options{NoResample: noResample})
			if err != nil {
				b.Fatal(err)
			}
			return s, s
		}
	}
	confs := []conf{
		{"ar", spec.Config{Plan: spec.Plan{Strategy: "ar"}}, func() (drafter.Source, *Source) { return nil, nil }},
		{"noisy-chain-4", spec.Config{Plan: spec.Plan{Strategy: "chain", Gamma: 4}}, func() (drafter.Source, *Source) {
			return drafter.NewModel(draft, 0, target.CtxLen, "noisy"), nil
		}},
		{"hidden-chain-2", spec.Config{Plan: spec.Plan{Strategy: "chain", Gamma: gamma}}, hid(false)},
		{"hidden-chain-2-noresample", spec.Config{Plan: spec.Plan{Strategy: "chain", Gamma: gamma}}, hid(true)},
		{"hidden-egt", spec.Config{Plan: spec.Plan{Strategy: "egt", EGT: []int{1, 1, 2}, Branch: 2, WMax: 4}}, hid(false)},
	}
	type tally struct {
		tps                     []float64
		tokens, steps, drafted  int
		accepted                int
		resample, decode        time.Duration
		resampled, regularSteps int
	}
	res := make([]tally, len(confs))
	for b.Loop() {
		for round := 0; round < 3; round++ {
			for ci, c := range confs {
				src, hs := c.src()
				e := &spec.Engine{Target: target, Source: src}
				var toks int
				var dec time.Duration
				for _, p := range prompts {
					cfg := c.cfg
					cfg.MaxTokens, cfg.StopAtEOS = 256, true
					r, err := e.Run(ctx, p, cfg)
					if err != nil {
						b.Fatal(err)
					}
					toks += len(r.Tokens)
					dec += r.Decode
					t := &res[ci]
					t.tokens += len(r.Tokens)
					t.steps += len(r.Steps)
					for _, s := range r.Steps {
						t.drafted += s.Drafted
						t.accepted += s.Accepted
					}
				}
				t := &res[ci]
				t.tps = append(t.tps, float64(toks)/dec.Seconds())
				t.decode += dec
				if hs != nil {
					st := hs.Stats()
					t.resample += st.Resample
					t.resampled += st.Resampled
					t.regularSteps += st.Steps
				}
				runtime.GC()
			}
		}
	}
	median := func(x []float64) float64 {
		s := append([]float64(nil), x...)
		sort.Float64s(s)
		return s[len(s)/2]
	}
	arTPS := median(res[0].tps)
	if len(d.Losses) > 0 {
		l := d.Losses[len(d.Losses)-1]
		b.Logf("drafter %s: held-out MSE %.4f, KL %.4f, top-1 agreement %.1f%% (epoch %d, depth %d)", path, l.MSE, l.KL, 100*l.Agree, l.Epoch, l.Depth)
	}
	for i, c := range confs {
		t := res[i]
		acc := 0.0
		if t.drafted > 0 {
			acc = float64(t.accepted) / float64(t.drafted)
		}
		tps := median(t.tps)
		line := ""
		if t.regularSteps > 0 {
			line = fmt.Sprintf(" %d of %d steps re-sampled, re-sampling %.2f%% of decode time", t.resampled, t.regularSteps, 100*t.resample.Seconds()/t.decode.Seconds())
		}
		b.Logf("%-26s %7.1f tokens/s (median of 3) %.2fx ar; AAL %.2f; acceptance %.1f%%;%s", c.name, tps, tps/arTPS, float64(t.tokens)/float64(max(1, t.steps)), 100*acc, line)
		b.ReportMetric(tps, c.name+"-tok/s")
	}
}

// BenchmarkTrainStep measures training throughput on the bench target (or
// stories260K with ARBORIST_TRAIN_BENCH=small): one update's forward and
// backward passes over four 160-token sequences unrolled to depth 3, for
// today's float64 reference (hand-written loops, gonum products, one
// sequence after another, as the trainer ran before) and the float32
// network (the backend's kernels, one worker per thread, as Train runs it)
// with float32 products and, where the CPU has AVX-512 BF16, with bfloat16
// products (Train's default there), interleaved; tokens/s for each.
//
//	go test -run - -bench TrainStep -benchtime 1x ./engine/hidden
func BenchmarkTrainStep(b *testing.B) {
	name := "bench/target-60m-q8_0.gguf"
	if os.Getenv("ARBORIST_TRAIN_BENCH") == "small" {
		name = "stories260K.gguf"
	}
	target := loadTarget(b, name)
	d, err := New(target, 256, target.Layers/2, 1)
	if err != nil {
		b.Fatal(err)
	}
	n64, err := newNet(d, target, DefaultSettings())
	if err != nil {
		b.Fatal(err)
	}
	precs := []cpu.Precision{cpu.F32}
	if cpu.BF16Products() {
		precs = append(precs, cpu.BF16)
	}
	nets := make([]*fnet, len(precs))
	wss := make([][]*fnet, len(precs))
	for i, prec := range precs {
		nets[i] = newFNet(d, n64, target.Backend)
		nets[i].setPrecision(prec)
		nets[i].pack()
		wss[i] = nets[i].workers(target.Backend.Threads())
		defer closeWorkers(wss[i], nets[i])
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const T, K, B = 160, 3, 4
	var seqs []*seq
	for range B {
		sq := randomSeq(rng, T, d.Dim, d.Vocab)
		sq.z = nil
		seqs = append(seqs, sq)
	}
	var t64 time.Duration
	t32 := make([]time.Duration, len(precs))
	rounds := 0
	for b.Loop() {
		for r := 0; r < 2; r++ {
			t0 := time.Now()
			for _, sq := range seqs {
				lvs, _ := n64.forward(sq, sq.tokens, K)
				n64.backward(sq, sq.tokens, lvs, 1)
			}
			t64 += time.Since(t0)
			for i, ws := range wss {
				t0 = time.Now()
				parallel(len(ws), func(wi int) {
					for k := wi; k < B; k += len(ws) {
						pt := ws[wi].targetDist(seqs[k])
						flvs, _ := ws[wi].forward(seqs[k], seqs[k].tokens, K, pt)
						ws[wi].backward(seqs[k], seqs[k].tokens, flvs, 1, pt)
					}
				})
				t32[i] += time.Since(t0)
			}
			rounds++
		}
	}
	tok := float64(rounds * T * B)
	line := fmt.Sprintf("%s, %d threads: float64 reference %.0f tokens/s", name, target.Backend.Threads(), tok/t64.Seconds())
	for i, prec := range precs {
		line += fmt.Sprintf(", float32 network with %s products %.0f tokens/s (%.1fx)", prec, tok/t32[i].Seconds(), t64.Seconds()/t32[i].Seconds())
		b.ReportMetric(tok/t32[i].Seconds(), prec.String()+"-tok/s")
	}
	b.Logf("%s; depth %d, %d parameters", line, K, d.Params())
	b.ReportMetric(tok/t64.Seconds(), "float64-tok/s")
}
