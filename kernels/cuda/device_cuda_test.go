//go:build cuda

package cuda

// The GPU tests: every kernel against a float64 (or exact) reference
// computed here on the host, the CPU backend beside the matrix products,
// and batch-equals-sequential bit for bit. They run only where a GPU is
// (gorgonia.org/cu's package init exits the test binary when cuInit fails;
// scripts/device-check.sh runs the compiled binary on the GPU machine).

import (
	"math"
	"math/rand"
	"testing"

	"arborist/kernels"
	"arborist/kernels/cpu"
	"arborist/kernels/quant"
)

func newDevice(t *testing.T) *Device {
	t.Helper()
	skipStandIn(t)
	d, err := New(0)
	if err != nil {
		t.Skipf("no usable CUDA device: %v", err)
	}
	t.Cleanup(d.Close)
	t.Logf("device: %s", d.Describe())
	return d
}

// skipStandIn skips a test of what the kernels compute on the stand-in
// driver, which runs none of them (TestLaunchBudget counts launches there).
func skipStandIn(t *testing.T) {
	t.Helper()
	if StandIn() {
		t.Skip("the stand-in driver runs no kernels")
	}
}

func randVec(r *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64() * scale)
	}
	return v
}

func upload(t *testing.T, d *Device, v []float32) kernels.Tensor {
	t.Helper()
	x, err := d.NewVector(v)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func download(d *Device, x kernels.Tensor, n int) []float32 {
	v := make([]float32, n)
	d.Download(v, x)
	return v
}

// encode quantises w (rows x cols) to type t and returns the bytes and the
// dequantised weights the reference uses.
func encode(t *testing.T, typ quant.Type, w []float32, rows, cols int) ([]byte, []float32) {
	t.Helper()
	rb, err := quant.RowBytes(typ, cols)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, rows*rb)
	deq := make([]float32, rows*cols)
	for o := 0; o < rows; o++ {
		if err := quant.Quantize(typ, w[o*cols:(o+1)*cols], data[o*rb:(o+1)*rb]); err != nil {
			t.Fatal(err)
		}
		if err := quant.Dequantize(typ, data[o*rb:(o+1)*rb], deq[o*cols:(o+1)*cols]); err != nil {
			t.Fatal(err)
		}
	}
	return data, deq
}

func TestMatMulAgainstReference(t *testing.T) {
	d := newDevice(t)
	cb := cpu.New(2)
	defer cb.Close()
	r := rand.New(rand.NewSource(1))
	for _, typ := range WeightTypes {
		for _, sh := range [][2]int{{96, 256}, {64, 512}, {40, 256}} {
			rows, cols := sh[0], sh[1]
			data, deq := encode(t, typ, randVec(r, rows*cols, 0.05), rows, cols)
			m, err := d.NewMatrix(typ, data, rows, cols)
			if err != nil {
				t.Fatal(err)
			}
			cm, err := cb.NewMatrix(typ, data, rows, cols)
			if err != nil {
				t.Fatal(err)
			}
			const maxN = 37
			x := randVec(r, maxN*cols, 1)
			all := make([]float32, maxN*rows)
			d.MatMul(all, m, x, maxN)
			ref := make([]float32, maxN*rows)
			cb.MatMul(ref, cm, x, maxN)
			var worst, cworst float64
			for i := 0; i < maxN; i++ {
				for o := 0; o < rows; o++ {
					var s, mag float64
					for k := 0; k < cols; k++ {
						s += float64(deq[o*cols+k]) * float64(x[i*cols+k])
						mag += math.Abs(float64(deq[o*cols+k]) * float64(x[i*cols+k]))
					}
					e := math.Abs(float64(all[i*rows+o])-s) / (mag + 1e-6)
					worst = max(worst, e)
					cworst = max(cworst, math.Abs(float64(all[i*rows+o]-ref[i*rows+o]))/(mag+1e-6))
				}
			}
			// 8-bit activations cost up to about 1/127 of the magnitude;
			// F16/BF16 on tensor cores round x to the weight type
			tol := 1e-5
			switch {
			case quantised(typ):
				tol = 1e-2
			case typ == quant.F16:
				tol = 2e-3
			case typ == quant.BF16:
				tol = 1e-2
			}
			if worst > tol || cworst > 2*tol {
				t.Errorf("%v %dx%d: relative error %.3g vs float64, %.3g vs the CPU backend (tolerance %.g)", typ, rows, cols, worst, cworst, tol)
			}
			// batch equals sequential, bit for bit, for every width
			for _, n := range []int{1, 2, 8, 9, 16, 17} {
				got := make([]float32, n*rows)
				for i := 0; i+n <= maxN; i += n {
					d.MatMul(got, m, x[i*cols:], n)
					for j := range got {
						if got[j] != all[i*rows+j] {
							t.Fatalf("%v %dx%d: width %d differs from width %d at row %d", typ, rows, cols, n, maxN, i+j/rows)
						}
					}
				}
			}
		}
	}
}

// TestMatMulMulti: products sharing one input, of every weight type and of
// shapes on and off the tensor-core path, give through MatMulMulti (which
// prepares the input once for several) what MatMulT gives each, bit for
// bit, for every width.
func TestMatMulMulti(t *testing.T) {
	d := newDevice(t)
	r := rand.New(rand.NewSource(11))
	const cols = 256
	var ws []kernels.Matrix
	for _, typ := range WeightTypes {
		for _, rows := range []int{48, 40} { // 40: not whole tensor-core tiles
			data, _ := encode(t, typ, randVec(r, rows*cols, 0.05), rows, cols)
			m, err := d.NewMatrix(typ, data, rows, cols)
			if err != nil {
				t.Fatal(err)
			}
			ws = append(ws, m)
		}
	}
	for _, n := range []int{1, 5, 17} {
		x := upload(t, d, randVec(r, n*cols, 1))
		outs := make([]kernels.Tensor, len(ws))
		for i, w := range ws {
			o, err := d.NewTensor(n * w.Rows())
			if err != nil {
				t.Fatal(err)
			}
			outs[i] = o
		}
		d.MatMulMulti(outs, ws, x, n)
		for i, w := range ws {
			one, err := d.NewTensor(n * w.Rows())
			if err != nil {
				t.Fatal(err)
			}
			d.MatMulT(one, w, x, n)
			got, want := download(d, outs[i], n*w.Rows()), download(d, one, n*w.Rows())
			for j := range want {
				if got[j] != want[j] {
					t.Fatalf("%v %dx%d width %d: value %d is %g through MatMulMulti, %g through MatMulT", w.Type(), w.Rows(), cols, n, j, got[j], want[j])
				}
			}
		}
	}
}

func TestEmbed(t *testing.T) {
	d := newDevice(t)
	r := rand.New(rand.NewSource(2))
	const rows, cols = 50, 512
	for _, typ := range WeightTypes {
		data, deq := encode(t, typ, randVec(r, rows*cols, 1), rows, cols)
		m, err := d.NewMatrix(typ, data, rows, cols)
		if err != nil {
			t.Fatal(err)
		}
		ids := []int{3, 0, 49, 3, 17}
		dst, _ := d.NewTensor(len(ids) * cols)
		if err := d.Embed(dst, m, ids); err != nil {
			t.Fatal(err)
		}
		got := download(d, dst, len(ids)*cols)
		for i, id := range ids {
			for j := 0; j < cols; j++ {
				if w := deq[id*cols+j]; math.Abs(float64(got[i*cols+j]-w)) > 1e-6*math.Abs(float64(w))+1e-7 {
					t.Fatalf("%v: row %d col %d: %g, want %g", typ, id, j, got[i*cols+j], w)
				}
			}
		}
		if err := d.Embed(dst, m, []int{rows}); err == nil {
			t.Fatalf("%v: id outside the table accepted", typ)
		}
	}
}

func close32(a float32, b float64, rel float64) bool {
	return math.Abs(float64(a)-b) <= rel*(math.Abs(b)+1e-3)
}

func TestRowOps(t *testing.T) {
	d := newDevice(t)
	r := rand.New(rand.NewSource(3))
	const rows, dim = 5, 1000
	x := randVec(r, rows*dim, 2)
	w := randVec(r, dim, 1)
	xt, wt := upload(t, d, x), upload(t, d, w)
	out, _ := d.NewTensor(rows * dim)
	d.RMSNorm(out, xt, wt, rows, dim, 1e-5)
	got := download(d, out, rows*dim)
	for i := 0; i < rows; i++ {
		var s float64
		for j := 0; j < dim; j++ {
			s += float64(x[i*dim+j]) * float64(x[i*dim+j])
		}
		sc := 1 / math.Sqrt(s/dim+1e-5)
		for j := 0; j < dim; j++ {
			if want := float64(x[i*dim+j]) * sc * float64(w[j]); !close32(got[i*dim+j], want, 1e-5) {
				t.Fatalf("rmsnorm [%d,%d] = %g, want %g", i, j, got[i*dim+j], want)
			}
		}
	}
	y := randVec(r, rows*dim, 1)
	yt := upload(t, d, y)
	check := func(name string, f func(i int) float64) {
		t.Helper()
		g := download(d, xt, rows*dim)
		for i := range g {
			if want := f(i); !close32(g[i], want, 1e-5) {
				t.Fatalf("%s [%d] = %g, want %g", name, i, g[i], want)
			}
		}
		copy(x, g)
	}
	d.Add(xt, yt, rows*dim)
	prev := append([]float32(nil), x...)
	check("add", func(i int) float64 { return float64(prev[i]) + float64(y[i]) })
	prev = append(prev[:0], x...)
	d.Scale(xt, rows*dim, 0.5)
	check("scale", func(i int) float64 { return float64(prev[i]) * 0.5 })
	prev = append(prev[:0], x...)
	d.AddRow(xt, wt, rows, dim)
	check("add_row", func(i int) float64 { return float64(prev[i]) + float64(w[i%dim]) })
	prev = append(prev[:0], x...)
	d.Softcap(xt, rows*dim, 3)
	check("softcap", func(i int) float64 { return 3 * math.Tanh(float64(prev[i])/3) })
	for _, gelu := range []bool{false, true} {
		prev = append(prev[:0], x...)
		d.GLU(xt, yt, rows*dim, gelu)
		check("glu", func(i int) float64 {
			v := float64(prev[i])
			if gelu {
				return 0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v))) * float64(y[i])
			}
			return v / (1 + math.Exp(-v)) * float64(y[i])
		})
	}
}

func TestRoPE(t *testing.T) {
	d := newDevice(t)
	r := rand.New(rand.NewSource(4))
	const rows, heads, hd, rd = 3, 4, 64, 32
	for _, neox := range []bool{false, true} {
		x := randVec(r, rows*heads*hd, 1)
		cs, sn := make([]float32, rows*rd/2), make([]float32, rows*rd/2)
		for i := range cs {
			a := r.Float64() * 6
			cs[i], sn[i] = float32(math.Cos(a)), float32(math.Sin(a))
		}
		xt := upload(t, d, x)
		d.RoPE(xt, rows, kernels.RoPEShape{Heads: heads, HeadDim: hd, RopeDim: rd, Neox: neox}, cs, sn)
		got := download(d, xt, len(x))
		want := append([]float32(nil), x...)
		for i := 0; i < rows; i++ {
			for h := 0; h < heads; h++ {
				p := want[(i*heads+h)*hd:]
				for k := 0; k < rd/2; k++ {
					a, b := 2*k, 2*k+1
					if neox {
						a, b = k, k+rd/2
					}
					c, s := float64(cs[i*rd/2+k]), float64(sn[i*rd/2+k])
					x0, x1 := float64(p[a]), float64(p[b])
					p[a], p[b] = float32(x0*c-x1*s), float32(x0*s+x1*c)
				}
			}
		}
		for i := range got {
			if !close32(got[i], float64(want[i]), 1e-5) {
				t.Fatalf("neox=%v [%d] = %g, want %g", neox, i, got[i], want[i])
			}
		}
	}
}

// attnRef is the float64 attention of one layer.
func attnRef(q, k, v []float32, past, n int, mask []bool, s kernels.AttnShape) []float64 {
	w := s.KVHeads * s.HeadDim
	out := make([]float64, n*s.Heads*s.HeadDim)
	total := past + n
	for i := 0; i < n; i++ {
		for h := 0; h < s.Heads; h++ {
			kh := h / (s.Heads / s.KVHeads)
			sc := make([]float64, total)
			mx := math.Inf(-1)
			vis := make([]bool, total)
			for j := 0; j < total; j++ {
				vis[j] = j <= past+i
				if mask != nil {
					vis[j] = mask[i*total+j]
				}
				if !vis[j] {
					continue
				}
				var dot float64
				for e := 0; e < s.HeadDim; e++ {
					dot += float64(q[(i*s.Heads+h)*s.HeadDim+e]) * float64(k[j*w+kh*s.HeadDim+e])
				}
				dot *= float64(s.Scale)
				if s.Softcap > 0 {
					dot = float64(s.Softcap) * math.Tanh(dot/float64(s.Softcap))
				}
				sc[j] = dot
				mx = math.Max(mx, dot)
			}
			var sum float64
			for j := range sc {
				if vis[j] {
					sc[j] = math.Exp(sc[j] - mx)
					sum += sc[j]
				}
			}
			for j := range sc {
				if !vis[j] {
					continue
				}
				for e := 0; e < s.HeadDim; e++ {
					out[(i*s.Heads+h)*s.HeadDim+e] += sc[j] / sum * float64(v[j*w+kh*s.HeadDim+e])
				}
			}
		}
	}
	return out
}

func TestAttention(t *testing.T) {
	d := newDevice(t)
	r := rand.New(rand.NewSource(5))
	for _, kvt := range []quant.Type{quant.F32, quant.F16} {
		for _, c := range []struct {
			heads, kvHeads, hd, past, n int
			tree                        bool
			cap                         float32
		}{{8, 4, 8, 0, 5, false, 0}, {4, 4, 64, 37, 1, false, 0}, {32, 8, 128, 300, 16, true, 0}, {8, 2, 256, 10, 9, true, 50}, {4, 1, 96, 1000, 3, false, 0}} {
			s := kernels.AttnShape{Heads: c.heads, KVHeads: c.kvHeads, HeadDim: c.hd, Scale: float32(1 / math.Sqrt(float64(c.hd))), Softcap: c.cap}
			w, total := c.kvHeads*c.hd, c.past+c.n
			const layers, layer = 2, 1
			kv, err := d.NewKV(layers, total+4, w, kvt)
			if err != nil {
				t.Fatal(err)
			}
			k, v := randVec(r, total*w, 1), randVec(r, total*w, 1)
			if kvt == quant.F16 { // the reference sees what the cache holds
				for i := range k {
					k[i], v[i] = quant.F16ToF32(quant.F32ToF16(k[i])), quant.F16ToF32(quant.F32ToF16(v[i]))
				}
			}
			// store in two batches, as a pass does
			for _, part := range [][2]int{{0, c.past}, {c.past, total}} {
				if part[1] > part[0] {
					kt, vt := upload(t, d, k[part[0]*w:part[1]*w]), upload(t, d, v[part[0]*w:part[1]*w])
					d.StoreKV(kv, layer, part[0], kt, vt, part[1]-part[0])
				}
			}
			var mask []bool
			if c.tree {
				mask = make([]bool, c.n*total)
				for i := 0; i < c.n; i++ {
					for j := 0; j < total; j++ {
						mask[i*total+j] = j < c.past || j == c.past+i || (j < c.past+i && r.Intn(2) == 0)
					}
				}
				mask[(c.n-1)*total+c.past+c.n-1] = false // a row that sees only the prefix
			}
			q := randVec(r, c.n*c.heads*c.hd, 1)
			qt := upload(t, d, q)
			out, _ := d.NewTensor(len(q))
			d.Attention(out, qt, kv, layer, c.past, c.n, mask, s)
			got := download(d, out, len(q))
			want := attnRef(q, k, v, c.past, c.n, mask, s)
			for i := range got {
				if math.Abs(float64(got[i])-want[i]) > 1e-4 {
					t.Fatalf("%v %+v: [%d] = %g, want %g", kvt, c, i, got[i], want[i])
				}
			}
			kv.Free()
		}
	}
}

func TestKVCompactCopyGatherArgmax(t *testing.T) {
	d := newDevice(t)
	r := rand.New(rand.NewSource(6))
	for _, kvt := range []quant.Type{quant.F32, quant.F16} {
		const layers, slots, w = 3, 16, 24
		// a permutation, and a prefix in place (moved from slot 3 on)
		for _, keep := range [][]int{{5, 0, 1, 9, 2}, {0, 1, 2, 9, 4}} {
			kv, _ := d.NewKV(layers, slots, w, kvt)
			k := randVec(r, slots*w, 1)
			v := randVec(r, slots*w, 1)
			for l := 0; l < layers; l++ {
				d.StoreKV(kv, l, 0, upload(t, d, k), upload(t, d, v), slots)
			}
			if err := d.Compact(kv, keep, 12); err != nil {
				t.Fatal(err)
			}
			if err := d.Compact(kv, []int{1, 1}, 12); err == nil {
				t.Fatal("repeated slot accepted")
			}
			cp, _ := d.NewKV(layers, slots, w, kvt)
			if err := d.CopyKV(cp, kv, len(keep)); err != nil {
				t.Fatal(err)
			}
			// read back through attention: one query that sees only slot j
			// returns value row j
			for _, c := range []kernels.KV{kv, cp} {
				for j, src := range keep {
					mask := make([]bool, j+1)
					mask[j] = true
					q, _ := d.NewTensor(w)
					out, _ := d.NewTensor(w)
					d.Attention(out, q, c, layers-1, j, 1, mask, kernels.AttnShape{Heads: 1, KVHeads: 1, HeadDim: w, Scale: 1})
					got := download(d, out, w)
					for e := 0; e < w; e++ {
						want := v[src*w+e]
						if kvt == quant.F16 {
							want = quant.F16ToF32(quant.F32ToF16(want))
						}
						if got[e] != want {
							t.Fatalf("%v: slot %d (was %d) value %d = %g, want %g", kvt, j, src, e, got[e], want)
						}
					}
				}
			}
			kv.Free()
			cp.Free()
		}
	}
	x := randVec(r, 4*300, 1)
	x[1*300+7], x[1*300+200] = 9, 9 // a tie: the lower index wins
	x[2*300+299] = 50
	xt := upload(t, d, x)
	am := make([]int, 4)
	d.Argmax(am, xt, 4, 300)
	for i := 0; i < 4; i++ {
		best := 0
		for j := 1; j < 300; j++ {
			if x[i*300+j] > x[i*300+best] {
				best = j
			}
		}
		if am[i] != best {
			t.Fatalf("argmax row %d = %d, want %d", i, am[i], best)
		}
	}
	g, _ := d.NewTensor(3 * 300)
	d.Gather(g, xt, []int{3, 1, 3}, 300)
	got := download(d, g, 900)
	for j, src := range []int{3, 1, 3} {
		for e := 0; e < 300; e++ {
			if got[j*300+e] != x[src*300+e] {
				t.Fatalf("gather row %d", j)
			}
		}
	}
}

func TestMemoryCheckedBeforeAllocating(t *testing.T) {
	d := newDevice(t)
	if _, err := d.NewTensor(1 << 40); err == nil {
		t.Fatal("a 4 TiB tensor was accepted")
	}
	if _, err := d.NewKV(1<<10, 1<<20, 1<<12, quant.F32); err == nil {
		t.Fatal("a 32 TiB cache was accepted")
	}
}

// The device times its own memory: every rate positive and below the
// memory's datasheet rate (a copy counts bytes read and written, so it
// may come near it, never far above), transfers slower than the copy, and
// the allocations it made freed again.
func TestMeasureMemory(t *testing.T) {
	d := newDevice(t)
	held := len(d.allocs)
	r, err := d.MeasureMemory()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("copy %.1f GB/s, datasheet %.1f GB/s, host to device %.1f GB/s, device to host %.1f GB/s, %d multiprocessors",
		r.Copy/1e9, r.Peak/1e9, r.HostToDevice/1e9, r.DeviceToHost/1e9, r.Multiprocessors)
	if r.Copy <= 0 || r.HostToDevice <= 0 || r.DeviceToHost <= 0 || r.Multiprocessors < 1 || r.Description == "" {
		t.Fatalf("rates %+v", r)
	}
	if r.Peak > 0 && r.Copy > 1.1*r.Peak {
		t.Errorf("a copy at %.1f GB/s beats the memory's datasheet rate %.1f GB/s", r.Copy/1e9, r.Peak/1e9)
	}
	if r.HostToDevice > r.Copy || r.DeviceToHost > r.Copy {
		t.Errorf("transfers (%.1f, %.1f GB/s) faster than a copy in device memory (%.1f GB/s)", r.HostToDevice/1e9, r.DeviceToHost/1e9, r.Copy/1e9)
	}
	if len(d.allocs) != held {
		t.Errorf("%d allocations before, %d after", held, len(d.allocs))
	}
}
