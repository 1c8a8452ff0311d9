package model_test

import (
	"context"
	"testing"

	"arborist/engine/model"
	"arborist/kernels/quant"
)

// TestSlidingWindowTree: with a window of 2 positions, a tree-shaped batch
// whose nodes sit at slots past their positions gives each row the logits
// of its own path run alone, and the cache compacted to one path continues
// like a cache built from that path. The window is over positions: a
// node's slot index is no stand-in for its position.
func TestSlidingWindowTree(t *testing.T) {
	ctx := context.Background()
	for _, shape := range []string{
		"custom:dim=64,layers=2,heads=4,kv=2,ffn=96,vocab=300,window=2",
		"custom:dim=64,layers=3,heads=2,kv=1,hd=32,ffn=96,vocab=300,arch=gemma2,window=2",
		"custom:dim=64,layers=6,heads=2,kv=1,hd=32,ffn=96,vocab=300,arch=gemma3,window=2",
	} {
		t.Run(shape, func(t *testing.T) {
			m := tinyModel(t, shape, quant.F32)
			prefix := []int{1, 20, 30, 40}
			cache := m.NewCache(32)
			var res model.Result
			if err := m.Forward(ctx, cache, model.Batch{Tokens: prefix}, &res); err != nil {
				t.Fatal(err)
			}
			past := cache.Len()
			// rows: a (depth 1), c (depth 1), d (child of c), e (child of d)
			tree := []int{50, 60, 70, 80}
			parent := []int{-1, -1, 1, 2}
			depth := []int{0, 0, 1, 2}
			pos := make([]int, len(tree))
			total := past + len(tree)
			mask := make([]bool, len(tree)*total)
			for i := range tree {
				pos[i] = past + depth[i]
				for j := 0; j < past; j++ {
					mask[i*total+j] = true
				}
				for k := i; k >= 0; k = parent[k] {
					mask[i*total+past+k] = true
				}
			}
			var tr model.Result
			if err := m.Forward(ctx, cache, model.Batch{Tokens: tree, Pos: pos, Mask: mask}, &tr); err != nil {
				t.Fatal(err)
			}
			paths := [][]int{{50}, {60}, {60, 70}, {60, 70, 80}}
			for i, p := range paths {
				var r model.Result
				seq := append(append([]int{}, prefix...), p...)
				if err := m.Forward(ctx, m.NewCache(32), model.Batch{Tokens: seq, Want: []int{len(seq) - 1}}, &r); err != nil {
					t.Fatal(err)
				}
				if d := maxDiff(tr.Logits[i*m.Vocab:(i+1)*m.Vocab], r.Logits); d > 1e-4 {
					t.Fatalf("tree row %d (path %v) differs from its path alone by %g", i, p, d)
				}
			}
			keep := []int{0, 1, 2, 3, past + 1, past + 2, past + 3}
			if err := cache.Compact(keep); err != nil {
				t.Fatal(err)
			}
			var cont, ref model.Result
			if err := m.Forward(ctx, cache, model.Batch{Tokens: []int{90}}, &cont); err != nil {
				t.Fatal(err)
			}
			if err := m.Forward(ctx, m.NewCache(32), model.Batch{Tokens: []int{1, 20, 30, 40, 60, 70, 80, 90}, Want: []int{7}}, &ref); err != nil {
				t.Fatal(err)
			}
			if d := maxDiff(cont.Logits, ref.Logits); d > 1e-4 {
				t.Fatalf("after compaction the next step differs by %g", d)
			}
		})
	}
}
