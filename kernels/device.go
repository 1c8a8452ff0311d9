package kernels

import "arborist/kernels/quant"

// This file is the device-level contract a forward pass runs on: weights,
// activations and the KV cache live where the backend keeps them, and the
// model code above (engine/model) sends only token ids, positions, RoPE
// tables and masks, and reads back only the rows it asks for.
//
// Why op-level, not pass-level. Two designs would let a device keep a whole
// pass: a pass-level interface ("run this batch of this architecture"),
// which every backend implements in full, or an op-level one (ollama's
// ml.Backend/Context/Tensor, ggml's graph nodes), where the architecture is
// written once against a small set of primitives. Arborist runs eight
// families that differ in a dozen switches (q/k norms, soft-caps, GELU,
// post-norms, sliding windows, RoPE variants); a pass-level interface would
// make the CUDA backend spell each family out again, and a third backend a
// third time. So the architectures live once in engine/model, and a backend
// implements about twenty primitives on opaque Tensors. The primitives are
// coarse where a device needs them to be (Attention reads the cache and
// applies the mask in one call; RoPE rotates every head of every row; Embed
// looks up a whole batch), so a pass is a few dozen calls per layer, each a
// single kernel launch on a GPU, and nothing crosses PCIe but ids,
// positions, the RoPE table, the mask and the wanted output rows. Eager
// calls (no graph object) keep the CPU backend exactly as fast as plain
// loops; a device that wants graph replay can capture the launches of a
// static shape itself.
//
// Shapes. Tensors hold float32 rows, row-major; every operation names its
// row count and width, and works on the first rows*width values, so one
// tensor allocated for the largest batch serves every smaller one.

// Tensor is a float32 activation buffer in the backend's memory (host
// memory for cpu, device memory for cuda). Only its backend reads or writes
// its values; code above moves values in and out with Upload and Download.
// A backend whose tensors hold memory of their own may give them a Free()
// method: engine/model calls it when it drops a tensor (a scratch buffer
// outgrown, Cache.Free); host tensors are left to the garbage collector.
type Tensor interface {
	// Len is the number of float32 values the tensor holds.
	Len() int
}

// KV is one sequence's key/value cache in the backend's memory: Layers()
// layers of Cap() slots; a slot holds one key row and one value row of
// Width() values each, stored as Type() (quant.F32, or quant.F16 to halve
// the memory). Which slots are in use is the caller's bookkeeping
// (engine/model.Cache); the backend only stores rows.
type KV interface {
	Layers() int
	Cap() int
	Width() int
	Type() quant.Type
	// Bytes is the memory the cache holds.
	Bytes() uint64
	// Free releases the cache's memory; it must not be used afterwards.
	Free()
}

// RoPEShape describes one rotation: rows rows of heads heads of headDim
// values, of which the first ropeDim are rotated, in pairs (2i, 2i+1), or
// (i, i+ropeDim/2) when Neox.
type RoPEShape struct {
	Heads, HeadDim, RopeDim int
	Neox                    bool
}

// AttnShape describes one attention call: Heads query heads sharing KVHeads
// key/value heads of HeadDim values, scores multiplied by Scale and, when
// Softcap > 0, mapped to Softcap*tanh(score/Softcap) before the softmax.
type AttnShape struct {
	Heads, KVHeads, HeadDim int
	Scale, Softcap          float32
}

// Device is a backend that can keep a whole forward pass: weights,
// activations and the KV cache in its memory. Every method may be called
// from one goroutine at a time per Device; a backend serialises its own
// workers.
type Device interface {
	Backend

	// NewVector stores a small constant vector (a norm's weights, a bias)
	// in the backend's memory.
	NewVector(v []float32) (Tensor, error)
	// NewTensor allocates a zeroed activation tensor of n values. The
	// backend checks n against its memory and returns an error, never
	// panics, when it does not fit.
	NewTensor(n int) (Tensor, error)
	// View is the n values of t from value offset on, as a tensor of its
	// own over t's memory: what either writes, the other reads. A pass of
	// several sequences keeps all their rows in one tensor, so that each
	// weight product runs once over every row, and hands each sequence's
	// rows to StoreKV and Attention, which work from a tensor's first row,
	// as a view. A view holds no memory of its own (it has no Free), is
	// valid while t is, and costs no copy; offset+n must not exceed
	// t.Len() (the backend panics, naming the sizes, otherwise).
	View(t Tensor, offset, n int) Tensor
	// Upload copies src into dst[:len(src)].
	Upload(dst Tensor, src []float32)
	// Download copies src[:len(dst)] into dst.
	Download(dst []float32, src Tensor)
	// NewKV allocates a cache of layers x slots x width keys and values of
	// type t (quant.F32 or quant.F16); it returns an error when t is not
	// supported or the cache does not fit.
	NewKV(layers, slots, width int, t quant.Type) (KV, error)

	// Embed writes the dequantised rows ids[i] of table (a token embedding
	// matrix: Rows() tokens of Cols() values) into dst's rows i. It
	// returns an error for an id outside the table.
	Embed(dst Tensor, table Matrix, ids []int) error
	// MatMulT is MatMul on tensors: out[r, o] = W[o, :] · x[r, :], r < n.
	MatMulT(out Tensor, w Matrix, x Tensor, n int)
	// RMSNorm: out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w, for rows rows
	// of dim values (out may be x). The mean accumulates in at least
	// float64-equivalent precision on the CPU, as ggml does.
	RMSNorm(out, x, w Tensor, rows, dim int, eps float32)
	// AddRow adds the dim-vector b to each of rows rows of x (a bias).
	AddRow(x, b Tensor, rows, dim int)
	// Add: x[i] += y[i] for i < n (the residual).
	Add(x, y Tensor, n int)
	// Scale: x[i] *= s for i < n.
	Scale(x Tensor, n int, s float32)
	// Softcap: x[i] = c * tanh(x[i] / c) for i < n.
	Softcap(x Tensor, n int, c float32)
	// GLU: g[i] = act(g[i]) * u[i] for i < n, act SiLU, or GELU (tanh
	// form, gemma's gelu_pytorch_tanh) when gelu.
	GLU(g, u Tensor, n int, gelu bool)
	// RoPE rotates rows rows of x in place by the angles in cos and sin
	// (host tables of rows * RopeDim/2 values, row-major, already scaled).
	RoPE(x Tensor, rows int, s RoPEShape, cos, sin []float32)
	// StoreKV writes rows rows of keys k and values v (each rows x
	// kv.Width()) into layer's slots slot..slot+rows-1.
	StoreKV(kv KV, layer, slot int, k, v Tensor, rows int)
	// Attention computes, for n query rows of q (n x Heads*HeadDim), the
	// softmax-weighted sum of layer's cached values over slots
	// 0..past+n-1 (the batch's own keys are already stored at past..), and
	// writes n x Heads*HeadDim values to out. mask (host; nil = causal:
	// row i sees slots 0..past+i) holds n rows of past+n flags. A row that
	// sees no slot outputs zeros.
	Attention(out, q Tensor, kv KV, layer, past, n int, mask []bool, s AttnShape)
	// Compact moves, on every layer, slot keep[i] to slot i; keep lists
	// distinct slots below used, in any order.
	Compact(kv KV, keep []int, used int) error
	// CopyKV copies the first n slots of every layer of src into dst (the
	// same shape and type): a prefix shared by a new sequence.
	CopyKV(dst, src KV, n int) error
	// Gather copies rows[j] of src into row j of dst, rows of dim values.
	Gather(dst, src Tensor, rows []int, dim int)
	// Argmax writes the index of the largest of each of rows rows of cols
	// values (the lowest index on ties) into dst[:rows].
	Argmax(dst []int, x Tensor, rows, cols int)
}

// MemoryMeter is a Device with memory of its own (a GPU's), which it can
// time: the rate of a copy inside that memory, which bounds how fast a
// decode pass can stream the weights (the device's roofline), and of
// transfers to and from the host, which every pass pays for its inputs and
// outputs. The CPU backend's memory is the host's (profiles.Bandwidth
// times it) and has no MemoryMeter.
type MemoryMeter interface {
	MeasureMemory() (MemoryRates, error)
}

// MemoryRates are a device's measured memory rates, in bytes per second,
// and what the driver says of it.
type MemoryRates struct {
	Copy            float64 // a device-to-device copy, bytes read plus bytes written
	HostToDevice    float64 // from pageable host memory
	DeviceToHost    float64 // to pageable host memory
	Peak            float64 // the memory's rate by its clock and bus width (the datasheet's)
	Multiprocessors int
	Description     string
}

// MultiMatMul is a Device that multiplies one input by several matrices in
// one dispatch (the CPU backend: one hand-over to its workers and one
// quantisation of the input instead of one per matrix). Each outs[i] must
// equal, bit for bit, what MatMulT(outs[i], ws[i], x, n) writes, so that
// using it changes no result.
type MultiMatMul interface {
	MatMulMulti(outs []Tensor, ws []Matrix, x Tensor, n int)
}

// MatMulAll writes x multiplied by each ws[i] into outs[i]: in one
// dispatch where d is a MultiMatMul, else one MatMulT each.
func MatMulAll(d Device, outs []Tensor, ws []Matrix, x Tensor, n int) {
	if m, ok := d.(MultiMatMul); ok {
		m.MatMulMulti(outs, ws, x, n)
		return
	}
	for i, w := range ws {
		d.MatMulT(outs[i], w, x, n)
	}
}

// SeqAttention is one sequence's part of a pass's attention on a layer:
// its N query rows (Q, N x Heads*HeadDim) and their outputs, its own cache
// with Past slots before them, and its mask (nil: causal), as Attention
// takes them.
type SeqAttention struct {
	Out, Q  Tensor
	KV      KV
	Past, N int
	Mask    []bool
}

// SeqsAttender is a Device that computes the attention of several
// sequences of a pass in one dispatch (the CPU backend: one hand-over to
// its workers for all of them instead of one a sequence, each waiting for
// its slowest task). Each sequence's output must equal, bit for bit, what
// Attention writes for it alone.
type SeqsAttender interface {
	AttentionSeqs(layer int, seqs []SeqAttention, s AttnShape)
}

// AttentionAll computes every sequence's attention on layer: in one
// dispatch where d is a SeqsAttender, else one Attention each.
func AttentionAll(d Device, layer int, seqs []SeqAttention, s AttnShape) {
	if m, ok := d.(SeqsAttender); ok && len(seqs) > 1 {
		m.AttentionSeqs(layer, seqs, s)
		return
	}
	for _, q := range seqs {
		d.Attention(q.Out, q.Q, q.KV, layer, q.Past, q.N, q.Mask, s)
	}
}
