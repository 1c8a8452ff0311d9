//go:build cgo && !purego

package cpu

// #cgo CFLAGS: -O3 -std=gnu11
// #include "gemm.h"
import "C"

import (
	"fmt"
	"unsafe"
)

func gemm(c, a, b []float32, m, n, k int, transA, transB, accumulate, bf bool) {
	var pa, pb *C.float
	if k > 0 {
		pa, pb = (*C.float)(unsafe.Pointer(&a[0])), (*C.float)(unsafe.Pointer(&b[0]))
	}
	if C.arb_gemm(pa, pb, (*C.float)(unsafe.Pointer(&c[0])), C.int(m), C.int(n), C.int(k), flag(transA), flag(transB), flag(accumulate), flag(bf)) != 0 {
		panic(fmt.Sprintf("cpu: no memory for the packing buffers of a %dx%dx%d product", m, n, k))
	}
}

func bf16Products() bool { return C.arb_gemm_bf16() != 0 }

// packBAll packs with arb_gemm_pack_b into 32-byte aligned storage (the
// micro-kernel's aligned loads of B).
func packBAll(p *PackedB, b []float32) {
	bf := flag(p.prec == BF16)
	size := int(C.arb_gemm_packed_size(C.int(p.n), C.int(p.k), bf))
	if cap(p.v) < size+8 {
		p.v = make([]float32, size+8)
	}
	v := p.v[:cap(p.v)]
	off := int((32 - uintptr(unsafe.Pointer(&v[0]))%32) % 32 / 4)
	p.v = v[off : off+size]
	if size == 0 {
		return
	}
	if C.arb_gemm_pack_b(unsafe.Pointer(&p.v[0]), (*C.float)(unsafe.Pointer(&b[0])), C.int(p.n), C.int(p.k), flag(p.trans), bf) != 0 {
		panic(fmt.Sprintf("cpu: no memory for the packing buffer of a %dx%d matrix", p.k, p.n))
	}
}

func gemmPacked(c, a []float32, p *PackedB, m int, transA, accumulate bool) {
	var pa, pb *C.float
	if p.k > 0 {
		pa, pb = (*C.float)(unsafe.Pointer(&a[0])), (*C.float)(unsafe.Pointer(&p.v[0]))
	}
	if C.arb_gemm_pb(pa, unsafe.Pointer(pb), (*C.float)(unsafe.Pointer(&c[0])), C.int(m), C.int(p.n), C.int(p.k), flag(transA), flag(accumulate), flag(p.prec == BF16)) != 0 {
		panic(fmt.Sprintf("cpu: no memory for the packing buffers of a %dx%dx%d product", m, p.n, p.k))
	}
}

func flag(v bool) C.int {
	if v {
		return 1
	}
	return 0
}
