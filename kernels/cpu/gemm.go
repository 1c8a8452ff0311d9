package cpu

import (
	"fmt"
	"unsafe"

	"arborist/kernels/quant"
)

// GemmNT computes C (m x n) = A (m x k) · B^T, or adds it to C when
// accumulate, with B stored n x k (rows of B are the outputs, as weight
// rows are). It is the training product (the hidden-state drafter's
// trainer): blocked over k, it does not keep the forward pass's rule that a
// row's result is independent of the batch, so inference never calls it.
// It runs on the calling goroutine; callers parallelise over sequences.
func GemmNT(c, a, b []float32, m, n, k int, accumulate bool) {
	if m < 0 || n < 0 || k < 0 || len(a) < m*k || len(b) < n*k || len(c) < m*n {
		panic(fmt.Sprintf("cpu: GemmNT of %dx%d by (%dx%d)^T into %d values (have %d, %d)", m, k, n, k, len(c), len(a), len(b)))
	}
	if m == 0 || n == 0 {
		return
	}
	gemmNT(c, a, b, m, n, k, accumulate)
}

// gemmNTGo is the plain Go product, the fallback of pure-Go builds and the
// reference of the tests.
func gemmNTGo(c, a, b []float32, m, n, k int, accumulate bool) {
	for i := 0; i < m; i++ {
		ar := a[i*k : (i+1)*k]
		for j := 0; j < n; j++ {
			br := b[j*k : (j+1)*k]
			var s float32
			for t, v := range ar {
				s += v * br[t]
			}
			if accumulate {
				c[i*n+j] += s
			} else {
				c[i*n+j] = s
			}
		}
	}
}

// F32 returns an F32 matrix's weights as float32 values, row after row
// (nil for other types), for products that need them in place.
func (m *Matrix) F32() []float32 {
	if m.typ != quant.F32 || m.rows*m.cols == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&m.data[0])), m.rows*m.cols)
}
