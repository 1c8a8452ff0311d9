package hardware

import (
	"context"
	"errors"
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
