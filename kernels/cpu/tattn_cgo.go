//go:build cgo && !purego

package cpu

// #cgo CFLAGS: -O3 -std=gnu11
// #cgo LDFLAGS: -lm
// #include "tattn.h"
import "C"

import "unsafe"

func f32p(x []float32) *C.float {
	if len(x) == 0 {
		return nil
	}
	return (*C.float)(unsafe.Pointer(&x[0]))
}

func trainAttnForward(a *TrainAttention, o []float32, oStride int) {
	C.arb_tattn_fwd(f32p(a.Q), C.int(a.QStride), f32p(a.KT), f32p(a.VT), C.int(a.R0), C.int(a.HeadDim), f32p(a.EK), f32p(a.EV),
		C.int(a.J), C.int(a.Rows), C.float(a.Scale), f32p(a.P), f32p(o), C.int(oStride))
}

func trainAttnBackward(a *TrainAttention, dout []float32, ds int, dq []float32, dqs int, dkT, dvT, dek, dev, scratch []float32) {
	C.arb_tattn_bwd(f32p(a.Q), C.int(a.QStride), f32p(a.KT), f32p(a.VT), C.int(a.R0), C.int(a.HeadDim), f32p(a.EK), f32p(a.EV),
		C.int(a.J), C.int(a.Rows), C.float(a.Scale), f32p(a.P), f32p(dout), C.int(ds), f32p(dq), C.int(dqs),
		f32p(dkT), f32p(dvT), f32p(dek), f32p(dev), f32p(scratch))
}
