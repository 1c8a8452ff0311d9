package hidden

import (
	"math"
	"math/rand/v2"
	"testing"

	"arborist/kernels"
	"arborist/kernels/devicetest"
)

// TestFloat32MatchesReference: the float32 network on the backend's kernels
// computes the float64 reference's loss parts and gradient (every parameter
// block, three unrolled levels, stored and recomputed target logits), with
// the CPU backend's workers and with another backend's (products stay on
// the host: a device's matrices would be copies of the first weights).
func TestFloat32MatchesReference(t *testing.T) {
	t.Run("cpu", func(t *testing.T) { testFloat32MatchesReference(t, nil) })
	t.Run("fake64", func(t *testing.T) { testFloat32MatchesReference(t, devicetest.NewFake()) })
}

func testFloat32MatchesReference(t *testing.T, be kernels.Backend) {
	target := loadTarget(t, "stories260K.gguf")
	d, err := New(target, 16, 2, 7)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range d.Block(bW2) {
		d.Block(bW2)[i] = float32(0.1 * rng.NormFloat64())
	}
	n, err := newNet(d, target, DefaultSettings())
	if err != nil {
		t.Fatal(err)
	}
	if be == nil {
		be = target.Backend
	}
	f := newFNet(d, n, be)
	f.ar.poison = true // a value the passes read before writing it would come out NaN
	for _, stored := range []bool{true, false} {
		sq := randomSeq(rng, 23, d.Dim, d.Vocab)
		if !stored {
			sq.z = nil // labels from head(norm(H)), in both networks
		}
		info := append([]int(nil), sq.tokens...)
		info[5] = (info[5] + 3) % d.Vocab
		const K = 3
		clear(n.g)
		clear(f.g)
		if stored {
			f.pack() // the packed weights' products, then (stale packs never read) the plain ones
		} else {
			f.changed()
		}
		lvs, parts := n.forward(sq, info, K)
		n.backward(sq, info, lvs, 1)
		pt := f.targetDist(sq)
		flvs, fparts := f.forward(sq, info, K, pt)
		f.backward(sq, info, flvs, 1, pt)
		l64, _, _ := n.loss(parts)
		l32, _, _ := n.loss(fparts)
		if !(math.Abs(l64-l32) <= 1e-4*math.Abs(l64)) { // NaN fails too
			t.Errorf("stored logits %v: loss %.6f (float32) vs %.6f (float64)", stored, l32, l64)
		}
		for _, b := range n.lay {
			var num, den float64
			for i := b.Off; i < b.Off+b.Size(); i++ {
				d := float64(f.g[i]) - n.g[i]
				num += d * d
				den += n.g[i] * n.g[i]
			}
			rel := math.Sqrt(num / math.Max(den, 1e-30))
			if den == 0 || !(rel <= 2e-3) {
				t.Errorf("stored logits %v: %s: float32 gradient differs from the float64 one by %.2e (relative norm; reference norm %.2e)", stored, b.Name, rel, math.Sqrt(den))
			}
		}
	}
}
