package cpu

import (
	"arborist/kernels"
	"arborist/kernels/quant"
)

// host is the CPU backend's kernels.Host: its training math and its view
// of the machine, offered in its registration (register.go) so that code
// above the kernels finds them by name rather than by this package. Every
// method is the package function of the same name.
type host struct{}

var _ kernels.Host = host{}

func (host) Gemm(prec kernels.Precision, c, a, b []float32, m, n, k int, transA, transB, accumulate bool) {
	GemmAt(prec, c, a, b, m, n, k, transA, transB, accumulate)
}

func (host) NewPacked() kernels.Packed { return new(PackedB) }

// GemmPacked takes the packs NewPacked made; another Packed is a
// programming error and panics.
func (host) GemmPacked(c, a []float32, p kernels.Packed, m int, transA, accumulate bool) {
	GemmPacked(c, a, p.(*PackedB), m, transA, accumulate)
}

func (host) BF16Products() bool                      { return BF16Products() }
func (host) Softmax(x []float32) (lse, mean float64) { return Softmax(x) }
func (host) SiLUGate(s, sg, g, u []float32)          { SiLUGate(s, sg, g, u) }

func (host) TrainForward(a *kernels.TrainAttention, o []float32, oStride int) {
	(*TrainAttention)(a).Forward(o, oStride)
}

func (host) TrainBackward(a *kernels.TrainAttention, dout []float32, ds int, dq []float32, dqs int, dkT, dvT, dek, dev, scratch []float32) {
	(*TrainAttention)(a).Backward(dout, ds, dq, dqs, dkT, dvT, dek, dev, scratch)
}

func (host) PhysicalCores() int                               { return PhysicalCores() }
func (host) MemTotal() uint64                                 { return MemTotal() }
func (host) KernelsID() string                                { return KernelsID() }
func (host) ReadSum(p []uint64) uint64                        { return ReadSum(p) }
func (host) PeakProbe(integer bool, iters int) (int64, int64) { return PeakProbe(integer, iters) }
func (host) RepackBudget() int64                              { return RepackBudget() }
func (host) RepackedBytes(t quant.Type, rows, cols int) int64 { return RepackedBytes(t, rows, cols) }
