//go:build cgo && !purego

package cpu

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkAttention: one decode step's attention of the bench target's
// shape (64 heads of 8, 32 kv heads) over 128 cached positions.
func BenchmarkAttention(b *testing.B) {
	const heads, kvHeads, hd, past = 64, 32, 8, 128
	rng := rand.New(rand.NewPCG(1, 2))
	fill := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		return x
	}
	q, kc, vc := fill(heads*hd), fill((past+1)*kvHeads*hd), fill((past+1)*kvHeads*hd)
	out := make([]float32, heads*hd)
	be := New(DefaultThreads())
	defer be.Close()
	for b.Loop() {
		be.Attention(out, q, kc, vc, past, 1, nil, heads, kvHeads, hd, 0.35)
	}
}
