package cpu

import (
	"math"

	"arborist/kernels"
	"arborist/kernels/quant"
)

// The element-wise operations of a pass (RMSNorm, the residual add, the
// SiLU gate, RoPE, storing keys and values in the cache) and the
// quantisation of a product's activations run
// on the calling thread for a decode step's few thousand values, and are
// split across the workers for a wide pass's: at 128 tokens of a 1B
// model they are millions of values a layer, which one core took while
// the other waited. Each row (or value) is computed by the same code
// either way, so a result never depends on the split.

// parallelMin is the fewest values an operation is split across the
// workers for: below it the hand-over costs more than it saves.
const parallelMin = 1 << 15

// rowOp names what a rowsJob computes.
type rowOp int

const (
	opNorm  rowOp = iota // out = RMSNorm(x) * w, a unit a row
	opAdd                // x += y, a unit a value
	opSiLU               // g = silu(g) * u, a unit a value
	opRoPE               // rotate x by cos, sin, a unit a row
	opQuant              // quantise x into b.q8, a unit a row
	opStore              // keys and values into the cache, a unit a row
)

// rowsJob is one element-wise operation over units [0, n): its operands,
// whichever the operation reads.
type rowsJob struct {
	op           rowOp
	b            *Backend // opQuant's buffers; the C form's pool
	out, x, w, y []float32
	cos, sin     []float32
	dim          int
	eps          float32
	rope         kernels.RoPEShape
	n            int    // opQuant: rows in all
	layout       layout // opQuant: the layouts to fill
	kv           *KV    // opStore: the cache, its layer and first slot
	layer, slot  int
}

// run computes j over n units (of cost values each) on the calling
// thread, or split across the workers when there is enough of it.
func (b *Backend) runRows(j *rowsJob, n, cost int) {
	if b.threads == 1 || n*cost < parallelMin || n < 2 {
		j.do(0, 0, n)
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.rows = *j
	b.rows.b = b // for its C form
	b.pool.run(&b.rows, n, max(1, parallelMin/(4*max(1, cost))))
	b.rows = rowsJob{} // drop the references to the caller's slices
}

func (j *rowsJob) do(_, lo, hi int) {
	switch j.op {
	case opNorm:
		dim := j.dim
		rmsNorm(j.out[lo*dim:hi*dim], j.x[lo*dim:hi*dim], j.w[:dim], dim, j.eps)
	case opAdd:
		addTo(j.x[lo:hi], j.y[lo:hi])
	case opSiLU:
		siluMul(j.x[lo:hi], j.y[lo:hi])
	case opRoPE:
		s := j.rope
		w, half := s.Heads*s.HeadDim, s.RopeDim/2
		rope(j.x[lo*w:hi*w], hi-lo, s, j.cos[lo*half:hi*half], j.sin[lo*half:hi*half])
	case opQuant:
		j.b.quantizeRows(j.x, j.n, lo, hi, j.layout)
	case opStore:
		c, w := j.kv, j.kv.width
		at, k, v := (j.slot+lo)*w, j.x[lo*w:hi*w], j.y[lo*w:hi*w]
		if c.typ == quant.F32 {
			copy(c.k[j.layer][at:at+len(k)], k)
			copy(c.v[j.layer][at:at+len(v)], v)
			return
		}
		f32ToF16(c.k16[j.layer][at:at+len(k)], k)
		f32ToF16(c.v16[j.layer][at:at+len(v)], v)
	}
}

// rmsNormGo is rmsNorm in Go (builds without cgo): each row of x times
// w over its root mean square, the sum of squares in float64.
func rmsNormGo(out, x, w []float32, dim int, eps float32) {
	for r := 0; r < len(x)/dim; r++ {
		xr := x[r*dim : (r+1)*dim]
		var sum float64
		for _, v := range xr {
			sum += float64(v * v)
		}
		mean := float32(sum / float64(dim))
		scale := 1 / float32(math.Sqrt(float64(mean+eps)))
		or := out[r*dim : (r+1)*dim]
		for i, v := range xr {
			or[i] = v * scale * w[i]
		}
	}
}

// ropeGo rotates the first RopeDim values of each head of rows rows of
// x by the row's angles (RopeDim/2 of cos and of sin a row): pairs (2i,
// 2i+1), or (i, i+RopeDim/2) when Neox.
func ropeGo(x []float32, rows int, s kernels.RoPEShape, cos, sin []float32) {
	hd, half := s.HeadDim, s.RopeDim/2
	w := s.Heads * hd
	for r := 0; r < rows; r++ {
		c, sn := cos[r*half:(r+1)*half], sin[r*half:(r+1)*half]
		row := x[r*w : (r+1)*w]
		for h := 0; h < s.Heads; h++ {
			v := row[h*hd : (h+1)*hd]
			for i := 0; i < half; i++ {
				a, bb := 2*i, 2*i+1
				if s.Neox {
					a, bb = i, i+half
				}
				x0, x1 := v[a], v[bb]
				v[a] = x0*c[i] - x1*sn[i]
				v[bb] = x0*sn[i] + x1*c[i]
			}
		}
	}
}

// f32ToF16Go converts src to half floats in dst, quant.F32ToF16 a value.
func f32ToF16Go(dst []uint16, src []float32) {
	for i, f := range src {
		dst[i] = quant.F32ToF16(f)
	}
}

// addToGo: x[i] += y[i].
func addToGo(x, y []float32) {
	y = y[:len(x)]
	for i := range x {
		x[i] += y[i]
	}
}
