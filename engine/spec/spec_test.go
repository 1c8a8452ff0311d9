package spec

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"arborist/assets"
	"arborist/engine/demo"
	"arborist/engine/drafter"
	"arborist/engine/generate"
	"arborist/engine/hidden"
	"arborist/engine/model"
	"arborist/engine/model/modeltest/testfiles"
	"arborist/engine/tree"
	"arborist/kernels"
	"arborist/kernels/cpu"
)

// modelPath is a test model by its path under ../shared/models:
// stories260K and the noisy drafter the project can build itself (the
// embedded stories260K, engine/demo's drafter) run without ../shared;
// every other model skips without it.
func modelPath(t testing.TB, name string) string {
	t.Helper()
	switch name {
	case "stories260K.gguf":
		return testfiles.Stories260K(t)
	case "bench/draft-noisy-0.05.gguf":
		p := filepath.Join(testfiles.SharedDir(t), "models", "bench", "draft-noisy-0.05.gguf")
		if _, err := os.Stat(p); err == nil {
			return p
		}
		// the same construction: 0.05 std of noise on stories260K's matrices
		_, draft, err := demo.Write(context.Background(), assets.DemoModel, t.TempDir(), demo.Options{Widen: 1, Float32: true})
		if err != nil {
			t.Fatal(err)
		}
		return draft
	}
	return testfiles.Shared(t, "models/"+name)
}

func prompts(t testing.TB) []string {
	t.Helper()
	return testfiles.StoryPrompts(t)
}

type pair struct {
	target, draft *model.Model
	// side is a device of its own beside the target's, and own a copy
	// of the target there (both made on first use), so layer-skip and
	// hidden-state drafting run beside the target
	side func() kernels.Device
	own  func() *model.Model
}

func loadPair(t testing.TB, target, draft string) pair {
	t.Helper()
	be := cpu.New(2)
	t.Cleanup(be.Close)
	path := modelPath(t, target)
	tm, err := model.Load(path, be)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tm.Close() })
	dbe := cpu.New(1)
	t.Cleanup(dbe.Close)
	dm, err := model.Load(modelPath(t, draft), dbe)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dm.Close() })
	var onceSide, onceOwn sync.Once
	var side kernels.Device
	var own *model.Model
	sideDev := func() kernels.Device {
		onceSide.Do(func() {
			side = cpu.New(1)
			t.Cleanup(side.Close)
		})
		return side
	}
	return pair{tm, dm, sideDev, func() *model.Model {
		onceOwn.Do(func() {
			m, err := model.Load(path, sideDev())
			if err != nil {
				panic(err) // loaded once already, as the target
			}
			t.Cleanup(func() { m.Close() })
			own = m
		})
		return own
	}}
}

// configs lists one configuration per strategy (and variants).
func configs() map[string]Config {
	st, _ := tree.FromWidths([]int{3, 2, 1})
	par, _ := tree.FromParents([]int{-1, -1, 0, 0, 2, 4})
	// a DP-optimal tree of 10 nodes under a decaying acceptance model
	opt, _, _ := tree.Optimal(func(d, r int) float64 { return 0.8 * math.Pow(0.4, float64(r)) / float64(d+1) }, 10, 6, 4)
	return map[string]Config{
		"ar":          {Plan: Plan{Strategy: "ar"}},
		"chain4":      {Plan: Plan{Strategy: "chain", Gamma: 4}},
		"chain8":      {Plan: Plan{Strategy: "chain", Gamma: 8}},
		"tree-widths": {Plan: Plan{Strategy: "tree", Parents: st.Parents}},
		"tree-parent": {Plan: Plan{Strategy: "tree", Parents: par.Parents}},
		"sequoia":     {Plan: Plan{Strategy: "sequoia", Parents: opt[9].Parents}},
		"egt":         {Plan: Plan{Strategy: "egt", EGT: []int{1, 2, 3, 3, 2}, Branch: 2, WMax: 12, Pad: true}},
		"egt-thresh":  {Plan: Plan{Strategy: "egt", EGT: []int{1, 2, 2, 2, 2, 2}, Branch: 3, WMax: 10}, Depth: Threshold{Max: 6, Min: 0.2}},
		"egt-aot":     {Plan: Plan{Strategy: "egt", EGT: []int{1, 2, 2, 2}, Branch: 2, WMax: 8, AOT: true}},
		"egt-learned": {Plan: Plan{Strategy: "egt", EGT: []int{1, 2, 2, 2, 2}, Branch: 2, WMax: 10, AOT: true}, Depth: contextDepth{Max: 5}},
		"duo":         {Plan: Plan{Strategy: "duo", Gamma: 6, MaxSeqs: 4}},
		"duo-1":       {Plan: Plan{Strategy: "duo", Gamma: 4, MaxSeqs: 1}},
		// tail drafting: the next draft prepared at several end positions
		// (every end of the chain; pads are none of an EGT's)
		"chain4-tail":  {Plan: Plan{Strategy: "chain", Gamma: 4, Tail: 5}},
		"chain3-tail":  {Plan: Plan{Strategy: "chain", Gamma: 3, Tail: 1}},
		"egt-tail":     {Plan: Plan{Strategy: "egt", EGT: []int{1, 2, 2, 2}, Branch: 2, WMax: 8, Tail: 4}},
		"egt-pad-tail": {Plan: Plan{Strategy: "egt", EGT: []int{1, 2, 3, 3, 2}, Branch: 2, WMax: 12, Pad: true, AOT: true, Tail: 13}},
		"duo-tail":     {Plan: Plan{Strategy: "duo", Gamma: 6, MaxSeqs: 4, Tail: 3}},
	}
}

// contextDepth stands in for a learned depth policy: the depth it stops
// at follows everything such a policy reads (the target's state, the last
// token, the drafter's root distribution, the frontier), so the strategies
// stay lossless whatever a learned policy decides.
type contextDepth struct{ Max int }

func (c contextDepth) Next(s DepthState) bool {
	if s.Depth == 0 {
		return true
	}
	if s.Depth >= c.Max {
		return false
	}
	h := 0.0
	for _, v := range s.Hidden {
		h += math.Abs(float64(v))
	}
	return (s.Last+s.Depth+int(10*s.Top1)+int(3*s.Entropy)+int(h)+int(10*s.Best))%3 != 0
}

func sources(p pair, ctx int) map[string]func() (drafter.Source, bool) {
	return map[string]func() (drafter.Source, bool){
		"draft":  func() (drafter.Source, bool) { return drafter.NewModel(p.draft, 0, ctx, "draft"), true },
		"ngram":  func() (drafter.Source, bool) { return drafter.NewNGram(3, p.target.Vocab), false },
		"layers": func() (drafter.Source, bool) { return drafter.NewModel(p.target, 2, ctx, "layers:2"), false },
		"hidden": func() (drafter.Source, bool) { return hiddenSource(p.target, 0.2), false },
		// re-sampling after every rejection, whatever the drafter's confidence
		"hidden-resample": func() (drafter.Source, bool) { return hiddenSource(p.target, 1e-9), false },
		// the concurrent sources beside the draft model: the target's
		// first layers on a copy of its own, and the hidden-state drafter's
		// layer on a device of its own
		"layers-own": func() (drafter.Source, bool) {
			return drafter.NewModel(p.own(), 2, ctx, "layers:2 on its own backend"), true
		},
		"hidden-own": func() (drafter.Source, bool) { return hiddenSourceOn(p.target, 1e-9, p.side()), true },
	}
}

// hiddenSource is an untrained hidden-state drafter with non-zero
// token-info: its proposals are poor, which exercises rejections and
// re-sampling.
func hiddenSource(m *model.Model, resampleMin float64) *hidden.Source {
	return hiddenSourceOn(m, resampleMin, nil)
}

// hiddenSourceOn is hiddenSource with its layer on dev (nil: the
// target's device), where it can draft while the target verifies.
func hiddenSourceOn(m *model.Model, resampleMin float64, dev kernels.Device) *hidden.Source {
	d, err := hidden.New(m, 16, m.Layers/2, 1)
	if err != nil {
		panic(err)
	}
	rng := rand.New(rand.NewPCG(2, 3))
	for i := range d.P {
		d.P[i] += float32(0.05 * rng.NormFloat64())
	}
	src, err := hidden.NewSource(d, m, hidden.Options{ResampleMin: resampleMin, Device: dev})
	if err != nil {
		panic(err)
	}
	return src
}

// TestGreedyLossless: for every strategy and draft source, greedy
// speculative output equals plain autoregressive decoding token for token.
func TestGreedyLossless(t *testing.T) {
	p := loadPair(t, "stories260K.gguf", "bench/draft-noisy-0.05.gguf")
	ps := prompts(t)
	ctx := context.Background()
	const n = 48
	want := map[string][]int{}
	for _, pr := range ps {
		ids := p.target.Tok.Encode(pr, true, false)
		out, _, err := generate.Run(ctx, p.target, ids, generate.Options{MaxTokens: n, StopAtEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		want[pr] = out
	}
	for cname, cfg := range configs() {
		for sname, mk := range sources(p, 512) {
			if cfg.Strategy == "ar" && sname != "draft" {
				continue
			}
			t.Run(cname+"/"+sname, func(t *testing.T) {
				src, conc := mk()
				e := &Engine{Target: p.target, Source: src, Concurrent: conc}
				if cfg.Strategy == "ar" {
					e.Source = nil
				}
				acc := 0
				for _, pr := range ps {
					ids := p.target.Tok.Encode(pr, true, false)
					c := cfg
					c.MaxTokens, c.StopAtEOS = n, true
					res, err := e.Run(ctx, ids, c)
					if err != nil {
						t.Fatal(err)
					}
					if fmt.Sprint(res.Tokens) != fmt.Sprint(want[pr]) {
						t.Fatalf("prompt %q:\n got %v\nwant %v", pr, res.Tokens, want[pr])
					}
					acc += len(res.Tokens) - len(res.Steps)
				}
				if cfg.Strategy != "ar" && sname == "draft" && acc == 0 {
					t.Errorf("no draft token was ever accepted")
				}
			})
		}
	}
}

// TestContextFillsUp: with the context capped, every strategy stops exactly
// where plain decoding does (the cache full), with the same tokens.
func TestContextFillsUp(t *testing.T) {
	p := loadPair(t, "stories260K.gguf", "bench/draft-noisy-0.05.gguf")
	ctx := context.Background()
	ids := p.target.Tok.Encode("Tom and his dog went to the park", true, false)
	const capacity = 40
	ar := &Engine{Target: p.target}
	want, err := ar.Run(ctx, ids, Config{Plan: Plan{Strategy: "ar"}, MaxTokens: 100, Ctx: capacity})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(want.Tokens); got != capacity-len(ids)+1 {
		t.Fatalf("ar produced %d tokens in a context of %d after %d prompt tokens", got, capacity, len(ids))
	}
	for name, cfg := range configs() {
		t.Run(name, func(t *testing.T) {
			// the drafter on its own backend: AOT, duo and tail drafting
			// run beside the target, in a drafter cache sized by the run
			e := &Engine{Target: p.target, Source: drafter.NewModel(p.draft, 0, 512, "draft"), Concurrent: true}
			cfg.MaxTokens, cfg.Ctx = 100, capacity
			res, err := e.Run(ctx, ids, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(res.Tokens) != fmt.Sprint(want.Tokens) {
				t.Fatalf("got %v\nwant %v", res.Tokens, want.Tokens)
			}
		})
	}
}

// TestEOSMidTree: generations that reach the end-of-story token stop there,
// even when it is accepted in the middle of a drafted path.
func TestEOSMidTree(t *testing.T) {
	p := loadPair(t, "stories260K.gguf", "bench/draft-noisy-0.05.gguf")
	ctx := context.Background()
	ids := p.target.Tok.Encode("The little bird wanted to fly", true, false)
	want, _, err := generate.Run(ctx, p.target, ids, generate.Options{MaxTokens: 400, StopAtEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	if !p.target.Tok.IsEOG(want[len(want)-1]) {
		t.Skip("the reference generation does not reach EOS within 400 tokens")
	}
	for name, cfg := range configs() {
		t.Run(name, func(t *testing.T) {
			e := &Engine{Target: p.target, Source: drafter.NewModel(p.draft, 0, 1024, "draft"), Concurrent: true}
			cfg.MaxTokens, cfg.StopAtEOS = 400, true
			res, err := e.Run(ctx, ids, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(res.Tokens) != fmt.Sprint(want) {
				t.Fatalf("got %d tokens, want %d ending in EOS", len(res.Tokens), len(want))
			}
		})
	}
}

func TestVocabMismatch(t *testing.T) {
	other := modelPath(t, "llama-2-tiny-random.gguf")
	be := cpu.New(1)
	defer be.Close()
	a, err := model.Load(modelPath(t, "stories260K.gguf"), be)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := model.Load(other, be)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	err = drafter.CheckVocab(a.Tok, b.Tok)
	if err == nil || !strings.Contains(err.Error(), "target has 512 tokens, drafter 32000") || !strings.Contains(err.Error(), "differ") {
		t.Errorf("CheckVocab: %v", err)
	}
	if err := drafter.CheckVocab(a.Tok, a.Tok); err != nil {
		t.Errorf("same vocabulary: %v", err)
	}
	e := &Engine{Target: a, Source: drafter.NewModel(b, 0, 64, "x")}
	if _, err := e.Run(context.Background(), []int{1}, Config{Plan: Plan{Strategy: "chain", Gamma: 2}, MaxTokens: 4}); err == nil {
		t.Error("engine ran a drafter with a different vocabulary size")
	}
}

// TestGreedyLosslessBenchPair: the same equality on the quantised bench pair
// (Q8_0 target), where batched and one-token passes run different kernels.
func TestGreedyLosslessBenchPair(t *testing.T) {
	if testing.Short() {
		t.Skip("bench pair: slower")
	}
	p := loadPair(t, "bench/target-60m-q8_0.gguf", "bench/draft-noisy-0.05.gguf")
	ctx := context.Background()
	const n = 40
	for _, pr := range prompts(t)[:3] {
		ids := p.target.Tok.Encode(pr, true, false)
		want, _, err := generate.Run(ctx, p.target, ids, generate.Options{MaxTokens: n, StopAtEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"chain4", "chain8", "tree-widths", "egt", "duo"} {
			cfg := configs()[name]
			cfg.MaxTokens, cfg.StopAtEOS = n, true
			e := &Engine{Target: p.target, Source: drafter.NewModel(p.draft, 0, 512, "draft"), Concurrent: true}
			res, err := e.Run(ctx, ids, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(res.Tokens) != fmt.Sprint(want) {
				t.Fatalf("%s on %q:\n got %v\nwant %v", name, pr, res.Tokens, want)
			}
		}
	}
}

// TestValidateBudget: sizes a strategy derives
// from its parameters are bounded before the run allocates for them.
func TestValidateBudget(t *testing.T) {
	wide := make([]int, 600) // 600 children of the root
	for i := range wide {
		wide[i] = -1
	}
	for name, c := range map[string]Config{
		"chain gamma":    {Plan: Plan{Strategy: "chain", Gamma: 1 << 62}, MaxTokens: 8},
		"duo overflow":   {Plan: Plan{Strategy: "duo", Gamma: 1 << 61, MaxSeqs: 8}, MaxTokens: 8},
		"tree size":      {Plan: Plan{Strategy: "tree", Parents: wide}, MaxTokens: 8},
		"egt w-max":      {Plan: Plan{Strategy: "egt", EGT: []int{1}, Branch: 2, WMax: 1e9}, MaxTokens: 8},
		"gamma vs ctx":   {Plan: Plan{Strategy: "chain", Gamma: 64}, Ctx: 32, MaxTokens: 8},
		"egt width big":  {Plan: Plan{Strategy: "egt", EGT: []int{1 << 40}, Branch: 2, WMax: 8}, MaxTokens: 8},
		"duo vs ctx":     {Plan: Plan{Strategy: "duo", Gamma: 8, MaxSeqs: 4}, Ctx: 16, MaxTokens: 8},
		"tree vs ctx":    {Plan: Plan{Strategy: "tree", Widths: []int{4, 4}}, Ctx: 16, MaxTokens: 8},
		"egt w-max, ctx": {Plan: Plan{Strategy: "egt", EGT: []int{1, 2}, Branch: 2, WMax: 20}, Ctx: 16, MaxTokens: 8},
		"sequoia vs ctx": {Plan: Plan{Strategy: "sequoia", Parents: wide[:20]}, Ctx: 16, MaxTokens: 8},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for _, c := range []Config{
		{Plan: Plan{Strategy: "chain", Gamma: 4}, Ctx: 32, MaxTokens: 8},
		{Plan: Plan{Strategy: "duo", Gamma: 4, MaxSeqs: 4}, Ctx: 32, MaxTokens: 8},
		{Plan: Plan{Strategy: "tree", Widths: []int{4, 4}}, Ctx: 32, MaxTokens: 8},
		{Plan: Plan{Strategy: "egt", EGT: []int{1, 2}, Branch: 2, WMax: 20}, Ctx: 32, MaxTokens: 8},
		{Plan: Plan{Strategy: "sequoia", Parents: wide[:20]}, Ctx: 32, MaxTokens: 8},
	} {
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", c.Plan, err)
		}
	}
}

// recordDepth records the states a depth policy is given.
type recordDepth struct {
	max    int
	states *[]DepthState
}

func (r recordDepth) Next(s DepthState) bool {
	*r.states = append(*r.states, DepthState{Depth: s.Depth, Best: s.Best, Hidden: append([]float32(nil), s.Hidden...), Last: s.Last, Top1: s.Top1, Entropy: s.Entropy})
	return s.Depth < r.max
}

// TestDepthStateIsTheStep: a depth policy is told, before each level, the
// levels drafted, the frontier's best path probability, the target's
// hidden state, the last committed token and the drafter's root
// distribution, the same the step then records for training one.
func TestDepthStateIsTheStep(t *testing.T) {
	p := loadPair(t, "stories260K.gguf", "bench/draft-noisy-0.05.gguf")
	prompt := p.target.Tok.Encode("Once upon a time", true, false)
	var states []DepthState
	var steps []Step
	var out []int
	cfg := Config{Plan: Plan{Strategy: "egt", EGT: []int{1, 2, 2}, Branch: 2, WMax: 6}, MaxTokens: 24, RecordHidden: true,
		Depth: recordDepth{max: 3, states: &states}, OnStep: func(s Step) { steps = append(steps, s) }}
	res, err := (&Engine{Target: p.target, Source: drafter.NewModel(p.draft, 0, 256, "draft")}).Run(context.Background(), prompt, cfg)
	if err != nil {
		t.Fatal(err)
	}
	out = res.Tokens
	last := prompt[len(prompt)-1]
	at := 0
	for i, st := range steps {
		if st.Last != last {
			t.Fatalf("step %d: last token %d, want %d", i, st.Last, last)
		}
		if len(st.Hidden) != p.target.Dim || !(st.RootTop1 > 0 && st.RootTop1 <= 1) || st.RootEntropy < 0 || st.RootEntropy > math.Log(float64(p.target.Vocab))+1e-9 {
			t.Fatalf("step %d records hidden %d, root top-1 %g, entropy %g", i, len(st.Hidden), st.RootTop1, st.RootEntropy)
		}
		for d := 0; at < len(states) && (d == 0 || states[at].Depth != 0); d++ {
			s := states[at]
			at++
			if s.Depth != d || s.Last != st.Last || fmt.Sprint(s.Hidden) != fmt.Sprint(st.Hidden) || s.Best < 0 || s.Best > 1 {
				t.Fatalf("step %d, depth %d: the policy was told %+v", i, d, s)
			}
			if d == 0 && (s.Best != 1 || s.Top1 != 0) {
				t.Fatalf("step %d: before any level the policy was told best %g, top-1 %g", i, s.Best, s.Top1)
			}
			if d > 0 && (s.Top1 != st.RootTop1 || s.Entropy != st.RootEntropy) {
				t.Fatalf("step %d, depth %d: root %g/%g told, %g/%g recorded", i, d, s.Top1, s.Entropy, st.RootTop1, st.RootEntropy)
			}
		}
		last = out[min(len(out), sumEmitted(steps[:i+1]))-1]
	}
	if at != len(states) || len(steps) == 0 {
		t.Fatalf("%d policy calls matched of %d over %d steps", at, len(states), len(steps))
	}
}

func sumEmitted(steps []Step) int {
	n := 0
	for _, s := range steps {
		n += s.Emitted
	}
	return n
}
