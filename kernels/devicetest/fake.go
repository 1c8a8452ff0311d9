package devicetest

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"

	"arborist/kernels"
	"arborist/kernels/quant"
)

// Fake is a kernels.Device that computes every primitive in float64 and
// records each call by name. Its tensors and caches hold float64 values
// that only it can read, so code above the backend that ran on a Fake and
// gave the right answer cannot have read or written activations or the KV
// cache directly: it went through Upload, Download and the primitives. It
// panics, naming the call, when handed a tensor, cache or matrix of another
// backend.
//
// A Fake is deterministic and every row of a batch is computed exactly as
// it would be alone, so greedy speculative decoding on it must match plain
// decoding on it token for token.
type Fake struct {
	mu    sync.Mutex
	calls map[string]int
	// MaxValues bounds NewTensor and NewKV (in float64 values), so tests
	// can check that callers handle a device that runs out of memory.
	MaxValues int
}

// NewFake returns an empty Fake with a limit of 1<<28 values per buffer.
func NewFake() *Fake { return &Fake{calls: map[string]int{}, MaxValues: 1 << 28} }

func (f *Fake) record(op string) {
	f.mu.Lock()
	f.calls[op]++
	f.mu.Unlock()
}

// Calls returns how often each primitive has been called.
func (f *Fake) Calls() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int, len(f.calls))
	for k, v := range f.calls {
		out[k] = v
	}
	return out
}

// CallSummary lists the calls as "name=count" in name order, for logs.
func (f *Fake) CallSummary() string {
	c := f.Calls()
	names := make([]string, 0, len(c))
	for k := range c {
		names = append(names, k)
	}
	sort.Strings(names)
	for i, k := range names {
		names[i] = fmt.Sprintf("%s=%d", k, c[k])
	}
	return strings.Join(names, " ")
}

type fakeTensor struct{ v []float64 }

func (t *fakeTensor) Len() int { return len(t.v) }

type fakeMatrix struct {
	typ  quant.Type
	w    [][]float64
	cols int
}

func (m *fakeMatrix) Rows() int        { return len(m.w) }
func (m *fakeMatrix) Cols() int        { return m.cols }
func (m *fakeMatrix) Type() quant.Type { return m.typ }

type fakeKV struct {
	typ                quant.Type
	layers, cap, width int
	k, v               [][]float64 // per layer: cap x width
}

func (c *fakeKV) Layers() int      { return c.layers }
func (c *fakeKV) Cap() int         { return c.cap }
func (c *fakeKV) Width() int       { return c.width }
func (c *fakeKV) Type() quant.Type { return c.typ }
func (c *fakeKV) Bytes() uint64 {
	return uint64(c.layers) * uint64(c.cap) * uint64(c.width) * 2 * uint64(c.typ.TypeSize())
}
func (c *fakeKV) Free() { c.k, c.v = nil, nil }

func ten(op string, t kernels.Tensor) []float64 {
	ft, ok := t.(*fakeTensor)
	if !ok {
		panic(fmt.Sprintf("devicetest.Fake.%s: tensor %T is not the Fake's", op, t))
	}
	return ft.v
}

func mat(op string, m kernels.Matrix) *fakeMatrix {
	fm, ok := m.(*fakeMatrix)
	if !ok {
		panic(fmt.Sprintf("devicetest.Fake.%s: matrix %T is not the Fake's", op, m))
	}
	return fm
}

func kvOf(op string, c kernels.KV) *fakeKV {
	fc, ok := c.(*fakeKV)
	if !ok {
		panic(fmt.Sprintf("devicetest.Fake.%s: cache %T is not the Fake's", op, c))
	}
	if fc.k == nil {
		panic(fmt.Sprintf("devicetest.Fake.%s: cache used after Free", op))
	}
	return fc
}

// Name returns "fake64".
func (f *Fake) Name() string { return "fake64" }

// Threads returns 1.
func (f *Fake) Threads() int { return 1 }

// Close does nothing.
func (f *Fake) Close() {}

// NewMatrix dequantises the weights to float64 rows.
func (f *Fake) NewMatrix(t quant.Type, data []byte, rows, cols int) (kernels.Matrix, error) {
	f.record("NewMatrix")
	rb, err := quant.RowBytes(t, cols)
	if err != nil {
		return nil, err
	}
	if rows < 0 || len(data) < rows*rb {
		return nil, fmt.Errorf("devicetest: %d rows of %d %s weights need %d bytes, have %d", rows, cols, t, rows*rb, len(data))
	}
	w, err := dequantRows(t, data, rows, cols)
	if err != nil {
		return nil, err
	}
	return &fakeMatrix{typ: t, w: w, cols: cols}, nil
}

// MatMul is the host-memory product, in float64.
func (f *Fake) MatMul(out []float32, w kernels.Matrix, x []float32, n int) {
	f.record("MatMul")
	m := mat("MatMul", w)
	x64 := make([]float64, n*m.cols)
	for i := range x64 {
		x64[i] = float64(x[i])
	}
	for i, v := range refMatMul(m.w, x64, n) {
		out[i] = float32(v)
	}
}

// NewVector stores v.
func (f *Fake) NewVector(v []float32) (kernels.Tensor, error) {
	f.record("NewVector")
	t := &fakeTensor{v: make([]float64, len(v))}
	for i, x := range v {
		t.v[i] = float64(x)
	}
	return t, nil
}

// NewTensor allocates n zeros, or refuses above MaxValues.
func (f *Fake) NewTensor(n int) (kernels.Tensor, error) {
	f.record("NewTensor")
	if n < 0 || n > f.MaxValues {
		return nil, fmt.Errorf("devicetest: a tensor of %d values exceeds the fake device's %d", n, f.MaxValues)
	}
	return &fakeTensor{v: make([]float64, n)}, nil
}

// View is n values of t from offset on, sharing t's float64 values.
func (f *Fake) View(t kernels.Tensor, offset, n int) kernels.Tensor {
	f.record("View")
	v := ten("View", t)
	if offset < 0 || n < 0 || offset+n > len(v) {
		panic(fmt.Sprintf("devicetest.Fake.View: values [%d, %d) of a tensor of %d", offset, offset+n, len(v)))
	}
	return &fakeTensor{v: v[offset : offset+n : offset+n]}
}

// Upload copies src into dst.
func (f *Fake) Upload(dst kernels.Tensor, src []float32) {
	f.record("Upload")
	d := ten("Upload", dst)
	for i, v := range src {
		d[i] = float64(v)
	}
}

// Download copies dst's length of values out, rounded to float32.
func (f *Fake) Download(dst []float32, src kernels.Tensor) {
	f.record("Download")
	s := ten("Download", src)
	for i := range dst {
		dst[i] = float32(s[i])
	}
}

// NewKV allocates a cache; F32 and F16 are supported.
func (f *Fake) NewKV(layers, slots, width int, t quant.Type) (kernels.KV, error) {
	f.record("NewKV")
	if t != quant.F32 && t != quant.F16 {
		return nil, fmt.Errorf("devicetest: KV cache type %s not supported (F32, F16)", t)
	}
	if layers <= 0 || slots <= 0 || width <= 0 || slots > f.MaxValues/width || layers > f.MaxValues/(slots*width) {
		return nil, fmt.Errorf("devicetest: a KV cache of %d layers x %d slots x %d does not fit the fake device's %d values", layers, slots, width, f.MaxValues)
	}
	c := &fakeKV{typ: t, layers: layers, cap: slots, width: width, k: make([][]float64, layers), v: make([][]float64, layers)}
	for l := range c.k {
		c.k[l] = make([]float64, slots*width)
		c.v[l] = make([]float64, slots*width)
	}
	return c, nil
}

// Embed copies the rows ids of the table.
func (f *Fake) Embed(dst kernels.Tensor, table kernels.Matrix, ids []int) error {
	f.record("Embed")
	d, m := ten("Embed", dst), mat("Embed", table)
	for i, id := range ids {
		if id < 0 || id >= len(m.w) {
			return fmt.Errorf("devicetest: token id %d out of range [0, %d)", id, len(m.w))
		}
		copy(d[i*m.cols:(i+1)*m.cols], m.w[id])
	}
	return nil
}

// MatMulT is MatMul on tensors.
func (f *Fake) MatMulT(out kernels.Tensor, w kernels.Matrix, x kernels.Tensor, n int) {
	f.record("MatMulT")
	m := mat("MatMulT", w)
	copy(ten("MatMulT", out), refMatMul(m.w, ten("MatMulT", x)[:n*m.cols], n))
}

// RMSNorm normalises rows.
func (f *Fake) RMSNorm(out, x, w kernels.Tensor, rows, dim int, eps float32) {
	f.record("RMSNorm")
	refRMSNorm(ten("RMSNorm", out), ten("RMSNorm", x), ten("RMSNorm", w), rows, dim, float64(eps))
}

// AddRow adds b to each row.
func (f *Fake) AddRow(x, b kernels.Tensor, rows, dim int) {
	f.record("AddRow")
	xv, bv := ten("AddRow", x), ten("AddRow", b)
	for r := 0; r < rows; r++ {
		for i := 0; i < dim; i++ {
			xv[r*dim+i] += bv[i]
		}
	}
}

// Add adds y to x.
func (f *Fake) Add(x, y kernels.Tensor, n int) {
	f.record("Add")
	xv, yv := ten("Add", x), ten("Add", y)
	for i := 0; i < n; i++ {
		xv[i] += yv[i]
	}
}

// Scale multiplies x by s.
func (f *Fake) Scale(x kernels.Tensor, n int, s float32) {
	f.record("Scale")
	xv := ten("Scale", x)
	for i := 0; i < n; i++ {
		xv[i] *= float64(s)
	}
}

// Softcap maps x to c*tanh(x/c).
func (f *Fake) Softcap(x kernels.Tensor, n int, c float32) {
	f.record("Softcap")
	xv, cv := ten("Softcap", x), float64(c)
	for i := 0; i < n; i++ {
		xv[i] = cv * math.Tanh(xv[i]/cv)
	}
}

// GLU: g = act(g) * u.
func (f *Fake) GLU(g, u kernels.Tensor, n int, useGELU bool) {
	f.record("GLU")
	gv, uv := ten("GLU", g), ten("GLU", u)
	for i := 0; i < n; i++ {
		if useGELU {
			gv[i] = gelu(gv[i]) * uv[i]
		} else {
			gv[i] = silu(gv[i]) * uv[i]
		}
	}
}

// RoPE rotates x.
func (f *Fake) RoPE(x kernels.Tensor, rows int, s kernels.RoPEShape, cos, sin []float32) {
	f.record("RoPE")
	refRoPE(ten("RoPE", x), rows, s, cos, sin)
}

// StoreKV writes rows into the cache, rounded to its type.
func (f *Fake) StoreKV(kv kernels.KV, layer, slot int, k, v kernels.Tensor, rows int) {
	f.record("StoreKV")
	c := kvOf("StoreKV", kv)
	if slot < 0 || slot+rows > c.cap {
		panic(fmt.Sprintf("devicetest.Fake.StoreKV: slots %d..%d outside a cache of %d", slot, slot+rows, c.cap))
	}
	kv64, vv64 := ten("StoreKV", k), ten("StoreKV", v)
	w := c.width
	for i := 0; i < rows*w; i++ {
		c.k[layer][slot*w+i] = roundKV(c.typ, kv64[i])
		c.v[layer][slot*w+i] = roundKV(c.typ, vv64[i])
	}
}

// Attention attends over the cache.
func (f *Fake) Attention(out, q kernels.Tensor, kv kernels.KV, layer, past, n int, mask []bool, s kernels.AttnShape) {
	f.record("Attention")
	c := kvOf("Attention", kv)
	qv := ten("Attention", q)[:n*s.Heads*s.HeadDim]
	copy(ten("Attention", out), refAttention(qv, c.k[layer], c.v[layer], past, n, mask, s))
}

// Compact moves slot keep[i] to slot i on every layer.
func (f *Fake) Compact(kv kernels.KV, keep []int, used int) error {
	f.record("Compact")
	c := kvOf("Compact", kv)
	seen := make(map[int]bool, len(keep))
	for _, s := range keep {
		if s < 0 || s >= used || used > c.cap || seen[s] {
			return fmt.Errorf("devicetest: compact: slot %d invalid (used %d, or listed twice)", s, used)
		}
		seen[s] = true
	}
	w := c.width
	for l := 0; l < c.layers; l++ {
		for _, buf := range [][]float64{c.k[l], c.v[l]} {
			old := append([]float64(nil), buf[:used*w]...)
			for i, s := range keep {
				copy(buf[i*w:(i+1)*w], old[s*w:(s+1)*w])
			}
		}
	}
	return nil
}

// CopyKV copies a prefix of src into dst.
func (f *Fake) CopyKV(dst, src kernels.KV, n int) error {
	f.record("CopyKV")
	d, s := kvOf("CopyKV", dst), kvOf("CopyKV", src)
	if d.layers != s.layers || d.width != s.width || d.typ != s.typ || n < 0 || n > s.cap || n > d.cap {
		return fmt.Errorf("devicetest: copy %d slots between caches of different shapes", n)
	}
	for l := 0; l < s.layers; l++ {
		copy(d.k[l][:n*s.width], s.k[l])
		copy(d.v[l][:n*s.width], s.v[l])
	}
	return nil
}

// Gather copies the listed rows.
func (f *Fake) Gather(dst, src kernels.Tensor, rows []int, dim int) {
	f.record("Gather")
	d, s := ten("Gather", dst), ten("Gather", src)
	for j, r := range rows {
		copy(d[j*dim:(j+1)*dim], s[r*dim:(r+1)*dim])
	}
}

// Argmax finds each row's largest value (lowest index on ties), comparing
// the float32 values a Download would return, so it agrees with an argmax
// over downloaded logits.
func (f *Fake) Argmax(dst []int, x kernels.Tensor, rows, cols int) {
	f.record("Argmax")
	xv := ten("Argmax", x)
	for r := 0; r < rows; r++ {
		best := 0
		for i := 1; i < cols; i++ {
			if float32(xv[r*cols+i]) > float32(xv[r*cols+best]) {
				best = i
			}
		}
		dst[r] = best
	}
}

var _ kernels.Device = (*Fake)(nil)
