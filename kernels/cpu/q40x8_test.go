//go:build cgo && !purego

package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"arborist/kernels/quant"
)

// TestRepackedSizes: the Go table the copies are sized by
// (repackedRowBytes) gives, at both widths, what the C packers' layouts
// take a group and block, for every type; 0 for the types not repacked. A
// copy sized short would be written past its end.
func TestRepackedSizes(t *testing.T) {
	for _, typ := range quant.SupportedTypes() {
		for _, group := range []int{8, 16} {
			want := layoutGroupBytes(typ, group)
			got := int64(group) * repackedRowBytes(typ)
			if got != want {
				t.Errorf("%s, %d rows: %d bytes a group's block in Go, %d in C", typ, group, got, want)
			}
			if rb := repackedBytes(typ, 16, 2*quant.QKK, group); rb != 16/int64(group)*2*int64(quant.QKK/typ.BlockSize())*want {
				t.Errorf("%s, %d rows: a 16 x %d matrix takes %d bytes repacked", typ, group, 2*quant.QKK, rb)
			}
		}
	}
}

// TestEightRows: a matrix of a repacked type whose rows come in eights is
// repacked where its tiles run (sixteen rows a group with AVX-512 VNNI,
// eight with AVX2 alone), and its product agrees with the Go kernel on
// the original layout (the K-quants' tiles, which scale the activations
// per 256 values, with kTilesReference, bit for bit, at both widths); each
// output equals, bit for bit, what it is when
// its activation row is multiplied alone and when one thread does all
// rows (greedy losslessness rests on both).
func TestEightRows(t *testing.T) {
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q8_0, quant.Q5_0, quant.Q4_1, quant.Q5_1, quant.IQ4_NL, quant.IQ4_XS, quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q5_K, quant.Q6_K} {
		// 24 rows: a sixteen-row group and one padded with zeros, in one
		// tile of two groups; 40: two groups, then a padded one alone;
		// 96: three tiles of two groups, split between the threads
		for _, rows := range []int{24, 40, 96} {
			t.Run(fmt.Sprintf("%s/rows=%d", typ, rows), func(t *testing.T) { testEightRows(t, typ, rows) })
		}
	}
}

func testEightRows(t *testing.T, typ quant.Type, rows int) {
	rng := rand.New(rand.NewPCG(21, 22))
	cols := 512
	w := quantized(t, rng, typ, rows, cols)
	m, err := NewMatrix(typ, w, rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	want := repacks() // sixteen rows a group with VNNI, eight with AVX2
	if (m.packed != nil) != want || int64(len(m.packed)) != RepackedBytes(typ, rows, cols) {
		t.Fatalf("repacked %d bytes with SIMD level %d (RepackedBytes %d)", len(m.packed), simdLevel, RepackedBytes(typ, rows, cols))
	}
	odd, _ := NewMatrix(typ, quantized(t, rng, typ, 13, cols), 13, cols)
	if odd.packed != nil {
		t.Fatal("13 rows were repacked")
	}
	const guard = 7
	be2, be1 := New(2), New(1)
	defer be2.Close()
	defer be1.Close()
	for _, n := range []int{1, 2, 3, 4, 5, 8, 9, 17} {
		x := gaussian(rng, n*cols)
		got := make([]float32, n*rows+guard)
		for i := range got {
			got[i] = float32(math.NaN())
		}
		be2.MatMul(got, m, x, n)
		for i := n * rows; i < len(got); i++ {
			if !math.IsNaN(float64(got[i])) {
				t.Fatalf("n=%d: wrote past the end at %d", n, i)
			}
		}
		one := make([]float32, n*rows)
		be1.MatMul(one, m, x, n)
		want := make([]float32, n*rows)
		tol := 1e-3 * math.Sqrt(float64(cols))
		if m.packed != nil && layoutOf(m) == inKPanels {
			// the K-quants' tiles scale activations per 256 values: the Go
			// version of their steps gives their bits
			be2.q8.k.size(len(x))
			cQuantizeKPanels(&be2.q8.k, x, n, 0, n)
			kTilesReference(typ, w, m.rowBytes, rows, cols, &be2.q8.k, n, want)
			tol = 0
		} else {
			be2.q8.quantize(x)
			(&matmulJob{b: be2, out: want, w: m, x: x, n: n}).doGo(0, 0, rows)
		}
		for i := range want {
			if d := math.Abs(float64(got[i] - want[i])); d > tol {
				t.Fatalf("n=%d: out[%d] = %v, Go kernel %v", n, i, got[i], want[i])
			}
			if got[i] != one[i] {
				t.Fatalf("n=%d: out[%d] = %v on two threads, %v on one", n, i, got[i], one[i])
			}
		}
		for r := 0; r < n; r++ {
			alone := make([]float32, rows)
			be2.MatMul(alone, m, x[r*cols:(r+1)*cols], 1)
			for o := range alone {
				if alone[o] != got[r*rows+o] {
					t.Fatalf("n=%d row %d: out[%d] = %v in the batch, %v alone", n, r, o, got[r*rows+o], alone[o])
				}
			}
		}
	}
}

// TestSixteenRowsMatchEightRows: on a CPU with AVX-512 VNNI, the
// sixteen-row tiles (x16.c) give, bit for bit, the eight-row AVX2 tiles'
// outputs for Q4_0 and Q8_0 (their integer block sums are exact on both
// paths, and the float code after them is the same, lane by lane); for
// Q5_0, Q4_1 and Q5_1 both widths give legacyTilesReference's, and for
// the K-quants, whose activations are scaled per 256 values,
// kTilesReference's: their steps in Go (after checkKPanels has checked
// the activations). On rows of raw random bytes (Q8_0's -128 included)
// against activations that reach +-127 (one row at 127 throughout, where
// the AVX2 tiles' 16-bit pair sums peak), at every tile width and with
// the last group half padding. Changed weights in a repacked copy (a
// negative control: one vector of the last block) must change an output.
// Elsewhere it is skipped: the kernels it compares do not run there.
func TestSixteenRowsMatchEightRows(t *testing.T) {
	if simdLevel < 2 || !repacks() {
		t.Skipf("SIMD level %d: no AVX-512 VNNI tiles on this CPU (or ARBORIST_SIMD / ARBORIST_REPACK)", simdLevel)
	}
	rng := rand.New(rand.NewPCG(31, 32))
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q8_0, quant.Q5_0, quant.Q4_1, quant.Q5_1, quant.IQ4_NL, quant.IQ4_XS, quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q5_K, quant.Q6_K} {
		rows, cols := 24, 768 // 24 blocks: a group of sixteen for the quantisers and a rest
		rb, _ := quant.RowBytes(typ, cols)
		w := randomWeights(rng, typ, rows, cols)
		m8 := &Matrix{typ: typ, rows: rows, cols: cols, rowBytes: rb, data: w}
		m8.packed, m8.group = repackMatrix(m8, 8)
		m16 := &Matrix{typ: typ, rows: rows, cols: cols, rowBytes: rb, data: w}
		m16.packed, m16.group = repackMatrix(m16, 16)
		kq := layoutOf(m16) == inKPanels
		if m8.packed == nil || m16.packed == nil {
			t.Fatal("not repacked as the tiles take it")
		}
		for n := 1; n <= 19; n++ {
			x := gaussian(rng, n*cols)
			x[0], x[1] = 1e3, -1e3 // a block that quantises to +-127
			if n == 2 {
				// a row that quantises to 127 throughout: the 16-bit pair
				// sums of the AVX2 tiles reach their largest
				for i := cols; i < 2*cols; i++ {
					x[i] = 1
				}
			}
			var q q8Buf
			q.size(len(x))
			cQuantize(&q, x)
			q.p.size(len(x))
			cQuantizePanels(&q.p, x, n, 0, n)
			q.k.size(len(x))
			cQuantizeKPanels(&q.k, x, n, 0, n)
			a, v := make([]float32, n*rows), make([]float32, n*rows)
			if !tiles(m16, &q, 0, (rows+15)/16, n, v, false) {
				t.Fatal("the repacked kernels refused")
			}
			// a streamed product (non-temporal requests, pf_once) gives
			// the same bits
			vs := make([]float32, n*rows)
			if !tiles(m16, &q, 0, (rows+15)/16, n, vs, true) {
				t.Fatal("the repacked kernels refused to stream")
			}
			for i := range v {
				if math.Float32bits(v[i]) != math.Float32bits(vs[i]) {
					t.Fatalf("%v n=%d: out[%d] = %v streamed, %v not", typ, n, i, vs[i], v[i])
				}
			}
			legacy := typ == quant.Q5_0 || typ == quant.Q4_1 || typ == quant.Q5_1 || typ == quant.IQ4_NL || typ == quant.IQ4_XS
			if kq || legacy {
				if kq {
					checkKPanels(t, x, n, cols, &q.k)
					kTilesReference(typ, w, rb, rows, cols, &q.k, n, a)
				} else {
					legacyTilesReference(typ, w, rb, rows, cols, &q.p, n, a)
				}
				e := make([]float32, n*rows)
				if !tiles(m8, &q, 0, rows/8, n, e, false) {
					t.Fatal("the eight-row tiles refused")
				}
				for i := range a {
					if math.Float32bits(a[i]) != math.Float32bits(e[i]) {
						t.Fatalf("%v n=%d: out[%d] = %v with eight-row tiles, %v with the reference", typ, n, i, e[i], a[i])
					}
				}
				if n == 5 && !changesOutput(m8.packed[len(m8.packed)-32:], func() { tiles(m8, &q, 0, rows/8, n, e, false) }, a, e) {
					// negative control: the eight-row copy's last vector of weights changed
					t.Fatalf("%v: a changed weight byte in the eight-row copy changed no output", typ)
				}
			} else if !tiles(m8, &q, 0, rows/8, n, a, false) {
				t.Fatal("the repacked kernels refused")
			}
			for i := range a {
				if math.Float32bits(a[i]) != math.Float32bits(v[i]) {
					t.Fatalf("%v n=%d: out[%d] = %v with sixteen-row tiles, %v with the reference (K-quants: kTilesReference)", typ, n, i, v[i], a[i])
				}
			}
			// the eight-row tiles streamed give the same bits too
			e8, s8 := make([]float32, n*rows), make([]float32, n*rows)
			if !tiles(m8, &q, 0, rows/8, n, e8, false) || !tiles(m8, &q, 0, rows/8, n, s8, true) {
				t.Fatal("the eight-row tiles refused")
			}
			for i := range e8 {
				if math.Float32bits(e8[i]) != math.Float32bits(s8[i]) {
					t.Fatalf("%v n=%d: out[%d] = %v streamed by the eight-row tiles, %v not", typ, n, i, s8[i], e8[i])
				}
			}
			if q.q[0] != 127 || q.q[1] != -127 || q.k.q[0] != 127 || q.k.q[1] != -127 {
				t.Fatalf("activations %d %d (K panels %d %d), want 127 -127", q.q[0], q.q[1], q.k.q[0], q.k.q[1])
			}
			if n == 3 && !changesOutput(m16.packed[len(m16.packed)-128:len(m16.packed)-64], func() { tiles(m16, &q, 0, (rows+15)/16, n, v, false) }, a, v) {
				// negative control: the last block's next-to-last vector of weights changed
				t.Fatalf("%v: a changed weight byte changed no output", typ)
			}
		}
	}
}

// TestAVXVNNITilesMatchAVX2: the eight-row tiles' AVX-VNNI compilation
// (vpdpbusd) gives the AVX2 one's bits (maddubs, 16-bit sums) for every
// type they take, every tile width and streamed or not, activations at
// +-127 included; where the CPU lacks AVX-VNNI it is refused, and the
// AVX2 tiles run.
func TestAVXVNNITilesMatchAVX2(t *testing.T) {
	if simdLevel < 1 || !repacks() {
		t.Skipf("SIMD level %d: no eight-row tiles on this CPU (or ARBORIST_SIMD / ARBORIST_REPACK)", simdLevel)
	}
	cpuHas := avxVNNICPU()
	if avxVNNI && !cpuHas {
		t.Fatal("the AVX-VNNI tiles chosen on a CPU without them")
	}
	rng := rand.New(rand.NewPCG(33, 34))
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q8_0, quant.Q5_0, quant.Q4_1, quant.Q5_1, quant.IQ4_NL, quant.IQ4_XS, quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q5_K, quant.Q6_K} {
		rows, cols := 16, 512
		rb, _ := quant.RowBytes(typ, cols)
		w := randomWeights(rng, typ, rows, cols)
		m := &Matrix{typ: typ, rows: rows, cols: cols, rowBytes: rb, data: w}
		if m.packed, m.group = repackMatrix(m, 8); m.packed == nil {
			t.Fatalf("%v: not repacked eight rows a group", typ)
		}
		for n := 1; n <= 9; n++ {
			x := gaussian(rng, n*cols)
			for i := 0; i < cols; i++ { // a row at +-127 throughout: the AVX2 16-bit sums at their largest
				x[i] = float32(1 - 2*(i%2))
			}
			var q q8Buf
			q.size(len(x))
			cQuantize(&q, x)
			q.k.size(len(x))
			cQuantizeKPanels(&q.k, x, n, 0, n)
			for _, stream := range []bool{false, true} {
				a, v := make([]float32, n*rows), make([]float32, n*rows)
				if !tilesOn(m, &q, 0, rows/8, n, a, stream, false) {
					t.Fatalf("%v: the AVX2 tiles refused", typ)
				}
				if ok := tilesOn(m, &q, 0, rows/8, n, v, stream, true); ok != cpuHas {
					t.Fatalf("%v: the AVX-VNNI tiles ran %v on a CPU with AVX-VNNI %v", typ, ok, cpuHas)
				}
				if !cpuHas {
					continue
				}
				for i := range a {
					if math.Float32bits(a[i]) != math.Float32bits(v[i]) {
						t.Fatalf("%v n=%d stream %v: out[%d] = %v with AVX-VNNI, %v with AVX2", typ, n, stream, i, v[i], a[i])
					}
				}
				if n == 4 && !stream && !changesOutput(m.packed[len(m.packed)-32:], func() { tilesOn(m, &q, 0, rows/8, n, v, false, true) }, a, v) {
					// negative control: the copy's last vector of weights changed
					t.Fatalf("%v: a changed weight byte changed no output of the AVX-VNNI tiles", typ)
				}
			}
		}
	}
	if !cpuHas {
		t.Skip("no AVX-VNNI on this CPU: its tiles are refused, the AVX2 ones run")
	}
}

// randomWeights is rows x cols of typ with random bytes, every float16
// scale (and min) a finite one, so the tiles' results are numbers to
// compare bit for bit.
func randomWeights(rng *rand.Rand, typ quant.Type, rows, cols int) []byte {
	rb, _ := quant.RowBytes(typ, cols)
	w := make([]byte, rows*rb)
	for i := range w {
		w[i] = byte(rng.Uint32())
	}
	blocks, at := cols/quant.QK, []int{0}
	switch typ {
	case quant.Q4_K, quant.Q5_K:
		blocks, at = cols/quant.QKK, []int{0, 2} // d and dmin
	case quant.Q6_K:
		blocks, at = cols/quant.QKK, []int{208} // d, after the weights and scales
	case quant.Q4_1, quant.Q5_1:
		at = []int{0, 2} // d and m
	case quant.IQ4_XS:
		blocks = cols / quant.QKK
	case quant.Q3_K:
		blocks, at = cols/quant.QKK, []int{108} // d, last
	case quant.Q2_K:
		blocks, at = cols/quant.QKK, []int{80, 82} // d and dmin, last
	}
	bb := rb / blocks
	for r := 0; r < rows; r++ {
		for b := 0; b < blocks; b++ {
			for _, k := range at {
				// a finite float16 scale: sign, exponent 1..29, mantissa
				h := uint16(rng.Uint32()&0x83ff) | uint16(1+rng.IntN(29))<<10
				w[r*rb+b*bb+k], w[r*rb+b*bb+k+1] = byte(h), byte(h>>8)
			}
		}
	}
	return w
}

// TestRepackBudget: a backend repacks its matrices until their copies
// would pass its budget, and multiplies the rest in their file layout,
// with the same results (to float rounding: another kernel).
func TestRepackBudget(t *testing.T) {
	if !repacks() {
		t.Skip("no repacking on this CPU or build")
	}
	rng := rand.New(rand.NewPCG(41, 42))
	rows, cols := 16, 256
	w := quantized(t, rng, quant.Q8_0, rows, cols)
	size := RepackedBytes(quant.Q8_0, rows, cols)
	b := New(1)
	defer b.Close()
	b.repackLeft = size + size/2 // one copy fits, not two
	first, _ := b.NewMatrix(quant.Q8_0, w, rows, cols)
	second, _ := b.NewMatrix(quant.Q8_0, w, rows, cols)
	if first.(*Matrix).packed == nil || second.(*Matrix).packed != nil || b.repackLeft != size/2 {
		t.Fatalf("repacked %v then %v, %d bytes left of the budget", first.(*Matrix).packed != nil, second.(*Matrix).packed != nil, b.repackLeft)
	}
	x := gaussian(rng, cols)
	a, c := make([]float32, rows), make([]float32, rows)
	b.MatMul(a, first, x, 1)
	b.MatMul(c, second, x, 1)
	for i := range a {
		if d := math.Abs(float64(a[i] - c[i])); d > 1e-3*math.Sqrt(float64(cols)) {
			t.Fatalf("out[%d]: %v repacked, %v in the file layout", i, a[i], c[i])
		}
	}
	if RepackBudget() <= 0 {
		t.Fatal("no repacking budget")
	}
}

// TestStreams: a backend streams its products' weights (streams, the
// non-temporal requests of x16.c's pf_once) once its repacked copies pass
// streamMin, and its products, split across the workers or not, give the
// same bits as a backend that does not stream.
func TestStreams(t *testing.T) {
	if !repacks() {
		t.Skip("no repacking on this CPU or build")
	}
	rng := rand.New(rand.NewPCG(43, 44))
	rows, cols := 256, 512
	for _, typ := range []quant.Type{quant.Q8_0, quant.Q4_K} {
		w := quantized(t, rng, typ, rows, cols)
		plain, streamed := New(2), New(2)
		streamed.streamMin = RepackedBytes(typ, rows, cols) - 1
		mp, _ := plain.NewMatrix(typ, w, rows, cols)
		ms, _ := streamed.NewMatrix(typ, w, rows, cols)
		if plain.streams() || !streamed.streams() {
			t.Fatalf("%v: streams %v with %d bytes repacked of %d, %v with %d of %d", typ, plain.streams(), plain.repacked.Load(), plain.streamMin,
				streamed.streams(), streamed.repacked.Load(), streamed.streamMin)
		}
		for _, n := range []int{1, 3, 8, 17} {
			x := gaussian(rng, n*cols)
			a, c := make([]float32, n*rows), make([]float32, n*rows)
			plain.MatMul(a, mp, x, n)
			streamed.MatMul(c, ms, x, n)
			for i := range a {
				if math.Float32bits(a[i]) != math.Float32bits(c[i]) {
					t.Fatalf("%v n=%d: out[%d] = %v streamed, %v not", typ, n, i, c[i], a[i])
				}
			}
		}
		plain.Close()
		streamed.Close()
	}
	if streamBytes < 64<<20 {
		t.Fatalf("streamBytes %d: a model that fits in a third-level cache would stream", streamBytes)
	}
}

// panelRows is x16.c's ARB_PANEL: the activation rows a panel holds.
const panelRows = 4

// panelSlot is where block b of activation row r (of n) sits in panels of
// nb blocks a row: its 32 values at 32 times it, its scale at it.
func panelSlot(r, b, n, nb int) int {
	p0 := r / panelRows * panelRows
	return p0*nb + b*min(n-p0, panelRows) + r - p0
}

// changesOutput flips bits in every byte of vec (repacked weights), runs
// run, which writes got, puts the bytes back, and says whether got then
// differs anywhere from want: a negative control of a tile comparison.
func changesOutput(vec []byte, run func(), want, got []float32) bool {
	for i := range vec {
		vec[i] ^= 0x11
	}
	run()
	for i := range vec {
		vec[i] ^= 0x11
	}
	for i := range want {
		if want[i] != got[i] {
			return true
		}
	}
	return false
}

// fma32 is a float32 fused multiply-add where the exact a*b + c is a
// float64 (as every integer sum below is), so it is rounded once.
func fma32(a, b, c float32) float32 { return float32(math.FMA(float64(a), float64(b), float64(c))) }

// kTilesReference is x16.c's K-quant tiles, step by step in Go, on the
// activations p (arb_quantize_q8k_panels) of n rows against rows rows of
// w (a K-quant, rb bytes a row): out[r*rows+o].
func kTilesReference(typ quant.Type, w []byte, rb, rows, cols int, p *panelBuf, n int, out []float32) {
	nb := cols / quant.QK
	for r := 0; r < n; r++ {
		for o := 0; o < rows; o++ {
			row := w[o*rb : (o+1)*rb]
			var acc float32
			for s := 0; s < cols/quant.QKK; s++ {
				dy := p.d[panelSlot(r, 8*s, n, nb)]
				y := func(b int) []int8 { at := 32 * panelSlot(r, b, n, nb); return p.q[at : at+32] }
				var fs float32
				if typ == quant.Q3_K || typ == quant.Q2_K {
					bb := 110
					if typ == quant.Q2_K {
						bb = 84
					}
					blk := row[s*bb : (s+1)*bb]
					var sc [16]int8
					if typ == quant.Q3_K {
						quant.Q3KScales(blk[96:108], &sc)
					}
					var im int32
					for c := 0; c < 8; c++ {
						qy := y(8*s + c)
						for half := 0; half < 2; half++ {
							var sum, ysum int32
							for l := 16 * half; l < 16*half+16; l++ {
								i := 32*c + l
								if typ == quant.Q3_K {
									sum += int32(quant.Q3KWeight(blk, i)) * int32(qy[l])
								} else {
									q, _ := quant.Q2KWeight(blk, i)
									sum += int32(q) * int32(qy[l])
								}
								ysum += int32(qy[l])
							}
							g := 2*c + half
							if typ == quant.Q3_K {
								fs = fma32(float32(sc[g]), float32(sum), fs)
							} else {
								fs = fma32(float32(blk[g]&0xf), float32(sum), fs)
								im += int32(blk[g]>>4) * ysum
							}
						}
					}
					if typ == quant.Q3_K {
						acc = fma32(dy, f16le(blk[108:])*fs, acc)
					} else {
						acc = fma32(dy, fma32(-f16le(blk[82:]), float32(im), f16le(blk[80:])*fs), acc)
					}
					continue
				}
				if typ == quant.Q6_K {
					blk := row[s*210 : (s+1)*210]
					for c := 0; c < 8; c++ {
						half128, g := c/4, c%4
						ql, qh := blk[64*half128+32*(g%2):], blk[128+32*half128:]
						qy := y(8*s + c)
						for half := 0; half < 2; half++ {
							var sum int32
							for l := 16 * half; l < 16*half+16; l++ {
								q := int32(ql[l]>>uint(4*(g/2))&0xf|(qh[l]>>uint(2*g)&3)<<4) - 32
								sum += q * int32(qy[l])
							}
							fs = fma32(float32(int8(blk[192+2*c+half])), float32(sum), fs)
						}
					}
					acc = fma32(dy, f16le(blk[208:])*fs, acc)
					continue
				}
				five := typ == quant.Q5_K
				bb, qlOff := 144, 16
				if five {
					bb, qlOff = 176, 48
				}
				blk := row[s*bb : (s+1)*bb]
				var im int32
				for j := 0; j < 8; j++ {
					ql, shift := blk[qlOff+32*(j/2):], uint(4*(j%2))
					qy := y(8*s + j)
					var isum, ysum int32
					for l := 0; l < 32; l++ {
						q := int32(ql[l] >> shift & 0xf)
						if five {
							q |= int32(blk[16+l]>>uint(j)&1) << 4
						}
						isum += q * int32(qy[l])
						ysum += int32(qy[l])
					}
					sc, m := quant.ScaleMinK4(j, blk[4:16])
					fs = fma32(float32(sc), float32(isum), fs)
					im += int32(m) * ysum
				}
				v := fma32(-f16le(blk[2:]), float32(im), f16le(blk)*fs)
				acc = fma32(dy, v, acc)
			}
			out[r*rows+o] = acc
		}
	}
}

// legacyTilesReference is x16.c's Q5_0, Q4_1 and Q5_1 tiles step by step in
// Go, on the activations p (arb_quantize_q8_panels) of n rows against rows
// rows of w (rb bytes a row): for Q5_0 each block's exact sum of
// (q - 16) * y, then acc += (d * dy) * sum; for Q4_1 and Q5_1, with the
// block's min m and exact activation sum sy, the exact sum of q * y, then
// acc += dy * (d * sum + m * sy).
func legacyTilesReference(typ quant.Type, w []byte, rb, rows, cols int, p *panelBuf, n int, out []float32) {
	nb := cols / quant.QK
	if typ == quant.IQ4_NL || typ == quant.IQ4_XS {
		iq4TilesReference(typ, w, rb, rows, cols, p, n, out)
		return
	}
	mn, q5 := typ != quant.Q5_0, typ != quant.Q4_1
	head := 2
	if mn {
		head = 4
	}
	bb := head + 16
	if q5 {
		bb += 4
	}
	for r := 0; r < n; r++ {
		for o := 0; o < rows; o++ {
			var acc float32
			for b := 0; b < nb; b++ {
				blk := w[o*rb+bb*b : o*rb+bb*(b+1)]
				qs := blk[bb-16:]
				var qh uint32
				if q5 {
					qh = uint32(blk[head]) | uint32(blk[head+1])<<8 | uint32(blk[head+2])<<16 | uint32(blk[head+3])<<24
				}
				at := panelSlot(r, b, n, nb)
				qy := p.q[32*at : 32*at+32]
				var isum, ysum int32
				for l := 0; l < 32; l++ {
					q := int32(qs[l%16] >> uint(4*(l/16)) & 0xf)
					q |= int32(qh>>uint(l)&1) << 4
					if !mn {
						q -= 16
					}
					isum += q * int32(qy[l])
					ysum += int32(qy[l])
				}
				if !mn {
					acc = fma32(f16le(blk)*p.d[at], float32(isum), acc)
					continue
				}
				v := fma32(f16le(blk[2:]), float32(ysum), f16le(blk)*float32(isum))
				acc = fma32(p.d[at], v, acc)
			}
			out[r*rows+o] = acc
		}
	}
}

// iq4TilesReference is legacyTilesReference for IQ4_NL and IQ4_XS: each
// block's exact sum of table[q] * y, then acc += (dl * dy) * sum, dl the
// block's scale (IQ4_XS: d * (ls - 32), exact in float32).
func iq4TilesReference(typ quant.Type, w []byte, rb, rows, cols int, p *panelBuf, n int, out []float32) {
	nb := cols / quant.QK
	for r := 0; r < n; r++ {
		for o := 0; o < rows; o++ {
			row := w[o*rb : (o+1)*rb]
			var acc float32
			for b := 0; b < nb; b++ {
				var qs []byte
				var dl float32
				if typ == quant.IQ4_NL {
					qs, dl = row[18*b+2:18*b+18], f16le(row[18*b:])
				} else {
					sb := row[136*(b/8) : 136*(b/8+1)]
					qs, dl = sb[8+16*(b%8):8+16*(b%8+1)], f16le(sb)*float32(quant.IQ4XSScale(sb, b%8))
				}
				at := panelSlot(r, b, n, nb)
				qy := p.q[32*at : 32*at+32]
				var isum int32
				for l := 0; l < 32; l++ {
					isum += int32(quant.KValuesIQ4NL[qs[l%16]>>uint(4*(l/16))&0xf]) * int32(qy[l])
				}
				acc = fma32(dl*p.d[at], float32(isum), acc)
			}
			out[r*rows+o] = acc
		}
	}
}

// checkKPanels checks arb_quantize_q8k_panels' panels of x (n rows of
// cols) against the quantisation written out in Go: each 256 values
// scaled by their largest magnitude over 127, rounded to nearest even; a
// block's offsets the sums of blocks j and j+1 (even j), its halves' sums
// (two int16), and -32 times its halves' sums.
func checkKPanels(t *testing.T, x []float32, n, cols int, p *panelBuf) {
	t.Helper()
	nb := cols / quant.QK
	for r := 0; r < n; r++ {
		for s := 0; s < cols/quant.QKK; s++ {
			xs := x[r*cols+s*quant.QKK : r*cols+(s+1)*quant.QKK]
			d, id := q8Scale(xs)
			var sums [8]int32
			for j := 0; j < 8; j++ {
				b := 8*s + j
				at := panelSlot(r, b, n, nb)
				if p.d[at] != d {
					t.Fatalf("row %d block %d: scale %v, want %v", r, b, p.d[at], d)
				}
				var low int32
				for l := 0; l < 32; l++ {
					want := int8(math.RoundToEven(float64(xs[32*j+l] * id)))
					if got := p.q[32*at+l]; got != want {
						t.Fatalf("row %d block %d: q[%d] = %d, want %d", r, b, l, got, want)
					}
					sums[j] += int32(want)
					if l == 15 {
						low = sums[j]
					}
				}
				p0 := r / panelRows * panelRows
				P := min(n-p0, panelRows)
				c := p.c[4*p0*nb+b*4*P+r-p0:] // this block's four offsets, P apart
				if j%2 == 1 {                 // the even block before holds both sums
					want := int32(uint32(uint16(sums[j-1])) | uint32(sums[j])<<16)
					if got := p.c[4*p0*nb+(b-1)*4*P+r-p0]; got != want {
						t.Fatalf("row %d blocks %d, %d: sums word %#x, want %#x", r, b-1, b, got, want)
					}
				}
				halves := int32(uint32(uint16(low)) | uint32(sums[j]-low)<<16)
				if j%2 == 1 && c[0] != 0 || c[P] != halves || c[2*P] != -32*low || c[3*P] != -32*(sums[j]-low) {
					t.Fatalf("row %d block %d: offsets %d %d %d %d, want (0) %d %d %d", r, b, c[0], c[P], c[2*P], c[3*P], halves, -32*low, -32*(sums[j]-low))
				}
			}
		}
	}
}
