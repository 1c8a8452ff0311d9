package spec

import (
	"context"
	"fmt"
	"testing"

	"arborist/engine/drafter"
	"arborist/engine/generate"
	"arborist/engine/hidden"
	"arborist/engine/model"
	"arborist/engine/sample"
	"arborist/kernels/quant"
)

// TestGreedyLosslessLongContext: greedy speculative output equals plain
// decoding after a prompt longer than an attention chunk (1024 visible
// slots for heads of 64 on the CPU), so every verification row's softmax
// spans two chunks folded together and a tree row must still equal its
// path decoded alone, in float32 and float16 caches. The target is a
// synthetic model with heads of 64 (the shipped test models have heads of
// 8, whose chunks hold 4096 slots); drafting with the target itself keeps
// long accepted runs and sibling rejections, drafting with its first
// layer rejects often.
func TestGreedyLosslessLongContext(t *testing.T) {
	if testing.Short() {
		t.Skip("long prompts: slower")
	}
	target, draft := loadFamily(t, "custom:dim=128,layers=2,heads=2,kv=1,ffn=256,vocab=600,ctx=2048")
	prompt := longPrompt(target.Vocab, 1300)
	ctx := context.Background()
	const n = 40
	for _, kv := range []quant.Type{quant.F32, quant.F16} {
		target.KVType, draft.KVType = kv, kv
		want, _, err := generate.Run(ctx, target, prompt, generate.Options{MaxTokens: n})
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"chain4", "chain8", "tree-widths", "tree-parent", "sequoia", "egt", "egt-aot", "duo", "chain4-tail"} {
			for _, layers := range []int{0, 1} {
				t.Run(fmt.Sprintf("%v/%s/layers=%d", kv, name, layers), func(t *testing.T) {
					cfg := configs()[name]
					cfg.MaxTokens = n
					e := &Engine{Target: target, Source: drafter.NewModel(draft, layers, 2048, "draft"), Concurrent: true}
					res, err := e.Run(ctx, prompt, cfg)
					if err != nil {
						t.Fatal(err)
					}
					if fmt.Sprint(res.Tokens) != fmt.Sprint(want) {
						t.Fatalf("got  %v\nwant %v", res.Tokens, want)
					}
					if layers == 0 && len(res.Tokens)-len(res.Steps) == 0 {
						t.Errorf("the target drafting for itself had no token accepted")
					}
				})
			}
		}
	}
}

// longSampledShape is the long-context sampled tests' target: heads of 64
// dims (attention chunks of 512 slots on the CPU), and small otherwise,
// so that thousands of seeded runs, each verifying against a long cache,
// stay cheap. Its first layer drafts for it (about half of the drafts
// accepted at the tests' temperature).
const longSampledShape = "custom:dim=64,layers=2,heads=1,kv=1,ffn=128,vocab=300,ctx=2048"

// cpuAttnChunk is how many visible slots one attention chunk of the CPU
// backend holds for heads of 64 dims (arb_attention_chunk in
// kernels/cpu): the long prompts, two chunks and 76 tokens (1,100), make
// every verification row fold three chunks.
const cpuAttnChunk = 512

// longPrompt is a deterministic prompt of n tokens over a vocabulary of
// vocab (its first three, the control tokens, left out).
func longPrompt(vocab, n int) []int {
	prompt := make([]int, n)
	for i := range prompt {
		prompt[i] = 3 + (i*131+17)%(vocab-3)
	}
	return prompt
}

// longSampledCase is the long-context sampled tests' setup: a prompt
// reaching past an attention chunk, prefilled once per engine
// (Engine.Prefill) and copied by every run, as Run's prefill would have
// computed it, and the drafters keeping their own prompt slots from run
// to run. The temperature makes the first two tokens' joint distribution
// concentrated enough for a chi-square over n runs to catch a broken
// verifier. With withHidden, the hidden-state drafter is trained first.
func longSampledCase(t *testing.T, n int, withHidden bool) sampledCase {
	target, second := loadFamily(t, longSampledShape)
	sc := sampledCase{target: target, second: second, prompt: longPrompt(target.Vocab, 2*cpuAttnChunk+76),
		params: sample.Params{Temp: 0.3}, n: n, layers: 1, ctx: target.CtxLen, prefilled: true}
	if len(sc.prompt)-1 <= cpuAttnChunk {
		t.Fatalf("a prompt of %d tokens fits one attention chunk", len(sc.prompt))
	}
	if withHidden {
		sc.drafter = trainedHidden(t, target)
	}
	return sc
}

// trainedHidden trains a hidden-state drafter for target, briefly: on a
// random model an untrained one proposes tokens the target all but never
// emits, and then no verifier, right or broken, changes what is emitted
// enough to be seen.
func trainedHidden(t *testing.T, target *model.Model) *hidden.Drafter {
	var prompts [][]int
	for i := 0; i < 8; i++ {
		p := make([]int, 48)
		for j := range p {
			p[j] = 3 + (j*131+17+i*37)%(target.Vocab-3)
		}
		prompts = append(prompts, p)
	}
	set := hidden.DefaultSettings()
	set.D, set.Tokens, set.Samples, set.Epochs, set.Depth, set.Batch, set.LR = target.Dim, 96, 2, 16, 1, 8, 1e-2
	set.HeldOut, set.Corpus, set.Patience = 0, false, 0
	set.Temp, set.Temps = 0.3, []float64{0.3}
	set.Precision = "f32"
	d, err := hidden.New(target, set.D, target.Layers/2, 1)
	if err != nil {
		t.Fatal(err)
	}
	tr := &hidden.Trainer{Target: target, Prompts: prompts, Settings: set}
	if err := tr.Train(context.Background(), d, nil); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestSampledLosslessLongContext is TestSampledLossless after a prompt
// longer than an attention chunk, every rule, in float32 and float16
// caches: each verification row's softmax spans two chunks folded
// together, and its residual step must still leave the target's
// distribution, while a broken one is caught.
func TestSampledLosslessLongContext(t *testing.T) {
	if testing.Short() {
		t.Skip("statistical test: thousands of seeded runs after a long prompt")
	}
	sc := longSampledCase(t, 600, true)
	for _, kv := range []quant.Type{quant.F32, quant.F16} {
		t.Run(kv.String(), func(t *testing.T) {
			sc.target.KVType, sc.second.KVType = kv, kv
			checkSampledLossless(t, sc)
		})
	}
}

// TestSampledFullAcceptanceLongContext is TestSampledFullAcceptance after
// a prompt longer than an attention chunk, in float32 and float16 caches.
func TestSampledFullAcceptanceLongContext(t *testing.T) {
	if testing.Short() {
		t.Skip("statistical test: thousands of seeded runs after a long prompt")
	}
	sc := longSampledCase(t, 600, false)
	// colder: the runs are grouped by their first three tokens, and each
	// group seen often enough is tested
	sc.params.Temp = 0.15
	for _, kv := range []quant.Type{quant.F32, quant.F16} {
		t.Run(kv.String(), func(t *testing.T) {
			sc.target.KVType, sc.second.KVType = kv, kv
			checkSampledFullAcceptance(t, sc)
		})
	}
}
