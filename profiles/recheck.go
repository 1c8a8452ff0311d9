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
// re-check times W = 1, a middle width and one wider pass now, interleaved
// (medians of at least nine rounds), and when any is off by more than
// RecheckTolerance rescales the curve: each anchor's ratio at its width
// when that anchor moved, linearly between anchors, the first below and
// the last above (so a lone stale point and a uniformly slower machine
// are both corrected, and an anchor within tolerance stays put). The
// middle anchor is there because the curve does not move in one piece: on
// the bench pair a re-check found W = 1 and W = 8 13% faster than stored
// while W = 4, the width of the chosen plan, measured what it was stored
// at, and rescaling it by the ends over-predicted that plan by 12%.
type Recheck struct {
	W                 int           // the wide anchor's width
	Mid               int           // the middle anchor's width (0: none, the curve is too short)
	Stored1, Now1     time.Duration // T_verify(1): stored curve, measured now
	StoredMid, NowMid time.Duration // T_verify(Mid)
	StoredW, NowW     time.Duration // T_verify(W)
	Scale1, ScaleMid  float64       // Now / Stored at the anchors
	ScaleW            float64
	Rescaled          bool          // the curve was rescaled
	BandwidthStored   float64       // bytes/s when the machine was profiled (0: unknown)
	BandwidthNow      float64       // bytes/s now (0: not measured)
	BandwidthWarning  string        // set when the bandwidth moved by more than 15%
	Elapsed           time.Duration // what the re-check cost
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
	s := fmt.Sprintf("T_verify re-check: W=1 stored %s, now %s", ms(r.Stored1), ms(r.Now1))
	if r.Mid > 0 {
		s += fmt.Sprintf("; W=%d stored %s, now %s", r.Mid, ms(r.StoredMid), ms(r.NowMid))
	}
	s += fmt.Sprintf("; W=%d stored %s, now %s", r.W, ms(r.StoredW), ms(r.NowW))
	if r.Rescaled {
		s += fmt.Sprintf("; curve rescaled (x%.2f at W=1", applied(r.Scale1))
		if r.Mid > 0 {
			s += fmt.Sprintf(", x%.2f at W=%d", applied(r.ScaleMid), r.Mid)
		}
		s += fmt.Sprintf(", x%.2f from W=%d)", applied(r.ScaleW), r.W)
	} else {
		s += "; curve kept"
	}
	if r.BandwidthWarning != "" {
		s += "\nwarning: " + r.BandwidthWarning
	}
	return s
}

// RecheckVerify re-measures T_verify(1), T_verify(4) and T_verify(W) (W =
// 8, or the curve's widest point below it; the middle anchor only where
// 1 < 4 < W) on m, returns the curve to use (rescaled or the stored one)
// and what it found. When bandwidthStored is positive
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
	if r.W > 4 {
		r.Mid = 4
		widths = append(widths, r.Mid)
	}
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
	anchors, factors := []int{1}, []float64{applied(r.Scale1)}
	if r.Mid > 0 {
		r.StoredMid, r.NowMid = Interp(curve, r.Mid), now[1].Median
		if r.StoredMid <= 0 {
			return curve, r, fmt.Errorf("profiles: the stored T_verify curve has no positive time at W=%d", r.Mid)
		}
		r.ScaleMid = float64(r.NowMid) / float64(r.StoredMid)
		anchors, factors = append(anchors, r.Mid), append(factors, applied(r.ScaleMid))
	}
	if r.W > 1 {
		anchors, factors = append(anchors, r.W), append(factors, applied(r.ScaleW))
	}
	out := curve
	for _, f := range factors {
		if f != 1 {
			r.Rescaled = true
			out = RescaleAt(curve, anchors, factors)
			break
		}
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

// RescaleAt multiplies each point's median and spread by a factor
// interpolated linearly between anchors (increasing widths, each with its
// factor): the first factor below the first anchor, the last above the
// last.
func RescaleAt(curve []store.Point, anchors []int, factors []float64) []store.Point {
	out := make([]store.Point, len(curve))
	for i, p := range curve {
		f := factors[len(factors)-1]
		if p.W <= anchors[0] {
			f = factors[0]
		} else {
			for k := 1; k < len(anchors); k++ {
				if p.W < anchors[k] {
					a, b := anchors[k-1], anchors[k]
					f = factors[k-1] + (factors[k]-factors[k-1])*float64(p.W-a)/float64(b-a)
					break
				}
			}
		}
		p.Median = time.Duration(float64(p.Median) * f)
		p.Spread = time.Duration(float64(p.Spread) * f)
		out[i] = p
	}
	return out
}
