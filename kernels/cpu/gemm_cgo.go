//go:build cgo && !purego

package cpu

// #cgo CFLAGS: -O3 -std=gnu11
// #include "gemm.h"
import "C"

import (
	"fmt"
	"unsafe"
)

func gemm(c, a, b []float32, m, n, k int, transA, transB, accumulate bool) {
	flag := func(v bool) C.int {
		if v {
			return 1
		}
		return 0
	}
	var pa, pb *C.float
	if k > 0 {
		pa, pb = (*C.float)(unsafe.Pointer(&a[0])), (*C.float)(unsafe.Pointer(&b[0]))
	}
	if C.arb_gemm(pa, pb, (*C.float)(unsafe.Pointer(&c[0])), C.int(m), C.int(n), C.int(k), flag(transA), flag(transB), flag(accumulate)) != 0 {
		panic(fmt.Sprintf("cpu: no memory for the packing buffers of a %dx%dx%d product", m, n, k))
	}
}
