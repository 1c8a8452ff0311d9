//go:build cgo && !purego

package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"arborist/kernels/quant"
)

// TestEightRows: a Q4_0, Q8_0 or K-quant matrix whose rows come in eights is
// repacked where its tiles run (sixteen rows a group with AVX-512 VNNI,
// eight with AVX2 alone), and its product agrees with the Go kernel on
// the original layout; each output equals, bit for bit, what it is when
// its activation row is multiplied alone and when one thread does all
// rows (greedy losslessness rests on both).
func TestEightRows(t *testing.T) {
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q8_0, quant.Q4_K, quant.Q5_K, quant.Q6_K} {
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
	want := repacks() && (kGroupBytes(typ) == 0 || vnniTiles()) // K-quants only where their VNNI tiles run
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
		be2.q8.quantize(x)
		(&matmulJob{b: be2, out: want, w: m, x: x, n: n}).doGo(0, 0, rows)
		for i := range want {
			if d := math.Abs(float64(got[i] - want[i])); d > 1e-3*math.Sqrt(float64(cols)) {
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
// sixteen-row tiles (x16.c) give the eight-row AVX2 tiles' outputs bit for
// bit (their integer block sums are exact on both paths, and the float
// code after them is the same, lane by lane), for Q4_0, Q8_0 and K-quant
// rows of raw random bytes (Q8_0's -128 included) against activations that
// reach +-127, at every tile width and with the last group half padding.
// Changed weights in the sixteen-row copy (a negative control: one
// vector of the last block) must change an output. Elsewhere it is
// skipped: the kernels it compares do not run there.
func TestSixteenRowsMatchEightRows(t *testing.T) {
	if simdLevel < 2 || !repacks() {
		t.Skipf("SIMD level %d: no AVX-512 VNNI tiles on this CPU (or ARBORIST_SIMD / ARBORIST_REPACK)", simdLevel)
	}
	rng := rand.New(rand.NewPCG(31, 32))
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q8_0, quant.Q4_K, quant.Q5_K, quant.Q6_K} {
		rows, cols := 24, 512
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
		m8 := &Matrix{typ: typ, rows: rows, cols: cols, rowBytes: rb, data: w}
		m8.packed, m8.group = repackMatrix(m8, 8)
		m16 := &Matrix{typ: typ, rows: rows, cols: cols, rowBytes: rb, data: w}
		m16.packed, m16.group = repackMatrix(m16, 16)
		if m8.packed == nil || m16.packed == nil {
			t.Fatal("not repacked")
		}
		for n := 1; n <= 19; n++ {
			x := gaussian(rng, n*cols)
			x[0], x[1] = 1e3, -1e3 // a block that quantises to +-127
			var q q8Buf
			q.size(len(x))
			cQuantize(&q, x)
			q.sizePanels(len(x))
			cQuantizePanels(&q, x, n, 0, n)
			a, v := make([]float32, n*rows), make([]float32, n*rows)
			if !tiles(m8, &q, 0, rows/8, n, a) || !tiles(m16, &q, 0, (rows+15)/16, n, v) {
				t.Fatal("the repacked kernels refused")
			}
			for i := range a {
				if math.Float32bits(a[i]) != math.Float32bits(v[i]) {
					t.Fatalf("%v n=%d: out[%d] = %v with sixteen-row tiles, %v with eight-row ones", typ, n, i, v[i], a[i])
				}
			}
			if q.q[0] != 127 || q.q[1] != -127 {
				t.Fatalf("activations %d %d, want 127 -127", q.q[0], q.q[1])
			}
			if n == 3 { // negative control: the last block's next-to-last vector of weights changed
				vec := m16.packed[len(m16.packed)-128 : len(m16.packed)-64]
				for i := range vec {
					vec[i] ^= 0x11
				}
				tiles(m16, &q, 0, (rows+15)/16, n, v)
				for i := range vec {
					vec[i] ^= 0x11
				}
				same := true
				for i := range a {
					same = same && a[i] == v[i]
				}
				if same {
					t.Fatalf("%v: a changed weight byte changed no output", typ)
				}
			}
		}
	}
}

// TestKGroupBytes: the Go sizes of a repacked Q4_K, Q5_K and Q6_K group
// are the C ones.
func TestKGroupBytes(t *testing.T) {
	q4k, q5k, q6k := groupBytesC()
	if int64(q4k) != kGroupBytes(quant.Q4_K) || int64(q5k) != kGroupBytes(quant.Q5_K) || int64(q6k) != kGroupBytes(quant.Q6_K) {
		t.Fatalf("C packs %d, %d and %d bytes a group, Go sizes %d, %d and %d", q4k, q5k, q6k,
			kGroupBytes(quant.Q4_K), kGroupBytes(quant.Q5_K), kGroupBytes(quant.Q6_K))
	}
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
