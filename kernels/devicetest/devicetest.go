// Package devicetest holds every kernels.Device to the same float64
// references, primitive by primitive, as gonum's testblas holds every BLAS
// implementation to one suite: a backend's test calls Run with a
// constructor, and the CPU backend, the CUDA backend and any later one pass
// or fail the same checks. The model-level suite (whole forward passes,
// the shared conformance models, greedy identity of every strategy) builds
// on these primitives and lives above, in engine/model.
//
// Fake, a float64 Device that records its calls, lets tests above the
// backend prove that they reach activations and the KV cache only through
// the Device interface.
package devicetest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"arborist/kernels"
	"arborist/kernels/quant"
)

// Options adjusts Run to a backend.
type Options struct {
	// Types are the weight types to check; nil means every type
	// quant.SupportedTypes lists. A Device must refuse a type it does
	// not compute (NewMatrix returns an error), never compute it wrong.
	Types []quant.Type
	// Tolerance bounds |got - want| of a product of cols unit Gaussians
	// with weights of type t; nil means DefaultTolerance.
	Tolerance func(t quant.Type, cols int) float64
	// NotBatchExact relaxes the rule that a row computes the same bits
	// alone as inside a batch. Greedy speculative decoding is token-for-
	// token lossless only when verification rows equal decode rows, so a
	// device that sets it must say so where it is registered.
	NotBatchExact bool
}

// DefaultTolerance: 1e-4 x sqrt(cols) for F32 weights, 1e-3 x sqrt(cols)
// for F16 and BF16 (room for half-precision activations on tensor cores),
// and 0.05 x sqrt(cols) for the quantised types, whose activations engines
// round to 8 bits (about ten standard deviations of that rounding).
func DefaultTolerance(t quant.Type, cols int) float64 {
	tol := 0.05
	switch t {
	case quant.F32:
		tol = 1e-4
	case quant.F16, quant.BF16:
		tol = 1e-3
	}
	return tol * math.Sqrt(float64(cols))
}

// Run checks the device that newDev returns (one per subtest; Run closes
// it) against the float64 references.
func Run(t *testing.T, newDev func(t *testing.T) kernels.Device, o Options) {
	if o.Types == nil {
		o.Types = quant.SupportedTypes()
	}
	if o.Tolerance == nil {
		o.Tolerance = DefaultTolerance
	}
	sub := func(name string, fn func(t *testing.T, d kernels.Device, rng *rand.Rand)) {
		t.Run(name, func(t *testing.T) {
			d := newDev(t)
			defer d.Close()
			fn(t, d, rand.New(rand.NewPCG(uint64(len(name)), 7)))
		})
	}
	sub("Tensors", testTensors)
	sub("MatMul", func(t *testing.T, d kernels.Device, rng *rand.Rand) { testMatMul(t, d, rng, o) })
	sub("Embed", func(t *testing.T, d kernels.Device, rng *rand.Rand) { testEmbed(t, d, rng, o) })
	sub("Elementwise", testElementwise)
	sub("RoPE", testRoPE)
	for _, kt := range []quant.Type{quant.F32, quant.F16} {
		sub("Attention/"+kt.String(), func(t *testing.T, d kernels.Device, rng *rand.Rand) { testAttention(t, d, rng, kt, o) })
		sub("Compact/"+kt.String(), func(t *testing.T, d kernels.Device, rng *rand.Rand) { testCompact(t, d, rng, kt) })
	}
	sub("GatherArgmax", testGatherArgmax)
	for _, kt := range []quant.Type{quant.F32, quant.F16} {
		sub("View/"+kt.String(), func(t *testing.T, d kernels.Device, rng *rand.Rand) { testView(t, d, rng, kt) })
	}
}

// helpers shared by the checks

func gauss(rng *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * scale)
	}
	return x
}

func to64(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

func mustTensor(t *testing.T, d kernels.Device, vals []float32) kernels.Tensor {
	t.Helper()
	x, err := d.NewTensor(len(vals))
	if err != nil {
		t.Fatalf("NewTensor(%d): %v", len(vals), err)
	}
	d.Upload(x, vals)
	return x
}

func download(d kernels.Device, x kernels.Tensor, n int) []float32 {
	out := make([]float32, n)
	d.Download(out, x)
	return out
}

// near fails the test at the first value off by more than tol*max(1,|want|).
func near(t *testing.T, what string, got []float32, want []float64, tol float64) {
	t.Helper()
	for i := range want {
		if d := math.Abs(float64(got[i]) - want[i]); !(d <= tol*math.Max(1, math.Abs(want[i]))) {
			t.Fatalf("%s: value %d = %v, want %v (off by %.3g, tolerance %.3g)", what, i, got[i], want[i], d, tol)
		}
	}
}

func same(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: value %d is %v, but %v when computed in the batch", what, i, got[i], want[i])
		}
	}
}

func testTensors(t *testing.T, d kernels.Device, rng *rand.Rand) {
	x, err := d.NewTensor(1000)
	if err != nil {
		t.Fatal(err)
	}
	if x.Len() != 1000 {
		t.Fatalf("Len() = %d, want 1000", x.Len())
	}
	for i, v := range download(d, x, 1000) {
		if v != 0 {
			t.Fatalf("a new tensor holds %v at %d, want zeros", v, i)
		}
	}
	vals := gauss(rng, 700, 3)
	d.Upload(x, vals)
	same(t, "Upload then Download", download(d, x, 700), vals)
	if _, err := d.NewTensor(1 << 50); err == nil {
		t.Fatal("NewTensor(1<<50) succeeded; a device must refuse what it cannot hold")
	}
	if _, err := d.NewTensor(-1); err == nil {
		t.Fatal("NewTensor(-1) succeeded")
	}
	if _, err := d.NewKV(2, 8, 16, quant.Q4_0); err == nil {
		t.Fatal("NewKV with Q4_0 succeeded; only F32 and F16 caches are defined")
	}
	if _, err := d.NewKV(1<<20, 1<<20, 1<<12, quant.F32); err == nil {
		t.Fatal("a 16 PiB KV cache was allocated")
	}
	v, err := d.NewVector([]float32{1, -2, 3})
	if err != nil {
		t.Fatal(err)
	}
	same(t, "NewVector", download(d, v, 3), []float32{1, -2, 3})
}

// weights makes a rows x cols matrix of type typ from Gaussians, returning
// its bytes and the float64 dequantised rows the reference multiplies.
func weights(t *testing.T, rng *rand.Rand, typ quant.Type, rows, cols int) ([]byte, [][]float64) {
	t.Helper()
	rb, err := quant.RowBytes(typ, cols)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, rows*rb)
	if err := quant.Quantize(typ, gauss(rng, rows*cols, 1), data); err != nil {
		t.Fatal(err)
	}
	w, err := dequantRows(typ, data, rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	return data, w
}

func testMatMul(t *testing.T, d kernels.Device, rng *rand.Rand, o Options) {
	const rows = 37
	for _, typ := range o.Types {
		for _, cols := range []int{256, 512} {
			data, w := weights(t, rng, typ, rows, cols)
			m, err := d.NewMatrix(typ, data, rows, cols)
			if err != nil {
				t.Fatalf("%s: NewMatrix: %v", typ, err)
			}
			if m.Rows() != rows || m.Cols() != cols || m.Type() != typ {
				t.Fatalf("%s: matrix says %dx%d %s", typ, m.Rows(), m.Cols(), m.Type())
			}
			const n = 9
			xs := gauss(rng, n*cols, 1)
			x := mustTensor(t, d, xs)
			out, err := d.NewTensor(n * rows)
			if err != nil {
				t.Fatal(err)
			}
			d.MatMulT(out, m, x, n)
			got := download(d, out, n*rows)
			want := refMatMul(w, to64(xs), n)
			tol := o.Tolerance(typ, cols)
			for i := range want {
				if diff := math.Abs(float64(got[i]) - want[i]); !(diff <= tol) {
					t.Fatalf("%s %dx%d: out[%d] = %v, want %v (off by %.3g > %.3g)", typ, rows, cols, i, got[i], want[i], diff, tol)
				}
			}
			host := make([]float32, n*rows)
			d.MatMul(host, m, xs, n)
			same(t, fmt.Sprintf("%s: host MatMul against MatMulT", typ), host, got)
			if o.NotBatchExact {
				continue
			}
			for _, r := range []int{0, 4, n - 1} {
				one := mustTensor(t, d, xs[r*cols:(r+1)*cols])
				d.MatMulT(out, m, one, 1)
				same(t, fmt.Sprintf("%s: row %d alone", typ, r), download(d, out, rows), got[r*rows:(r+1)*rows])
			}
		}
	}
}

func testEmbed(t *testing.T, d kernels.Device, rng *rand.Rand, o Options) {
	const vocab, dim = 11, 256
	for _, typ := range o.Types {
		data, w := weights(t, rng, typ, vocab, dim)
		m, err := d.NewMatrix(typ, data, vocab, dim)
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		ids := []int{3, 0, 10, 3}
		x, err := d.NewTensor(len(ids) * dim)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Embed(x, m, ids); err != nil {
			t.Fatalf("%s: Embed: %v", typ, err)
		}
		got := download(d, x, len(ids)*dim)
		for i, id := range ids {
			near(t, fmt.Sprintf("%s: embedding of %d", typ, id), got[i*dim:(i+1)*dim], w[id], 1e-6)
		}
		if err := d.Embed(x, m, []int{vocab}); err == nil {
			t.Fatalf("%s: Embed of id %d in a table of %d succeeded", typ, vocab, vocab)
		}
		if err := d.Embed(x, m, []int{-1}); err == nil {
			t.Fatalf("%s: Embed of id -1 succeeded", typ)
		}
	}
}

func testElementwise(t *testing.T, d kernels.Device, rng *rand.Rand) {
	const rows, dim = 3, 96
	n := rows * dim
	xs, ws := gauss(rng, n, 2), gauss(rng, dim, 1)
	xs[5], xs[6] = 40, -40 // large values through silu, gelu and tanh
	x, w := mustTensor(t, d, xs), mustTensor(t, d, ws)

	out, err := d.NewTensor(n)
	if err != nil {
		t.Fatal(err)
	}
	d.RMSNorm(out, x, w, rows, dim, 1e-5)
	want := make([]float64, n)
	refRMSNorm(want, to64(xs), to64(ws), rows, dim, float64(float32(1e-5)))
	near(t, "RMSNorm", download(d, out, n), want, 1e-5)
	d.RMSNorm(x, x, w, rows, dim, 1e-5) // in place
	near(t, "RMSNorm in place", download(d, x, n), want, 1e-5)

	d.Upload(x, xs)
	d.AddRow(x, w, rows, dim)
	for r := 0; r < rows; r++ {
		for i := 0; i < dim; i++ {
			want[r*dim+i] = float64(xs[r*dim+i]) + float64(ws[i])
		}
	}
	near(t, "AddRow", download(d, x, n), want, 1e-6)

	ys := gauss(rng, n, 1)
	y := mustTensor(t, d, ys)
	d.Upload(x, xs)
	d.Add(x, y, n-1)
	for i := range want {
		want[i] = float64(xs[i])
		if i < n-1 {
			want[i] += float64(ys[i])
		}
	}
	near(t, "Add (all but the last value)", download(d, x, n), want, 1e-6)

	d.Upload(x, xs)
	d.Scale(x, n, 0.37)
	for i := range want {
		want[i] = float64(xs[i]) * float64(float32(0.37))
	}
	near(t, "Scale", download(d, x, n), want, 1e-6)

	d.Upload(x, xs)
	d.Softcap(x, n, 5)
	for i := range want {
		want[i] = 5 * math.Tanh(float64(xs[i])/5)
	}
	near(t, "Softcap", download(d, x, n), want, 1e-5)

	for _, useGELU := range []bool{false, true} {
		d.Upload(x, xs)
		d.GLU(x, y, n, useGELU)
		for i := range want {
			a := silu(float64(xs[i]))
			if useGELU {
				a = gelu(float64(xs[i]))
			}
			want[i] = a * float64(ys[i])
		}
		near(t, fmt.Sprintf("GLU (gelu %v)", useGELU), download(d, x, n), want, 1e-5)
	}
}

func testRoPE(t *testing.T, d kernels.Device, rng *rand.Rand) {
	for _, s := range []kernels.RoPEShape{
		{Heads: 4, HeadDim: 16, RopeDim: 16}, {Heads: 4, HeadDim: 16, RopeDim: 16, Neox: true},
		{Heads: 3, HeadDim: 32, RopeDim: 8, Neox: true}, {Heads: 2, HeadDim: 64, RopeDim: 32},
	} {
		const rows = 5
		n := rows * s.Heads * s.HeadDim
		xs := gauss(rng, n, 1)
		half := s.RopeDim / 2
		cos, sin := make([]float32, rows*half), make([]float32, rows*half)
		for i := range cos {
			a := rng.Float64() * 2 * math.Pi
			cos[i], sin[i] = float32(math.Cos(a)), float32(math.Sin(a))
		}
		x := mustTensor(t, d, xs)
		d.RoPE(x, rows, s, cos, sin)
		want := to64(xs)
		refRoPE(want, rows, s, cos, sin)
		near(t, fmt.Sprintf("RoPE %+v", s), download(d, x, n), want, 1e-5)
	}
}

// kvCase fills a cache of type kt with slots rows of random keys and
// values and returns the cache with the values it should hold.
func kvCase(t *testing.T, d kernels.Device, rng *rand.Rand, kt quant.Type, layers, slots, width int) (kernels.KV, [][]float64, [][]float64) {
	t.Helper()
	kv, err := d.NewKV(layers, slots+8, width, kt)
	if err != nil {
		t.Fatalf("NewKV(%s): %v", kt, err)
	}
	if kv.Layers() != layers || kv.Cap() != slots+8 || kv.Width() != width || kv.Type() != kt {
		t.Fatalf("NewKV: got %d layers x %d slots x %d %s", kv.Layers(), kv.Cap(), kv.Width(), kv.Type())
	}
	if want := uint64(layers*(slots+8)*width*2) * uint64(kt.TypeSize()); kv.Bytes() < want {
		t.Fatalf("KV Bytes() = %d, less than the %d its rows need", kv.Bytes(), want)
	}
	ks, vs := make([][]float64, layers), make([][]float64, layers)
	for l := 0; l < layers; l++ {
		kf, vf := gauss(rng, slots*width, 1), gauss(rng, slots*width, 1)
		// store in two pieces, to check StoreKV's slot offset
		cut := slots / 3
		for _, p := range [][2]int{{0, cut}, {cut, slots}} {
			k := mustTensor(t, d, kf[p[0]*width:p[1]*width])
			v := mustTensor(t, d, vf[p[0]*width:p[1]*width])
			d.StoreKV(kv, l, p[0], k, v, p[1]-p[0])
		}
		ks[l], vs[l] = make([]float64, slots*width), make([]float64, slots*width)
		for i := range ks[l] {
			ks[l][i], vs[l][i] = roundKV(kt, float64(kf[i])), roundKV(kt, float64(vf[i]))
		}
	}
	return kv, ks, vs
}

// pathKV is a cache whose layer layer-1 holds the rows slots of ks and vs
// (already rounded to kt, so storing them again keeps their bits) one
// after another.
func pathKV(t *testing.T, d kernels.Device, kt quant.Type, layers, width int, slots []int, ks, vs []float64) kernels.KV {
	t.Helper()
	kv, err := d.NewKV(layers, len(slots)+8, width, kt)
	if err != nil {
		t.Fatal(err)
	}
	k, v := make([]float32, len(slots)*width), make([]float32, len(slots)*width)
	for i, sl := range slots {
		for j := 0; j < width; j++ {
			k[i*width+j], v[i*width+j] = float32(ks[sl*width+j]), float32(vs[sl*width+j])
		}
	}
	d.StoreKV(kv, 1, 0, mustTensor(t, d, k), mustTensor(t, d, v), len(slots))
	return kv
}

// treeMask: row i of n sees the past and its ancestors in a binary tree.
func treeMask(past, n int) []bool {
	total := past + n
	m := make([]bool, n*total)
	for i := 0; i < n; i++ {
		for j := 0; j < past; j++ {
			m[i*total+j] = true
		}
		for a := i; ; a = (a - 1) / 2 {
			m[i*total+past+a] = true
			if a == 0 {
				break
			}
		}
	}
	return m
}

func testAttention(t *testing.T, d kernels.Device, rng *rand.Rand, kt quant.Type, o Options) {
	for _, c := range []struct {
		heads, kvHeads, hd, past, n int
		softcap                     float32
	}{
		{8, 8, 8, 0, 5, 0}, {64, 32, 8, 37, 9, 0}, {4, 2, 16, 21, 6, 0}, {8, 2, 128, 70, 3, 0},
		{6, 2, 64, 40, 4, 0}, {4, 4, 72, 11, 2, 0}, {4, 2, 32, 19, 4, 30},
		// heads of 8 over many rows: blocks of query vectors that end
		// inside a row's group of heads
		{12, 4, 8, 23, 13, 0}, {64, 32, 8, 3, 40, 0},
	} {
		s := kernels.AttnShape{Heads: c.heads, KVHeads: c.kvHeads, HeadDim: c.hd, Scale: float32(1 / math.Sqrt(float64(c.hd))), Softcap: c.softcap}
		width, qd, total := c.kvHeads*c.hd, c.heads*c.hd, c.past+c.n
		kv, ks, vs := kvCase(t, d, rng, kt, 2, total, width)
		qs := gauss(rng, c.n*qd, 1)
		q := mustTensor(t, d, qs)
		out, err := d.NewTensor(c.n * qd)
		if err != nil {
			t.Fatal(err)
		}
		masks := map[string][]bool{"causal": nil, "tree-shaped": treeMask(c.past, c.n)}
		blind := treeMask(c.past, c.n)
		for j := 0; j < total; j++ {
			blind[(c.n-1)*total+j] = false // the last row sees nothing
		}
		masks["blind row"] = blind
		for name, mask := range masks {
			what := fmt.Sprintf("%s cache, %+v, %s mask", kt, c, name)
			d.Attention(out, q, kv, 1, c.past, c.n, mask, s)
			got := download(d, out, c.n*qd)
			near(t, what, got, refAttention(to64(qs), ks[1], vs[1], c.past, c.n, mask, s), 1e-4)
			if name == "blind row" {
				for i, v := range got[(c.n-1)*qd:] {
					if v != 0 {
						t.Fatalf("%s: a row that sees no slot has %v at %d, want zeros", what, v, i)
					}
				}
			}
			if !o.NotBatchExact && name == "tree-shaped" {
				// a tree row gives the bits of its path decoded alone: the
				// slots it sees, stored one after another in a cache of
				// their own, under the causal rule (greedy verification
				// of a tree is lossless only so)
				for i := 0; i < c.n; i++ {
					var vis []int
					for j := 0; j < total; j++ {
						if mask[i*total+j] {
							vis = append(vis, j)
						}
					}
					path := pathKV(t, d, kt, kv.Layers(), width, vis, ks[1], vs[1])
					one := mustTensor(t, d, qs[i*qd:(i+1)*qd])
					d.Attention(out, one, path, 1, len(vis)-1, 1, nil, s)
					same(t, fmt.Sprintf("%s: row %d against its path alone", what, i), download(d, out, qd), got[i*qd:(i+1)*qd])
					path.Free()
				}
			}
			if o.NotBatchExact || name != "causal" {
				continue
			}
			// each row alone (past+i cached slots, the causal rule) gives
			// the bits it gave in the batch
			for i := 0; i < c.n; i++ {
				one := mustTensor(t, d, qs[i*qd:(i+1)*qd])
				d.Attention(out, one, kv, 1, c.past+i, 1, nil, s)
				same(t, fmt.Sprintf("%s: row %d alone", what, i), download(d, out, qd), got[i*qd:(i+1)*qd])
			}
		}
		kv.Free()
	}
}

func testCompact(t *testing.T, d kernels.Device, rng *rand.Rand, kt quant.Type) {
	const layers, used, heads, hd = 3, 12, 2, 16
	width := heads * hd
	s := kernels.AttnShape{Heads: heads, KVHeads: heads, HeadDim: hd, Scale: 0.25}
	check := func(what string, kv kernels.KV, ks, vs [][]float64, slots []int) {
		t.Helper()
		qs := gauss(rng, heads*hd, 1)
		q := mustTensor(t, d, qs)
		out, _ := d.NewTensor(heads * hd)
		for l := 0; l < layers; l++ {
			k, v := make([]float64, len(slots)*width), make([]float64, len(slots)*width)
			for i, sl := range slots {
				copy(k[i*width:(i+1)*width], ks[l][sl*width:(sl+1)*width])
				copy(v[i*width:(i+1)*width], vs[l][sl*width:(sl+1)*width])
			}
			d.Attention(out, q, kv, l, len(slots)-1, 1, nil, s)
			near(t, fmt.Sprintf("%s, layer %d", what, l), download(d, out, heads*hd), refAttention(to64(qs), k, v, len(slots)-1, 1, nil, s), 1e-4)
		}
	}
	kv, ks, vs := kvCase(t, d, rng, kt, layers, used, width)
	prefix, err := d.NewKV(layers, used, width, kt)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.CopyKV(prefix, kv, 5); err != nil {
		t.Fatalf("CopyKV: %v", err)
	}
	check("CopyKV of 5 slots", prefix, ks, vs, []int{0, 1, 2, 3, 4})

	keep := []int{0, 1, 2, 7, 4, 11, 9} // in place, then out of order
	if err := d.Compact(kv, keep, used); err != nil {
		t.Fatalf("Compact: %v", err)
	}
	check(fmt.Sprintf("%s cache compacted to %v", kt, keep), kv, ks, vs, keep)
	if err := d.Compact(kv, []int{0, len(keep)}, len(keep)); err == nil {
		t.Fatal("Compact accepted a slot past the used ones")
	}
	// the copy is independent of the compacted original
	check("CopyKV after the source was compacted", prefix, ks, vs, []int{0, 1, 2, 3, 4})
	kv.Free()
	prefix.Free()
}

func testGatherArgmax(t *testing.T, d kernels.Device, rng *rand.Rand) {
	const rows, dim = 6, 50
	xs := gauss(rng, rows*dim, 1)
	xs[2*dim+7], xs[2*dim+30] = 9, 9 // a tie: the lower index wins
	x := mustTensor(t, d, xs)
	g, _ := d.NewTensor(3 * dim)
	pick := []int{4, 2, 4}
	d.Gather(g, x, pick, dim)
	got := download(d, g, 3*dim)
	for j, r := range pick {
		same(t, fmt.Sprintf("Gather row %d", r), got[j*dim:(j+1)*dim], xs[r*dim:(r+1)*dim])
	}
	am := make([]int, rows)
	d.Argmax(am, x, rows, dim)
	for r := 0; r < rows; r++ {
		best := 0
		for i := 1; i < dim; i++ {
			if xs[r*dim+i] > xs[r*dim+best] {
				best = i
			}
		}
		if am[r] != best {
			t.Fatalf("Argmax of row %d = %d, want %d", r, am[r], best)
		}
	}
	if am[2] != 7 {
		t.Fatalf("Argmax of a tied row = %d, want the lower index 7", am[2])
	}
}

// testView: a view is its tensor's values from an offset on, read and
// written through either, and StoreKV and Attention handed views of rows
// of shared tensors (several sequences' rows in one pass) give the bits
// they give on tensors of those rows alone, leaving the other rows as
// they were.
func testView(t *testing.T, d kernels.Device, rng *rand.Rand, kt quant.Type) {
	xs := gauss(rng, 100, 1)
	x := mustTensor(t, d, xs)
	v := d.View(x, 30, 20)
	if v.Len() != 20 {
		t.Fatalf("a view of 20 values has Len %d", v.Len())
	}
	same(t, "a view downloaded", download(d, v, 20), xs[30:50])
	ys := gauss(rng, 20, 1)
	d.Upload(v, ys[:10])
	d.Scale(d.View(x, 40, 10), 10, 2)
	want := slices.Clone(xs)
	copy(want[30:40], ys[:10])
	for i := 40; i < 50; i++ {
		want[i] *= 2
	}
	same(t, "a tensor written through its views", download(d, x, 100), want)

	// two sequences' rows in one pass: rows [0, 3) and [3, 7) of q, k, v,
	// each sequence with a cache of its own
	const heads, kvHeads, hd = 4, 2, 16
	s := kernels.AttnShape{Heads: heads, KVHeads: kvHeads, HeadDim: hd, Scale: 0.25}
	width, qd := kvHeads*hd, heads*hd
	seqs := []struct{ off, n, past int }{{0, 3, 5}, {3, 4, 9}}
	const rows = 7
	qs, ks, vs := gauss(rng, rows*qd, 1), gauss(rng, rows*width, 1), gauss(rng, rows*width, 1)
	q, k, vt := mustTensor(t, d, qs), mustTensor(t, d, ks), mustTensor(t, d, vs)
	att, err := d.NewTensor(rows * qd)
	if err != nil {
		t.Fatal(err)
	}
	for i, sq := range seqs {
		kv, _, _ := kvCase(t, d, rng, kt, 2, sq.past+sq.n, width)
		alone, _, _ := kvCase(t, d, rng, kt, 2, sq.past+sq.n, width)
		if err := d.CopyKV(alone, kv, sq.past); err != nil {
			t.Fatal(err)
		}
		mask := treeMask(sq.past, sq.n)
		// in the pass: views of the shared tensors at the sequence's rows
		d.StoreKV(kv, 1, sq.past, d.View(k, sq.off*width, sq.n*width), d.View(vt, sq.off*width, sq.n*width), sq.n)
		d.Attention(d.View(att, sq.off*qd, sq.n*qd), d.View(q, sq.off*qd, sq.n*qd), kv, 1, sq.past, sq.n, mask, s)
		// alone: tensors of its rows only
		one, err := d.NewTensor(sq.n * qd)
		if err != nil {
			t.Fatal(err)
		}
		d.StoreKV(alone, 1, sq.past, mustTensor(t, d, ks[sq.off*width:(sq.off+sq.n)*width]), mustTensor(t, d, vs[sq.off*width:(sq.off+sq.n)*width]), sq.n)
		d.Attention(one, mustTensor(t, d, qs[sq.off*qd:(sq.off+sq.n)*qd]), alone, 1, sq.past, sq.n, mask, s)
		got := download(d, att, rows*qd)
		same(t, fmt.Sprintf("%s cache, sequence %d: attention through views", kt, i), got[sq.off*qd:(sq.off+sq.n)*qd], download(d, one, sq.n*qd))
		if i == 0 {
			for j, g := range got[sq.n*qd:] {
				if g != 0 {
					t.Fatalf("%s cache: attention into a view of rows [0, %d) wrote %v at value %d after them", kt, sq.n, g, sq.n*qd+j)
				}
			}
		}
		kv.Free()
		alone.Free()
	}
}
