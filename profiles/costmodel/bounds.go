package costmodel

import (
	"errors"
	"fmt"
	"math"
	"time"

	"arborist/profiles/latency"
)

// The model's guards: what it prices must be possible. A curve measured
// on a busy machine can read a wider pass cheaper than a narrower one
// (T_verify(4) below T_verify(1)), and a plan wider than the widest pass
// profiled would be priced on an extrapolation; either once put a 39-node
// tree at 18 times cheaper than one token of plain decoding. So a curve is
// read as monotone in W, a plan is priced only within the widths measured,
// and a step never costs less than plain decoding's token: no plan is then
// predicted above its tokens a step.

// ErrBeyondProfile marks a plan that verifies more tokens in one pass than
// the widest the profile measured: it is left out, never extrapolated.
var ErrBeyondProfile = errors.New("wider than the profile measured")

// Monotone returns pts with its medians made non-decreasing in W by pool
// adjacent violators: a run of points that falls is replaced by its mean
// (weighted by repetitions), the least change that makes the curve one a
// pass can have. Spreads are kept. pts is not changed.
func Monotone(pts []latency.Point) []latency.Point {
	if len(pts) < 2 {
		return pts
	}
	type block struct {
		sum, weight float64
		n           int
	}
	var blocks []block
	for _, p := range pts {
		w := float64(max(p.Reps, 1))
		blocks = append(blocks, block{float64(p.Median) * w, w, 1})
		for len(blocks) > 1 {
			a, b := blocks[len(blocks)-2], blocks[len(blocks)-1]
			if a.sum/a.weight <= b.sum/b.weight {
				break
			}
			blocks = append(blocks[:len(blocks)-2], block{a.sum + b.sum, a.weight + b.weight, a.n + b.n})
		}
	}
	out := make([]latency.Point, 0, len(pts))
	i := 0
	for _, b := range blocks {
		m := time.Duration(math.Round(b.sum / b.weight))
		for k := 0; k < b.n; k, i = k+1, i+1 {
			p := pts[i]
			p.Median = m
			out = append(out, p)
		}
	}
	return out
}

// monotone is c with every width-indexed curve made monotone.
func (c Costs) monotone() Costs {
	c.Verify, c.Draft = Monotone(c.Verify), Monotone(c.Draft)
	if len(c.Splits) > 0 {
		splits := make([]SplitCosts, len(c.Splits))
		for i, s := range c.Splits {
			s.Verify, s.Draft, s.Beside, s.DraftBeside = Monotone(s.Verify), Monotone(s.Draft), Monotone(s.Beside), Monotone(s.DraftBeside)
			splits[i] = s
		}
		c.Splits = splits
	}
	return c
}

// Widest is the widest pass the verification curve measured (0: none).
func (c Costs) Widest() int {
	if len(c.Verify) == 0 {
		return 0
	}
	return c.Verify[len(c.Verify)-1].W
}

// bound holds pr within what the curves cv can say and physics allows: a
// plan verifying more tokens than cv measured is refused, and a step is
// never cheaper than plain decoding's token (a step verifies at least one
// token), so Speedup never exceeds AAL; Bounded says the curve priced it
// cheaper and the step was raised.
func bound(pr *Prediction, c Costs, cv curves) error {
	if len(cv.verify) > 0 {
		if widest := cv.verify[len(cv.verify)-1].W; pr.Nodes+1 > widest {
			return fmt.Errorf("profiles: %s verifies %d tokens a pass: %w (W = %d)", pr.Plan, pr.Nodes+1, ErrBeyondProfile, widest)
		}
	}
	if pr.Plan.NeedsSource() {
		if plain := c.PlainToken(); pr.Step > 0 && pr.Step < plain {
			pr.Step, pr.Bounded = plain, true
			pr.setSpeedup(c)
		}
	}
	return nil
}

// spreadAt is the curve's spread at w relative to its median there.
func spreadAt(pts []latency.Point, w int) float64 {
	if len(pts) == 0 {
		return 0
	}
	spread := make([]latency.Point, len(pts))
	for i, p := range pts {
		spread[i] = latency.Point{W: p.W, Median: p.Spread}
	}
	med := Interp(pts, w)
	if med <= 0 {
		return 0
	}
	return float64(Interp(spread, w)) / float64(med)
}

// aalError is the calibration's relative sampling error of tokens a step:
// the spread of the tokens its recorded steps kept over their mean, over
// the square root of their count (0 without recorded steps: an assumed
// acceptance has no sampling error to show).
func (a *Acceptance) aalError() float64 {
	if a == nil || len(a.Depths) < 2 {
		return 0
	}
	var sum, sq float64
	for _, s := range a.Depths {
		v := float64(s.Accepted + 1)
		sum += v
		sq += v * v
	}
	n := float64(len(a.Depths))
	mean := sum / n
	sd := math.Sqrt(max(0, sq/n-mean*mean))
	return sd / mean / math.Sqrt(n)
}

// interval sets pr's Low and High: its speedup with tokens a step two
// standard errors of the calibration either way (aalError) and the
// verification pass one spread of the curve either way, never above
// tokens a step (bound).
func interval(pr *Prediction, aalErr float64, cv curves) {
	if !pr.Plan.NeedsSource() || pr.Step <= 0 {
		pr.Low, pr.High = pr.Speedup, pr.Speedup
		return
	}
	s := spreadAt(cv.verify, pr.Nodes+1) * float64(pr.Verify) / float64(pr.Step)
	lo, hi := 1-2*aalErr, 1+2*aalErr
	pr.Low = pr.Speedup * max(lo, 0) / (1 + s)
	pr.High = min(pr.Speedup*hi/max(1-s, 0.5), pr.AAL*hi)
	pr.High = max(pr.High, pr.Speedup)
}
