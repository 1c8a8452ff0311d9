package hidden

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"arborist/kernels"
	"arborist/kernels/cpu"
	"arborist/kernels/devicetest"
)

// TestFloat32MatchesReference: the float32 network on the backend's kernels
// computes the float64 reference's loss parts and gradient (every parameter
// block, three unrolled levels, stored and recomputed target logits), with
// the CPU backend's workers and with another backend's (products stay on
// the host: a device's matrices would be copies of the first weights).
//
// With bfloat16 products (where the CPU has them) the same holds to the
// looser tolerances of 8-bit mantissa inputs, and the products were
// rounded: the loss is further from the reference than float32 sums put it.
func TestFloat32MatchesReference(t *testing.T) {
	t.Run("cpu", func(t *testing.T) { testFloat32MatchesReference(t, nil, cpu.F32) })
	t.Run("fake64", func(t *testing.T) { testFloat32MatchesReference(t, devicetest.NewFake(), cpu.F32) })
	t.Run("cpu-bf16", func(t *testing.T) {
		if !cpu.BF16Products() {
			t.Skip("no AVX-512 BF16 here (or ARBORIST_SIMD caps it)")
		}
		testFloat32MatchesReference(t, nil, cpu.BF16)
	})
}

func testFloat32MatchesReference(t *testing.T, be kernels.Backend, prec cpu.Precision) {
	lossTol, gradTol := 1e-4, 2e-3
	if prec == cpu.BF16 {
		lossTol, gradTol = 3e-3, 3e-2
	}
	var lossErr float64
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
	f.setPrecision(prec)
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
		lossErr = max(lossErr, math.Abs(l64-l32)/math.Abs(l64))
		if !(math.Abs(l64-l32) <= lossTol*math.Abs(l64)) { // NaN fails too
			t.Errorf("stored logits %v, %s products: loss %.6f (float32) vs %.6f (float64)", stored, prec, l32, l64)
		}
		for _, b := range n.lay {
			var num, den float64
			for i := b.Off; i < b.Off+b.Size(); i++ {
				d := float64(f.g[i]) - n.g[i]
				num += d * d
				den += n.g[i] * n.g[i]
			}
			rel := math.Sqrt(num / math.Max(den, 1e-30))
			if den == 0 || !(rel <= gradTol) {
				t.Errorf("stored logits %v, %s products: %s: float32 gradient differs from the float64 one by %.2e (relative norm; reference norm %.2e)", stored, prec, b.Name, rel, math.Sqrt(den))
			}
			if testing.Verbose() {
				t.Logf("stored logits %v, %s products: %s: gradient relative error %.2e", stored, prec, b.Name, rel)
			}
		}
	}
	t.Logf("%s products: loss relative error up to %.2e", prec, lossErr)
	if prec == cpu.BF16 && lossErr <= 1e-4 {
		t.Errorf("bf16 products: the loss is within %.1e of the float64 reference, as close as float32 products put it: were the inputs rounded?", lossErr)
	}
}

// TestProducts: the precision setting picks the training products'
// precision: auto is bf16 exactly where the CPU runs bf16 products, f32
// always runs, bf16 is refused with a clear error where it cannot run, and
// anything else is refused by Validate.
func TestProducts(t *testing.T) {
	want := cpu.F32
	if cpu.BF16Products() {
		want = cpu.BF16
	}
	for _, c := range []struct {
		setting string
		prec    cpu.Precision
		ok      bool
	}{{"", want, true}, {"auto", want, true}, {"f32", cpu.F32, true}, {"bf16", cpu.BF16, cpu.BF16Products()}, {"fp8", cpu.F32, false}} {
		s := DefaultSettings()
		s.Precision = c.setting
		prec, err := s.Products()
		if (err == nil) != c.ok || (c.ok && prec != c.prec) {
			t.Errorf("precision %q: %v, %v; want %v (ok %v)", c.setting, prec, err, c.prec, c.ok)
		}
		if verr := s.Validate(); (verr == nil) != c.ok {
			t.Errorf("precision %q: Validate says %v", c.setting, verr)
		}
		if err != nil && !strings.Contains(err.Error(), "precision") {
			t.Errorf("precision %q: the error does not say what is wrong: %v", c.setting, err)
		}
	}
}
