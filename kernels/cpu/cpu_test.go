package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"arborist/kernels/quant"
)

// gaussian returns n standard normal values.
func gaussian(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

// quantized returns rows x cols standard normal weights stored as typ.
func quantized(t testing.TB, rng *rand.Rand, typ quant.Type, rows, cols int) []byte {
	t.Helper()
	rb, err := quant.RowBytes(typ, cols)
	if err != nil {
		t.Fatal(err)
	}
	w := make([]byte, rb*rows)
	if err := quant.Quantize(typ, gaussian(rng, rows*cols), w); err != nil {
		t.Fatal(err)
	}
	return w
}

// tolerance is how far a product of cols unit Gaussians may stray from the
// float64 reference: the |dot| scale, sqrt(cols), times 1e-4, or times 0.05
// for types whose activations are rounded to 8 bits (about 10 standard
// deviations of that rounding).
func tolerance(typ quant.Type, cols int) float64 {
	tol := 1e-4
	if usesQ8(typ) {
		tol = 0.05
	}
	return tol * math.Sqrt(float64(cols))
}

// refMatMul is the reference: dequantise each weight row and accumulate the
// dot product in float64.
func refMatMul(out []float32, t quant.Type, w []byte, rows, cols int, x []float32, n int) {
	rb, _ := quant.RowBytes(t, cols)
	row := make([]float32, cols)
	for o := 0; o < rows; o++ {
		if err := quant.Dequantize(t, w[o*rb:(o+1)*rb], row); err != nil {
			panic(err)
		}
		for r := 0; r < n; r++ {
			var s float64
			for i := 0; i < cols; i++ {
				s += float64(row[i]) * float64(x[r*cols+i])
			}
			out[r*rows+o] = float32(s)
		}
	}
}

// TestMatMulMatchesReference runs every weight type against the reference at
// odd sizes and 1..67 activation rows. Output buffers carry NaN sentinels past
// the end to catch out-of-bounds writes. Types that quantise activations to
// 8 bits are held to a tolerance relative to the row's magnitude.
func TestMatMulMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	be := New(3)
	defer be.Close()
	for _, typ := range quant.SupportedTypes() {
		worst := 0.0 // largest |error| relative to the row scale sqrt(cols), printed with -v
		cols := 3 * quant.QKK
		if typ.BlockSize() == 1 {
			cols = 37
		} else if typ.BlockSize() == quant.QK {
			cols = 7 * quant.QK
		}
		for _, rows := range []int{1, 5, 67} {
			for _, n := range []int{1, 2, 7, 67} {
				name := fmt.Sprintf("%s/rows=%d/n=%d", typ, rows, n)
				w := quantized(t, rng, typ, rows, cols)
				x := gaussian(rng, n*cols)
				m, err := be.NewMatrix(typ, w, rows, cols)
				if err != nil {
					t.Fatal(err)
				}
				const guard = 5
				got := make([]float32, n*rows+guard)
				for i := range got {
					got[i] = float32(math.NaN())
				}
				be.MatMul(got, m, x, n)
				want := make([]float32, n*rows)
				refMatMul(want, typ, w, rows, cols, x, n)
				tol := tolerance(typ, cols)
				for i := range want {
					d := math.Abs(float64(got[i] - want[i]))
					if !(d <= tol) {
						t.Fatalf("%s: out[%d] = %v, want %v (diff %g > %g)", name, i, got[i], want[i], d, tol)
					}
					worst = max(worst, d/math.Sqrt(float64(cols)))
				}
				for i := n * rows; i < len(got); i++ {
					if !math.IsNaN(float64(got[i])) {
						t.Fatalf("%s: wrote past the end at %d", name, i)
					}
				}
			}
		}
		t.Logf("%s (%s kernels): max |error| against float64 %.2e x sqrt(cols), tolerance %.0e", typ, Kernels(), worst, tolerance(typ, cols)/math.Sqrt(float64(cols)))
	}
}

// TestParallelMatchesSerial checks that splitting across workers changes
// nothing: one thread and four threads give bit-identical results.
func TestParallelMatchesSerial(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	rows, cols, n := 301, 256, 3
	w := quantized(t, rng, quant.Q8_0, rows, cols)
	x := gaussian(rng, n*cols)
	var outs [][]float32
	for _, th := range []int{1, 4} {
		be := New(th)
		m, _ := be.NewMatrix(quant.Q8_0, w, rows, cols)
		out := make([]float32, n*rows)
		be.MatMul(out, m, x, n)
		be.Close()
		outs = append(outs, out)
	}
	for i := range outs[0] {
		if outs[0][i] != outs[1][i] {
			t.Fatalf("out[%d]: 1 thread %v, 4 threads %v", i, outs[0][i], outs[1][i])
		}
	}
}

func TestNewMatrixErrors(t *testing.T) {
	if _, err := NewMatrix(quant.IQ2_XXS, make([]byte, 66), 1, 256); err == nil {
		t.Error("IQ2_XXS accepted")
	} else if !strings.Contains(err.Error(), "IQ2_XXS") {
		t.Errorf("IQ2_XXS refused without naming it: %v", err)
	}
	if _, err := NewMatrix(quant.Q8_0, make([]byte, 33), 1, 32); err == nil {
		t.Error("short data accepted")
	}
	if _, err := NewMatrix(quant.Q8_0, make([]byte, 34), 1, 33); err == nil {
		t.Error("partial block accepted")
	}
}

func TestParallelFor(t *testing.T) {
	be := New(4)
	defer be.Close()
	seen := make([]int, 1000)
	be.ParallelFor(len(seen), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			seen[i]++
		}
	})
	for i, c := range seen {
		if c != 1 {
			t.Fatalf("index %d visited %d times", i, c)
		}
	}
}

// BenchmarkMatMul times the 1376x512 product of the bench target's
// feed-forward (in cache) for every weight type at W = 1, 4, 8, 16, 32 and
// 64 activation rows, on the machine's cores: W = 1 is a decode step's
// product, the wider ones a verification pass's, so each kernel's gain from
// sharing its weights across tokens shows as GMAC/s (multiply-adds a
// second) per W.
func BenchmarkMatMul(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 8))
	rows, cols := 1376, 512
	for _, typ := range quant.SupportedTypes() {
		w := quantized(b, rng, typ, rows, cols)
		for _, n := range []int{1, 4, 8, 16, 32, 64} {
			b.Run(fmt.Sprintf("%s/n=%d", typ, n), func(b *testing.B) {
				be := New(DefaultThreads())
				defer be.Close()
				m, _ := be.NewMatrix(typ, w, rows, cols)
				x := gaussian(rng, n*cols)
				out := make([]float32, n*rows)
				b.SetBytes(int64(len(w)))
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					be.MatMul(out, m, x, n)
				}
				b.ReportMetric(float64(rows*cols*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
			})
		}
	}
}

// BenchmarkMatMulWide times a wide pass's products at the 1B shape's
// feed-forward sizes (8192 x 2048, the gate and up; 2048 x 8192, down),
// Q4_K and Q8_0, at 128 and 512 activation rows on the machine's cores,
// in GMAC/s: out of cache, split across the workers, as a prompt or a
// wide tree verifies.
func BenchmarkMatMulWide(b *testing.B) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, typ := range []quant.Type{quant.Q4_K, quant.Q8_0} {
		for _, shape := range [][2]int{{8192, 2048}, {2048, 8192}} {
			rows, cols := shape[0], shape[1]
			w := quantized(b, rng, typ, rows, cols)
			for _, n := range []int{128, 512} {
				b.Run(fmt.Sprintf("%s/%dx%d/n=%d", typ, rows, cols, n), func(b *testing.B) {
					be := New(DefaultThreads())
					defer be.Close()
					m, _ := be.NewMatrix(typ, w, rows, cols)
					x := gaussian(rng, n*cols)
					out := make([]float32, n*rows)
					be.MatMul(out, m, x, n)
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						be.MatMul(out, m, x, n)
					}
					b.ReportMetric(float64(rows*cols*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
				})
			}
		}
	}
}

// TestCKernelsMatchGo runs the C kernels (SIMD where the CPU has it) and the
// pure-Go kernels on the same inputs: both must agree to float rounding.
func TestCKernelsMatchGo(t *testing.T) {
	if !haveC {
		t.Skip("built without the C kernels")
	}
	t.Logf("kernels: %s", Kernels())
	rng := rand.New(rand.NewPCG(11, 12))
	be := New(2)
	defer be.Close()
	for _, typ := range quant.SupportedTypes() {
		rows, cols := 13, 2*quant.QKK
		for _, n := range []int{1, 3, 4, 9} {
			w := quantized(t, rng, typ, rows, cols)
			x := gaussian(rng, n*cols)
			m, _ := NewMatrix(typ, w, rows, cols)
			fromC := make([]float32, n*rows)
			be.MatMul(fromC, m, x, n)
			fromGo := make([]float32, n*rows)
			be.q8.quantize(x) // the Go quantiser, so only the kernels differ
			j := &matmulJob{b: be, out: fromGo, w: m, x: x, n: n}
			j.doGo(0, 0, rows)
			for i := range fromC {
				if d := math.Abs(float64(fromC[i] - fromGo[i])); d > 1e-3*math.Sqrt(float64(cols)) {
					t.Fatalf("%s n=%d: out[%d] C %v, Go %v", typ, n, i, fromC[i], fromGo[i])
				}
			}
		}
	}
}

// TestRowIndependentOfBatch: a row's product is bit for bit the same whether
// it is computed alone or among other rows (greedy speculative decoding
// compares a batched verification with one-token decoding).
func TestRowIndependentOfBatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	be := New(2)
	defer be.Close()
	for _, typ := range quant.SupportedTypes() {
		rows, cols := 19, 2*quant.QKK+quant.QKK/2
		if typ.BlockSize() == quant.QKK {
			cols = 3 * quant.QKK
		}
		w := quantized(t, rng, typ, rows, cols)
		m, _ := be.NewMatrix(typ, w, rows, cols)
		const n = 11 // tiles of 8, 4 and 3 rows
		x := gaussian(rng, n*cols)
		all := make([]float32, n*rows)
		be.MatMul(all, m, x, n)
		for r := 0; r < n; r++ {
			one := make([]float32, rows)
			be.MatMul(one, m, x[r*cols:(r+1)*cols], 1)
			for o := range one {
				if one[o] != all[r*rows+o] {
					t.Fatalf("%s: row %d output %d alone %v, in a batch of %d %v", typ, r, o, one[o], n, all[r*rows+o])
				}
			}
		}
	}
}

// TestQ8ActivationError measures what quantising the activations to 8 bits
// costs: for every type that runs on integer products, the RMS error of
// the outputs against the float64 reference, relative to the outputs' RMS,
// must stay under 1% (it measures about 0.5% on Gaussian inputs; printed
// with -v).
func TestQ8ActivationError(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	be := New(2)
	defer be.Close()
	for _, typ := range quant.SupportedTypes() {
		if !usesQ8(typ) {
			continue
		}
		rows, cols, n := 48, 4*quant.QKK, 3
		w := quantized(t, rng, typ, rows, cols)
		x := gaussian(rng, n*cols)
		m, _ := be.NewMatrix(typ, w, rows, cols)
		got := make([]float32, n*rows)
		be.MatMul(got, m, x, n)
		want := make([]float32, n*rows)
		refMatMul(want, typ, w, rows, cols, x, n)
		var se, ss float64
		for i := range want {
			d := float64(got[i] - want[i])
			se += d * d
			ss += float64(want[i]) * float64(want[i])
		}
		rel := math.Sqrt(se / ss)
		t.Logf("%s: RMS error from 8-bit activations %.3f%% of the outputs' RMS", typ, 100*rel)
		if rel > 0.01 {
			t.Errorf("%s: relative RMS error %.4f, want < 0.01", typ, rel)
		}
	}
}

// TestMatMul512Rows: a prefill-sized batch of 512 activation rows gives
// the reference's products for every type, so no index arithmetic
// overflows or skips a tile.
func TestMatMul512Rows(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	be := New(2)
	defer be.Close()
	const rows, cols, n = 5, quant.QKK, 512
	x := gaussian(rng, n*cols)
	for _, typ := range quant.SupportedTypes() {
		w := quantized(t, rng, typ, rows, cols)
		m, _ := be.NewMatrix(typ, w, rows, cols)
		got := make([]float32, n*rows)
		be.MatMul(got, m, x, n)
		want := make([]float32, n*rows)
		refMatMul(want, typ, w, rows, cols, x, n)
		tol := tolerance(typ, cols)
		for i := range want {
			if d := math.Abs(float64(got[i] - want[i])); !(d <= tol) {
				t.Fatalf("%s: out[%d] = %v, want %v", typ, i, got[i], want[i])
			}
		}
	}
}

// TestQ8KernelsExact checks the integer kernels' layouts tightly: against
// the float64 reference applied to the activations as the kernels see them
// (rounded to 8 bits per block), every quantised type must agree to float
// rounding, so a wrong bit, scale or table entry in any kernel family
// shows up far above the tolerance, which the 8-bit rounding of
// TestMatMulMatchesReference would not guarantee.
func TestQ8KernelsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 62))
	be := New(2)
	defer be.Close()
	for _, typ := range quant.SupportedTypes() {
		if !usesQ8(typ) {
			continue
		}
		rows, cols := 7, 3*quant.QKK
		worst := 0.0
		for _, n := range []int{1, 2, 3, 4, 5, 8, 9} {
			w := quantized(t, rng, typ, rows, cols)
			x := gaussian(rng, n*cols)
			var q q8Buf
			q.quantize(x)
			xq := make([]float32, len(x))
			for i := range xq {
				xq[i] = q.d[i/quant.QK] * float32(q.q[i])
			}
			m, _ := be.NewMatrix(typ, w, rows, cols)
			got := make([]float32, n*rows)
			be.MatMul(got, m, x, n)
			want := make([]float32, n*rows)
			refMatMul(want, typ, w, rows, cols, xq, n)
			for i := range want {
				d := math.Abs(float64(got[i] - want[i]))
				if !(d <= 1e-4*math.Sqrt(float64(cols))) {
					t.Fatalf("%s n=%d (%s): out[%d] = %v, want %v on the 8-bit activations", typ, n, Kernels(), i, got[i], want[i])
				}
				worst = max(worst, d/math.Sqrt(float64(cols)))
			}
		}
		t.Logf("%s (%s kernels): max |error| against float64 on the 8-bit activations %.2e x sqrt(cols)", typ, Kernels(), worst)
	}
}

// TestReadSum: the bandwidth probe's read depends on every word, in its
// four streams and in the tail past them, whatever the length.
func TestReadSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, n := range []int{16, 48, 64, 80, 1024, 1040, 4096 + 48} {
		p := make([]uint64, n)
		for i := range p {
			p[i] = rng.Uint64()
		}
		want := uint64(0)
		for _, v := range p {
			want ^= v
		}
		if got := ReadSum(p); got != want {
			t.Fatalf("%d words: %x, want %x", n, got, want)
		}
		for _, i := range []int{0, n / 4, n/2 + 1, n - 1} {
			p[i] ^= 1 << (i % 64)
			if ReadSum(p) == want {
				t.Fatalf("%d words: word %d changed and the sum did not", n, i)
			}
			p[i] ^= 1 << (i % 64)
		}
	}
}
