//go:build cgo && !purego

package cpu

import (
	"math"
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

// TestSiLUMul: the vector SiLU matches the float64 formula, including
// large magnitudes, and a row's result is the same whether it is computed
// alone or inside a longer batch (rows of 172, not a multiple of 8).
func TestSiLUMul(t *testing.T) {
	const width, rows = 172, 5
	rng := rand.New(rand.NewPCG(3, 9))
	g, u := make([]float32, width*rows), make([]float32, width*rows)
	for i := range g {
		g[i] = float32(rng.NormFloat64() * 6)
		u[i] = float32(rng.NormFloat64())
	}
	g[3], g[4], g[5] = 95, -95, 0
	be := New(2)
	defer be.Close()
	all := append([]float32(nil), g...)
	be.SiLUMul(all, u)
	for i := range g {
		x := float64(g[i])
		want := x / (1 + math.Exp(-x)) * float64(u[i])
		if d := math.Abs(float64(all[i]) - want); d > 1e-5*math.Max(1, math.Abs(want)) {
			t.Fatalf("element %d: silu(%g)*%g = %g, want %g", i, g[i], u[i], all[i], want)
		}
	}
	for r := 0; r < rows; r++ {
		one := append([]float32(nil), g[r*width:(r+1)*width]...)
		be.SiLUMul(one, u[r*width:(r+1)*width])
		for i, v := range one {
			if v != all[r*width+i] {
				t.Fatalf("row %d element %d: %g alone, %g in the batch", r, i, v, all[r*width+i])
			}
		}
	}
}
