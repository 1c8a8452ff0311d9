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
type Slow struct {
	kernels.Device
	// Latency is the time a product over rows activation rows takes.
	Latency func(rows int) time.Duration
	slept   atomic.Int64
}

// NewSlow wraps d with a latency of base + perRow * rows per product.
func NewSlow(d kernels.Device, base, perRow time.Duration) *Slow {
	return &Slow{Device: d, Latency: func(rows int) time.Duration { return base + time.Duration(rows)*perRow }}
}

// Name tells the stand-in from the device it wraps.
func (s *Slow) Name() string { return "slow-" + s.Device.Name() }

// Slept is the total scripted latency so far.
func (s *Slow) Slept() time.Duration { return time.Duration(s.slept.Load()) }

func (s *Slow) wait(rows int) {
	d := s.Latency(rows)
	s.slept.Add(int64(d))
	time.Sleep(d)
}

// MatMulT computes, then waits out the scripted latency.
func (s *Slow) MatMulT(out kernels.Tensor, w kernels.Matrix, x kernels.Tensor, n int) {
	s.Device.MatMulT(out, w, x, n)
	s.wait(n)
}

// MatMul computes, then waits out the scripted latency.
func (s *Slow) MatMul(out []float32, w kernels.Matrix, x []float32, n int) {
	s.Device.MatMul(out, w, x, n)
	s.wait(n)
}

var _ kernels.Device = (*Slow)(nil)
