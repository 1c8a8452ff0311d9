//go:build cgo && !purego

package cpu

// #cgo CFLAGS: -O3 -std=gnu11
// #cgo LDFLAGS: -lm
// #include "tmath.h"
import "C"

func softmax(x []float32) (lse, mean float64) {
	var m C.double
	l := C.arb_softmax(f32p(x), C.int(len(x)), &m)
	return float64(l), float64(m)
}

func siluGate(s, sg, g, u []float32) {
	C.arb_silu_gate(f32p(s), f32p(sg), f32p(g), f32p(u), C.long(len(g)))
}
