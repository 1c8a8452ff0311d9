package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSoftmax: the trainer's softmax against the float64 one, at lengths
// with and without a tail past the vector width, with rows far from zero
// (the maximum is subtracted) and a single entry; the returned log sum exp
// and mean are checked against their definitions, and the row sums to 1.
func TestSoftmax(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 3, 8, 13, 512, 517} {
		for _, off := range []float32{0, 40, -60} {
			x := gaussian(rng, n)
			for i := range x {
				x[i] = x[i]*4 + off
			}
			want := append([]float32(nil), x...)
			var wl, wm float64
			{
				mx := math.Inf(-1)
				for _, v := range want {
					mx = math.Max(mx, float64(v))
				}
				var s, ez float64
				for _, v := range want {
					e := math.Exp(float64(v) - mx)
					s += e
					ez += e * float64(v)
				}
				wl, wm = mx+math.Log(s), ez/s
				for i, v := range want {
					want[i] = float32(math.Exp(float64(v) - wl))
				}
			}
			got := append([]float32(nil), x...)
			l, m := Softmax(got)
			if math.Abs(l-wl) > 1e-5*math.Max(1, math.Abs(wl)) || math.Abs(m-wm) > 1e-4*math.Max(1, math.Abs(wm)) {
				t.Fatalf("n=%d off=%v: lse %v mean %v, want %v %v", n, off, l, m, wl, wm)
			}
			var sum float64
			for i := range got {
				sum += float64(got[i])
				if d := math.Abs(float64(got[i] - want[i])); d > 1e-6+1e-5*float64(want[i]) {
					t.Fatalf("n=%d off=%v: p[%d] = %v, want %v", n, off, i, got[i], want[i])
				}
			}
			if math.Abs(sum-1) > 1e-5 {
				t.Fatalf("n=%d: sums to %v", n, sum)
			}
		}
	}
}

// TestSiLUGate: the gate and its kept sigmoid against float64, across the
// range where the sigmoid saturates and at a length with a tail.
func TestSiLUGate(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const n = 1003
	g, u := gaussian(rng, n), gaussian(rng, n)
	for i := range g {
		g[i] *= 12
	}
	s, sg := make([]float32, n), make([]float32, n)
	SiLUGate(s, sg, g, u)
	for i := range g {
		v := 1 / (1 + math.Exp(-float64(g[i])))
		w := float64(g[i]) * v * float64(u[i])
		if math.Abs(float64(sg[i])-v) > 1e-6 || math.Abs(float64(s[i])-w) > 1e-5*math.Max(1, math.Abs(w)) {
			t.Fatalf("g=%v u=%v: sigmoid %v silu %v, want %v %v", g[i], u[i], sg[i], s[i], v, w)
		}
	}
}
