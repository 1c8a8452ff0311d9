package kernels

import (
	"fmt"

	"arborist/kernels/quant"
)

// HostBackend is the backend that computes in host memory and offers the
// Host beside its Device: the CPU backend, linked into every binary.
const HostBackend = "cpu"

// Host is what the host backend offers beyond a Device: the training math
// and the machine's facts as its kernels see them. Code above the kernels
// reaches it by name (LookupHost), as it reaches every backend, so no
// package outside the kernels names a backend's package.
type Host interface {
	TrainMath
	HostFacts
}

// TrainMath is the float32 math on host slices that the hidden-state
// drafter's trainer (engine/hidden) runs, whatever backend its target runs
// on: the parameters change after every update, and a device matrix is a
// copy made when it is created, so a drafter trained through device
// matrices would compute with its first weights. Its products are blocked
// over k and do not keep the forward pass's rule that a row's result is
// independent of the batch, so inference never calls them. Every method
// runs on the calling goroutine; callers parallelise over sequences.
type TrainMath interface {
	// Gemm computes C (m x n) = op(A) · op(B), or adds it to C when
	// accumulate, with its inputs at prec. op(A) is A stored m x k, or
	// with transA A stored k x m and read transposed; op(B) is B stored
	// k x n, or with transB B stored n x k (rows of B are the outputs, as
	// weight rows are).
	Gemm(prec Precision, c, a, b []float32, m, n, k int, transA, transB, accumulate bool)
	// NewPacked returns an empty packed operand for GemmPacked.
	NewPacked() Packed
	// GemmPacked is Gemm against a packed op(B), with the n, k and
	// precision p was packed with.
	GemmPacked(c, a []float32, p Packed, m int, transA, accumulate bool)
	// BF16Products says whether PrecisionBF16 products run as such here
	// (elsewhere they run as PrecisionF32).
	BF16Products() bool
	// Softmax replaces x by softmax(x) and returns log sum exp(x) and
	// sum softmax(x)_i x_i (so a distribution's sum p log p is mean - lse
	// with no logarithm per entry): the trainer's loss rows.
	Softmax(x []float32) (lse, mean float64)
	// SiLUGate writes sg = sigmoid(g) and s = g * sg * u for the
	// trainer's feed-forward block, keeping the sigmoid for the backward
	// pass.
	SiLUGate(s, sg, g, u []float32)
	// TrainForward computes a's attention weights into a.P and its output
	// rows into o (row t at o[t*oStride:], HeadDim values).
	TrainForward(a *TrainAttention, o []float32, oStride int)
	// TrainBackward adds the gradients through a's attention, given dout
	// (the output's gradient, row t at dout[t*ds:]): to dq (row stride
	// dqs), to level 0's transposed dkT and dvT (laid out as KT), and to
	// the packed extra levels' dek and dev (laid out as EK). scratch
	// holds Rows+J values.
	TrainBackward(a *TrainAttention, dout []float32, ds int, dq []float32, dqs int, dkT, dvT, dek, dev, scratch []float32)
}

// HostFacts is the machine as the host backend's kernels see it: what the
// hardware survey (profiles/hardware) records and probes, and the memory
// the backend adds beside a model's mapped weights (inspect).
type HostFacts interface {
	// PhysicalCores counts the machine's physical cores, or returns 0
	// where they cannot be read.
	PhysicalCores() int
	// MemTotal is the machine's RAM in bytes, 0 where it cannot be read.
	MemTotal() uint64
	// KernelsID names the kernel family as hardware fingerprints hold
	// it (Registration.Kernels is its display name).
	KernelsID() string
	// ReadSum XORs the words of p (len a multiple of 16) with the
	// kernels' widest loads: the inner loop of a memory bandwidth
	// measurement.
	ReadSum(p []uint64) uint64
	// PeakProbe runs iters rounds of the kernels' inner operations (int8
	// products, or float32 FMA when integer is false) with no memory
	// traffic and returns how many multiply-adds that was (and a value
	// that depends on them); timed by the caller, it gives the compute
	// ceiling per thread.
	PeakProbe(integer bool, iters int) (macs int64, sink int64)
	// RepackBudget is the memory a backend's repacked weight copies may
	// take in all.
	RepackBudget() int64
	// RepackedBytes is the memory a t matrix of rows x cols takes beside
	// its mapped weights (0 where nothing is repacked).
	RepackedBytes(t quant.Type, rows, cols int) int64
}

// LookupHost returns the host backend's registration, whose Host is set,
// or says why there is none (the CPU backend not linked in: a build's
// mistake, as profiles/pairs links it).
func LookupHost() (Registration, error) {
	r, err := Lookup(HostBackend)
	if err != nil {
		return r, fmt.Errorf("kernels: no host backend: %w", err)
	}
	if r.Host == nil {
		return r, fmt.Errorf("kernels: backend %s offers no host math", r.Name)
	}
	return r, nil
}

// Precision is what a training product rounds its inputs to; it sums in
// float32 either way.
type Precision uint8

const (
	// PrecisionF32 multiplies the float32 inputs as they are.
	PrecisionF32 Precision = iota
	// PrecisionBF16 rounds the inputs to bfloat16 (8 bits of mantissa, to
	// nearest even) and sums their products in float32, as
	// mixed-precision training does, on CPUs with AVX-512 BF16
	// (TrainMath.BF16Products), whose vdpbf16ps does twice the
	// multiply-adds of a float32 FMA; elsewhere a BF16 product runs as
	// F32.
	PrecisionBF16
)

func (p Precision) String() string {
	if p == PrecisionBF16 {
		return "bf16"
	}
	return "f32"
}

// Packed is the B operand of a product packed once for many products, the
// way Gemm packs it block by block on every call: the trainer multiplies
// by the same weights (forward, x · W^T, and backward, dy · W) for every
// sequence and level of an update, and packing them each time was about a
// tenth of a product. Re-pack after B changes; a Packed is read-only while
// products use it, so workers share one.
type Packed interface {
	// PackAt packs op(B) (n columns, k values; B stored k x n, or n x k
	// with transB) for products at prec, reusing its storage when it is
	// large enough: a BF16 pack holds op(B) rounded to bfloat16, and
	// GemmPacked then rounds op(A) too.
	PackAt(prec Precision, b []float32, n, k int, transB bool)
}

// TrainAttention is one query head's causal attention over the rows of one
// unrolled level of the hidden-state drafter's trainer (engine/hidden):
// query row t of level J reads keys 0..t of level 0 and row t of levels
// 1..J. TrainMath's TrainForward and TrainBackward run a whole head per
// call, since a head can be 8 values wide and a row's work is a few dozen
// vector operations. Training only: inference has its own attention
// kernels, whose order of summation is fixed for losslessness.
type TrainAttention struct {
	Q       []float32 // query rows: row t at Q[t*QStride:], HeadDim values
	QStride int
	// KT and VT are level 0's keys and values of the head's key/value
	// head, transposed: channel d at [d*R0 : (d+1)*R0].
	KT, VT []float32
	R0     int
	// EK and EV are the extra levels' keys and values, packed: level l
	// (1..J), row t, channel d at [((l-1)*Rows+t)*HeadDim+d].
	EK, EV  []float32
	J, Rows int
	HeadDim int
	Scale   float32
	// P holds the attention weights: row t's t+1+J of them from
	// TrainRowBase(t, J).
	P []float32
}

// TrainRowBase is where row t's attention weights start in
// TrainAttention.P for J extra levels.
func TrainRowBase(t, J int) int { return t*(t+1)/2 + t*J }
