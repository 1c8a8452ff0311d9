package hardware

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestSustain: a sustained read takes at least one pass and reads for at
// least the time asked, its rate over the whole read is no faster than its
// fastest pass, and a cancelled context stops it with the context's error.
func TestSustain(t *testing.T) {
	p := NewBandwidthProbe(2, 4<<20)
	r, err := p.Sustain(context.Background(), 0)
	if err != nil || r.Passes != 1 || r.Rate <= 0 || r.Rate > r.Best*(1+1e-9) {
		t.Fatalf("no duration asked: %+v, %v; want one pass, a rate no faster than the best pass", r, err)
	}
	t0 := time.Now()
	r, err = p.Sustain(context.Background(), 30*time.Millisecond)
	if err != nil || time.Since(t0) < 30*time.Millisecond || r.Passes < 1 || r.Rate > r.Best*(1+1e-9) {
		t.Fatalf("30 ms: %+v, %v after %v", r, err, time.Since(t0))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Sustain(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v, want context.Canceled", err)
	}
}

// heldProber is a probe whose first chunk is held up (as a thread is by
// other work on a busy machine) until every other chunk of the pass is
// done; each chunk is 1000 multiply-adds.
type heldProber struct {
	total   int64
	calls   atomic.Int64
	done    atomic.Int64
	release chan struct{}
	held    atomic.Bool // the held chunk was let go by the others' progress
}

func (h *heldProber) PeakProbe(integer bool, iters int) (int64, int64) {
	if h.calls.Add(1) == 1 {
		select {
		case <-h.release:
			h.held.Store(true)
		case <-time.After(time.Minute): // the others never finished: a guard, not a measurement
		}
	} else if h.done.Add(1) == h.total-1 {
		close(h.release)
	}
	return 1000, int64(iters)
}

// TestPeakPassShares: a probe pass's chunks go to whichever thread is
// free, as the kernels' pool hands out a product's: with one thread held
// up, the others do every other chunk, and the pass counts them all.
func TestPeakPassShares(t *testing.T) {
	const threads = 3
	h := &heldProber{total: threads * peakChunks, release: make(chan struct{})}
	macs := peakPass(h, true, 7, make([]int64, threads))
	if !h.held.Load() {
		t.Fatal("the held chunk waited for the others in vain: the others did not take its thread's share")
	}
	if macs != 1000*threads*peakChunks || h.calls.Load() != threads*peakChunks {
		t.Fatalf("%d multiply-adds in %d chunks, want %d in %d", macs, h.calls.Load(), 1000*threads*peakChunks, threads*peakChunks)
	}
}

// TestComputePeak: the probe measures a positive rate and stops on a
// cancelled context.
func TestComputePeak(t *testing.T) {
	for _, integer := range []bool{true, false} {
		if pk, err := ComputePeak(context.Background(), 2, integer); err != nil || !(pk > 0) {
			t.Fatalf("integer %v: %g, %v", integer, pk, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ComputePeak(ctx, 2, true); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}
