package cuda

import (
	"fmt"
	"math"

	"arborist/kernels/quant"
)

// Reserve is the device memory every allocation leaves free: the driver's
// own use, the loaded module, and the launches' stacks.
const Reserve = 256 << 20

const mib = 1 << 20

// Fit checks an allocation of bytes for what against the device's free
// memory (free of total, as cuMemGetInfo reports them) before it is made,
// so a model or cache that does not fit is refused with the figures, not
// met with an out-of-memory error halfway through loading.
func Fit(what string, bytes, free, total int64) error {
	switch {
	case bytes < 0:
		return fmt.Errorf("cuda: %s: negative size %d", what, bytes)
	case bytes > free-Reserve:
		return fmt.Errorf("cuda: %s needs %.1f MiB of device memory; %.1f MiB of %.1f MiB are free (%d MiB kept in reserve)",
			what, float64(bytes)/mib, float64(free)/mib, float64(total)/mib, Reserve/mib)
	}
	return nil
}

// WeightBytes is the device memory of a rows x cols matrix of type t,
// uploaded in its GGUF layout.
func WeightBytes(t quant.Type, rows, cols int) (int64, error) {
	if rows < 1 || cols < 1 {
		return 0, fmt.Errorf("cuda: %dx%d matrix", rows, cols)
	}
	rb, err := quant.RowBytes(t, cols)
	if err != nil {
		return 0, err
	}
	if int64(rb) > math.MaxInt64/int64(rows) {
		return 0, fmt.Errorf("cuda: %dx%d %v matrix is too large", rows, cols, t)
	}
	return int64(rb) * int64(rows), nil
}

// KVBytes is the device memory of a cache of layers x slots x width keys
// and as many values of type t.
func KVBytes(layers, slots, width int, t quant.Type) (int64, error) {
	_, es, err := kvSuffix(t)
	if err != nil {
		return 0, err
	}
	if layers < 1 || slots < 1 || width < 1 {
		return 0, fmt.Errorf("cuda: KV cache of %d layers x %d slots x %d values", layers, slots, width)
	}
	b := 2 * int64(layers) * int64(slots)
	if b > math.MaxInt64/int64(width*es) {
		return 0, fmt.Errorf("cuda: KV cache of %d layers x %d slots x %d values is too large", layers, slots, width)
	}
	return b * int64(width*es), nil
}

// TensorBytes is the device memory of an activation tensor of n float32s.
func TensorBytes(n int) (int64, error) {
	if n < 0 || int64(n) > math.MaxInt64/4 {
		return 0, fmt.Errorf("cuda: tensor of %d values", n)
	}
	return 4 * int64(n), nil
}

// Plan is the device memory a model needs, by kind, so a caller can check a
// whole configuration (weights, a cache of so many slots, activations for
// batches of W rows) before loading anything.
type Plan struct {
	Weights, KV, Activations, Scratch int64
}

// Total is the sum of the plan's parts.
func (p Plan) Total() int64 { return p.Weights + p.KV + p.Activations + p.Scratch }

// Check reports whether the plan fits free bytes of device memory.
func (p Plan) Check(free, total int64) error {
	return Fit(fmt.Sprintf("the model (weights %.1f MiB, KV cache %.1f MiB, activations %.1f MiB, scratch %.1f MiB)",
		float64(p.Weights)/mib, float64(p.KV)/mib, float64(p.Activations)/mib, float64(p.Scratch)/mib), p.Total(), free, total)
}

// Shape is what Plan needs to know about a transformer: its matrices
// (each with its type) and the sizes of its activations.
type Shape struct {
	Matrices []MatrixShape
	Layers   int
	Dim      int // residual width
	FFN      int // feed-forward width
	QDim     int // heads x head dimension
	KVDim    int // key/value heads x head dimension
	Vocab    int
}

// MatrixShape is one weight matrix.
type MatrixShape struct {
	Type       quant.Type
	Rows, Cols int
}

// PlanModel sums the memory of shape's weights, a cache of slots slots of
// type kv, and activations and product scratch for batches of up to w rows
// (the buffers a pass allocates once for its widest batch).
func PlanModel(s Shape, slots, w int, kv quant.Type) (Plan, error) {
	var p Plan
	for _, m := range s.Matrices {
		b, err := WeightBytes(m.Type, m.Rows, m.Cols)
		if err != nil {
			return p, err
		}
		p.Weights += b
		mp, err := PlanMatMul(m.Type, m.Rows, m.Cols, w)
		if err != nil {
			return p, err
		}
		p.Scratch = max(p.Scratch, mp.Scratch)
	}
	var err error
	if p.KV, err = KVBytes(s.Layers, slots, s.KVDim, kv); err != nil {
		return p, err
	}
	// x, the normed x, q, k, v, the attention output, gate, up, logits
	per := 3*s.Dim + s.QDim + 2*s.KVDim + 2*s.FFN + s.Vocab + s.QDim
	if p.Activations, err = TensorBytes(w * per); err != nil {
		return p, err
	}
	return p, nil
}
