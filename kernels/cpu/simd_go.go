//go:build !cgo || purego

package cpu

import (
	"unsafe"

	"arborist/kernels"
)

// Kernels names the kernel family in use, for benchmarks, reports and the
// hardware description.
func Kernels() string { return "pure-go" }

// KernelsID names the kernel family as hardware fingerprints hold it.
func KernelsID() string { return Kernels() }

const haveC = false

func cQuantize(q *q8Buf, x []float32) { q.quantize(x) }

// cQuantizeRows is q.quantizeRows without cgo.
func cQuantizeRows(q *q8Buf, x []float32, cols, lo, hi int) { q.quantizeRows(x, cols, lo, hi) }

// cQuantizePanels is never called without cgo: nothing is repacked.
func cQuantizePanels(p *panelBuf, x []float32, n, lo, hi int) {
	panic("cpu: panels in a build without cgo")
}

// cQuantizeKPanels is never called without cgo: nothing is repacked.
func cQuantizeKPanels(p *panelBuf, x []float32, n, lo, hi int) {
	panic("cpu: panels in a build without cgo")
}

func (j *matmulJob) doC(worker, lo, hi int) { j.doGo(worker, lo, hi) }

// ReadSum XORs the words of p: the inner loop of a memory bandwidth
// measurement.
func ReadSum(p []uint64) uint64 {
	var s0, s1, s2, s3 uint64
	for i := 0; i+4 <= len(p); i += 4 {
		s0 ^= p[i]
		s1 ^= p[i+1]
		s2 ^= p[i+2]
		s3 ^= p[i+3]
	}
	return s0 ^ s1 ^ s2 ^ s3
}

// attnJob is unused without the C kernels (attention runs attendGo); it
// keeps the Backend layout the same on every build.
type attnJob struct{}

// seqsJob is AttentionSeqs's job, which builds without cgo do not have
// (kernels.AttentionAll runs each sequence's Attention).
type seqsJob struct{}

// attendC is never called without cgo (haveC is false).
func (b *Backend) attendC(out, q []float32, kc, vc unsafe.Pointer, f16 bool, past, n int, mask []bool, heads, kvHeads, hd int, scale float32) {
	panic("cpu: C attention in a build without cgo")
}

func siluMul(g, u []float32) { siluMulGo(g, u) }

func rmsNorm(out, x, w []float32, dim int, eps float32) { rmsNormGo(out, x, w, dim, eps) }

func addTo(x, y []float32) { addToGo(x, y) }

func f32ToF16(dst []uint16, src []float32) { f32ToF16Go(dst, src) }

func rope(x []float32, rows int, s kernels.RoPEShape, cos, sin []float32) {
	ropeGo(x, rows, s, cos, sin)
}

// PeakProbe runs iters rounds of multiply-adds with no memory traffic and
// returns how many that was (and a value that depends on them): int8 or
// float32, as the pure-Go kernels compute them. Timed by the caller, it
// gives the compute ceiling per thread.
func PeakProbe(integer bool, iters int) (macs int64, sink int64) {
	if integer {
		var s [8]int32
		a := int8(iters | 3)
		for i := 0; i < iters; i++ {
			for k := range s {
				for j := 0; j < 32; j++ {
					s[k] += int32(a) * int32(int8(k+j))
				}
			}
		}
		return int64(iters) * 8 * 32, int64(s[0] + s[7])
	}
	var s [10]float32
	m := float32(0.999)
	for i := 0; i < iters; i++ {
		for k := range s {
			for j := 0; j < 8; j++ {
				s[k] = s[k]*m + 0.001
			}
		}
	}
	return int64(iters) * 10 * 8, int64(s[0] + s[9])
}

func gemm(c, a, b []float32, m, n, k int, transA, transB, accumulate, _ bool) {
	gemmGo(c, a, b, m, n, k, transA, transB, accumulate)
}

func trainAttnForward(a *TrainAttention, o []float32, oStride int) { trainAttnForwardGo(a, o, oStride) }

func trainAttnBackward(a *TrainAttention, dout []float32, ds int, dq []float32, dqs int, dkT, dvT, dek, dev, scratch []float32) {
	trainAttnBackwardGo(a, dout, ds, dq, dqs, dkT, dvT, dek, dev, scratch)
}

// repackMatrix: pure-Go builds have no repacked tiles.
func repackMatrix(*Matrix, int) ([]byte, int) { return nil, 0 }

func repacks() bool { return false }

func vnniTiles() bool { return false }

func softmax(x []float32) (lse, mean float64) { return softmaxGo(x) }

func siluGate(s, sg, g, u []float32) { siluGateGo(s, sg, g, u) }

// bf16Products: the pure-Go product has no bfloat16 path.
func bf16Products() bool { return false }

// packBAll keeps op(B) as given: the Go product reads it in place.
func packBAll(p *PackedB, b []float32) { p.v = append(p.v[:0], b[:p.n*p.k]...) }

func gemmPacked(c, a []float32, p *PackedB, m int, transA, accumulate bool) {
	gemmGo(c, a, p.v, m, p.n, p.k, transA, p.trans, accumulate)
}
