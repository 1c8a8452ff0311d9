//go:build cgo && !purego

package cpu

// #cgo CFLAGS: -O3 -std=gnu11
// #cgo LDFLAGS: -lm
// #include "attn.h"
// #include "simd.h"
// #include "q40x8.h"
import "C"

import (
	"os"
	"unsafe"

	"arborist/kernels"
	"arborist/kernels/quant"
)

// simdLevel is 3 when the C kernels run their AVX2+FMA+F16C versions, the
// repacked products their AVX-512 VNNI tiles and the training products
// their bfloat16 tiles, 2 without the last, 1 with AVX2+FMA+F16C alone,
// 0 for the portable C versions (ARBORIST_SIMD caps it). Read once,
// before any worker runs.
var simdLevel = int(C.arb_simd_level())

// avxVNNI is set where the eight-row tiles (level 1) run their AVX-VNNI
// compilation: a CPU with AVX-VNNI but no AVX-512 VNNI (Intel's since
// Alder Lake), or one with both under ARBORIST_SIMD=1; ARBORIST_AVXVNNI=0
// turns it off. The same bits either way. Read once, before any worker
// runs.
var avxVNNI = C.arb_avx_vnni() != 0

// avxVNNICPU says whether the CPU has AVX-VNNI beside AVX2, FMA and F16C
// (at ARBORIST_SIMD's level 1 or above), whatever ARBORIST_AVXVNNI says.
func avxVNNICPU() bool { return C.arb_avx_vnni_cpu() != 0 }

// noRepack is set by ARBORIST_REPACK=0: every weight is then multiplied
// in its file layout, without the repacked copy that sits in
// memory beside the mapped file (for a model that only just fits). Read
// once, before any matrix is made.
var noRepack = os.Getenv("ARBORIST_REPACK") == "0"

// Kernels names the kernel family in use, for benchmarks, reports and the
// hardware description: the widest instructions its products run.
func Kernels() string {
	switch {
	case simdLevel >= 3:
		return "c-avx512-vnni-bf16"
	case simdLevel >= 2:
		return "c-avx512-vnni"
	case simdLevel >= 1 && avxVNNI:
		return "c-avx2-avxvnni"
	case simdLevel >= 1:
		return "c-avx2"
	}
	return "c-portable"
}

// KernelsID names the kernel family as hardware fingerprints hold it. The
// AVX-512 levels were first called "c-avx2-vnni" and stored profiles are
// keyed by fingerprints made with that name, so it stays here; the
// bfloat16 level shares it, as its training tiles change no latency curve;
// the AVX-VNNI compilation of the AVX2 tiles keeps "c-avx2", as they
// compute the same.
func KernelsID() string {
	switch {
	case simdLevel >= 2:
		return "c-avx2-vnni"
	case simdLevel >= 1:
		return "c-avx2"
	}
	return Kernels()
}

const haveC = true

func cQuantize(q *q8Buf, x []float32) {
	if q.size(len(x)) == 0 {
		return
	}
	cQuantizeRows(q, x, len(x), 0, 1)
}

// cQuantizeRows quantises rows lo..hi-1 of x (rows of cols values) into
// q's row-by-row layout, sized for all of x.
func cQuantizeRows(q *q8Buf, x []float32, cols, lo, hi int) {
	a, nb := lo*cols, cols/quant.QK
	if hi <= lo || nb == 0 {
		return
	}
	C.arb_quantize_q8((*C.float)(unsafe.Pointer(&x[a])), C.int((hi-lo)*cols), (*C.float)(unsafe.Pointer(&q.d[lo*nb])),
		(*C.int8_t)(unsafe.Pointer(&q.q[a])), (*C.int32_t)(unsafe.Pointer(&q.s[lo*nb])))
}

// cQuantizePanels quantises rows lo..hi-1 of x (n rows) into p, sized for
// all of x, for the sixteen-row tiles of the types with a scale a block.
func cQuantizePanels(p *panelBuf, x []float32, n, lo, hi int) {
	if hi <= lo || len(x) < n*quant.QK {
		return
	}
	C.arb_quantize_q8_panels((*C.float)(unsafe.Pointer(&x[0])), C.int(n), C.int(len(x)/n), C.int(lo), C.int(hi),
		(*C.int8_t)(unsafe.Pointer(&p.q[0])), (*C.float)(unsafe.Pointer(&p.d[0])), (*C.int32_t)(unsafe.Pointer(&p.c[0])))
}

// cQuantizeKPanels quantises rows lo..hi-1 of x (n rows, a multiple of 256
// values each) into p, sized for all of x, a scale for each 256 values, for
// the K-quants' sixteen-row tiles.
func cQuantizeKPanels(p *panelBuf, x []float32, n, lo, hi int) {
	if hi <= lo || len(x) < n*quant.QKK {
		return
	}
	C.arb_quantize_q8k_panels((*C.float)(unsafe.Pointer(&x[0])), C.int(n), C.int(len(x)/n), C.int(lo), C.int(hi),
		(*C.int8_t)(unsafe.Pointer(&p.q[0])), (*C.float)(unsafe.Pointer(&p.d[0])), (*C.int32_t)(unsafe.Pointer(&p.c[0])))
}

func (j *matmulJob) doC(worker, lo, hi int) {
	w := j.w
	if w.packed != nil { // lo, hi count units (pairs of sixteen-row groups, or groups of eight)
		if w.group == 16 {
			lo, hi = 2*lo, min(2*hi, (w.rows+15)/16)
		}
		if !tiles(w, &j.b.q8, lo, hi, j.n, j.out, j.b.streams()) {
			panic("cpu: a repacked matrix on a CPU without its tiles") // repack checks first
		}
		return
	}
	if usesQ8(w.typ) {
		q := &j.b.q8
		C.arb_mm_q8(C.int(w.typ), (*C.uint8_t)(unsafe.Pointer(&w.data[0])), C.long(w.rowBytes), C.int(lo), C.int(hi), C.int(w.cols/quant.QK),
			(*C.float)(unsafe.Pointer(&q.d[0])), (*C.int8_t)(unsafe.Pointer(&q.q[0])), (*C.int32_t)(unsafe.Pointer(&q.s[0])),
			C.int(j.n), (*C.float)(unsafe.Pointer(&j.out[0])), C.int(w.rows))
		return
	}
	buf := j.b.scratchRow(worker, C.ARB_F32_ROWS*w.cols) // the AVX-512 tiles widen four rows at a time
	C.arb_mm_f32(C.int(w.typ), (*C.uint8_t)(unsafe.Pointer(&w.data[0])), C.long(w.rowBytes), C.int(lo), C.int(hi), C.int(w.cols),
		(*C.float)(unsafe.Pointer(&j.x[0])), C.int(j.n), (*C.float)(unsafe.Pointer(&j.out[0])), C.int(w.rows), (*C.float)(unsafe.Pointer(&buf[0])))
}

// mmFloatAt multiplies all of m's rows (F32, F16 or BF16) by the n rows of
// x on one thread with the float kernels of SIMD level lvl (capped at the
// CPU's): the tests hold the levels' tiles to each other's bits.
func mmFloatAt(lvl int, m *Matrix, x []float32, n int, out []float32) {
	buf := make([]float32, C.ARB_F32_ROWS*m.cols)
	C.arb_mm_f32_at(C.int(lvl), C.int(m.typ), (*C.uint8_t)(unsafe.Pointer(&m.data[0])), C.long(m.rowBytes), 0, C.int(m.rows), C.int(m.cols),
		(*C.float)(unsafe.Pointer(&x[0])), C.int(n), (*C.float)(unsafe.Pointer(&out[0])), C.int(m.rows), (*C.float)(unsafe.Pointer(&buf[0])))
}

// attnJob is one Attention call on the C kernels (attn.c): its operands,
// its plan, and the plan's buffers, which stay between calls so that a
// decode step allocates nothing.
type attnJob struct {
	b      *Backend
	out, q []float32
	kc, vc unsafe.Pointer // one cache layer, float32 or (a.f16) float16
	mask   []bool
	a      C.arb_attn_args
	bnd    []int32   // the rows' chunks (arb_attention_plan)
	cnt    []int32   // how many each row has
	part   []float32 // a split plan's records
}

func (j *attnJob) do(worker, lo, hi int) {
	C.arb_attention(&j.a, f32p(j.out), f32p(j.q), j.kc, j.vc, j.maskp(), i32p(j.bnd), i32p(j.cnt), f32p(j.part), C.long(lo), C.long(hi),
		f32p(j.b.scratchRow(worker, int(j.a.scratch))))
}

func (j *attnJob) maskp() *C.uint8_t {
	if j.mask == nil {
		return nil
	}
	return (*C.uint8_t)(unsafe.Pointer(&j.mask[0]))
}

// attendC runs the C attention over one cache layer (kc, vc: float32, or
// float16 when f16): arb_attention_plan splits the rows' visible slots
// into chunks and the work into tasks; a plan that gives each chunk a
// task of its own (too few kv heads for the threads) then folds their
// records in a second job.
func (b *Backend) attendC(out, q []float32, kc, vc unsafe.Pointer, f16 bool, past, n int, mask []bool, heads, kvHeads, hd int, scale float32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	j := &b.attn
	j.b, j.out, j.q, j.kc, j.vc, j.mask = b, out, q, kc, vc, mask
	tasks := j.plan(f16, past, n, heads, kvHeads, hd, scale, b.threads, 1)
	b.pool.run(j, tasks, attnGrain(tasks, n*heads*(past+n)*hd))
	if j.a.split != 0 {
		j.a.phase = 1
		b.pool.run(j, n*heads, max(1, n*heads/(4*b.threads)))
	}
	j.out, j.q, j.kc, j.vc, j.mask = nil, nil, nil, nil, nil // drop the references to the caller's memory
}

// attnGrain is the fewest tasks a claim of an attention job takes: about
// 4096 multiply-adds of scores' worth (work in all, over tasks).
func attnGrain(tasks, work int) int { return max(1, 4096*tasks/max(1, work)) }

// plan plans the job's call (its mask set) for threads threads, in a job
// of seqs sequences' attention: its arguments, its rows' chunks and a
// split plan's records; it returns the plan's tasks.
func (j *attnJob) plan(f16 bool, past, n, heads, kvHeads, hd int, scale float32, threads, seqs int) int {
	j.a = C.arb_attn_args{past: C.int(past), n: C.int(n), heads: C.int(heads), kv_heads: C.int(kvHeads), hd: C.int(hd), scale: C.float(scale),
		seqs: C.int(seqs)}
	if f16 {
		j.a.f16 = 1
	}
	stride := (past+n)/int(C.arb_attention_chunk(C.int(hd))) + 2
	j.bnd = growInts(j.bnd, n*stride)
	j.cnt = growInts(j.cnt, n)
	tasks := int(C.arb_attention_plan(&j.a, j.maskp(), C.int(threads), i32p(j.bnd), i32p(j.cnt)))
	if r := int(C.arb_attention_records(&j.a)); r > 0 {
		if cap(j.part) < r {
			j.part = make([]float32, r)
		}
		j.part = j.part[:r]
	}
	return tasks
}

// attnChunk is the visible slots a chunk of a row's attention holds for
// heads of hd dims (arb_attention_chunk).
func attnChunk(hd int) int { return int(C.arb_attention_chunk(C.int(hd))) }

// lastPlan says how the last attendC call ran: whether each chunk was a
// task of its own (then folded by a second job), and its rows' chunks
// (row i's chunk c: slots bounds[i][c] .. bounds[i][c+1]-1), for the
// tests.
func (b *Backend) lastPlan() (split bool, bounds [][]int32) {
	j := &b.attn
	stride := int(j.a.stride)
	for i, k := range j.cnt[:j.a.n] {
		if k == 0 {
			bounds = append(bounds, nil)
			continue
		}
		bounds = append(bounds, j.bnd[i*stride:i*stride+int(k)+1])
	}
	return j.a.split != 0, bounds
}

// growInts returns s with room for n values.
func growInts(s []int32, n int) []int32 {
	if cap(s) < n {
		s = make([]int32, n, max(n, 2*cap(s)))
	}
	return s[:n]
}

// HostAttention is the C attention over host float32 slices (q: n rows of
// heads*hd; kc, vc: cached rows of kvHeads*hd; mask nil = causal), for
// the kernel tests and benchmarks.
func (b *Backend) HostAttention(out, q, kc, vc []float32, past, n int, mask []bool, heads, kvHeads, hd int, scale float32) {
	b.attendC(out, q, unsafe.Pointer(&kc[0]), unsafe.Pointer(&vc[0]), false, past, n, mask, heads, kvHeads, hd, scale)
}

// SiLUMul: g[i] = silu(g[i]) * u[i], in C.
func (b *Backend) SiLUMul(g, u []float32) { siluMul(g, u) }

func siluMul(g, u []float32) {
	if len(g) == 0 {
		return
	}
	C.arb_silu_mul((*C.float)(unsafe.Pointer(&g[0])), (*C.float)(unsafe.Pointer(&u[0])), C.long(len(g)))
}

// rmsNorm sets each row of dim values of out to the row of x times w
// over the row's root mean square (arb_rmsnorm: eight values at a time
// with AVX2, the sum of squares in double).
func rmsNorm(out, x, w []float32, dim int, eps float32) {
	rows := len(x) / dim
	if rows == 0 {
		return
	}
	_, _ = out[rows*dim-1], w[dim-1]
	C.arb_rmsnorm((*C.float)(unsafe.Pointer(&out[0])), (*C.float)(unsafe.Pointer(&x[0])), (*C.float)(unsafe.Pointer(&w[0])),
		C.int(rows), C.int(dim), C.float(eps))
}

// addTo: x[i] += y[i], in C (a float add is exact to its rounding, so the
// result is the Go loop's bit for bit).
func addTo(x, y []float32) {
	if len(x) == 0 {
		return
	}
	_ = y[len(x)-1]
	C.arb_add((*C.float)(unsafe.Pointer(&x[0])), (*C.float)(unsafe.Pointer(&y[0])), C.long(len(x)))
}

// rope rotates rows rows of x as ropeGo does, bit for bit (arb_rope: eight
// values at a time with AVX2, each product rounded on its own).
func rope(x []float32, rows int, s kernels.RoPEShape, cos, sin []float32) {
	half := s.RopeDim / 2
	if rows == 0 || half == 0 {
		return
	}
	_, _, _ = x[rows*s.Heads*s.HeadDim-1], cos[rows*half-1], sin[rows*half-1]
	neox := 0
	if s.Neox {
		neox = 1
	}
	C.arb_rope((*C.float)(unsafe.Pointer(&x[0])), C.int(rows), C.int(s.Heads), C.int(s.HeadDim), C.int(s.RopeDim), C.int(neox),
		(*C.float)(unsafe.Pointer(&cos[0])), (*C.float)(unsafe.Pointer(&sin[0])))
}

// f32ToF16 converts src to half floats in dst as quant.F32ToF16 does,
// bit for bit (arb_f32_to_f16: F16C, eight at a time), or in Go where
// the CPU has no F16C.
func f32ToF16(dst []uint16, src []float32) {
	if len(src) == 0 {
		return
	}
	_ = dst[len(src)-1]
	if C.arb_f32_to_f16((*C.uint16_t)(unsafe.Pointer(&dst[0])), (*C.float)(unsafe.Pointer(&src[0])), C.long(len(src))) != 0 {
		f32ToF16Go(dst, src)
	}
}

// ReadSum XORs the words of p (len a multiple of 16), four streams at
// once with vector loads where the CPU has them: the inner loop of a
// memory bandwidth measurement.
func ReadSum(p []uint64) uint64 {
	if len(p) == 0 {
		return 0
	}
	return uint64(C.arb_read_sum((*C.uint64_t)(unsafe.Pointer(&p[0])), C.long(len(p))))
}

// PeakProbe runs iters rounds of the kernels' inner operations with no
// memory traffic and returns how many multiply-adds that was (and a value
// that depends on them): int8 (the eight-row tiles' maddubs and madd on
// 256-bit vectors, or vpdpbusd on 512-bit ones where the VNNI tiles run)
// or float32 FMA (integer false; on 512-bit vectors where the float
// products' tiles are). Timed by the caller, it gives the compute ceiling
// per thread.
func PeakProbe(integer bool, iters int) (macs int64, sink int64) {
	if integer {
		return int64(iters) * int64(C.arb_peak_i8_macs()), int64(C.arb_peak_i8(C.long(iters)))
	}
	return int64(iters) * int64(C.arb_peak_f32_macs()), int64(C.arb_peak_f32(C.long(iters)))
}

// layoutGroupBytes is what the C packers' layouts give a group of group
// rows (8 or 16) a block of t (super-block for the types of 256 weights a
// block), for TestRepackedSizes to hold repackedRowBytes to.
func layoutGroupBytes(t quant.Type, group int) int64 {
	if group == 16 {
		return int64(C.arb_x16_bytes(C.int(t), 16, 1))
	}
	return int64(C.arb_x8_group_bytes(C.int(t)))
}

// repackMatrix returns m's rows repacked group rows at a time (16: x16.c,
// for every repacked type; 8: q40x8.c for Q4_0, Q8_0, Q5_0, Q4_1 and
// Q5_1, k8.c for the K-quants) and the group,
// or nil and 0 where that does not apply (repackedBytes 0: another type,
// rows not a multiple of 8, the portable kernels in use). Measured on the
// bench target (Q8_0) and synthetic models: see docs/PERFORMANCE.md.
func repackMatrix(m *Matrix, group int) ([]byte, int) {
	size := repackedBytes(m.typ, m.rows, m.cols, group)
	if size == 0 {
		return nil, 0
	}
	p := make([]byte, size)
	src, dst := (*C.uint8_t)(unsafe.Pointer(&m.data[0])), (*C.uint8_t)(unsafe.Pointer(&p[0]))
	if group == 16 {
		C.arb_x16_pack(C.int(m.typ), src, C.long(m.rowBytes), C.int(m.rows), C.int(m.cols/m.typ.BlockSize()), dst)
		return p, group
	}
	if kQuant(m.typ) {
		C.arb_k8_pack(C.int(m.typ), src, C.long(m.rowBytes), C.int(m.rows), C.int(m.cols/m.typ.BlockSize()), dst)
		return p, group
	}
	nb := m.cols / quant.QK
	C.arb_x8_pack(C.int(m.typ), src, C.long(m.rowBytes), C.int(m.rows), C.int(nb), dst)
	return p, group
}

// tiles multiplies groups lo..hi-1 of the repacked matrix w by the n
// activation rows quantised in q (in the panels layoutOf(w) names for the
// sixteen-row AVX-512 VNNI tiles, row by row for the eight-row AVX2 ones,
// as w was packed), into out; stream as arb_mm_x16 takes it
// (Backend.streams). It reports false where the CPU lacks them.
func tiles(w *Matrix, q *q8Buf, lo, hi, n int, out []float32, stream bool) bool {
	return tilesOn(w, q, lo, hi, n, out, stream, avxVNNI)
}

// tilesOn is tiles with the eight-row tiles' AVX-VNNI compilation when
// vnni (false where the CPU lacks it), so a test can hold one to the other.
func tilesOn(w *Matrix, q *q8Buf, lo, hi, n int, out []float32, stream, vnni bool) bool {
	p, glo, ghi := (*C.uint8_t)(unsafe.Pointer(&w.packed[0])), C.int(lo), C.int(hi)
	o, cn, rows := (*C.float)(unsafe.Pointer(&out[0])), C.int(n), C.int(w.rows)
	var rc C.int
	var yd *C.float
	var yq *C.int8_t
	var ys *C.int32_t
	kq := layoutOf(w) == inKPanels
	if w.group != 16 && !kq {
		yd, yq, ys = (*C.float)(unsafe.Pointer(&q.d[0])), (*C.int8_t)(unsafe.Pointer(&q.q[0])), (*C.int32_t)(unsafe.Pointer(&q.s[0]))
	}
	switch {
	case w.group == 8 && kq:
		rc = C.arb_mm_k8(C.int(w.typ), p, glo, ghi, (*C.int8_t)(unsafe.Pointer(&q.k.q[0])), (*C.float)(unsafe.Pointer(&q.k.d[0])),
			(*C.int32_t)(unsafe.Pointer(&q.k.c[0])), C.int(w.cols/quant.QK), cn, o, rows, cBool(stream), cBool(vnni))
	case w.group == 16:
		pb := &q.p
		if kq {
			pb = &q.k
		}
		rc = C.arb_mm_x16(C.int(w.typ), p, glo, ghi, (*C.int8_t)(unsafe.Pointer(&pb.q[0])), (*C.float)(unsafe.Pointer(&pb.d[0])),
			(*C.int32_t)(unsafe.Pointer(&pb.c[0])), C.int(w.cols/quant.QK), cn, o, rows, cBool(stream))
	default:
		rc = C.arb_mm_x8(C.int(w.typ), p, glo, ghi, C.int(w.cols/quant.QK), yd, yq, ys, cn, o, rows, cBool(stream), cBool(vnni))
	}
	return rc == 0
}

// cBool is b as a C int.
func cBool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// vnniTiles says whether the repacked products run their AVX-512 VNNI
// tiles (x16.c).
func vnniTiles() bool { return simdLevel >= 2 }

// repacks says whether this CPU runs the repacked tiles.
func repacks() bool { return simdLevel >= 1 && !noRepack }
