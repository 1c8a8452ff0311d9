package cpu

import "fmt"

// Gemm computes C (m x n) = op(A) · op(B), or adds it to C when
// accumulate. op(A) is A stored m x k, or with transA A stored k x m and
// read transposed; op(B) is B stored k x n, or with transB B stored n x k
// (rows of B are the outputs, as weight rows are). It is the training
// product (the hidden-state drafter's trainer): blocked over k, it does not
// keep the forward pass's rule that a row's result is independent of the
// batch, so inference never calls it. It runs on the calling goroutine;
// callers parallelise over sequences.
func Gemm(c, a, b []float32, m, n, k int, transA, transB, accumulate bool) {
	if m < 0 || n < 0 || k < 0 || len(a) < m*k || len(b) < n*k || len(c) < m*n {
		panic(fmt.Sprintf("cpu: Gemm of %dx%d by %dx%d into %d values (have %d, %d)", m, k, k, n, len(c), len(a), len(b)))
	}
	if m == 0 || n == 0 {
		return
	}
	gemm(c, a, b, m, n, k, transA, transB, accumulate)
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
