//go:build cgo && !purego

package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"arborist/kernels/quant"
)

// TestQ4_0EightRows: a Q4_0 matrix whose rows come in eights is repacked
// where the AVX2 kernels run, and its product agrees with the Go kernel on
// the original layout; each output equals, bit for bit, what it is when
// its activation row is multiplied alone and when one thread does all
// rows (greedy losslessness rests on both).
func TestQ4_0EightRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	rows, cols := 24, 512
	w := quantized(t, rng, quant.Q4_0, rows, cols)
	m, err := NewMatrix(quant.Q4_0, w, rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	if (m.packed != nil) != (simdLevel >= 1) {
		t.Fatalf("repacked %v with SIMD level %d", m.packed != nil, simdLevel)
	}
	odd, _ := NewMatrix(quant.Q4_0, quantized(t, rng, quant.Q4_0, 13, cols), 13, cols)
	if odd.packed != nil {
		t.Fatal("13 rows were repacked")
	}
	be2, be1 := New(2), New(1)
	defer be2.Close()
	defer be1.Close()
	for _, n := range []int{1, 2, 3, 4, 5, 9} {
		x := gaussian(rng, n*cols)
		got := make([]float32, n*rows)
		be2.MatMul(got, m, x, n)
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
