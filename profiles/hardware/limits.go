package hardware

import (
	"context"
	"fmt"
	"time"

	"arborist/engine/model"
	"arborist/kernels"
	"arborist/profiles/latency"
	"arborist/profiles/store"
)

// Limits are what the machine allows a model: its read bandwidth against
// the bytes a token streams (the decode roofline), and the compute
// ceiling against the multiply-adds a token costs.
type Limits struct {
	Bandwidth   float64 // bytes/s
	WeightBytes float64 // per token
	// KVRead is the KV cache a decode step reads at the context the
	// roofline is taken at (bench's: its runs' mean), bytes per token; 0
	// where no context is given (the weights alone).
	KVRead float64
	Peak   float64 // multiply-adds/s of the kernels' inner operations
	MACs   float64 // multiply-adds per token
	// Probed is the probe's own figure where a measured pass ran faster
	// than it and set Peak instead (Bound), at width BoundW; 0 where the
	// probe's figure is Peak.
	Probed  float64
	BoundW  int
	Integer bool // Peak is of int8 products (the weights are quantised)
	// Memory is the memory of a device with its own (a GPU) where the
	// model runs there: Bandwidth is then its copy rate, and Peak is 0 (the
	// CPU's compute ceiling says nothing of the device's).
	Memory *store.DeviceMemory
}

// ModelLimits measures the compute ceiling for m's weight type on threads
// threads and returns m's limits with the given read bandwidth.
func ModelLimits(ctx context.Context, m *model.Model, threads int, bandwidth float64) (Limits, error) {
	l := modelLimits(m, bandwidth)
	var err error
	l.Peak, err = ComputePeak(ctx, threads, l.Integer)
	return l, err
}

// DeviceMemory measures dev's own memory, or returns nil for a device
// whose memory is the host's (the CPU backend: Bandwidth times that).
func DeviceMemory(dev kernels.Backend) (*store.DeviceMemory, error) {
	mm, ok := dev.(kernels.MemoryMeter)
	if !ok {
		return nil, nil
	}
	r, err := mm.MeasureMemory()
	if err != nil {
		return nil, fmt.Errorf("profiles: measuring the memory of %s: %w", dev.Name(), err)
	}
	return &store.DeviceMemory{Backend: dev.Name(), Description: r.Description, Multiprocessors: r.Multiprocessors,
		Copy: r.Copy, HostToDevice: r.HostToDevice, DeviceToHost: r.DeviceToHost, Peak: r.Peak}, nil
}

// DeviceLimits is ModelLimits for m on a device: with mem (the device's
// own memory) the roofline is mem's copy rate and no compute ceiling is
// measured; without, the host's bandwidth and the CPU's ceiling.
func DeviceLimits(ctx context.Context, m *model.Model, threads int, hostBandwidth float64, mem *store.DeviceMemory) (Limits, error) {
	if mem == nil {
		return ModelLimits(ctx, m, threads, hostBandwidth)
	}
	l := modelLimits(m, mem.Copy)
	l.Memory = mem
	return l, nil
}

// modelLimits is m's side of its limits (weight bytes and multiply-adds
// per token) at a read bandwidth, without a compute ceiling.
func modelLimits(m *model.Model, bandwidth float64) Limits {
	return Limits{Bandwidth: bandwidth, WeightBytes: float64(m.WeightBytes()), MACs: float64(m.MatMACs()),
		Integer: m.Blocks[0].Gate.Type().BlockSize() > 1}
}

// Roofline is the time a one-token pass needs at least: every weight byte,
// and the KV cache it attends over (KVRead), read once at the measured
// bandwidth.
func (l Limits) Roofline() time.Duration {
	return time.Duration(l.TokenBytes() / l.Bandwidth * float64(time.Second))
}

// TokenBytes is what a one-token pass reads at least: the weights and
// KVRead.
func (l Limits) TokenBytes() float64 { return l.WeightBytes + l.KVRead }

// Rate is the multiply-add rate of a pass over w tokens that took d.
func (l Limits) Rate(w int, d time.Duration) float64 { return float64(w) * l.MACs / d.Seconds() }

// Ceiling is the compute ceiling pts are judged against: the probe's
// figure, or the fastest multiply-add rate a pass of pts ran at where one
// ran faster, with that pass's width (0: the probe's figure). The machine
// did that work at that rate, so a pass beyond the probe shows the probe
// fell short (it ran while the machine was busier, a curve taken at a
// quieter time is set against it, or the kernels' loop beat the probe's),
// never a pass beyond what the machine can do: no share of the ceiling
// exceeds 100% from a ceiling measured short. Without a ceiling (a device
// with memory of its own) it is 0.
func (l Limits) Ceiling(pts []latency.Point) (peak float64, w int) {
	peak, w = l.Peak, l.BoundW
	if peak <= 0 {
		return 0, 0
	}
	for _, p := range pts {
		if p.Median <= 0 {
			continue
		}
		if r := l.Rate(p.W, p.Median); r > peak {
			peak, w = r, p.W
		}
	}
	return peak, w
}

// Bound raises Peak to Ceiling(pts), keeping the probe's figure in Probed
// where a pass set it: the ceiling a report stores and every share of it
// is then one no measured pass exceeds.
func (l *Limits) Bound(pts []latency.Point) {
	peak, w := l.Ceiling(pts)
	if peak <= l.Peak {
		return
	}
	if l.Probed == 0 {
		l.Probed = l.Peak
	}
	l.Peak, l.BoundW = peak, w
}

// Kind names the ceiling's operations.
func (l Limits) Kind() string {
	if l.Integer {
		return "int8"
	}
	return "float32 FMA"
}

// Describe sets a latency curve against the limits: its first point against
// the roofline, its widest against the compute ceiling.
func (l Limits) Describe(pts []latency.Point) string {
	first, last := pts[0], pts[len(pts)-1]
	what := "Read bandwidth"
	if l.Memory != nil {
		what = "Device memory (" + l.Memory.Description + ") copies at"
	}
	s := fmt.Sprintf("%s %.1f GB/s: T_verify(%d) = %v, %.0f%% of the roofline (%v to stream the weights once).",
		what, l.Bandwidth/1e9, first.W, first.Median.Round(time.Microsecond), 100*l.Roofline().Seconds()/first.Median.Seconds(), l.Roofline().Round(time.Microsecond))
	if l.Memory != nil {
		m := l.Memory
		return s + fmt.Sprintf(" Its datasheet rate is %.1f GB/s; %d multiprocessors; transfers from the host %.1f GB/s, to it %.1f GB/s.",
			m.Peak/1e9, m.Multiprocessors, m.HostToDevice/1e9, m.DeviceToHost/1e9)
	}
	rate := l.Rate(last.W, last.Median)
	peak, w := l.Ceiling(pts)
	s += fmt.Sprintf(" Compute ceiling %.0f GMAC/s of %s multiply-adds: at W=%d the pass runs %.1f GMAC/s, %.0f%% of it.",
		peak/1e9, l.Kind(), last.W, rate/1e9, 100*rate/peak)
	if w > 0 {
		probed := l.Probed
		if probed == 0 {
			probed = l.Peak
		}
		s += fmt.Sprintf(" The probe measured %.0f GMAC/s, less than the pass at W=%d ran: the ceiling is at least that pass's rate (the probe ran while the machine was busier, or the curve was measured at a quieter time).", probed/1e9, w)
	}
	return s
}
