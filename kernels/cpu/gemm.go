package cpu

import (
	"fmt"

	"arborist/kernels"
)

// Gemm computes C (m x n) = op(A) · op(B), or adds it to C when
// accumulate. op(A) is A stored m x k, or with transA A stored k x m and
// read transposed; op(B) is B stored k x n, or with transB B stored n x k
// (rows of B are the outputs, as weight rows are). It is the training
// product (the hidden-state drafter's trainer): blocked over k, it does not
// keep the forward pass's rule that a row's result is independent of the
// batch, so inference never calls it. It runs on the calling goroutine;
// callers parallelise over sequences.
func Gemm(c, a, b []float32, m, n, k int, transA, transB, accumulate bool) {
	GemmAt(F32, c, a, b, m, n, k, transA, transB, accumulate)
}

// Precision is what a training product rounds its inputs to
// (kernels.Precision, the contract's type).
type Precision = kernels.Precision

// The precisions, as this package's products name them.
const (
	F32  = kernels.PrecisionF32
	BF16 = kernels.PrecisionBF16
)

// BF16Products says whether BF16 products run as such on this CPU (not
// capped by ARBORIST_SIMD below 3).
func BF16Products() bool { return bf16Products() }

// GemmAt is Gemm with its inputs at prec.
func GemmAt(prec Precision, c, a, b []float32, m, n, k int, transA, transB, accumulate bool) {
	if m < 0 || n < 0 || k < 0 || len(a) < m*k || len(b) < n*k || len(c) < m*n {
		panic(fmt.Sprintf("cpu: Gemm of %dx%d by %dx%d into %d values (have %d, %d)", m, k, k, n, len(c), len(a), len(b)))
	}
	if m == 0 || n == 0 {
		return
	}
	gemm(c, a, b, m, n, k, transA, transB, accumulate, prec == BF16)
}

// gemmGo is the plain Go product, the fallback of pure-Go builds and the
// reference of the tests.
func gemmGo(c, a, b []float32, m, n, k int, transA, transB, accumulate bool) {
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float32
			for t := 0; t < k; t++ {
				av, bv := a[i*k+t], b[t*n+j]
				if transA {
					av = a[t*m+i]
				}
				if transB {
					bv = b[j*k+t]
				}
				s += av * bv
			}
			if accumulate {
				c[i*n+j] += s
			} else {
				c[i*n+j] = s
			}
		}
	}
}

// PackedB is the B operand of Gemm packed once for many products, the way
// Gemm packs it block by block on every call: the trainer multiplies by
// the same weights (forward, x · W^T, and backward, dy · W) for every
// sequence and level of an update, and packing them each time was about a
// tenth of a product. Re-pack after B changes; a PackedB is read-only
// while products use it, so workers share one.
type PackedB struct {
	v     []float32 // the packed values, or bfloat16 pairs (without cgo: op(B) as given)
	n, k  int
	trans bool
	prec  Precision
}

// Pack packs op(B) (n columns, k values; B stored k x n, or n x k with
// transB) into p, reusing p's storage when it is large enough.
func (p *PackedB) Pack(b []float32, n, k int, transB bool) { p.PackAt(F32, b, n, k, transB) }

// PackAt is Pack for products at prec: a BF16 pack holds op(B) rounded to
// bfloat16, and GemmPacked then rounds op(A) too.
func (p *PackedB) PackAt(prec Precision, b []float32, n, k int, transB bool) {
	if n < 0 || k < 0 || len(b) < n*k {
		panic(fmt.Sprintf("cpu: packing %dx%d from %d values", k, n, len(b)))
	}
	p.n, p.k, p.trans, p.prec = n, k, transB, prec
	packBAll(p, b)
}

// GemmPacked is Gemm against a packed op(B): C (m x n) = op(A) · op(B), or
// += when accumulate, with the n, k and precision p was packed with.
func GemmPacked(c, a []float32, p *PackedB, m int, transA, accumulate bool) {
	n, k := p.n, p.k
	if m < 0 || len(a) < m*k || len(c) < m*n {
		panic(fmt.Sprintf("cpu: GemmPacked of %dx%d by %dx%d into %d values (have %d)", m, k, k, n, len(c), len(a)))
	}
	if m == 0 || n == 0 {
		return
	}
	gemmPacked(c, a, p, m, transA, accumulate)
}
