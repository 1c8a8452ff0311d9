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

// bf16Round rounds v to bfloat16 (to nearest even), as vcvtneps2bf16
// does for finite values.
func bf16Round(v float32) float32 {
	u := math.Float32bits(v)
	u += 0x7fff + (u>>16)&1
	return math.Float32frombits(u &^ 0xffff)
}

// TestGemmBF16: a BF16 product equals the product of the inputs rounded
// to bfloat16 and summed in float64, to float32 summation error (the
// bfloat16 products are exact in float32), at the shapes, transposes and
// accumulations TestGemm covers, k odd included (the last pair's second
// half is zero); a pre-packed BF16 B gives the same bits; and the inputs
// were rounded (the negative control: the result is further from the
// unrounded float32 product than summation error allows). Skipped where
// the CPU has no AVX-512 BF16 (there BF16 runs as F32, which TestGemm
// covers).
func TestGemmBF16(t *testing.T) {
	if !BF16Products() {
		t.Skip("no AVX-512 BF16 here (or ARBORIST_SIMD caps it)")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	sizes := [][3]int{{1, 1, 1}, {6, 16, 8}, {7, 17, 37}, {160, 200, 512}, {97, 33, 601}, {4, 3, 1000}, {2, 5, 0}, {193, 40, 159}, {12, 48, 263}, {20, 530, 300}}
	rounded := func(x []float32) []float32 {
		out := make([]float32, len(x))
		for i, v := range x {
			out[i] = bf16Round(v)
		}
		return out
	}
	far := 0
	for _, s := range sizes {
		m, n, k := s[0], s[1], s[2]
		a, b := gaussian(rng, m*k), gaussian(rng, n*k)
		ar, br := rounded(a), rounded(b)
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			for _, acc := range []bool{false, true} {
				c0 := gaussian(rng, m*n)
				got, packed, exact := append([]float32(nil), c0...), append([]float32(nil), c0...), append([]float32(nil), c0...)
				GemmAt(BF16, got, a, b, m, n, k, tr[0], tr[1], acc)
				var pb PackedB
				pb.PackAt(BF16, b, n, k, tr[1])
				GemmPacked(packed, a, &pb, m, tr[0], acc)
				gemmGo(exact, a, b, m, n, k, tr[0], tr[1], acc)
				for i := 0; i < m; i++ {
					for j := 0; j < n; j++ {
						var want float64
						for p := 0; p < k; p++ {
							av, bv := ar[i*k+p], br[p*n+j]
							if tr[0] {
								av = ar[p*m+i]
							}
							if tr[1] {
								bv = br[j*k+p]
							}
							want += float64(av) * float64(bv)
						}
						if acc {
							want += float64(c0[i*n+j])
						}
						tol := 1e-6 * math.Sqrt(float64(k)+1) * 8
						g := float64(got[i*n+j])
						if !(math.Abs(g-want) <= tol) {
							t.Fatalf("%dx%dx%d transposes %v accumulate=%v: C[%d][%d] = %v, want %v (bfloat16 inputs)", m, n, k, tr, acc, i, j, g, want)
						}
						if packed[i*n+j] != got[i*n+j] {
							t.Fatalf("%dx%dx%d transposes %v accumulate=%v: packed B gives C[%d][%d] = %v, GemmAt %v", m, n, k, tr, acc, i, j, packed[i*n+j], got[i*n+j])
						}
						if math.Abs(g-float64(exact[i*n+j])) > tol {
							far++
						}
					}
				}
			}
		}
	}
	if far == 0 {
		t.Fatal("every BF16 product matched the float32 one to summation error: the inputs were not rounded")
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
// (dy^T · x, accumulated), one thread, GMAC/s each; where the CPU has
// AVX-512 BF16, the same at BF16.
func BenchmarkGemmTrain(b *testing.B) {
	const rows = 159
	rng := rand.New(rand.NewPCG(1, 1))
	for _, s := range [][2]int{{512, 512}, {256, 512}, {1376, 512}, {512, 1376}} {
		out, in := s[0], s[1]
		x, w, y := gaussian(rng, rows*in), gaussian(rng, out*in), gaussian(rng, rows*out)
		dw := make([]float32, out*in)
		type product struct {
			name string
			f    func()
		}
		cases := []product{
			{"fwd", func() { Gemm(y, x, w, rows, out, in, false, true, false) }},
			{"dx", func() { Gemm(x, y, w, rows, in, out, false, false, false) }},
			{"dw", func() { Gemm(dw, y, x, out, in, rows, true, false, true) }},
		}
		if BF16Products() {
			cases = append(cases,
				product{"fwd-bf16", func() { GemmAt(BF16, y, x, w, rows, out, in, false, true, false) }},
				product{"dx-bf16", func() { GemmAt(BF16, x, y, w, rows, in, out, false, false, false) }},
				product{"dw-bf16", func() { GemmAt(BF16, dw, y, x, out, in, rows, true, false, true) }})
		}
		for _, c := range cases {
			b.Run(fmt.Sprintf("%s-%dx%d", c.name, out, in), func(b *testing.B) {
				for b.Loop() {
					c.f()
				}
				b.ReportMetric(float64(rows*out*in)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
			})
		}
	}
}
