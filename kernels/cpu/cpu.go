// Package cpu is Arborist's CPU compute backend: matrix products over GGUF
// weight blocks, computed in place on the (memory-mapped) quantised data and
// split across a persistent pool of worker goroutines.
//
// For the quantised types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K,
// Q5_K, Q6_K, IQ4_NL, IQ4_XS) the activations are quantised to 8 bits per
// 32-value block, as mature engines do, and the inner products run on integers in place on
// the weight blocks; for the float types (F32, F16, BF16) each weight row is
// read (or widened to float32 in a per-worker scratch row) and multiplied
// in float32. The accuracy the 8-bit activations cost is measured by
// TestQ8ActivationError.
// Every kernel has a reference in refMatMul, which the tests compare against.
package cpu

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"arborist/kernels"
	"arborist/kernels/quant"
)

// Backend is the CPU backend. Its methods are safe for concurrent use; calls
// are serialised on its worker pool.
type Backend struct {
	threads int
	pool    *pool
	mu      sync.Mutex
	scratch [][]float32 // per worker, one dequantised row
	q8      q8Buf       // activations quantised for the current call
	mm      matmulJob   // the current call's job, reused so decoding allocates nothing
	multi   multiJob    // MatMulMulti's job, reused likewise
	rows    rowsJob     // the element-wise operation split across the workers
	attn    attnJob
	attnGo  attnGoJob
	seqs    seqsJob // AttentionSeqs's job
	// repackLeft is how many more bytes of repacked copies this backend's
	// matrices may take (RepackBudget): past it, a matrix is multiplied in
	// its file layout.
	repackLeft int64
	// repacked is the bytes of repacked copies made, and streamMin the
	// most of them with which products keep their weights in the caches
	// (streamBytes; streams)
	repacked  atomic.Int64
	streamMin int64
}

// streamBytes is the repacked weights past which a backend's products
// stream them past the caches where one tile reads them (arb_mm_x16's
// stream): above any third-level cache a decode step runs from (32 MB on
// the Zen 5 measured, 96-128 MB on the largest desktop parts), so a
// model there reads its weights from memory every token anyway. A model
// that fits in the caches keeps them: the bench target (59 MiB of Q8_0,
// about twice the 32 MB cache) read 0.97-1.03 either way, stories15m's
// shape (26 MB) read 1.09 streamed.
const streamBytes = 256 << 20

// streams says whether b's products stream their weights (streamBytes).
func (b *Backend) streams() bool { return b.repacked.Load() > b.streamMin }

// RepackBudget is the memory a backend's repacked weight copies may take
// in all: a quarter of the machine's RAM (MemTotal; 4 GiB where it cannot
// be read). The copies sit beside the mapped weights, and the K-quant ones
// (where the CPU has AVX-512 VNNI) are as large as those weights or
// larger: a 40 GB Q4_K_M model on a 64 GB machine would need 80 GB with
// every matrix repacked; with the budget its first 16 GB of matrices are,
// and the rest run the row kernels.
func RepackBudget() int64 {
	if ram := MemTotal(); ram > 0 {
		return int64(ram / 4)
	}
	return 4 << 30
}

// MemTotal is the machine's RAM in bytes (MemTotal in /proc/meminfo), 0
// where it cannot be read.
func MemTotal() uint64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				return 0
			}
			return kb * 1024
		}
	}
	return 0
}

var _ kernels.Backend = (*Backend)(nil)
var _ kernels.Parallel = (*Backend)(nil)

// DefaultThreads is the number of physical cores this process may use: SMT
// siblings share the execution units a matmul saturates, so one thread per
// core is the fastest setting. On Linux the cores are counted from
// /proc/cpuinfo (distinct physical id / core id pairs); elsewhere, or when
// that fails, the logical CPU count is halved when it is even and above 2.
func DefaultThreads() int {
	n := runtime.NumCPU()
	if cores := PhysicalCores(); cores > 0 {
		return min(cores, n)
	}
	if n > 2 && n%2 == 0 {
		return n / 2
	}
	return n
}

// PhysicalCores counts the distinct (physical id, core id) pairs in
// /proc/cpuinfo, or returns 0 where that file is missing.
func PhysicalCores() int {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return 0
	}
	cores := map[string]bool{}
	phys := ""
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "physical id":
			phys = strings.TrimSpace(v)
		case "core id":
			cores[phys+"/"+strings.TrimSpace(v)] = true
		}
	}
	return len(cores)
}

// New starts a backend with the given number of worker threads (at least 1).
func New(threads int) *Backend {
	if threads < 1 {
		threads = 1
	}
	return &Backend{threads: threads, pool: newPool(threads), scratch: make([][]float32, threads), repackLeft: RepackBudget(), streamMin: streamBytes}
}

// Name returns "cpu".
func (b *Backend) Name() string { return "cpu" }

// Threads returns the worker count.
func (b *Backend) Threads() int { return b.threads }

// Close stops the workers.
func (b *Backend) Close() { b.pool.close() }

// ParallelFor runs fn over [0, n) in chunks on the workers.
func (b *Backend) ParallelFor(n int, fn func(lo, hi int)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pool.run(funcJob(fn), n, 1)
}

// Matrix is a weight matrix in ggml row layout.
type Matrix struct {
	typ        quant.Type
	rows, cols int
	rowBytes   int
	data       []byte
	// packed is a quantised matrix's rows repacked group rows at a time:
	// sixteen for the AVX-512 VNNI tiles (x16.c), eight for the AVX2 ones
	// (q40x8.c, k8.c); nil where they do not run.
	// data stays for row reads and the portable kernels.
	packed []byte
	group  int
}

// Rows is the number of outputs.
func (m *Matrix) Rows() int { return m.rows }

// Cols is the number of inputs.
func (m *Matrix) Cols() int { return m.cols }

// Type is the weight type.
func (m *Matrix) Type() quant.Type { return m.typ }

// Row returns the bytes of output row o.
func (m *Matrix) Row(o int) []byte { return m.data[o*m.rowBytes : (o+1)*m.rowBytes] }

// NewMatrix wraps ggml-layout weight bytes without copying them.
// It repacks within the backend's budget (RepackBudget): a matrix whose
// copy would pass it keeps its file layout.
func (b *Backend) NewMatrix(t quant.Type, data []byte, rows, cols int) (kernels.Matrix, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	size := RepackedBytes(t, rows, cols)
	m, err := newMatrix(t, data, rows, cols, size <= b.repackLeft)
	if err == nil && m.packed != nil {
		b.repackLeft -= int64(len(m.packed))
		b.repacked.Add(int64(len(m.packed)))
	}
	return m, err
}

// NewMatrix wraps ggml-layout weight bytes without copying them (a Q4_0,
// Q8_0, Q4_K, Q5_K or Q6_K matrix whose rows come in eights also gets a
// repacked copy where the CPU runs the eight-row kernels).
func NewMatrix(t quant.Type, data []byte, rows, cols int) (*Matrix, error) {
	return newMatrix(t, data, rows, cols, true)
}

// newMatrix is NewMatrix, repacking only when repack allows it.
func newMatrix(t quant.Type, data []byte, rows, cols int, repack bool) (*Matrix, error) {
	if !t.Supported() {
		return nil, fmt.Errorf("cpu: weight type %s is not supported", t)
	}
	rb, err := quant.RowBytes(t, cols)
	if err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	if len(data) != rb*rows {
		return nil, fmt.Errorf("cpu: %s matrix %dx%d needs %d bytes, got %d", t, rows, cols, rb*rows, len(data))
	}
	m := &Matrix{typ: t, rows: rows, cols: cols, rowBytes: rb, data: data}
	if repack {
		m.packed, m.group = repackMatrix(m, packRows(t))
	}
	return m, nil
}

// packRows is how many rows a repacked group of t (any quantised type)
// holds on this CPU: 16 where the AVX-512 VNNI tiles run, 8 where the
// AVX2 ones do, 0 where t is not repacked.
func packRows(t quant.Type) int {
	if !repacks() {
		return 0
	}
	switch {
	case repackedRowBytes(t) == 0:
		return 0
	case vnniTiles():
		return 16
	}
	return 8
}

// repackedRowBytes is what one row's block (super-block for the types of
// 256 weights a block) takes repacked, at either width: the eight-row
// groups (q40x8.c's and k8.c's sizes) and the sixteen-row ones (x16.c's
// X16_ sizes) hold the same bytes a row, the file's rearranged, but
// IQ4_XS with float32 scales and the K-quants with their scales
// unpacked; 0 for the types that are not repacked.
func repackedRowBytes(t quant.Type) int64 {
	switch t {
	case quant.Q8_0:
		return 2 + 32
	case quant.Q4_0, quant.IQ4_NL:
		return 2 + 16
	case quant.Q5_0:
		return 2 + 16 + 4
	case quant.Q4_1:
		return 2 + 2 + 16
	case quant.Q5_1:
		return 2 + 2 + 16 + 4
	case quant.IQ4_XS:
		return 8 * (4 + 16)
	case quant.Q4_K:
		return 2 + 2 + 16 + 128
	case quant.Q5_K:
		return 2 + 2 + 16 + 128 + 32
	case quant.Q6_K:
		return 2 + 16 + 256
	case quant.Q3_K:
		return 2 + 16 + 96
	case quant.Q2_K:
		return 2 + 2 + 16 + 64
	}
	return 0
}

// RepackedBytes is the memory a t matrix of rows x cols takes on this
// CPU beside its mapped weights (the sixteen-row copy of a quantised
// type where the AVX-512 VNNI tiles run, the eight-row one where the AVX2
// tiles do), for memory estimates and the copy itself; 0 where nothing
// is repacked. The rows must come in eights
// (sixteen-row groups pad the last eight with zeros).
func RepackedBytes(t quant.Type, rows, cols int) int64 {
	return repackedBytes(t, rows, cols, packRows(t))
}

// repackedBytes is RepackedBytes in groups of group rows (16 or 8).
func repackedBytes(t quant.Type, rows, cols, group int) int64 {
	if group == 0 || rows <= 0 || rows%8 != 0 || cols <= 0 || cols%t.BlockSize() != 0 {
		return 0
	}
	groups := int64((rows + group - 1) / group)
	return groups * int64(group) * int64(cols/t.BlockSize()) * repackedRowBytes(t)
}

// q8Buf holds activations quantised to 8 bits in blocks of 32, in the
// layouts the kernels read. Row by row (the row kernels and the eight-row
// tiles): value d[b]*q[b*32+j], with s[b] the sum of the block's q (for
// types with a min or an offset). In panels (the sixteen-row tiles, x16.c):
// p, each block with its own scale (arb_quantize_q8_panels), for Q4_0 and
// Q8_0; k, one scale for each 256 values (arb_quantize_q8k_panels), for the
// K-quants.
type q8Buf struct {
	d []float32
	q []int8
	s []int32

	p, k panelBuf
}

// panelBuf is activations in panels: q, the scales d and the offsets c,
// four a block.
type panelBuf struct {
	q []int8
	d []float32
	c []int32
}

// layout is a set of the activation layouts of q8Buf.
type layout uint8

const (
	byRows    layout = 1 << iota // row by row
	inPanels                     // panels, a scale a block (q8Buf.p)
	inKPanels                    // panels, a scale a super-block (q8Buf.k)
)

// kQuant says whether t is a K-quant, whose tiles read activations
// scaled per 256 values.
func kQuant(t quant.Type) bool {
	switch t {
	case quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q5_K, quant.Q6_K:
		return true
	}
	return false
}

// layoutOf is the layout products with w read.
func layoutOf(w *Matrix) layout {
	switch {
	case !usesQ8(w.typ):
		return 0
	case kQuant(w.typ):
		if w.group == 0 {
			return byRows
		}
		return inKPanels // the sixteen- and the eight-row tiles alike
	case w.group != 16:
		return byRows
	}
	return inPanels
}

// size makes room for n activations row by row and returns their block
// count.
func (q *q8Buf) size(n int) int {
	nb := n / quant.QK
	q.d = grow(q.d, nb)
	q.s = growI32(q.s, nb)
	if cap(q.q) < n {
		q.q = make([]int8, n)
	}
	q.q = q.q[:n]
	return nb
}

// size makes room for n activations in panels.
func (p *panelBuf) size(n int) {
	nb := n / quant.QK
	p.d = grow(p.d, nb)
	p.c = growI32(p.c, 4*nb)
	if cap(p.q) < n {
		p.q = make([]int8, n)
	}
	p.q = p.q[:n]
}

func (q *q8Buf) quantize(x []float32) {
	q.size(len(x))
	q.quantizeRows(x, len(x), 0, 1)
}

// quantizeRows quantises rows lo..hi-1 of x, rows of cols values, into
// the row-by-row layout (sized for all of x).
func (q *q8Buf) quantizeRows(x []float32, cols, lo, hi int) {
	for b := lo * cols / quant.QK; b < hi*cols/quant.QK; b++ {
		xs := x[b*quant.QK : (b+1)*quant.QK]
		d, id := q8Scale(xs)
		sum := int32(0)
		qs := q.q[b*quant.QK : (b+1)*quant.QK]
		for j, v := range xs {
			r := int8(math.RoundToEven(float64(v * id)))
			qs[j] = r
			sum += int32(r)
		}
		q.d[b], q.s[b] = d, sum
	}
}

// q8Scale is the scale d of 8-bit values for xs (their largest magnitude
// over 127) and its inverse (0 where d is).
func q8Scale(xs []float32) (d, id float32) {
	amax := float32(0)
	for _, v := range xs {
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	d = amax / 127
	if d != 0 {
		id = 1 / d
	}
	return d, id
}

func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

func growI32(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n)
	}
	return s[:n]
}

// usesQ8 reports whether products with t run on 8-bit activations.
func usesQ8(t quant.Type) bool {
	switch t {
	case quant.Q8_0, quant.Q4_0, quant.Q4_1, quant.Q5_0, quant.Q5_1, quant.Q4_K, quant.Q5_K, quant.Q6_K,
		quant.Q2_K, quant.Q3_K, quant.IQ4_NL, quant.IQ4_XS:
		return true
	}
	return false
}

type matmulJob struct {
	b   *Backend
	out []float32
	w   *Matrix
	x   []float32
	n   int
}

// MatMul computes out[r*rows+o] = W[o,:] . x[r*cols:] for r < n.
func (b *Backend) MatMul(out []float32, wm kernels.Matrix, x []float32, n int) {
	w := wm.(*Matrix)
	if len(x) < n*w.cols || len(out) < n*w.rows {
		panic(fmt.Sprintf("cpu: MatMul %dx%d with %d rows: x has %d values, out %d", w.rows, w.cols, n, len(x), len(out)))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if l := layoutOf(w); l != 0 {
		b.quantize(x[:n*w.cols], n, l)
	}
	b.mm = matmulJob{b: b, out: out, w: w, x: x, n: n}
	j := &b.mm
	defer func() { b.mm = matmulJob{} }() // drop the references to the caller's slices
	if w.packed != nil {
		// a repacked matrix is split by groups of rows (a row's result
		// depends on nothing else, but a group is the unit)
		b.pool.run(j, units(w), grain(unitRows(w), w.cols, n))
		return
	}
	// grain: at least 32K multiply-adds a chunk, so a small product (a
	// drafter's: width 64) runs on the calling thread instead of paying
	// a hand-over per chunk; with 4096 weights a chunk, a 64-wide drafter
	// decoded at 4.1-4.3K tokens/s on 2 threads against 12.7K on one, and
	// at 6.1-11.2K with this (the rows a chunk covers never change a
	// row's result)
	b.pool.run(j, w.rows, grain(1, w.cols, n))
}

// quantize fills b.q8 with x (n rows) in 8-bit blocks, in the layouts
// of l. The caller holds b.mu; a wide pass's rows are split across the
// workers.
func (b *Backend) quantize(x []float32, n int, l layout) {
	if l&byRows != 0 {
		b.q8.size(len(x))
	}
	if l&inPanels != 0 {
		b.q8.p.size(len(x))
	}
	if l&inKPanels != 0 {
		b.q8.k.size(len(x))
	}
	if b.threads == 1 || len(x) < parallelMin || n < 2 {
		b.quantizeRows(x, n, 0, n, l)
		return
	}
	b.rows = rowsJob{op: opQuant, b: b, x: x, n: n, layout: l}
	b.pool.run(&b.rows, n, max(1, parallelMin/(4*(len(x)/n))))
	b.rows = rowsJob{}
}

// quantizeRows quantises rows lo..hi-1 of x (n rows) into b.q8, whose
// buffers are sized, in the layouts of l.
func (b *Backend) quantizeRows(x []float32, n, lo, hi int, l layout) {
	cols := len(x) / n
	if l&byRows != 0 {
		if haveC {
			cQuantizeRows(&b.q8, x, cols, lo, hi)
		} else {
			b.q8.quantizeRows(x, cols, lo, hi)
		}
	}
	if l&inPanels != 0 {
		cQuantizePanels(&b.q8.p, x, n, lo, hi)
	}
	if l&inKPanels != 0 {
		cQuantizeKPanels(&b.q8.k, x, n, lo, hi)
	}
}

// units is how many work items a product with w has: rows, or for a
// repacked matrix groups of eight rows (the AVX2 tiles) or pairs of
// sixteen (the AVX-512 VNNI tiles take two groups at once).
func units(w *Matrix) int {
	return (w.rows + unitRows(w) - 1) / unitRows(w)
}

// grain is the fewest work items of unitRows rows a chunk of a product
// takes: at least 32K multiply-adds, so a small product (a 64-wide
// drafter's) runs on the calling thread instead of being handed between
// workers, while a larger one is split.
func grain(unitRows, cols, n int) int {
	return max(1, 32768/max(1, unitRows*cols*n))
}

// unitRows is how many rows one of w's work items covers.
func unitRows(w *Matrix) int {
	switch {
	case w.packed == nil:
		return 1
	case w.group == 16:
		return 32
	}
	return w.group
}

// maxMulti is the most matrices MatMulMulti takes in one dispatch (the
// attention's Q, K and V; the feed-forward's gate and up).
const maxMulti = 4

// multiJob is several products of one input as one job: units
// start[i]..start[i+1]-1 are product i's.
type multiJob struct {
	jobs  [maxMulti]matmulJob
	start [maxMulti + 1]int
	count int
}

func (j *multiJob) do(worker, lo, hi int) {
	for i := 0; i < j.count; i++ {
		a, b := max(lo, j.start[i]), min(hi, j.start[i+1])
		if a < b {
			j.jobs[i].do(worker, a-j.start[i], b-j.start[i])
		}
	}
}

// MatMulMulti multiplies x by each matrix of ws (all of the same width)
// into the matching outs in one hand-over to the workers, quantising x
// once: a decode step's products are small, and each hand-over costs a
// wake-up. Every out equals, bit for bit, what MatMul writes (the same
// kernel runs each row on the same quantised input). More than maxMulti
// matrices, or matrices of different widths, run one MatMul each.
func (b *Backend) MatMulMulti(outs []kernels.Tensor, ws []kernels.Matrix, x kernels.Tensor, n int) {
	if len(outs) != len(ws) {
		panic(fmt.Sprintf("cpu: MatMulMulti of %d matrices into %d outputs", len(ws), len(outs)))
	}
	cols := -1
	var l layout // the activation layouts the products read
	for _, wm := range ws {
		w := wm.(*Matrix)
		if cols >= 0 && w.cols != cols {
			cols = -2
			break
		}
		cols = w.cols
		l |= layoutOf(w)
	}
	if len(ws) > maxMulti || cols < 0 {
		for i, w := range ws {
			b.MatMul(Data(outs[i]), w, Data(x), n)
		}
		return
	}
	xd := Data(x)
	if len(xd) < n*cols {
		panic(fmt.Sprintf("cpu: MatMulMulti of width %d with %d rows: x has %d values", cols, n, len(xd)))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if l != 0 {
		b.quantize(xd[:n*cols], n, l)
	}
	j := &b.multi
	j.count = len(ws)
	for i, wm := range ws {
		w := wm.(*Matrix)
		out := Data(outs[i])
		if len(out) < n*w.rows {
			panic(fmt.Sprintf("cpu: MatMulMulti %dx%d with %d rows: out has %d values", w.rows, w.cols, n, len(out)))
		}
		j.jobs[i] = matmulJob{b: b, out: out, w: w, x: xd, n: n}
		j.start[i+1] = j.start[i] + units(w)
	}
	// grain as MatMul's: at least 32K multiply-adds a chunk, in units of
	// the widest unit among the matrices (a unit of the sixteen-row tiles
	// is 32 rows: counted as rows, a decode step's Q, K and V of a
	// 512-wide model fell in one chunk and ran on one thread)
	unit := 1
	for _, wm := range ws {
		unit = max(unit, unitRows(wm.(*Matrix)))
	}
	b.pool.run(j, j.start[j.count], grain(unit, cols, n))
	for i := range j.jobs {
		j.jobs[i] = matmulJob{} // drop the references to the caller's slices
	}
}

func (j *matmulJob) do(worker, lo, hi int) {
	if haveC {
		j.doC(worker, lo, hi)
		return
	}
	j.doGo(worker, lo, hi)
}

// scratchRow returns worker's scratch row of at least cols floats.
func (b *Backend) scratchRow(worker, cols int) []float32 {
	if cap(b.scratch[worker]) < cols {
		// grow with headroom: attention asks for one more slot every step
		b.scratch[worker] = make([]float32, max(cols, 2*cap(b.scratch[worker]), 1024))
	}
	return b.scratch[worker][:cols]
}

// doGo is the pure-Go kernel: the reference the C kernels are tested
// against, and the fallback where cgo is unavailable.
func (j *matmulJob) doGo(worker, lo, hi int) {
	w, n, cols, rows := j.w, j.n, j.w.cols, j.w.rows
	switch {
	case w.typ == quant.F32:
		for o := lo; o < hi; o++ {
			wr := f32Row(w.Row(o), cols)
			for r := 0; r < n; r++ {
				j.out[r*rows+o] = DotF32(wr, j.x[r*cols:(r+1)*cols])
			}
		}
	case usesQ8(w.typ):
		nb := cols / quant.QK
		q := &j.b.q8
		dot := q8Dots[w.typ]
		for o := lo; o < hi; o++ {
			wr := w.Row(o)
			for r := 0; r < n; r++ {
				j.out[r*rows+o] = dot(wr, q.d[r*nb:(r+1)*nb], q.q[r*cols:(r+1)*cols], q.s[r*nb:(r+1)*nb])
			}
		}
	default:
		buf := j.b.scratchRow(worker, cols)
		for o := lo; o < hi; o++ {
			if err := quant.Dequantize(w.typ, w.Row(o), buf); err != nil {
				panic(err) // types were checked in NewMatrix
			}
			for r := 0; r < n; r++ {
				j.out[r*rows+o] = DotF32(buf, j.x[r*cols:(r+1)*cols])
			}
		}
	}
}
