package cpu

import (
	"math/rand/v2"
	"testing"

	"arborist/kernels"
	"arborist/kernels/quant"
)

// TestMatMulMulti: several products of one input in one dispatch equal,
// bit for bit, one MatMul each, for matrices of different types (a
// repacked Q4_0, a K-quant, F16, a Q8_0 with rows off the eights) and row
// counts; matrices of different widths fall back to one MatMul each.
func TestMatMulMulti(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	cols := 512
	mk := func(typ quant.Type, rows int) *Matrix {
		m, err := NewMatrix(typ, quantized(t, rng, typ, rows, cols), rows, cols)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	be := New(2)
	defer be.Close()
	sets := [][]*Matrix{
		{mk(quant.Q4_0, 24), mk(quant.Q6_K, 16), mk(quant.Q8_0, 13)},
		{mk(quant.F16, 40), mk(quant.Q4_K, 72)},
		{mk(quant.Q8_0, 512), mk(quant.Q8_0, 256), mk(quant.Q8_0, 256)},
	}
	for si, set := range sets {
		for _, n := range []int{1, 3, 9} {
			x := gaussian(rng, n*cols)
			outs := make([]kernels.Tensor, len(set))
			ws := make([]kernels.Matrix, len(set))
			for i, w := range set {
				outs[i], ws[i] = Wrap(make([]float32, n*w.rows)), w
			}
			be.MatMulMulti(outs, ws, Wrap(x), n)
			for i, w := range set {
				want := make([]float32, n*w.rows)
				be.MatMul(want, w, x, n)
				for k, v := range Data(outs[i]) {
					if v != want[k] {
						t.Fatalf("set %d, n=%d, matrix %d (%s): out[%d] = %v, alone %v", si, n, i, w.typ, k, v, want[k])
					}
				}
			}
		}
	}
	// different widths: one MatMul each, same results
	a, b := mk(quant.Q8_0, 8), func() *Matrix {
		m, _ := NewMatrix(quant.Q8_0, quantized(t, rng, quant.Q8_0, 8, 256), 8, 256)
		return m
	}()
	x := gaussian(rng, 512)
	oa, ob := make([]float32, 8), make([]float32, 8)
	be.MatMulMulti([]kernels.Tensor{Wrap(oa), Wrap(ob)}, []kernels.Matrix{a, b}, Wrap(x), 1)
	wa, wb := make([]float32, 8), make([]float32, 8)
	be.MatMul(wa, a, x, 1)
	be.MatMul(wb, b, x, 1)
	for k := range wa {
		if oa[k] != wa[k] || ob[k] != wb[k] {
			t.Fatalf("mixed widths: %v %v, alone %v %v", oa[k], ob[k], wa[k], wb[k])
		}
	}
}

// TestMultiSplitsADecodeStep: a decode step's Q, K and V of a 512-wide
// model (512 + 256 + 256 rows), in one MatMulMulti, are split into chunks
// for every worker whatever the unit its matrices are repacked in (rows,
// eight-row groups, pairs of sixteen-row groups), while a 64-wide
// drafter's stay in one chunk on the calling thread.
func TestMultiSplitsADecodeStep(t *testing.T) {
	const threads = 2
	chunks := func(unit, rows, cols int) int {
		total := (rows + unit - 1) / unit
		chunk := chunkSize(total, grain(unit, cols, 1), threads)
		return (total + chunk - 1) / chunk
	}
	for _, unit := range []int{1, 8, 32} {
		if c := chunks(unit, 1024, 512); c < 2*threads {
			t.Errorf("units of %d rows: a 1024x512 decode product in %d chunks; want at least %d", unit, c, 2*threads)
		}
		if c := chunks(unit, 192, 64); c != 1 {
			t.Errorf("units of %d rows: a 192x64 drafter product in %d chunks; want 1", unit, c)
		}
	}
}
