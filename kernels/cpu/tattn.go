package cpu

import (
	"fmt"
	"math"

	"arborist/kernels"
)

// TrainAttention is kernels.TrainAttention with the CPU's kernels as its
// methods: Forward and Backward run a whole head per call, in C where the
// build has it (host.go hands the contract's value over to them).
type TrainAttention kernels.TrainAttention

// check panics on slices too short for the shape (the trainer sizes them;
// a short one is a bug, and C must never read past a slice).
func (a *TrainAttention) check(extra ...[2]int) {
	hd, R, J := a.HeadDim, a.Rows, a.J
	need := [][2]int{
		{len(a.Q), (R-1)*a.QStride + hd}, {len(a.KT), hd * a.R0}, {len(a.VT), hd * a.R0},
		{len(a.EK), J * R * hd}, {len(a.EV), J * R * hd}, {len(a.P), kernels.TrainRowBase(R, J)},
	}
	if R > a.R0 || R <= 0 || hd <= 0 || J < 0 {
		panic(fmt.Sprintf("cpu: train attention of %d rows over %d keys, head width %d, %d extra levels", R, a.R0, hd, J))
	}
	for i, n := range append(need, extra...) {
		if n[0] < n[1] {
			panic(fmt.Sprintf("cpu: train attention: argument %d has %d values, needs %d", i, n[0], n[1]))
		}
	}
}

// Forward computes the attention weights into P and the output rows into
// o (row t at o[t*oStride:], HeadDim values).
func (a *TrainAttention) Forward(o []float32, oStride int) {
	a.check([2]int{len(o), (a.Rows-1)*oStride + a.HeadDim})
	trainAttnForward(a, o, oStride)
}

// Backward adds the gradients through the head's attention, given dout
// (the output's gradient, row t at dout[t*ds:]): to dq (row stride dqs),
// to level 0's transposed dkT and dvT (laid out as KT), and to the packed
// extra levels' dek and dev (laid out as EK). scratch holds Rows+J values.
func (a *TrainAttention) Backward(dout []float32, ds int, dq []float32, dqs int, dkT, dvT, dek, dev, scratch []float32) {
	hd, R := a.HeadDim, a.Rows
	a.check([2]int{len(dout), (R-1)*ds + hd}, [2]int{len(dq), (R-1)*dqs + hd}, [2]int{len(dkT), hd * a.R0},
		[2]int{len(dvT), hd * a.R0}, [2]int{len(dek), a.J * R * hd}, [2]int{len(dev), a.J * R * hd}, [2]int{len(scratch), R + a.J})
	trainAttnBackward(a, dout, ds, dq, dqs, dkT, dvT, dek, dev, scratch)
}

// trainAttnForwardGo is the Go version of Forward (pure-Go builds, and the
// tests' reference).
func trainAttnForwardGo(a *TrainAttention, o []float32, oStride int) {
	hd, R, J, r0 := a.HeadDim, a.Rows, a.J, a.R0
	for t := 0; t < R; t++ {
		qv := a.Q[t*a.QStride : t*a.QStride+hd]
		p := a.P[kernels.TrainRowBase(t, J) : kernels.TrainRowBase(t, J)+t+1+J]
		for i := 0; i <= t; i++ {
			var s float32
			for d, qx := range qv {
				s += qx * a.KT[d*r0+i]
			}
			p[i] = s
		}
		for l := 1; l <= J; l++ {
			e := ((l-1)*R + t) * hd
			p[t+l] = DotF32(qv, a.EK[e:e+hd])
		}
		mx := float32(math.Inf(-1))
		for i := range p {
			p[i] *= a.Scale
			mx = max(mx, p[i])
		}
		var sum float32
		for i, v := range p {
			p[i] = float32(math.Exp(float64(v - mx)))
			sum += p[i]
		}
		inv := 1 / sum
		for i := range p {
			p[i] *= inv
		}
		ov := o[t*oStride : t*oStride+hd]
		for d := range ov {
			ov[d] = DotF32(p[:t+1], a.VT[d*r0:d*r0+t+1])
		}
		for l := 1; l <= J; l++ {
			e := ((l-1)*R + t) * hd
			axpyF32(ov, p[t+l], a.EV[e:e+hd])
		}
	}
}

// trainAttnBackwardGo is the Go version of Backward.
func trainAttnBackwardGo(a *TrainAttention, dout []float32, ds int, dq []float32, dqs int, dkT, dvT, dek, dev, scratch []float32) {
	hd, R, J, r0 := a.HeadDim, a.Rows, a.J, a.R0
	for t := 0; t < R; t++ {
		p := a.P[kernels.TrainRowBase(t, J) : kernels.TrainRowBase(t, J)+t+1+J]
		pr := p[:t+1]
		qv, do := a.Q[t*a.QStride:t*a.QStride+hd], dout[t*ds:t*ds+hd]
		dqv := dq[t*dqs : t*dqs+hd]
		dp := scratch[:t+1+J]
		for i := 0; i <= t; i++ {
			var s float32
			for d, g := range do {
				s += g * a.VT[d*r0+i]
			}
			dp[i] = s
		}
		for d, g := range do {
			axpyF32(dvT[d*r0:d*r0+t+1], g, pr)
		}
		for l := 1; l <= J; l++ {
			e := ((l-1)*R + t) * hd
			axpyF32(dev[e:e+hd], p[t+l], do)
			dp[t+l] = DotF32(do, a.EV[e:e+hd])
		}
		c := DotF32(p, dp)
		for i := range dp {
			dp[i] = p[i] * (dp[i] - c) * a.Scale
		}
		for d, qx := range qv {
			dqv[d] += DotF32(dp[:t+1], a.KT[d*r0:d*r0+t+1])
			axpyF32(dkT[d*r0:d*r0+t+1], qx, dp[:t+1])
		}
		for l := 1; l <= J; l++ {
			e := ((l-1)*R + t) * hd
			axpyF32(dqv, dp[t+l], a.EK[e:e+hd])
			axpyF32(dek[e:e+hd], dp[t+l], qv)
		}
	}
}

// axpyF32: y += a * x.
func axpyF32(y []float32, a float32, x []float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] += a * x[i]
	}
}
