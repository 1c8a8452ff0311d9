package devicetest

import (
	"sync/atomic"
	"time"

	"arborist/kernels"
)

// Slow is a stand-in for a device with scripted latencies: it computes
// with the Device it wraps and then sleeps Latency(rows) after every
// matrix product, so a forward pass over W tokens of a model with P
// products costs about P * Latency(W) however fast the host is. Tests of
// two-device scheduling (a drafter on one device while the target
// verifies on another) use two of them to prove overlap and the
// adaptation of budgets to latency ratios on a machine with two cores:
// sleeping takes no CPU, so the two stand-ins run truly at once.
//
// The latencies are owed and slept in pieces of at least Quantum (and all
// of what is owed before a Download, so a pass ends on time): a sleep per
// product would cost a scheduler wake-up each, which on a loaded machine
// stretches a 100 µs product to a millisecond.
type Slow struct {
	kernels.Device
	// Latency is the time a product over rows activation rows takes.
	Latency func(rows int) time.Duration
	// Quantum is the least sleep (default 4 ms).
	Quantum time.Duration
	slept   atomic.Int64
	owed    atomic.Int64
	busy    atomic.Int64
}

// NewSlow wraps d with a latency of base + perRow * rows per product.
func NewSlow(d kernels.Device, base, perRow time.Duration) *Slow {
	return &Slow{Device: d, Latency: func(rows int) time.Duration { return base + time.Duration(rows)*perRow }}
}

// Name tells the stand-in from the device it wraps.
func (s *Slow) Name() string { return "slow-" + s.Device.Name() }

// Slept is the total scripted latency so far.
func (s *Slow) Slept() time.Duration { return time.Duration(s.slept.Load()) }

// Busy is the wall time spent in its products and in sleeping out their
// latency: what a timeline of the device would show as busy.
func (s *Slow) Busy() time.Duration { return time.Duration(s.busy.Load()) }

func (s *Slow) wait(rows int) {
	d := s.Latency(rows)
	s.slept.Add(int64(d))
	q := s.Quantum
	if q <= 0 {
		q = 4 * time.Millisecond
	}
	if owed := s.owed.Add(int64(d)); owed >= int64(q) {
		s.pay()
	}
}

// pay sleeps what is owed.
func (s *Slow) pay() {
	if d := s.owed.Swap(0); d > 0 {
		t0 := time.Now()
		time.Sleep(time.Duration(d))
		s.busy.Add(int64(time.Since(t0)))
	}
}

// Download pays the latency owed, then copies.
func (s *Slow) Download(dst []float32, src kernels.Tensor) {
	s.pay()
	s.Device.Download(dst, src)
}

// Argmax pays the latency owed, then reads the rows' argmax.
func (s *Slow) Argmax(dst []int, x kernels.Tensor, rows, cols int) {
	s.pay()
	s.Device.Argmax(dst, x, rows, cols)
}

// MatMulT computes, then waits out the scripted latency.
func (s *Slow) MatMulT(out kernels.Tensor, w kernels.Matrix, x kernels.Tensor, n int) {
	t0 := time.Now()
	s.Device.MatMulT(out, w, x, n)
	s.busy.Add(int64(time.Since(t0)))
	s.wait(n)
}

// MatMul computes, then waits out the scripted latency.
func (s *Slow) MatMul(out []float32, w kernels.Matrix, x []float32, n int) {
	s.Device.MatMul(out, w, x, n)
	s.wait(n)
}

var _ kernels.Device = (*Slow)(nil)
