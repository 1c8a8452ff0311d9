package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"arborist/kernels"
)

// TestTrainAttention: a head's forward and backward (C where the build has
// it, AVX2 or portable as ARBORIST_SIMD says) against the Go version, for
// row counts off the 8-value vectors, 0 to 3 extra levels, head widths 8
// and 12, and a level shorter than level 0.
func TestTrainAttention(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, c := range []struct{ r0, rows, j, hd int }{{1, 1, 0, 8}, {13, 13, 0, 8}, {37, 35, 2, 8}, {20, 17, 3, 12}, {64, 61, 1, 8}} {
		qs := c.hd*3 + 5
		mk := func(n int) []float32 { return gaussian(rng, n) }
		a := &TrainAttention{
			Q: mk(c.rows * qs), QStride: qs, KT: mk(c.hd * c.r0), VT: mk(c.hd * c.r0), R0: c.r0,
			EK: mk(c.j * c.rows * c.hd), EV: mk(c.j * c.rows * c.hd), J: c.j, Rows: c.rows, HeadDim: c.hd,
			Scale: float32(1 / math.Sqrt(float64(c.hd))), P: make([]float32, kernels.TrainRowBase(c.rows, c.j)),
		}
		b := *a
		b.P = make([]float32, len(a.P))
		o, want := make([]float32, c.rows*qs), make([]float32, c.rows*qs)
		a.Forward(o, qs)
		trainAttnForwardGo(&b, want, qs)
		near(t, "P", a.P, b.P)
		near(t, "out", o, want)
		dout := mk(c.rows * qs)
		grads := func() [][]float32 {
			return [][]float32{mk(c.rows * qs), mk(c.hd * c.r0), mk(c.hd * c.r0), mk(c.j * c.rows * c.hd), mk(c.j * c.rows * c.hd)}
		}
		g1 := grads()
		g2 := make([][]float32, len(g1))
		for i := range g1 {
			g2[i] = append([]float32(nil), g1[i]...)
		}
		a.Backward(dout, qs, g1[0], qs, g1[1], g1[2], g1[3], g1[4], make([]float32, c.rows+c.j))
		trainAttnBackwardGo(&b, dout, qs, g2[0], qs, g2[1], g2[2], g2[3], g2[4], make([]float32, c.rows+c.j))
		for i, name := range []string{"dq", "dkT", "dvT", "dek", "dev"} {
			near(t, name, g1[i], g2[i])
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("a short output slice was accepted")
		}
	}()
	a := &TrainAttention{Q: make([]float32, 8), QStride: 8, KT: make([]float32, 8), VT: make([]float32, 8), R0: 1, Rows: 1, HeadDim: 8, P: make([]float32, 1)}
	a.Forward(make([]float32, 7), 8)
}

func near(t *testing.T, name string, got, want []float32) {
	t.Helper()
	for i := range want {
		if d := math.Abs(float64(got[i] - want[i])); d > 1e-4*(1+math.Abs(float64(want[i]))) {
			t.Fatalf("%s[%d] = %v, want %v", name, i, got[i], want[i])
		}
	}
}

// BenchmarkTrainAttention: one head of the bench drafter's trainer (head
// width 8, a 160-token sequence, the deepest level), forward and backward.
func BenchmarkTrainAttention(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 8))
	const r0, rows, j, hd, qs = 159, 157, 2, 8, 512
	mk := func(n int) []float32 { return gaussian(rng, n) }
	a := &TrainAttention{
		Q: mk(rows * qs), QStride: qs, KT: mk(hd * r0), VT: mk(hd * r0), R0: r0,
		EK: mk(j * rows * hd), EV: mk(j * rows * hd), J: j, Rows: rows, HeadDim: hd,
		Scale: float32(1 / math.Sqrt(hd)), P: make([]float32, kernels.TrainRowBase(rows, j)),
	}
	o, dout, dq := make([]float32, rows*qs), mk(rows*qs), make([]float32, rows*qs)
	dkT, dvT, dek, dev := make([]float32, hd*r0), make([]float32, hd*r0), make([]float32, j*rows*hd), make([]float32, j*rows*hd)
	scratch := make([]float32, rows+j)
	b.Run("fwd", func(b *testing.B) {
		for b.Loop() {
			a.Forward(o, qs)
		}
	})
	a.Forward(o, qs)
	b.Run("bwd", func(b *testing.B) {
		for b.Loop() {
			a.Backward(dout, qs, dq, qs, dkT, dvT, dek, dev, scratch)
		}
	})
}
