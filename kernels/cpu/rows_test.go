package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"arborist/kernels"
	"arborist/kernels/quant"
)

// TestRowsSplitMatchesSerial: the element-wise operations and the
// quantisation of a wide pass's activations, split across four workers,
// give one thread's results bit for bit (each row or value is computed by
// the same code wherever the split falls), for sizes past parallelMin.
func TestRowsSplitMatchesSerial(t *testing.T) {
	rng := rand.New(rand.NewPCG(71, 72))
	const rows, dim = 70, 1024 // 70 x 1024 values: split
	if rows*dim < 2*parallelMin {
		t.Fatal("too small to be split")
	}
	x, y, w := gaussian(rng, rows*dim), gaussian(rng, rows*dim), gaussian(rng, dim)
	cos, sin := gaussian(rng, rows*32), gaussian(rng, rows*32)
	wq := quantized(t, rng, quant.Q4_K, 48, dim)
	w8 := quantized(t, rng, quant.Q5_0, 48, dim) // a row-kernel type
	run := func(threads int) [][]float32 {
		b := New(threads)
		defer b.Close()
		var outs [][]float32
		norm := make([]float32, rows*dim)
		b.RMSNorm(Wrap(norm), Wrap(x), Wrap(w), rows, dim, 1e-5)
		outs = append(outs, norm)
		sum := append([]float32(nil), x...)
		b.Add(Wrap(sum), Wrap(y), rows*dim)
		outs = append(outs, sum)
		g := append([]float32(nil), x...)
		b.GLU(Wrap(g), Wrap(y), rows*dim, false)
		outs = append(outs, g)
		r := append([]float32(nil), x...)
		b.RoPE(Wrap(r), rows, kernels.RoPEShape{Heads: 16, HeadDim: 64, RopeDim: 64}, cos, sin)
		outs = append(outs, r)
		for _, wb := range [][]byte{wq, w8} {
			typ := quant.Q4_K
			if &wb[0] == &w8[0] {
				typ = quant.Q5_0
			}
			m, err := b.NewMatrix(typ, wb, 48, dim)
			if err != nil {
				t.Fatal(err)
			}
			out := make([]float32, rows*48)
			b.MatMul(out, m, x, rows)
			outs = append(outs, out)
		}
		return outs
	}
	one, four := run(1), run(4)
	for k := range one {
		for i := range one[k] {
			if math.Float32bits(one[k][i]) != math.Float32bits(four[k][i]) {
				t.Fatalf("operation %d: value %d = %v on one thread, %v on four", k, i, one[k][i], four[k][i])
			}
		}
	}
}

// TestRMSNormAndAdd: the kernels' RMSNorm (C, eight values at a time,
// where cgo is on) agrees with the float64 formula and with the Go loop
// to float rounding, for widths with and without a tail of fewer than
// eight; a row's result is the same alone as among other rows; the add
// is the Go loop's bit for bit.
func TestRMSNormAndAdd(t *testing.T) {
	rng := rand.New(rand.NewPCG(73, 74))
	for _, dim := range []int{8, 13, 64, 512, 1030} {
		const rows = 5
		x, w := gaussian(rng, rows*dim), gaussian(rng, dim)
		x[3] *= 40 // one large value
		got, ref := make([]float32, rows*dim), make([]float32, rows*dim)
		rmsNorm(got, x, w, dim, 1e-5)
		rmsNormGo(ref, x, w, dim, 1e-5)
		for r := 0; r < rows; r++ {
			var ss float64
			for _, v := range x[r*dim : (r+1)*dim] {
				ss += float64(v) * float64(v)
			}
			scale := 1 / math.Sqrt(ss/float64(dim)+1e-5)
			one := make([]float32, dim)
			rmsNorm(one, x[r*dim:(r+1)*dim], w, dim, 1e-5)
			for i := 0; i < dim; i++ {
				k := r*dim + i
				want := float64(x[k]) * scale * float64(w[i])
				if d := math.Abs(float64(got[k]) - want); d > 1e-5*math.Max(1, math.Abs(want)) {
					t.Fatalf("dim %d row %d value %d: %v, want %v", dim, r, i, got[k], want)
				}
				if d := math.Abs(float64(got[k] - ref[k])); d > 1e-6*math.Max(1, math.Abs(want)) {
					t.Fatalf("dim %d row %d value %d: %v, the Go loop %v", dim, r, i, got[k], ref[k])
				}
				if math.Float32bits(one[i]) != math.Float32bits(got[k]) {
					t.Fatalf("dim %d row %d value %d: %v alone, %v among %d rows", dim, r, i, one[i], got[k], rows)
				}
			}
		}
		a, b := append([]float32(nil), x...), append([]float32(nil), x...)
		y := gaussian(rng, rows*dim)
		addTo(a, y)
		addToGo(b, y)
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
				t.Fatalf("dim %d: add value %d %v, the Go loop %v", dim, i, a[i], b[i])
			}
		}
	}
}

// TestRoPEMatchesGo: the kernels' RoPE (C, eight values at a time, where
// cgo is on) gives the Go loop's bits, for rotated pairs adjacent and
// half a head apart, whole and partial rotations, and halves that leave a
// tail of fewer than a vector.
func TestRoPEMatchesGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(75, 76))
	for _, s := range []kernels.RoPEShape{
		{Heads: 3, HeadDim: 8, RopeDim: 8}, {Heads: 3, HeadDim: 8, RopeDim: 8, Neox: true},
		{Heads: 2, HeadDim: 64, RopeDim: 64}, {Heads: 2, HeadDim: 128, RopeDim: 128, Neox: true},
		{Heads: 4, HeadDim: 80, RopeDim: 20}, {Heads: 4, HeadDim: 80, RopeDim: 20, Neox: true},
		{Heads: 1, HeadDim: 96, RopeDim: 24, Neox: true}, {Heads: 2, HeadDim: 6, RopeDim: 6},
	} {
		const rows = 5
		half := s.RopeDim / 2
		x, cos, sin := gaussian(rng, rows*s.Heads*s.HeadDim), gaussian(rng, rows*half), gaussian(rng, rows*half)
		got, ref := append([]float32(nil), x...), append([]float32(nil), x...)
		rope(got, rows, s, cos, sin)
		ropeGo(ref, rows, s, cos, sin)
		for i := range ref {
			if math.Float32bits(got[i]) != math.Float32bits(ref[i]) {
				t.Fatalf("%+v: value %d = %v, the Go loop's %v", s, i, got[i], ref[i])
			}
		}
		for i := range x { // the values past RopeDim untouched
			if i%s.HeadDim >= s.RopeDim && got[i] != x[i] {
				t.Fatalf("%+v: value %d past the rotated dims changed", s, i)
			}
		}
	}
}

// TestSiLUValueAlone: the SiLU gate gives each value the bits it gets
// alone, wherever it falls (in a full vector or among the last few), and
// stays within float rounding of silu(x)*u in float64, large and tiny
// values included.
func TestSiLUValueAlone(t *testing.T) {
	rng := rand.New(rand.NewPCG(77, 78))
	const n = 101 // four vectors of sixteen, two more, and five over
	g, u := gaussian(rng, n), gaussian(rng, n)
	g[3], g[70], g[99] = 40, -40, 1e-30
	got := append([]float32(nil), g...)
	siluMul(got, u)
	for i := range g {
		one := []float32{g[i]}
		siluMul(one, u[i:i+1])
		if math.Float32bits(one[0]) != math.Float32bits(got[i]) {
			t.Fatalf("value %d: %v in the batch, %v alone", i, got[i], one[0])
		}
		x := float64(g[i])
		want := x / (1 + math.Exp(-x)) * float64(u[i])
		if math.Abs(float64(got[i])-want) > 1e-6*math.Max(1, math.Abs(want)) {
			t.Fatalf("value %d: silu(%v)*%v = %v, want %v", i, g[i], u[i], got[i], want)
		}
	}
}

// TestF32ToF16MatchesGo: the cache's half-float conversion (F16C where
// cgo and the CPU have it) gives quant.F32ToF16's bits for random values
// and the edges: signed zeros, subnormal halves and the smallest values
// that round to them or to zero, ties to even, the largest half and the
// values that round past it to infinity, infinities, and NaNs whatever
// their payload (the quiet NaN 0x7e00 with their sign).
func TestF32ToF16MatchesGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(79, 80))
	x := gaussian(rng, 203)
	for i := range x[:100] {
		x[i] *= float32(math.Pow(2, float64(rng.IntN(50)-30)))
	}
	bits := []uint32{0x00000000, 0x80000000, 0x33000000, 0x33000001, 0xb3000001, 0x387fc000, 0x38800000, 0x3f801000,
		0x3f803000, 0x477fe000, 0x477fefff, 0x477ff000, 0xc77ff000, 0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001,
		0xffc12345, 0x7fbfffff}
	for i, b := range bits {
		x[100+i] = math.Float32frombits(b)
	}
	got := make([]uint16, len(x))
	f32ToF16(got, x)
	for i, f := range x {
		if want := quant.F32ToF16(f); got[i] != want {
			t.Fatalf("value %d (%#08x): %#04x, quant.F32ToF16 %#04x", i, math.Float32bits(f), got[i], want)
		}
	}
}
