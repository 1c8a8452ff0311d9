package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"arborist/kernels/quant"
)

// TestGemmNT: the blocked training product against the plain loop, at
// sizes that exercise every edge of its tiling (rows not a multiple of 3,
// outputs not a multiple of 4 or of the block, k not a multiple of 8 or of
// the k block), overwriting and accumulating.
func TestGemmNT(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, s := range [][3]int{{1, 1, 1}, {3, 4, 8}, {7, 13, 37}, {160, 200, 512}, {5, 97, 600}, {4, 3, 1000}, {2, 5, 0}} {
		m, n, k := s[0], s[1], s[2]
		a, b := gaussian(rng, m*k), gaussian(rng, n*k)
		for _, acc := range []bool{false, true} {
			got, want := gaussian(rng, m*n), make([]float32, m*n)
			copy(want, got)
			GemmNT(got, a, b, m, n, k, acc)
			gemmNTGo(want, a, b, m, n, k, acc)
			for i := range want {
				if d := math.Abs(float64(got[i] - want[i])); d > 1e-4*math.Sqrt(float64(k)+1)*4 {
					t.Fatalf("%dx%dx%d accumulate=%v: C[%d] = %v, want %v", m, n, k, acc, i, got[i], want[i])
				}
			}
		}
	}
}

// BenchmarkGemmNT: the trainer's largest product shape (480 rows of 512
// values against a 32000-row head), against the forward pass's F32 kernel
// on the same matrices; GMAC/s as the metric.
func BenchmarkGemmNT(b *testing.B) {
	const m, n, k = 96, 8000, 512
	rng := rand.New(rand.NewPCG(1, 1))
	a, w := gaussian(rng, m*k), gaussian(rng, n*k)
	c := make([]float32, m*n)
	b.Run("gemm", func(b *testing.B) {
		for b.Loop() {
			GemmNT(c, a, w, m, n, k, false)
		}
		b.ReportMetric(float64(m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
	})
	b.Run("matmul", func(b *testing.B) {
		be := New(1)
		defer be.Close()
		mat, _ := NewMatrix(quant.F32, unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), 4*len(w)), n, k)
		for b.Loop() {
			be.MatMul(c, mat, a, m)
		}
		b.ReportMetric(float64(m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
	})
}
