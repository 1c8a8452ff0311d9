package cuda

import (
	"fmt"

	"arborist/kernels/quant"
)

// These constants mirror the #defines of kernels/arborist.cu; a test reads
// them from the source.
const (
	warp     = 32
	mmWarps  = 4   // MM_WARPS: output rows per matrix-product block
	mmqNB    = 8   // MMQ_NB: batch rows per matrix-product block
	tcWarps  = 8   // TC_WARPS: warps sharing a tensor-core output tile
	attWarps = 4   // ATT_WARPS
	attMaxD  = 256 // ATT_MAXD * 32: the largest head dimension
	ewBlock  = 256 // block of the element-wise and row kernels
	embBlock = 128 // threads (32-weight chunks) per block of embed_q*
)

// Hardware limits every launch must respect (all NVIDIA GPUs since sm_30).
const (
	maxBlock  = 1024
	maxGridX  = 1<<31 - 1
	maxGridYZ = 65535
	maxShared = 48 << 10 // static shared memory per block
)

// Launch is one kernel launch: the kernel's name, its grid and block.
// Kernels use static shared memory only.
type Launch struct {
	Kernel string
	Grid   [3]int
	Block  [3]int
}

// Check reports a launch the hardware would refuse.
func (l Launch) Check() error {
	b := l.Block[0] * l.Block[1] * l.Block[2]
	switch {
	case l.Kernel == "":
		return fmt.Errorf("cuda: launch without a kernel")
	case b < 1 || b > maxBlock || l.Block[0] < 1 || l.Block[1] < 1 || l.Block[2] < 1:
		return fmt.Errorf("cuda: %s: block %v out of range", l.Kernel, l.Block)
	case l.Grid[0] < 1 || l.Grid[0] > maxGridX:
		return fmt.Errorf("cuda: %s: grid.x %d out of range", l.Kernel, l.Grid[0])
	case l.Grid[1] < 1 || l.Grid[1] > maxGridYZ || l.Grid[2] < 1 || l.Grid[2] > maxGridYZ:
		return fmt.Errorf("cuda: %s: grid %v out of range (y and z at most %d)", l.Kernel, l.Grid, maxGridYZ)
	}
	return nil
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

func launch(kernel string, gx, gy, gz, bx int) (Launch, error) {
	l := Launch{Kernel: kernel, Grid: [3]int{gx, gy, gz}, Block: [3]int{bx, 1, 1}}
	return l, l.Check()
}

// MatMulPlan is how a product out[n x rows] = x[n x cols] W^T runs: the
// launches in order and the scratch they need (bytes), for the quantised
// activations or the rounded copy of x the tensor cores read.
type MatMulPlan struct {
	Launches    []Launch
	Scratch     int64
	TensorCores bool
	// Quantised: x is quantised to 8 bits first (int8 values, then a
	// float32 scale and a float32 scaled sum per 32 values).
	Quantised bool
	// Pad is the row count of the rounded copy of x (n rounded up to 16)
	// on the tensor-core path.
	Pad int
}

// PlanMatMul returns the launches for a product with a rows x cols matrix
// of type t over n activation rows.
func PlanMatMul(t quant.Type, rows, cols, n int) (MatMulPlan, error) {
	var p MatMulPlan
	suf, err := suffix(t)
	if err != nil {
		return p, err
	}
	if rows < 1 || cols < 1 || n < 1 {
		return p, fmt.Errorf("cuda: product of %dx%d weights with %d rows", rows, cols, n)
	}
	if bs := t.BlockSize(); cols%bs != 0 {
		return p, fmt.Errorf("cuda: %v row of %d weights is not whole blocks of %d", t, cols, bs)
	}
	gx, gy := ceilDiv(rows, mmWarps), ceilDiv(n, mmqNB)
	switch {
	case quantised(t):
		q, err := launch("quantize_q8", cols/32, n, 1, warp)
		if err != nil {
			return p, err
		}
		m, err := launch("mm_"+suf, gx, gy, 1, warp*mmWarps)
		if err != nil {
			return p, err
		}
		p.Launches, p.Quantised = []Launch{q, m}, true
		p.Scratch = int64(n)*int64(cols) + 2*4*int64(n)*int64(cols/32)
	case t == quant.F16 && rows%16 == 0 && cols%16 == 0:
		// F16 only: a tensor-core product rounds the activations to the
		// weights' type, and bf16's 8 bits put BF16 products outside the
		// Device suite's tolerance (about 1.6e-3 x sqrt(cols) against
		// 1e-3); BF16 takes the float32 path below until a split
		// (hi + lo bf16) product is written
		p.Pad = ceilDiv(n, 16) * 16
		conv := "to_half"
		if t == quant.BF16 {
			conv = "to_bf16"
		}
		c, err := launch(conv, ceilDiv(cols, ewBlock), p.Pad, 1, ewBlock)
		if err != nil {
			return p, err
		}
		m, err := launch("mm_tc_"+suf, rows/16, p.Pad/16, 1, warp*tcWarps)
		if err != nil {
			return p, err
		}
		p.Launches, p.TensorCores = []Launch{c, m}, true
		p.Scratch = 2 * int64(p.Pad) * int64(cols)
	default:
		m, err := launch("mm_"+suf, gx, gy, 1, warp*mmWarps)
		if err != nil {
			return p, err
		}
		p.Launches = []Launch{m}
	}
	return p, nil
}

// EmbedLaunch looks up nids rows of a table of cols values of type t.
func EmbedLaunch(t quant.Type, cols, nids int) (Launch, error) {
	suf, err := suffix(t)
	if err != nil {
		return Launch{}, err
	}
	if quantised(t) {
		if cols%t.BlockSize() != 0 {
			return Launch{}, fmt.Errorf("cuda: %v row of %d weights is not whole blocks", t, cols)
		}
		return launch("embed_"+suf, ceilDiv(cols/32, embBlock), nids, 1, embBlock)
	}
	return launch("embed_"+suf, ceilDiv(cols, ewBlock), nids, 1, ewBlock)
}

// RowLaunch is a kernel with a block per row (rmsnorm, argmax).
func RowLaunch(kernel string, rows int) (Launch, error) {
	return launch(kernel, rows, 1, 1, ewBlock)
}

// ElementwiseLaunch covers n values with a thread each (add, scale,
// softcap, add_row, glu).
func ElementwiseLaunch(kernel string, n int) (Launch, error) {
	return launch(kernel, ceilDiv(n, ewBlock), 1, 1, ewBlock)
}

// RowsLaunch covers rows rows of width values, a thread per value (gather,
// store_kv).
func RowsLaunch(kernel string, rows, width int) (Launch, error) {
	return launch(kernel, ceilDiv(width, ewBlock), rows, 1, ewBlock)
}

// RoPELaunch rotates rows rows of heads heads, a thread per pair.
func RoPELaunch(rows, heads, ropeDim, headDim int) (Launch, error) {
	if ropeDim < 2 || ropeDim%2 != 0 || ropeDim > headDim {
		return Launch{}, fmt.Errorf("cuda: rope of %d dimensions in heads of %d", ropeDim, headDim)
	}
	return launch("rope", ceilDiv(heads*ropeDim/2, ewBlock), rows, 1, ewBlock)
}

// kvSuffix names the kernels of a cache of type t.
func kvSuffix(t quant.Type) (string, int, error) {
	switch t {
	case quant.F32:
		return "f32", 4, nil
	case quant.F16:
		return "f16", 2, nil
	}
	return "", 0, fmt.Errorf("cuda: KV cache type %v is not supported (F32 or F16)", t)
}

// CompactTail is the part of a compaction (slot keep[i] to slot i) that
// moves anything: the first off slots, kept where they are (keep[i] == i,
// the whole context before a step's tree, which every commit keeps), are
// left alone, and the rest move as tail does (slot tail[i] to slot i)
// within the cache seen from slot off. A commit then moves the accepted
// path's slots alone, not the whole context twice. keep must be distinct
// slots, so tail's are not negative.
func CompactTail(keep []int) (off int, tail []int) {
	for off < len(keep) && keep[off] == off {
		off++
	}
	if off == len(keep) {
		return off, nil
	}
	tail = make([]int, len(keep)-off)
	for i, s := range keep[off:] {
		tail[i] = s - off
	}
	return off, tail
}

// CompactLaunches moves k kept slots of a cache of layers layers of width
// values of type t: a gather to scratch and a put back, over 2*layers
// planes of 16-bit words. It returns the scratch bytes too.
func CompactLaunches(t quant.Type, layers, width, k int) ([]Launch, int64, error) {
	_, es, err := kvSuffix(t)
	if err != nil {
		return nil, 0, err
	}
	words := width * es / 2
	g, err := launch("kv_gather", ceilDiv(words, ewBlock), k, 2*layers, ewBlock)
	if err != nil {
		return nil, 0, err
	}
	p, err := launch("kv_put", ceilDiv(words, ewBlock), k, 2*layers, ewBlock)
	if err != nil {
		return nil, 0, err
	}
	return []Launch{g, p}, int64(2*layers) * int64(k) * int64(width*es), nil
}

// AttentionLaunch runs n query rows of heads heads against a cache of type
// t: a block of attWarps warps per (head, row).
func AttentionLaunch(t quant.Type, heads, kvHeads, headDim, n int) (Launch, error) {
	suf, _, err := kvSuffix(t)
	if err != nil {
		return Launch{}, err
	}
	switch {
	case headDim < 1 || headDim > attMaxD:
		return Launch{}, fmt.Errorf("cuda: head dimension %d is not supported (at most %d)", headDim, attMaxD)
	case kvHeads < 1 || heads%kvHeads != 0:
		return Launch{}, fmt.Errorf("cuda: %d query heads do not share %d key/value heads evenly", heads, kvHeads)
	}
	return launch("attention_"+suf, heads, n, 1, warp*attWarps)
}
