package spec

import (
	"context"
	"fmt"
	"testing"

	"arborist/engine/drafter"
	"arborist/engine/generate"
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
	prompt := make([]int, 1300)
	for i := range prompt {
		prompt[i] = 3 + (i*131+17)%(target.Vocab-3)
	}
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
