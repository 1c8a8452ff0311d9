//go:build cgo && !purego

package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"arborist/kernels"
	"arborist/kernels/quant"
)

// BenchmarkAttentionContext: a pass's attention of llama-3.2-1b's shape
// (32 heads of 64 over 8 kv heads) at long contexts through the Device
// (the cache as NewKV makes it), over its sixteen layers in turn, so each
// call reads its layer from memory as a model's pass does: a decode step
// (W=1), verifications of 16 and 64 tokens under a binary tree's mask,
// and a 512-token prefill chunk (causal), in float32 and float16 caches.
// One op is one layer's call.
func BenchmarkAttentionContext(b *testing.B) {
	const heads, kvHeads, hd, layers = 32, 8, 64, 16
	rng := rand.New(rand.NewPCG(7, 8))
	kvd, qd := kvHeads*hd, heads*hd
	shape := kernels.AttnShape{Heads: heads, KVHeads: kvHeads, HeadDim: hd, Scale: 0.125}
	for _, ctx := range []int{1024, 4096, 8192} {
		for _, t := range []quant.Type{quant.F32, quant.F16} {
			be := New(DefaultThreads())
			kvi, err := be.NewKV(layers, ctx+64, kvd, t)
			if err != nil {
				b.Fatal(err)
			}
			for l := 0; l < layers; l++ {
				for s := 0; s < ctx+64; s += 512 {
					n := min(512, ctx+64-s)
					be.StoreKV(kvi, l, s, Wrap(gaussian(rng, n*kvd)), Wrap(gaussian(rng, n*kvd)), n)
				}
			}
			for _, w := range []struct {
				name string
				n    int
				tree bool
			}{{"decode", 1, false}, {"verify16", 16, true}, {"verify64", 64, true}, {"prefill512", 512, false}} {
				past := ctx - w.n
				if w.n == 1 {
					past = ctx
				}
				total := past + w.n
				var mask []bool
				if w.tree {
					mask = make([]bool, w.n*total)
					for i := 0; i < w.n; i++ {
						for j := 0; j < past; j++ {
							mask[i*total+j] = true
						}
						for a := i; ; a = (a - 1) / 2 {
							mask[i*total+past+a] = true
							if a == 0 {
								break
							}
						}
					}
				}
				q, out := Wrap(gaussian(rng, w.n*qd)), Wrap(make([]float32, w.n*qd))
				b.Run(fmt.Sprintf("ctx=%d/%s/%s", ctx, w.name, t), func(b *testing.B) {
					i := 0
					for b.Loop() {
						be.Attention(out, q, kvi, i%layers, past, w.n, mask, shape)
						i++
					}
				})
			}
			kvi.Free()
			be.Close()
		}
	}
}

// BenchmarkAttentionStream: the same bytes and arithmetic as a decode
// step's attention over one layer of llama-3.2-1b's shape after 4096
// float16 positions (8 MiB of keys and values, four query heads a kv
// head), laid out as the cache holds them (kv8: 8 kv heads a row, so a
// head's rows are 1 KiB apart) and as one head of 32768 positions (kv1:
// a head's rows one contiguous stream), each over sixteen layers in turn
// so every call reads from memory. The gap is what the cache's row
// layout costs a step at depth: the hardware's prefetch follows a
// contiguous stream, and the kernel's own requests for strided rows are
// held to the first level's miss buffers.
func BenchmarkAttentionStream(b *testing.B) {
	for _, c := range []struct{ kvHeads, ctx int }{{8, 4096}, {1, 32768}} {
		const hd, layers = 64, 16
		heads := 4 * c.kvHeads
		rng := rand.New(rand.NewPCG(7, 8))
		kvd, qd := c.kvHeads*hd, heads*hd
		shape := kernels.AttnShape{Heads: heads, KVHeads: c.kvHeads, HeadDim: hd, Scale: 0.125}
		be := New(DefaultThreads())
		kvi, err := be.NewKV(layers, c.ctx+64, kvd, quant.F16)
		if err != nil {
			b.Fatal(err)
		}
		for l := 0; l < layers; l++ {
			for s := 0; s < c.ctx+64; s += 512 {
				n := min(512, c.ctx+64-s)
				be.StoreKV(kvi, l, s, Wrap(gaussian(rng, n*kvd)), Wrap(gaussian(rng, n*kvd)), n)
			}
		}
		q, out := Wrap(gaussian(rng, qd)), Wrap(make([]float32, qd))
		b.Run(fmt.Sprintf("kv%d", c.kvHeads), func(b *testing.B) {
			i := 0
			for b.Loop() {
				be.Attention(out, q, kvi, i%layers, c.ctx, 1, nil, shape)
				i++
			}
		})
		kvi.Free()
		be.Close()
	}
}
