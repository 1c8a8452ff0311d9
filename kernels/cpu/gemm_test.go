package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"arborist/kernels/quant"
)

// TestGemm: the packed training product against the plain loop, for
// every transpose of A and B, at sizes that exercise every edge of its
// blocking (rows not a multiple of the 6-row panel or of the 96-row block,
// columns not a multiple of the 16-column panel, k not a multiple of the
// 256-value block), overwriting and accumulating. make test runs it with
// ARBORIST_SIMD=0 too, for the portable micro-kernel. A pre-packed B
// (PackedB) gives the same bits as Gemm packing it itself.
func TestGemm(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	sizes := [][3]int{{1, 1, 1}, {6, 16, 8}, {7, 17, 37}, {160, 200, 512}, {97, 33, 600}, {4, 3, 1000}, {2, 5, 0}, {193, 40, 160}, {12, 48, 263}, {20, 530, 300}}
	for _, s := range sizes {
		m, n, k := s[0], s[1], s[2]
		a, b := gaussian(rng, m*k), gaussian(rng, n*k)
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			for _, acc := range []bool{false, true} {
				got, want := gaussian(rng, m*n), make([]float32, m*n)
				copy(want, got)
				packed := append([]float32(nil), got...)
				Gemm(got, a, b, m, n, k, tr[0], tr[1], acc)
				gemmGo(want, a, b, m, n, k, tr[0], tr[1], acc)
				var pb PackedB
				pb.Pack(b, n, k, tr[1])
				GemmPacked(packed, a, &pb, m, tr[0], acc)
				for i := range want {
					if d := math.Abs(float64(got[i] - want[i])); !(d <= 1e-4*math.Sqrt(float64(k)+1)*4) {
						t.Fatalf("%dx%dx%d transposes %v accumulate=%v: C[%d] = %v, want %v", m, n, k, tr, acc, i, got[i], want[i])
					}
					if packed[i] != got[i] { // the same blocks in the same order
						t.Fatalf("%dx%dx%d transposes %v accumulate=%v: packed B gives C[%d] = %v, Gemm %v", m, n, k, tr, acc, i, packed[i], got[i])
					}
				}
			}
		}
	}
}

// BenchmarkGemmNT: Gemm against weight rows (B^T), at a large training
// shape (96 rows of 512 values against 8000 weight rows), against the forward pass's F32 kernel
// on the same matrices; GMAC/s as the metric (one thread: the peak is the
// core's FMA rate, 16 MACs a cycle with AVX2 on two FMA ports).
func BenchmarkGemmNT(b *testing.B) {
	const m, n, k = 96, 8000, 512
	rng := rand.New(rand.NewPCG(1, 1))
	a, w := gaussian(rng, m*k), gaussian(rng, n*k)
	c := make([]float32, m*n)
	b.Run("gemm", func(b *testing.B) {
		for b.Loop() {
			Gemm(c, a, w, m, n, k, false, true, false)
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

// BenchmarkGemmTrain: Gemm at the shapes the hidden-state drafter's
// trainer runs on the bench target (159 rows of a sequence; dim 512, 256
// key/value channels, FFN 1376): the forward product against weight rows
// (x · W^T), the input gradient (dy · W) and the weight gradient
// (dy^T · x, accumulated), one thread, GMAC/s each.
func BenchmarkGemmTrain(b *testing.B) {
	const rows = 159
	rng := rand.New(rand.NewPCG(1, 1))
	for _, s := range [][2]int{{512, 512}, {256, 512}, {1376, 512}, {512, 1376}} {
		out, in := s[0], s[1]
		x, w, y := gaussian(rng, rows*in), gaussian(rng, out*in), gaussian(rng, rows*out)
		dw := make([]float32, out*in)
		for _, c := range []struct {
			name string
			f    func()
		}{
			{"fwd", func() { Gemm(y, x, w, rows, out, in, false, true, false) }},
			{"dx", func() { Gemm(x, y, w, rows, in, out, false, false, false) }},
			{"dw", func() { Gemm(dw, y, x, out, in, rows, true, false, true) }},
		} {
			b.Run(fmt.Sprintf("%s-%dx%d", c.name, out, in), func(b *testing.B) {
				for b.Loop() {
					c.f()
				}
				b.ReportMetric(float64(rows*out*in)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
			})
		}
	}
}
