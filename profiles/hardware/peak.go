package hardware

import (
	"context"
	"math"
	"sync/atomic"
	"time"

	"arborist/kernels"
)

// Bandwidth measures memory read bandwidth in bytes per second with a
// STREAM-like read of a buffer much larger than the caches, split over
// threads goroutines, using the CPU backend's widest loads; the best of
// several passes.
func Bandwidth(ctx context.Context, threads int, size int) (float64, error) {
	return NewBandwidthProbe(threads, size).Measure(ctx)
}

// BandwidthProbe is Bandwidth's buffer, written once, so that probes taken
// between other work (bench's decode runs, each set against the probe
// just before it) cost a read of it, not an allocation and its page
// faults.
type BandwidthProbe struct {
	buf     []uint64
	threads int
	sinks   []uint64
	host    kernels.HostFacts // its ReadSum reads the buffer
}

// NewBandwidthProbe allocates and writes a probe of size bytes (256 MiB
// where size is not positive) read by threads goroutines.
func NewBandwidthProbe(threads, size int) *BandwidthProbe {
	if size <= 0 {
		size = 256 << 20
	}
	threads = max(1, threads)
	p := &BandwidthProbe{buf: make([]uint64, size/8), threads: threads, sinks: make([]uint64, threads), host: host().Host}
	for i := range p.buf {
		p.buf[i] = uint64(i)
	}
	return p
}

// Measure is the best of five reads of the probe's buffer, in bytes per
// second.
func (p *BandwidthProbe) Measure(ctx context.Context) (float64, error) {
	best := 0.0
	for pass := 0; pass < 5; pass++ {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		best = math.Max(best, float64(8*len(p.buf))/p.pass().Seconds())
	}
	return best, nil
}

// pass reads the whole buffer once, split over the probe's threads, and
// returns how long that took.
func (p *BandwidthProbe) pass() time.Duration {
	n, threads := len(p.buf), p.threads
	done := make(chan struct{}, threads)
	t0 := time.Now()
	for w := 0; w < threads; w++ {
		go func(w int) {
			lo, hi := w*n/threads/16*16, (w+1)*n/threads/16*16
			p.sinks[w] = p.host.ReadSum(p.buf[lo:hi])
			done <- struct{}{}
		}(w)
	}
	for w := 0; w < threads; w++ {
		<-done
	}
	return time.Since(t0)
}

// Reading is a sustained read of a probe's buffer: Rate is the bytes it
// read over the whole time it read them (bytes per second), Best the
// fastest single pass, and Passes how many there were.
type Reading struct {
	Rate   float64
	Best   float64
	Passes int
}

// maxSustain bounds a sustained read (Sustain): at a few gigabytes a
// second a pass of the default buffer takes some tens of milliseconds.
const maxSustain = 30 * time.Second

// Sustain reads the probe's buffer pass after pass for about d (at least
// one pass; at most maxSustain), as a decode run streams its weights:
// set against a run of the same length just before or after it, its rate
// is what the memory delivered while the run read, where a probe's best
// pass of a few milliseconds is what it delivered at its quietest (on a
// machine shared with other work the two differ by up to 2x).
func (p *BandwidthProbe) Sustain(ctx context.Context, d time.Duration) (Reading, error) {
	bytes := float64(8 * len(p.buf))
	d = min(d, maxSustain)
	var r Reading
	var total time.Duration
	for r.Passes == 0 || total < d {
		if err := ctx.Err(); err != nil {
			return Reading{}, err
		}
		el := p.pass()
		total += el
		r.Passes++
		r.Best = math.Max(r.Best, bytes/el.Seconds())
	}
	r.Rate = bytes * float64(r.Passes) / total.Seconds()
	return r, nil
}

// ComputePeak measures the compute ceiling of the CPU kernels in
// multiply-adds per second over threads goroutines: the inner operations of
// the integer kernels (integer true: int8 products summed to int32, as the
// quantised types run) or of the float32 ones (FMA), with no memory
// traffic; the best of five passes of about 50 ms. Decoding cannot beat
// it, so T_verify(W) of wide W is judged against it (Limits.Ceiling).
func ComputePeak(ctx context.Context, threads int, integer bool) (float64, error) {
	return computePeak(ctx, host().Host, threads, integer)
}

// prober runs the kernels' inner operations (kernels.HostFacts).
type prober interface {
	PeakProbe(integer bool, iters int) (macs int64, sink int64)
}

// peakChunks is how many chunks a thread's share of a probe pass is cut
// into.
const peakChunks = 16

// computePeak is ComputePeak on p. A pass's work is cut into chunks the
// threads claim as they finish their last, as the kernels' pool runs a
// product: a thread held up by other work on the machine leaves its
// chunks to the others, as it does in a pass of the model. Split evenly
// instead, a pass lasted as long as its slowest thread, and on a busy
// machine the probe read a ceiling below the rate the kernels then ran
// wide passes at.
func computePeak(ctx context.Context, p prober, threads int, integer bool) (float64, error) {
	threads = max(1, threads)
	iters := 1 << 12
	for { // size one thread's share of a pass to about 50 ms
		t0 := time.Now()
		p.PeakProbe(integer, iters)
		if d := time.Since(t0); d > 10*time.Millisecond || iters > 1<<30 {
			iters = int(float64(iters) * float64(50*time.Millisecond) / float64(max(d, time.Microsecond)))
			break
		}
		iters *= 4
	}
	chunk := max(1, iters/peakChunks)
	best := 0.0
	sinks := make([]int64, threads)
	for pass := 0; pass < 5; pass++ {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		t0 := time.Now()
		macs := peakPass(p, integer, chunk, sinks)
		best = math.Max(best, float64(macs)/time.Since(t0).Seconds())
	}
	return best, nil
}

// peakPass runs a probe pass on len(sinks) threads, peakChunks chunks of
// chunk rounds each, claimed as the threads come free, and returns the
// multiply-adds done.
func peakPass(p prober, integer bool, chunk int, sinks []int64) int64 {
	threads := len(sinks)
	total := int64(threads * peakChunks)
	var macs, next atomic.Int64
	done := make(chan struct{}, threads)
	for w := 0; w < threads; w++ {
		go func(w int) {
			for next.Add(1) <= total {
				n, sink := p.PeakProbe(integer, chunk)
				macs.Add(n)
				sinks[w] ^= sink
			}
			done <- struct{}{}
		}(w)
	}
	for w := 0; w < threads; w++ {
		<-done
	}
	return macs.Load()
}
