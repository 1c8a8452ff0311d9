package profiles

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"arborist/engine/drafter"
	"arborist/engine/model"
	"arborist/engine/sample"
	"arborist/profiles/store"
)

// Recheck is the quick re-measurement of the stored curves before the
// speedup model uses them. A curve measured in a slow minute (or on a
// machine that has since changed) misprices every plan against plain
// decoding: speedup = AAL * T_verify(1) / step, so a stale T_verify(1)
// alone once made tune predict 2.36x for a plan that measured 1.48x. The
// re-check times W = 1, a middle width and one wider pass now, interleaved
// (medians of at least nine rounds), and when any is off by more than
// RecheckTolerance rescales the curve by every anchor's ratio at its width,
// linearly between anchors, the first below and the last above. All
// anchors move together because they were measured in the same rounds:
// their shape now is one measurement, and applying only the anchors past
// the tolerance bent the curve (a re-check that found W = 1 3% slower and
// W = 4 and 8 10% slower rescaled only the latter and under-predicted the
// chosen plan by 14%). The middle anchor is there because the curve does
// not move in one piece: on the bench pair a re-check found W = 1 and W =
// 8 13% faster than stored while W = 4, the width of the chosen plan,
// measured what it was stored at.
//
// With a draft model, each round also times the first DraftPasses
// drafter passes through the draft source right after the W = 1 target
// pass, as a chain step drafts, and rescales the drafter's curves when
// their sum moved past the tolerance: the drafter's back-to-back curve
// swung from 103 to 159 µs a pass between two profiles of the same pair,
// and a step's drafting is what the model charges most unevenly.
//
// Each round also times PlainPasses single-token passes back to back, as
// plain decoding runs them: plain decoding's time a token, the baseline
// every speedup is set against (Costs.Plain). The curve's W = 1 pass, timed
// alone between other work, is not that time: on the bench target (2 Zen 4
// cores) it read 7-14% above what the validation's plain decoding took a
// token, in all three tunes of a set, while the plans' steps were priced
// within 5%; so every prediction came out high by that much.
type Recheck struct {
	W                 int           // the wide anchor's width
	Mid               int           // the middle anchor's width (0: none, the curve is too short)
	Stored1, Now1     time.Duration // T_verify(1): stored curve, measured now
	StoredMid, NowMid time.Duration // T_verify(Mid)
	StoredW, NowW     time.Duration // T_verify(W)
	// Plain is plain decoding's time a token now: PlainPasses passes of
	// one token back to back (median of the rounds).
	Plain            time.Duration
	Scale1, ScaleMid float64 // Now / Stored at the anchors
	ScaleW           float64
	Rescaled         bool // the curve was rescaled
	// DraftPasses (0: no draft model) single-token drafter passes after a
	// target pass: what the stored curves charge, what they take now.
	DraftPasses           int
	StoredDraft, NowDraft time.Duration
	ScaleDraft            float64
	DraftRescaled         bool          // the drafter's curves were rescaled by ScaleDraft
	BandwidthStored       float64       // bytes/s when the machine was profiled (0: unknown)
	BandwidthNow          float64       // bytes/s now (0: not measured)
	BandwidthWarning      string        // set when the bandwidth moved by more than 15%
	Elapsed               time.Duration // what the re-check cost
}

// RecheckTolerance is how far a stored anchor may be from the one
// measured now before the curve is rescaled: about twice the spread of
// repeated profiles on a quiet machine.
const RecheckTolerance = 0.08

// DraftPasses is how many drafter passes after a target pass the
// re-check times: a typical chain step's.
const DraftPasses = 4

// RecheckBursts and RecheckGap spread the re-check's timed rounds over
// time: its rounds run in RecheckBursts bursts with RecheckGap between
// them, and each width's median is over all of them. Back to back, the
// rounds took a third of a second, and a slow spell of the machine that
// long could set the whole re-check (on the bench pair, one tune of three
// read W = 4 32% slow and W = 1 not at all, priced every plan 20% slow,
// and the validation a minute later measured them at the speed of the
// other two tunes); spread over about a second, such a spell reaches a
// third of the rounds and not the medians.
const (
	RecheckBursts = 3
	RecheckGap    = 300 * time.Millisecond
)

// PlainPasses is how many single-token passes back to back each round of
// the re-check times for plain decoding's token (after one untimed pass,
// which follows the round's other work as no decoding pass does).
const PlainPasses = 6

// moved says whether any ratio now/stored is past the tolerance.
func moved(ratios ...float64) bool {
	for _, r := range ratios {
		if math.Abs(r-1) > RecheckTolerance {
			return true
		}
	}
	return false
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
		s += fmt.Sprintf("; curve rescaled (x%.2f at W=1", r.Scale1)
		if r.Mid > 0 {
			s += fmt.Sprintf(", x%.2f at W=%d", r.ScaleMid, r.Mid)
		}
		s += fmt.Sprintf(", x%.2f from W=%d)", r.ScaleW, r.W)
	} else {
		s += "; curve kept"
	}
	if r.Plain > 0 {
		s += fmt.Sprintf("; plain decoding %s a token (%d passes back to back)", ms(r.Plain), PlainPasses)
	}
	if r.DraftPasses > 0 {
		s += fmt.Sprintf("\ndrafter re-check: %d passes after a target pass stored %s, now %s", r.DraftPasses, ms(r.StoredDraft), ms(r.NowDraft))
		if r.DraftRescaled {
			s += fmt.Sprintf("; drafter curves rescaled (x%.2f)", r.ScaleDraft)
		} else {
			s += "; kept"
		}
	}
	if r.BandwidthWarning != "" {
		s += "\nwarning: " + r.BandwidthWarning
	}
	return s
}

// RecheckVerify re-measures T_verify(1), T_verify(4) and T_verify(W) (W =
// 8, or the curve's widest point below it; the middle anchor only where
// 1 < 4 < W) on m, returns the curve to use (rescaled or the stored one)
// and what it found (RecheckCosts without a drafter).
func RecheckVerify(ctx context.Context, m *model.Model, curve []store.Point, threads int, bandwidthStored float64) ([]store.Point, Recheck, error) {
	c, r, err := RecheckCosts(ctx, m, nil, Costs{Verify: curve}, threads, bandwidthStored)
	return c.Verify, r, err
}

// RecheckCosts re-checks c.Verify as RecheckVerify does, sets c.Plain to
// plain decoding's token as timed now, and, when draft
// is the draft model c.Draft and c.DraftAfter were measured for, the
// drafter's first DraftPasses passes after a target pass in the same
// rounds; it returns c with the curves to use. When bandwidthStored is
// positive it also re-measures the read bandwidth with threads goroutines
// and warns when it moved by more than 15%: the machine is busier, or not
// the one that was profiled, and every stored curve is suspect.
func RecheckCosts(ctx context.Context, m, draft *model.Model, c Costs, threads int, bandwidthStored float64) (Costs, Recheck, error) {
	t0 := time.Now()
	var r Recheck
	curve := c.Verify
	if len(curve) == 0 {
		return c, r, fmt.Errorf("profiles: no stored T_verify curve to re-check")
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
	if draft != nil && len(c.Draft) > 0 {
		r.DraftPasses = DraftPasses
	}
	t, err := recheckRounds(ctx, m, draft, widths, r.DraftPasses, CurveOptions{Warmup: 2, MinReps: 9, MaxReps: 21})
	if err != nil {
		return c, r, err
	}
	now, drafted := t.widths, t.drafted
	r.Plain, c.Plain = t.plain, t.plain
	r.Stored1, r.Now1 = Interp(curve, 1), now[0]
	r.StoredW, r.NowW = Interp(curve, r.W), now[len(now)-1]
	if r.Stored1 <= 0 || r.StoredW <= 0 {
		return c, r, fmt.Errorf("profiles: the stored T_verify curve has no positive time at W=1")
	}
	r.Scale1 = float64(r.Now1) / float64(r.Stored1)
	r.ScaleW = float64(r.NowW) / float64(r.StoredW)
	anchors, factors := []int{1}, []float64{r.Scale1}
	if r.Mid > 0 {
		r.StoredMid, r.NowMid = Interp(curve, r.Mid), now[1]
		if r.StoredMid <= 0 {
			return c, r, fmt.Errorf("profiles: the stored T_verify curve has no positive time at W=%d", r.Mid)
		}
		r.ScaleMid = float64(r.NowMid) / float64(r.StoredMid)
		anchors, factors = append(anchors, r.Mid), append(factors, r.ScaleMid)
	}
	if r.W > 1 {
		anchors, factors = append(anchors, r.W), append(factors, r.ScaleW)
	}
	// the split curves (a concurrent pair's target on part of the
	// threads) move with the rest: were they left as stored while the
	// baseline moved, a plan priced on them would be compared against a
	// different machine (in a slow minute the re-check put T_verify(1)
	// 28% up, and duo, priced on the stale split curves, was predicted at
	// 2.21x and measured 1.60x). The anchors were timed on all threads;
	// the split curves take the same ratios, the best the re-check knows.
	c.Splits = slices.Clone(c.Splits)
	if moved(factors...) {
		r.Rescaled = true
		c.Verify = RescaleAt(curve, anchors, factors)
		for i := range c.Splits {
			c.Splits[i].Verify = RescaleAt(c.Splits[i].Verify, anchors, factors)
		}
	}
	if r.DraftPasses > 0 {
		one := Interp(c.Draft, 1)
		for i := 0; i < r.DraftPasses; i++ {
			r.StoredDraft += one
			if len(c.DraftAfter) > 0 {
				r.StoredDraft += c.DraftAfter[min(i, len(c.DraftAfter)-1)].Median
			}
		}
		r.NowDraft = drafted
		if r.StoredDraft > 0 {
			r.ScaleDraft = float64(r.NowDraft) / float64(r.StoredDraft)
			if moved(r.ScaleDraft) {
				r.DraftRescaled = true
				c.Draft = RescaleAt(c.Draft, []int{1}, []float64{r.ScaleDraft})
				if len(c.DraftAfter) > 0 {
					c.DraftAfter = RescaleAt(c.DraftAfter, []int{1}, []float64{r.ScaleDraft})
				}
				for i := range c.Splits {
					c.Splits[i].Draft = RescaleAt(c.Splits[i].Draft, []int{1}, []float64{r.ScaleDraft})
				}
			}
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
	return c, r, nil
}

// recheckTimes is what recheckRounds measured, medians over its rounds.
type recheckTimes struct {
	widths  []time.Duration // a target pass of each width
	drafted time.Duration   // the drafter passes after the W = 1 pass, summed (0: no draft model)
	plain   time.Duration   // a token of PlainPasses single-token passes back to back
}

// recheckRounds times target passes of each width on m over a cached
// context, round after round in RecheckBursts bursts (medians); with a
// draft model, each round first caches the context in a draft source, and
// right after the W = 1 pass times passes single-token source passes
// growing a chain (the median of their sum). Each round ends with PlainPasses + 1 single-token
// passes growing the context, as plain decoding runs them, the last
// PlainPasses timed.
func recheckRounds(ctx context.Context, m, draft *model.Model, widths []int, passes int, opt CurveOptions) (recheckTimes, error) {
	var out recheckTimes
	opt.defaults()
	maxW := max(slices.Max(widths), PlainPasses+1)
	if opt.Context+maxW > m.CtxLen || (passes > 0 && opt.Context+passes+1 > draft.CtxLen) {
		return out, fmt.Errorf("profiles: context %d + width %d exceed the models' positions", opt.Context, maxW)
	}
	vocab := m.Vocab
	if passes > 0 {
		vocab = min(vocab, draft.Vocab)
	}
	toks := make([]int, opt.Context+maxW)
	for i := range toks {
		toks[i] = (i*7 + 3) % vocab
	}
	cache := m.NewCache(opt.Context + maxW)
	var res model.Result
	if err := m.Forward(ctx, cache, model.Batch{Tokens: toks[:opt.Context], Want: []int{opt.Context - 1}}, &res); err != nil {
		return out, err
	}
	var src *drafter.Model
	var dist [][]float32
	if passes > 0 {
		src = drafter.NewModel(draft, 0, opt.Context+passes+1, sample.Params{}, "re-check")
		dist = [][]float32{make([]float32, draft.Vocab)}
	}
	times := make([][]time.Duration, len(widths))
	var drafted, plain []time.Duration
	round := func(timed bool) error {
		if src != nil {
			if err := primeSource(ctx, src, toks[:opt.Context], dist); err != nil {
				return err
			}
		}
		for i, w := range widths {
			cache.Truncate(opt.Context)
			t0 := time.Now()
			if err := m.Forward(ctx, cache, model.Batch{Tokens: toks[opt.Context : opt.Context+w]}, &res); err != nil {
				return err
			}
			if timed {
				times[i] = append(times[i], time.Since(t0))
			}
			if w != 1 || src == nil {
				continue
			}
			path := make([]int, 0, passes)
			t0 = time.Now()
			for k := 0; k < passes; k++ {
				if err := src.Expand(ctx, [][]int{path}, dist); err != nil {
					return err
				}
				path = append(path, (k*11+5)%vocab)
			}
			if timed {
				drafted = append(drafted, time.Since(t0))
			}
		}
		cache.Truncate(opt.Context)
		var t0 time.Time
		for k := 0; k <= PlainPasses; k++ {
			if k == 1 {
				t0 = time.Now()
			}
			if err := m.Forward(ctx, cache, model.Batch{Tokens: toks[opt.Context+k : opt.Context+k+1]}, &res); err != nil {
				return err
			}
		}
		if timed {
			plain = append(plain, time.Since(t0)/PlainPasses)
		}
		return nil
	}
	for i := 0; i < opt.Warmup; i++ {
		if err := round(false); err != nil {
			return out, err
		}
	}
	burst := max(1, opt.MinReps/RecheckBursts)
	for n := 0; n < opt.MaxReps; n++ {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		if n > 0 && n%burst == 0 && n < opt.MinReps {
			select {
			case <-ctx.Done():
				return out, ctx.Err()
			case <-time.After(RecheckGap):
			}
			if err := round(false); err != nil { // the threads and caches back to work
				return out, err
			}
		}
		if err := round(true); err != nil {
			return out, err
		}
		if n+1 >= opt.MinReps && allSettled(times) {
			break
		}
	}
	out.widths = make([]time.Duration, len(widths))
	for i := range widths {
		out.widths[i], _ = medianSpread(times[i])
	}
	if len(drafted) > 0 {
		out.drafted, _ = medianSpread(drafted)
	}
	out.plain, _ = medianSpread(plain)
	return out, nil
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
