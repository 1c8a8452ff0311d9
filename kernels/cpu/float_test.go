//go:build cgo && !purego

package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"arborist/kernels/quant"
)

// TestFloatTilesAgree: the float products' 512-bit tiles (four rows of
// weights by three of activations) give the AVX2 tiles' bits, for F32, F16
// and BF16, with row and activation counts off the tiles and widths with
// a remaining eight and a remaining few values; and a row's result is the
// same alone as in the batch.
func TestFloatTilesAgree(t *testing.T) {
	if simdLevel < 2 {
		t.Skipf("SIMD level %d: no 512-bit float tiles to compare", simdLevel)
	}
	rng := rand.New(rand.NewPCG(51, 52))
	for _, typ := range []quant.Type{quant.F32, quant.F16, quant.BF16} {
		for _, shape := range [][3]int{{9, 75, 7}, {13, 64, 1}, {4, 43, 3}, {6, 32, 5}, {17, 5, 2}} {
			rows, cols, n := shape[0], shape[1], shape[2]
			w := quantized(t, rng, typ, rows, cols)
			m, err := NewMatrix(typ, w, rows, cols)
			if err != nil {
				t.Fatal(err)
			}
			x := gaussian(rng, n*cols)
			wide, narrow := make([]float32, n*rows), make([]float32, n*rows)
			mmFloatAt(2, m, x, n, wide)
			mmFloatAt(1, m, x, n, narrow)
			for i := range wide {
				if math.Float32bits(wide[i]) != math.Float32bits(narrow[i]) {
					t.Fatalf("%s %dx%d n=%d: out[%d] 512-bit %v, AVX2 %v", typ, rows, cols, n, i, wide[i], narrow[i])
				}
			}
			for r := 0; r < n; r++ {
				one := make([]float32, rows)
				mmFloatAt(2, m, x[r*cols:(r+1)*cols], 1, one)
				for o, v := range one {
					if math.Float32bits(v) != math.Float32bits(wide[r*rows+o]) {
						t.Fatalf("%s %dx%d n=%d: row %d output %d alone %v, in the batch %v", typ, rows, cols, n, r, o, v, wide[r*rows+o])
					}
				}
			}
		}
	}
}
