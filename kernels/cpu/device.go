package cpu

import (
	"fmt"
	"math"
	"runtime"
	"unsafe"

	"arborist/kernels"
	"arborist/kernels/quant"
)

// The CPU backend as a kernels.Device: tensors and the KV cache are host
// slices, wrapped without copies, and each primitive is the loop the model
// code ran itself before the Device contract existed (same operations in
// the same order, so float32 results are bit for bit what they were).

var _ kernels.Device = (*Backend)(nil)

// maxBytes bounds one tensor or cache allocation: far above any model this
// backend can run, it turns a size computed from hostile input into an
// error instead of a runtime panic.
const maxBytes = 1 << 40

// Tensor is a host float32 buffer.
type Tensor struct{ d []float32 }

// Len is the number of values.
func (t *Tensor) Len() int { return len(t.d) }

// Data returns the values of a tensor of this backend (no copy).
func Data(t kernels.Tensor) []float32 { return t.(*Tensor).d }

// Wrap makes a tensor over host values, without copying them.
func Wrap(v []float32) kernels.Tensor { return &Tensor{d: v} }

// NewVector copies v into a new tensor.
func (b *Backend) NewVector(v []float32) (kernels.Tensor, error) {
	return &Tensor{d: append([]float32(nil), v...)}, nil
}

// NewTensor allocates n zeroed values.
func (b *Backend) NewTensor(n int) (kernels.Tensor, error) {
	if n < 0 || uint64(n)*4 > maxBytes {
		return nil, fmt.Errorf("cpu: tensor of %d values is out of range", n)
	}
	return &Tensor{d: make([]float32, n)}, nil
}

// View is n values of t from offset on, sharing t's slice.
func (b *Backend) View(t kernels.Tensor, offset, n int) kernels.Tensor {
	d := Data(t)
	if offset < 0 || n < 0 || offset+n > len(d) {
		panic(fmt.Sprintf("cpu: a view of values [%d, %d) of a tensor of %d", offset, offset+n, len(d)))
	}
	return &Tensor{d: d[offset : offset+n : offset+n]}
}

// Upload copies src into dst.
func (b *Backend) Upload(dst kernels.Tensor, src []float32) { copy(Data(dst)[:len(src)], src) }

// Download copies the first len(dst) values of src into dst.
func (b *Backend) Download(dst []float32, src kernels.Tensor) { copy(dst, Data(src)[:len(dst)]) }

// KV is a host KV cache: per layer, slots x width keys and values, as
// float32 (k, v) or as IEEE half floats (k16, v16).
type KV struct {
	layers, slots, width int
	typ                  quant.Type
	k, v                 [][]float32
	k16, v16             [][]uint16
	mem                  *kvMemory // where a large cache's rows live (nil: Go slices)
}

// Layers is the layer count.
func (c *KV) Layers() int { return c.layers }

// layerPtrs is layer's keys and values as the C attention reads them, and
// whether they are half floats (else float32); the caller keeps c alive
// while they are in use (a large cache's mapping holds them).
func (c *KV) layerPtrs(layer int) (k, v unsafe.Pointer, f16 bool) {
	if c.typ == quant.F16 {
		return unsafe.Pointer(&c.k16[layer][0]), unsafe.Pointer(&c.v16[layer][0]), true
	}
	return unsafe.Pointer(&c.k[layer][0]), unsafe.Pointer(&c.v[layer][0]), false
}

// Cap is the slot count.
func (c *KV) Cap() int { return c.slots }

// Width is the values per key (and per value) row.
func (c *KV) Width() int { return c.width }

// Type is quant.F32 or quant.F16.
func (c *KV) Type() quant.Type { return c.typ }

// Bytes is the memory the keys and values take.
func (c *KV) Bytes() uint64 {
	return kvBytes(c.layers, c.slots, c.width, c.typ)
}

func kvBytes(layers, slots, width int, t quant.Type) uint64 {
	return 2 * uint64(layers) * uint64(slots) * uint64(width) * uint64(t.TypeSize())
}

// Free drops the buffers: a large cache's mapping is unmapped at once,
// Go slices are left to the garbage collector.
func (c *KV) Free() {
	c.k, c.v, c.k16, c.v16 = nil, nil, nil, nil
	if c.mem != nil {
		c.mem.free()
		c.mem = nil
	}
}

// NewKV allocates a float32 or float16 cache.
func (b *Backend) NewKV(layers, slots, width int, t quant.Type) (kernels.KV, error) {
	if t != quant.F32 && t != quant.F16 {
		return nil, fmt.Errorf("cpu: a KV cache of %s is not supported (f32, f16)", t)
	}
	if layers < 0 || slots < 0 || width < 0 || kvBytes(layers, slots, width, t) > maxBytes ||
		uint64(slots)*uint64(width) > math.MaxInt32*64 {
		return nil, fmt.Errorf("cpu: KV cache of %d layers x %d slots x %d is out of range", layers, slots, width)
	}
	c := &KV{layers: layers, slots: slots, width: width, typ: t, mem: newKVMemory(kvBytes(layers, slots, width, t) + uint64(2*layers*64))}
	n := slots * width
	var bufs []unsafe.Pointer // each layer's keys, then its values
	if c.mem != nil {
		bufs = c.mem.carve(2*layers, n*t.TypeSize())
	}
	if t == quant.F32 {
		c.k, c.v = make([][]float32, layers), make([][]float32, layers)
		for l := range c.k {
			if bufs != nil {
				c.k[l], c.v[l] = unsafe.Slice((*float32)(bufs[2*l]), n), unsafe.Slice((*float32)(bufs[2*l+1]), n)
			} else {
				c.k[l], c.v[l] = make([]float32, n), make([]float32, n)
			}
		}
	} else {
		c.k16, c.v16 = make([][]uint16, layers), make([][]uint16, layers)
		for l := range c.k16 {
			if bufs != nil {
				c.k16[l], c.v16[l] = unsafe.Slice((*uint16)(bufs[2*l]), n), unsafe.Slice((*uint16)(bufs[2*l+1]), n)
			} else {
				c.k16[l], c.v16[l] = make([]uint16, n), make([]uint16, n)
			}
		}
	}
	return c, nil
}

// Embed dequantises table rows ids[i] into dst's rows.
func (b *Backend) Embed(dst kernels.Tensor, table kernels.Matrix, ids []int) error {
	w := table.(*Matrix)
	d := Data(dst)
	for i, id := range ids {
		if id < 0 || id >= w.rows {
			return fmt.Errorf("cpu: token id %d out of range [0, %d)", id, w.rows)
		}
		if err := quant.Dequantize(w.typ, w.Row(id), d[i*w.cols:(i+1)*w.cols]); err != nil {
			return fmt.Errorf("cpu: embedding row %d: %w", id, err)
		}
	}
	return nil
}

// MatMulT is MatMul on tensors.
func (b *Backend) MatMulT(out kernels.Tensor, w kernels.Matrix, x kernels.Tensor, n int) {
	b.MatMul(Data(out), w, Data(x), n)
}

// RMSNorm normalises rows rows of dim values; the mean of squares
// accumulates in float64, as ggml does.
func (b *Backend) RMSNorm(out, x, w kernels.Tensor, rows, dim int, eps float32) {
	j := rowsJob{op: opNorm, out: Data(out), x: Data(x), w: Data(w), dim: dim, eps: eps}
	b.runRows(&j, rows, dim)
}

// AddRow adds the dim-vector bias to rows rows of x.
func (b *Backend) AddRow(x, bias kernels.Tensor, rows, dim int) {
	xd, bd := Data(x), Data(bias)[:dim]
	for r := 0; r < rows; r++ {
		row := xd[r*dim : (r+1)*dim]
		for i := range row {
			row[i] += bd[i]
		}
	}
}

// Add: x[i] += y[i], i < n.
func (b *Backend) Add(x, y kernels.Tensor, n int) {
	j := rowsJob{op: opAdd, x: Data(x)[:n], y: Data(y)[:n]}
	b.runRows(&j, n, 1)
}

// Scale: x[i] *= s, i < n.
func (b *Backend) Scale(x kernels.Tensor, n int, s float32) {
	xd := Data(x)[:n]
	for i := range xd {
		xd[i] *= s
	}
}

// Softcap: x[i] = c*tanh(x[i]/c), i < n.
func (b *Backend) Softcap(x kernels.Tensor, n int, c float32) {
	xd := Data(x)[:n]
	for i, v := range xd {
		xd[i] = c * float32(math.Tanh(float64(v/c)))
	}
}

// GLU: g = act(g) * u over n values; SiLU runs in C where cgo is on, GELU
// (tanh form) in float64 as the reference's exact path does.
func (b *Backend) GLU(g, u kernels.Tensor, n int, gelu bool) {
	gd, ud := Data(g)[:n], Data(u)[:n]
	if gelu {
		const c = 0.7978845608028654 // sqrt(2/pi)
		for i, x := range gd {
			v := float64(x)
			gd[i] = float32(0.5*v*(1+math.Tanh(c*v*(1+0.044715*v*v)))) * ud[i]
		}
		return
	}
	j := rowsJob{op: opSiLU, x: gd, y: ud}
	b.runRows(&j, n, 1)
}

// siluMulGo is the pure-Go SiLU-gate product, the fallback without cgo.
func siluMulGo(g, u []float32) {
	for i := range g {
		x := g[i]
		g[i] = x / (1 + float32(math.Exp(float64(-x)))) * u[i]
	}
}

// RoPE rotates rows rows of x by the precomputed angles.
func (b *Backend) RoPE(x kernels.Tensor, rows int, s kernels.RoPEShape, cos, sin []float32) {
	j := rowsJob{op: opRoPE, x: Data(x), cos: cos, sin: sin, rope: s}
	b.runRows(&j, rows, s.Heads*s.RopeDim)
}

// StoreKV writes rows keys and values into layer's slots from slot on: a
// row a unit, split across the workers for a wide pass like the other
// element-wise work, a half-float cache converted with F16C (the bits of
// quant.F32ToF16).
func (b *Backend) StoreKV(kv kernels.KV, layer, slot int, k, v kernels.Tensor, rows int) {
	c := kv.(*KV)
	w := c.width
	j := rowsJob{op: opStore, kv: c, layer: layer, slot: slot, x: Data(k)[:rows*w], y: Data(v)[:rows*w]}
	b.runRows(&j, rows, 2*w)
	runtime.KeepAlive(c) // a large cache's mapping holds the rows
}

// Attention runs the C kernels (float32 or float16 cache) where cgo is on
// and no soft-cap applies, and the Go loop otherwise.
func (b *Backend) Attention(out, q kernels.Tensor, kv kernels.KV, layer, past, n int, mask []bool, s kernels.AttnShape) {
	c := kv.(*KV)
	if haveC && s.Softcap == 0 {
		kp, vp, f16 := c.layerPtrs(layer)
		b.attendC(Data(out), Data(q), kp, vp, f16, past, n, mask, s.Heads, s.KVHeads, s.HeadDim, s.Scale)
		runtime.KeepAlive(c) // its mapping holds kp and vp
		return
	}
	l := kvLayer{}
	if c.typ == quant.F32 {
		l.k, l.v = c.k[layer], c.v[layer]
	} else {
		l.k16, l.v16 = c.k16[layer], c.v16[layer]
	}
	b.attendGo(Data(out), Data(q), l, past, n, mask, s)
	runtime.KeepAlive(c)
}

// kvLayer is one layer of a cache, float32 (k, v) or float16 (k16, v16).
type kvLayer struct {
	k, v     []float32
	k16, v16 []uint16
}

// row returns the hd values at element off of the keys (or values when
// value): a view of a float32 cache, or a float16 row widened into buf.
func (l *kvLayer) row(value bool, off, hd int, buf []float32) []float32 {
	if l.k != nil {
		if value {
			return l.v[off : off+hd]
		}
		return l.k[off : off+hd]
	}
	src := l.k16[off : off+hd]
	if value {
		src = l.v16[off : off+hd]
	}
	for i, h := range src {
		buf[i] = quant.F16ToF32(h)
	}
	return buf[:hd]
}

// attendGo is the plain Go attention: the path of soft-capped models
// (gemma2) and of builds without cgo. For each batch row and query head it
// computes softmax(q·K*scale) over the slots the mask allows, times V;
// Softcap > 0 first maps each score s to softcap*tanh(s/softcap). Rows and
// heads run in parallel on the workers, each with its scratch row, so a
// decode step allocates nothing.
func (b *Backend) attendGo(out, q []float32, l kvLayer, past, n int, mask []bool, s kernels.AttnShape) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.attnGo = attnGoJob{b: b, out: out, q: q, l: l, past: past, n: n, mask: mask, s: s}
	b.pool.run(&b.attnGo, n*s.Heads, 1)
}

// attnGoJob is one attendGo call; a task is one (row, head) pair.
type attnGoJob struct {
	b       *Backend
	out, q  []float32
	l       kvLayer
	past, n int
	mask    []bool
	s       kernels.AttnShape
}

func (j *attnGoJob) do(worker, lo, hi int) {
	s, l, q, out, mask, past := j.s, &j.l, j.q, j.out, j.mask, j.past
	hd, heads := s.HeadDim, s.Heads
	kvd := s.KVHeads * hd
	group := heads / s.KVHeads
	total := past + j.n
	qd := heads * hd
	scale, softcap := s.Scale, s.Softcap
	scratch := j.b.scratchRow(worker, total+hd)
	scores, buf := scratch[:total], scratch[total:]
	for task := lo; task < hi; task++ {
		i, h := task/heads, task%heads
		kh := h / group
		qv := q[i*qd+h*hd : i*qd+(h+1)*hd]
		limit := past + i + 1 // causal
		var row []bool
		if mask != nil {
			row = mask[i*total : (i+1)*total]
			limit = total
		}
		maxS := float32(math.Inf(-1))
		for j := 0; j < limit; j++ {
			if row != nil && !row[j] {
				scores[j] = float32(math.Inf(-1))
				continue
			}
			kv := l.row(false, j*kvd+kh*hd, hd, buf)
			var d float32
			for t := range qv {
				d += qv[t] * kv[t]
			}
			d *= scale
			if softcap != 0 {
				d = softcap * float32(math.Tanh(float64(d/softcap)))
			}
			scores[j] = d
			maxS = max(maxS, d)
		}
		o := out[i*qd+h*hd : i*qd+(h+1)*hd]
		for t := range o {
			o[t] = 0
		}
		if math.IsInf(float64(maxS), -1) {
			continue // a row that attends to nothing outputs zeros
		}
		var sum float64
		for j := 0; j < limit; j++ {
			if row != nil && !row[j] {
				continue
			}
			e := float32(math.Exp(float64(scores[j] - maxS)))
			scores[j] = e
			sum += float64(e)
		}
		inv := float32(1 / sum)
		for j := 0; j < limit; j++ {
			if row != nil && !row[j] {
				continue
			}
			p := scores[j] * inv
			vv := l.row(true, j*kvd+kh*hd, hd, buf)
			for t := range o {
				o[t] += p * vv[t]
			}
		}
	}
}

// Compact moves slot keep[i] to slot i on every layer.
func (b *Backend) Compact(kv kernels.KV, keep []int, used int) error {
	c := kv.(*KV)
	if used < 0 || used > c.slots {
		return fmt.Errorf("cpu: compact: %d slots used of %d", used, c.slots)
	}
	inPlace := true
	for i, s := range keep {
		if s < 0 || s >= used {
			return fmt.Errorf("cpu: compact: slot %d out of range [0, %d)", s, used)
		}
		if s < i || (i > 0 && s <= keep[i-1]) {
			inPlace = false
		}
	}
	w := c.width
	for l := 0; l < c.layers; l++ {
		if c.typ == quant.F32 {
			compactRows(c.k[l], keep, used, w, inPlace)
			compactRows(c.v[l], keep, used, w, inPlace)
		} else {
			compactRows(c.k16[l], keep, used, w, inPlace)
			compactRows(c.v16[l], keep, used, w, inPlace)
		}
	}
	runtime.KeepAlive(c) // a large cache's mapping holds the rows
	return nil
}

// compactRows moves row keep[i] of buf to row i: in place when keep is
// increasing and never ahead of its index, else through a copy.
func compactRows[T float32 | uint16](buf []T, keep []int, used, d int, inPlace bool) {
	src := buf
	if !inPlace {
		src = append([]T(nil), buf[:used*d]...)
	}
	for i, s := range keep {
		if s != i || !inPlace {
			copy(buf[i*d:(i+1)*d], src[s*d:(s+1)*d])
		}
	}
}

// CopyKV copies the first n slots of every layer of src into dst.
func (b *Backend) CopyKV(dst, src kernels.KV, n int) error {
	d, s := dst.(*KV), src.(*KV)
	if d.layers != s.layers || d.width != s.width || d.typ != s.typ {
		return fmt.Errorf("cpu: copy between KV caches of different shapes (%d x %d %s, %d x %d %s)", s.layers, s.width, s.typ, d.layers, d.width, d.typ)
	}
	if n < 0 || n > s.slots || n > d.slots {
		return fmt.Errorf("cpu: copy of %d slots between caches of %d and %d", n, s.slots, d.slots)
	}
	m := n * s.width
	for l := 0; l < s.layers; l++ {
		if s.typ == quant.F32 {
			copy(d.k[l][:m], s.k[l][:m])
			copy(d.v[l][:m], s.v[l][:m])
		} else {
			copy(d.k16[l][:m], s.k16[l][:m])
			copy(d.v16[l][:m], s.v16[l][:m])
		}
	}
	runtime.KeepAlive(d) // large caches' mappings hold the rows
	runtime.KeepAlive(s)
	return nil
}

// Gather copies rows[j] of src into row j of dst.
func (b *Backend) Gather(dst, src kernels.Tensor, rows []int, dim int) {
	dd, sd := Data(dst), Data(src)
	for j, r := range rows {
		copy(dd[j*dim:(j+1)*dim], sd[r*dim:(r+1)*dim])
	}
}

// Argmax writes each row's index of its largest value (lowest on ties; a
// NaN first value stays the answer, as sample.Argmax does).
func (b *Backend) Argmax(dst []int, x kernels.Tensor, rows, cols int) {
	xd := Data(x)
	for r := 0; r < rows; r++ {
		row := xd[r*cols : (r+1)*cols]
		best := 0
		for i, v := range row {
			if v > row[best] {
				best = i
			}
		}
		dst[r] = best
	}
}
