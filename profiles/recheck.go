package profiles

import (
	"context"
	"fmt"
	"math"
	"time"

	"arborist/engine/model"
	"arborist/profiles/store"
)

// Recheck is the quick re-measurement of a stored T_verify curve before
// the speedup model uses it. A curve measured in a slow minute (or on a
// machine that has since changed) misprices every plan against plain
// decoding: speedup = AAL * T_verify(1) / step, so a stale T_verify(1)
// alone once made tune predict 2.36x for a plan that measured 1.48x. The
// re-check times W = 1 and one wider pass now, interleaved (medians of at
// least nine rounds), and when either is off by more than
// RecheckTolerance rescales the curve: by the W = 1 ratio at W = 1 when
// that anchor moved, by the wide ratio from that width up when it moved,
// linearly in between (so a lone stale point and a uniformly slower
// machine are both corrected, and an anchor within tolerance stays put).
type Recheck struct {
	W                int           // the wide anchor's width
	Stored1, Now1    time.Duration // T_verify(1): stored curve, measured now
	StoredW, NowW    time.Duration // T_verify(W)
	Scale1, ScaleW   float64       // Now / Stored at the two anchors
	Rescaled         bool          // the curve was rescaled
	BandwidthStored  float64       // bytes/s when the machine was profiled (0: unknown)
	BandwidthNow     float64       // bytes/s now (0: not measured)
	BandwidthWarning string        // set when the bandwidth moved by more than 15%
	Elapsed          time.Duration // what the re-check cost
}

// RecheckTolerance is how far a stored anchor may be from the one
// measured now before the curve is rescaled: about twice the spread of
// repeated profiles on a quiet machine.
const RecheckTolerance = 0.08

// applied is the factor an anchor's ratio now/stored puts on its end of
// the curve: only an anchor that moved past the tolerance moves it, so a
// lone stale point is corrected without dragging the rest by the other
// anchor's noise.
func applied(ratio float64) float64 {
	if math.Abs(ratio-1) <= RecheckTolerance {
		return 1
	}
	return ratio
}

// String is the one-line report tune and run print.
func (r *Recheck) String() string {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }
	s := fmt.Sprintf("T_verify re-check: W=1 stored %s, now %s; W=%d stored %s, now %s", ms(r.Stored1), ms(r.Now1), r.W, ms(r.StoredW), ms(r.NowW))
	if r.Rescaled {
		s += fmt.Sprintf("; curve rescaled (x%.2f at W=1, x%.2f from W=%d)", applied(r.Scale1), applied(r.ScaleW), r.W)
	} else {
		s += "; curve kept"
	}
	if r.BandwidthWarning != "" {
		s += "\nwarning: " + r.BandwidthWarning
	}
	return s
}

// RecheckVerify re-measures T_verify(1) and T_verify(W) (W = 8, or the
// curve's widest point below it) on m, returns the curve to use (rescaled
// or the stored one) and what it found. When bandwidthStored is positive
// it also re-measures the read bandwidth with threads goroutines and warns
// when it moved by more than 15%: the machine is busier, or not the one
// that was profiled, and every stored curve is suspect.
func RecheckVerify(ctx context.Context, m *model.Model, curve []store.Point, threads int, bandwidthStored float64) ([]store.Point, Recheck, error) {
	t0 := time.Now()
	var r Recheck
	if len(curve) == 0 {
		return curve, r, fmt.Errorf("profiles: no stored T_verify curve to re-check")
	}
	r.W = min(8, curve[len(curve)-1].W)
	widths := []int{1}
	if r.W > 1 {
		widths = append(widths, r.W)
	}
	now, err := VerifyCurve(ctx, m, widths, CurveOptions{Warmup: 2, MinReps: 9, MaxReps: 21})
	if err != nil {
		return curve, r, err
	}
	r.Stored1, r.Now1 = Interp(curve, 1), now[0].Median
	r.StoredW, r.NowW = Interp(curve, r.W), now[len(now)-1].Median
	if r.Stored1 <= 0 || r.StoredW <= 0 {
		return curve, r, fmt.Errorf("profiles: the stored T_verify curve has no positive time at W=1")
	}
	r.Scale1 = float64(r.Now1) / float64(r.Stored1)
	r.ScaleW = float64(r.NowW) / float64(r.StoredW)
	out := curve
	if s1, sw := applied(r.Scale1), applied(r.ScaleW); s1 != 1 || sw != 1 {
		r.Rescaled = true
		out = RescaleCurve(curve, s1, r.W, sw)
	}
	if bandwidthStored > 0 {
		r.BandwidthStored = bandwidthStored
		if bw, err := Bandwidth(ctx, threads, 64<<20); err == nil {
			r.BandwidthNow = bw
			if d := bw/bandwidthStored - 1; math.Abs(d) > 0.15 {
				r.BandwidthWarning = fmt.Sprintf("memory bandwidth is %.1f GB/s now, %.1f GB/s when this machine was profiled (%+.0f%%): another program may be loading the machine; profile again for curves to trust", bw/1e9, bandwidthStored/1e9, d*100)
			}
		}
	}
	r.Elapsed = time.Since(t0)
	return out, r, nil
}

// RescaleCurve multiplies each point's median and spread by s1 at W <= 1,
// by sw at W >= w, and by the linear blend of the two in between.
func RescaleCurve(curve []store.Point, s1 float64, w int, sw float64) []store.Point {
	out := make([]store.Point, len(curve))
	for i, p := range curve {
		f := sw
		switch {
		case p.W <= 1 || w <= 1:
			f = s1
		case p.W < w:
			f = s1 + (sw-s1)*float64(p.W-1)/float64(w-1)
		}
		p.Median = time.Duration(float64(p.Median) * f)
		p.Spread = time.Duration(float64(p.Spread) * f)
		out[i] = p
	}
	return out
}
