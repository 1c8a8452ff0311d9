//go:build cgo && !purego

package cpu

// #cgo CFLAGS: -O3 -std=gnu11
// #include "gemm.h"
import "C"

import "unsafe"

func gemmNT(c, a, b []float32, m, n, k int, accumulate bool) {
	acc, portable := 0, 0
	if accumulate {
		acc = 1
	}
	if simdLevel < 1 {
		portable = 1 // ARBORIST_SIMD=0 asks for the portable C kernels
	}
	var pa, pb *C.float
	if k > 0 {
		pa, pb = (*C.float)(unsafe.Pointer(&a[0])), (*C.float)(unsafe.Pointer(&b[0]))
	}
	C.arb_gemm_nt(pa, pb, (*C.float)(unsafe.Pointer(&c[0])), C.int(m), 0, C.int(n), C.int(k), C.int(n), C.int(acc), C.int(portable))
}
