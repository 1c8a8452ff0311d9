package measure

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"arborist/engine/drafter"
	"arborist/engine/model"
	"arborist/profiles/costmodel"
	"arborist/profiles/hardware"
	"arborist/profiles/latency"
	"arborist/profiles/pairs"
)

// Recheck is the quick re-measurement of the stored curves before the
// speedup model uses them. A curve measured in a slow minute (or on a
// machine that has since changed) misprices every plan against plain
// decoding: speedup = AAL * T_verify(1) / step, so a stale T_verify(1)
// alone once made tune predict 2.36x for a plan that measured 1.48x. The
// re-check times passes at its anchor widths now (RecheckAnchors: 1, 2,
// 3, 4, 6 and 8), interleaved (medians of at least nine rounds; with a
// recent calibration's RecheckWindow, each anchor's ratio to plain
// decoding's token pooled with the window's), and when any is off by more than
// RecheckTolerance rescales the curve by every anchor's ratio at its width,
// linearly between anchors, the first below and the last above. All
// anchors move together because they were measured in the same rounds:
// their shape now is one measurement, and applying only the anchors past
// the tolerance bent the curve (a re-check that found W = 1 3% slower and
// W = 4 and 8 10% slower rescaled only the latter and under-predicted the
// chosen plan by 14%). The anchors between the ends are there because
// the curve does not move in one piece: on the bench pair a re-check found
// W = 1 and W = 8 13% faster than stored while W = 4, the width of the
// chosen plan, measured what it was stored at.
//
// With a draft model, each round also times the first DraftPasses
// drafter passes through the draft source right after the W = 1 target
// pass, as a chain step drafts (and drafts such a chain, untimed, after
// each further anchor's pass but the last, with a hidden-state source
// too: Drafting), and rescales the drafter's curves when their sum moved
// past the tolerance: the drafter's back-to-back curve
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
	// Anchors are every width the re-check timed (RecheckAnchors), in
	// increasing width (At and Widest read them).
	Anchors []Anchor
	// Plain is plain decoding's time a token now: PlainPasses passes of
	// one token back to back (median of the rounds).
	Plain    time.Duration
	Rescaled bool // the curve was rescaled
	// DraftPasses (0: no draft model) single-token drafter passes after a
	// target pass: what the stored curves charge, what they take now.
	DraftPasses           int
	StoredDraft, NowDraft time.Duration
	ScaleDraft            float64
	DraftRescaled         bool    // the drafter's curves were rescaled by ScaleDraft
	BandwidthStored       float64 // bytes/s when the machine was profiled (0: unknown)
	BandwidthNow          float64 // bytes/s now (0: not measured)
	BandwidthWarning      string  // set when the bandwidth moved by more than 15%
	// WindowMoments (0: none pooled) is how many moments of a calibration's
	// RecheckWindow, spanning WindowSpan and ending WindowAge ago, the
	// anchors' ratios to plain decoding's token were pooled with.
	WindowMoments         int
	WindowSpan, WindowAge time.Duration
	Elapsed               time.Duration // what the re-check cost
	// Context is the re-check of the curves over context (nil: the
	// prices rest on the short context's curve alone, or it was not run).
	Context *ContextRecheck
	// Passes is the re-check of the curves of passes of several
	// sequences (RecheckPasses; none: none stored, or not run).
	Passes []PassAnchor
	// Below is the re-check of the curves before the short context
	// (RecheckBelow; none: none stored, or not run).
	Below []BelowAnchor
}

// Anchor is one width the re-check timed: the stored curve's time there,
// the time now (its ratio to plain decoding's token pooled with a
// calibration's window, when there is one), and Now / Stored.
type Anchor struct {
	W           int
	Stored, Now time.Duration
	Scale       float64
}

// At is the anchor the re-check timed at width w (the zero Anchor where it
// timed none: a curve too short for the width).
func (r *Recheck) At(w int) Anchor {
	for _, a := range r.Anchors {
		if a.W == w {
			return a
		}
	}
	return Anchor{}
}

// Widest is the re-check's widest anchor (min(8, the curve's widest)).
func (r *Recheck) Widest() Anchor {
	if len(r.Anchors) == 0 {
		return Anchor{}
	}
	return r.Anchors[len(r.Anchors)-1]
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
	s := "T_verify re-check:"
	for i, a := range r.Anchors {
		if i > 0 {
			s += ";"
		}
		s += fmt.Sprintf(" W=%d stored %s, now %s", a.W, ms(a.Stored), ms(a.Now))
	}
	if r.Rescaled {
		s += "; curve rescaled ("
		for i, a := range r.Anchors {
			if i > 0 {
				s += ", "
			}
			at := "at"
			if i == len(r.Anchors)-1 && i > 0 {
				at = "from"
			}
			s += fmt.Sprintf("x%.2f %s W=%d", a.Scale, at, a.W)
		}
		s += ")"
	} else {
		s += "; curve kept"
	}
	if r.Plain > 0 {
		s += fmt.Sprintf("; plain decoding %s a token (%d passes back to back)", ms(r.Plain), PlainPasses)
	}
	if r.WindowMoments > 0 {
		s += fmt.Sprintf("; each width's ratio to it the median of this moment and %d over the calibration's %.0f s (%s ago)", r.WindowMoments, r.WindowSpan.Seconds(), r.WindowAge.Round(time.Second))
	}
	if r.DraftPasses > 0 {
		s += fmt.Sprintf("\ndrafter re-check: %d passes after a target pass stored %s, now %s", r.DraftPasses, ms(r.StoredDraft), ms(r.NowDraft))
		if r.DraftRescaled {
			s += fmt.Sprintf("; drafter curves rescaled (x%.2f)", r.ScaleDraft)
		} else {
			s += "; kept"
		}
	}
	if r.Context != nil {
		s += "\n" + r.Context.String()
	}
	if len(r.Passes) > 0 {
		s += "\n" + passesLine(r.Passes)
	}
	if len(r.Below) > 0 {
		s += "\n" + belowLine(r.Below)
	}
	if r.BandwidthWarning != "" {
		s += "\nwarning: " + r.BandwidthWarning
	}
	return s
}

// Brief is the re-check in a sentence, for the GUI's tune message: plain
// decoding's token now, whether the curve was rescaled (and how far, the
// anchors' range), how many of the calibration's moments it pooled, and
// what it found after a long context and of passes of several sequences.
func (r *Recheck) Brief() string {
	if r == nil || len(r.Anchors) == 0 {
		return ""
	}
	s := fmt.Sprintf("Re-checked against this minute's machine: plain decoding %.2f ms a token", float64(r.Plain)/1e6)
	if r.Rescaled {
		lo, hi := r.Anchors[0].Scale, r.Anchors[0].Scale
		for _, a := range r.Anchors {
			lo, hi = min(lo, a.Scale), max(hi, a.Scale)
		}
		s += fmt.Sprintf(", the stored curve rescaled x%.2f-%.2f", lo, hi)
	} else {
		s += ", the stored curve kept"
	}
	if r.WindowMoments > 0 {
		s += fmt.Sprintf(", its shape pooled with %d moments of the calibration's", r.WindowMoments)
	}
	if c := r.Context; c != nil && c.Skipped == "" {
		s += fmt.Sprintf("; after %d tokens plain decoding %.2f ms a token", c.Context, float64(c.Plain)/1e6)
		if c.Rescaled {
			s += ", the curves over context rescaled"
		}
	}
	var changed []string
	for _, a := range r.Passes {
		if a.Rescaled {
			changed = append(changed, fmt.Sprintf("%d sequences%s x%.2f", a.Seqs, a.at(), a.Scale))
		}
	}
	if len(changed) > 0 {
		s += "; passes of " + strings.Join(changed, ", ")
	}
	for _, a := range r.Below {
		if a.Rescaled {
			s += fmt.Sprintf("; a pass after %d tokens now %.2fx one after %d (stored %.2fx)", a.Context, a.Now, ShortContext, a.Stored)
		}
	}
	return s + "."
}

// RecheckVerify re-measures T_verify at the anchors (RecheckAnchors: up to
// W = 8, or the curve's widest point below it) on m, returns the curve to
// use (rescaled or the stored one) and what it found (RecheckCosts without
// a drafter).
func RecheckVerify(ctx context.Context, m *model.Model, curve []latency.Point, threads int, bandwidthStored float64) ([]latency.Point, Recheck, error) {
	c, r, err := RecheckCosts(ctx, m, pairs.Drafting{}, costmodel.Costs{Verify: curve}, threads, bandwidthStored, nil)
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
func RecheckCosts(ctx context.Context, m *model.Model, d pairs.Drafting, c costmodel.Costs, threads int, bandwidthStored float64, window *costmodel.RecheckWindow) (costmodel.Costs, Recheck, error) {
	t0 := time.Now()
	var r Recheck
	curve := c.Verify
	if len(curve) == 0 {
		return c, r, fmt.Errorf("profiles: no stored T_verify curve to re-check")
	}
	widths := RecheckAnchors(curve[len(curve)-1].W)
	if d.Draft != nil && len(c.Draft) > 0 { // curves of its own to re-check
		r.DraftPasses = DraftPasses
	}
	t, err := recheckRounds(ctx, m, d, widths, CurveOptions{Warmup: 2, MinReps: 9, MaxReps: 21})
	if err != nil {
		return c, r, err
	}
	now, drafted := t.widths, t.drafted
	r.Plain, c.Plain = t.plain, t.plain
	if windowUsable(window, widths, m, d, time.Now().UTC()) && t.plain > 0 {
		own := make([]float64, len(now))
		for i, d := range now {
			own[i] = float64(d) / float64(t.plain)
		}
		for i, ratio := range windowPooled(window, own) {
			now[i] = time.Duration(ratio * float64(t.plain))
		}
		r.WindowMoments = len(window.Slots)
		r.WindowSpan = window.End.Sub(window.Start)
		r.WindowAge = time.Since(window.End)
	}
	var factors []float64
	if r.Anchors, factors, err = anchorsOf(curve, widths, now); err != nil {
		return c, r, fmt.Errorf("profiles: the stored T_verify curve %w", err)
	}
	// the split curves (a concurrent pair's target on part of the
	// threads) move with the rest: were they left as stored while the
	// baseline moved, a plan priced on them would be compared against a
	// different machine (in a slow minute the re-check put T_verify(1)
	// 28% up, and duo, priced on the stale split curves, was predicted at
	// 2.21x and measured 1.60x). The anchors were timed on all threads;
	// the split curves take the same ratios, the best the re-check knows.
	// (Passes of several sequences are not: RecheckPasses times them.)
	c.Splits = slices.Clone(c.Splits)
	if moved(factors...) {
		r.Rescaled = true
		c.Verify = RescaleAt(curve, widths, factors)
		for i := range c.Splits {
			c.Splits[i].Verify = RescaleAt(c.Splits[i].Verify, widths, factors)
			if c.Splits[i].Beside != nil {
				c.Splits[i].Beside = RescaleAt(c.Splits[i].Beside, widths, factors)
			}
		}
	}
	if r.DraftPasses > 0 {
		one := costmodel.Interp(c.Draft, 1)
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
					if c.Splits[i].DraftBeside != nil {
						c.Splits[i].DraftBeside = RescaleAt(c.Splits[i].DraftBeside, []int{1}, []float64{r.ScaleDraft})
					}
				}
			}
		}
	}
	if bandwidthStored > 0 {
		r.BandwidthStored = bandwidthStored
		if bw, err := hardware.Bandwidth(ctx, threads, 64<<20); err == nil {
			r.BandwidthNow = bw
			if d := bw/bandwidthStored - 1; math.Abs(d) > 0.15 {
				r.BandwidthWarning = fmt.Sprintf("memory bandwidth is %.1f GB/s now, %.1f GB/s when this machine was profiled (%+.0f%%): another program may be loading the machine; profile again for curves to trust", bw/1e9, bandwidthStored/1e9, d*100)
			}
		}
	}
	r.Elapsed = time.Since(t0)
	return c, r, nil
}

// anchorsOf sets the stored curve's time at each width against the time
// now (now[i] at widths[i]), and returns the anchors and their ratios;
// an error where the curve has no positive time at one.
func anchorsOf(curve []latency.Point, widths []int, now []time.Duration) ([]Anchor, []float64, error) {
	anchors, factors := make([]Anchor, len(widths)), make([]float64, len(widths))
	for i, w := range widths {
		a := Anchor{W: w, Stored: costmodel.Interp(curve, w), Now: now[i]}
		if a.Stored <= 0 {
			return nil, nil, fmt.Errorf("has no positive time at W=%d", w)
		}
		a.Scale = float64(a.Now) / float64(a.Stored)
		anchors[i], factors[i] = a, a.Scale
	}
	return anchors, factors, nil
}

// RecheckAnchors are the widths a re-check of a curve reaching maxW times:
// those of 1, 2, 3, 4 and 6 below min(8, maxW), and that. Chains and
// narrow trees verify 2 to 5 rows, where a curve's single points can be
// off by more than the re-check can see at 1 and 4 alone: on the bench
// pair a curve read T_verify(3) and T_verify(4) 3.40 and 4.70 ms (steps
// of 0.15 and 1.30 ms), and chain gamma 2, priced between the anchors W =
// 1 and 4, came out 14% short of its runs in every tune of a set.
func RecheckAnchors(maxW int) []int {
	w := min(8, maxW)
	var widths []int
	for _, a := range []int{1, 2, 3, 4, 6} {
		if a < w {
			widths = append(widths, a)
		}
	}
	return append(widths, w)
}

// WindowSampler reads a RecheckWindow a moment at a time (Sample), between
// other work.
type WindowSampler struct {
	probe *recheckProbe
	w     costmodel.RecheckWindow
}

// NewWindowSampler sets up the re-check's round on m at the anchors of a
// curve reaching maxW (the widest a profile measures: 8).
func NewWindowSampler(ctx context.Context, m *model.Model, d pairs.Drafting, maxW int) (*WindowSampler, error) {
	widths := RecheckAnchors(maxW)
	p, err := newRecheckProbe(ctx, m, d, widths, CurveOptions{})
	if err != nil {
		return nil, err
	}
	return &WindowSampler{probe: p, w: costmodel.RecheckWindow{Widths: widths, Backend: m.Backend.Name(), Threads: m.Backend.Threads(), Drafting: d.Kind()}}, nil
}

// Sample reads one moment: an untimed round, then costmodel.WindowRounds timed.
func (s *WindowSampler) Sample(ctx context.Context) error {
	if _, err := s.probe.round(ctx); err != nil {
		return err
	}
	ratios := make([][]float64, len(s.w.Widths))
	for r := 0; r < costmodel.WindowRounds; r++ {
		rd, err := s.probe.round(ctx)
		if err != nil {
			return err
		}
		for i, t := range rd.widths {
			ratios[i] = append(ratios[i], float64(t)/float64(max(1, rd.plain)))
		}
	}
	slot := make([]float64, len(ratios))
	for i, rs := range ratios {
		slot[i] = costmodel.Median(rs)
	}
	now := time.Now().UTC()
	if len(s.w.Slots) == 0 {
		s.w.Start = now
	}
	s.w.Slots, s.w.End = append(s.w.Slots, slot), now
	return nil
}

// Window is what the samples read (nil before any).
func (s *WindowSampler) Window() *costmodel.RecheckWindow {
	if s == nil || len(s.w.Slots) == 0 {
		return nil
	}
	w := s.w
	w.Slots = slices.Clone(w.Slots)
	return &w
}

// windowUsable reports whether a re-check of widths on m, drafting with d, at
// time now may pool the window: the same anchors, backend, threads and
// drafting, enough moments (not more than a calibration reads), every
// ratio one a pass can take, and not dated ahead nor older than WindowAge.
func windowUsable(w *costmodel.RecheckWindow, widths []int, m *model.Model, d pairs.Drafting, now time.Time) bool {
	if w == nil || len(w.Slots) < costmodel.MinWindowSlots || !slices.Equal(w.Widths, widths) || w.Drafting != d.Kind() {
		return false
	}
	if w.Backend != m.Backend.Name() || w.Threads != m.Backend.Threads() {
		return false
	}
	if len(w.Slots) > costmodel.MaxWindowSlots {
		return false
	}
	for _, s := range w.Slots {
		if len(s) != len(widths) {
			return false
		}
		for _, r := range s {
			// a ratio a database could hold but no pass can take (a
			// damaged record) would rescale the curve to nonsense
			if !(r > 0.01 && r < 1000) {
				return false
			}
		}
	}
	age := now.Sub(w.End)
	return age >= 0 && age <= costmodel.WindowAge
}

// windowPooled is each width's ratio T_verify(W) / plain token: the median over
// the window's moments and one more, own.
func windowPooled(w *costmodel.RecheckWindow, own []float64) []float64 {
	out := make([]float64, len(own))
	for i := range own {
		rs := []float64{own[i]}
		for _, s := range w.Slots {
			rs = append(rs, s[i])
		}
		out[i] = costmodel.Median(rs)
	}
	return out
}

// recheckTimes is what recheckRounds measured, medians over its rounds.
type recheckTimes struct {
	widths  []time.Duration // a target pass of each width
	drafted time.Duration   // the drafter passes after the W = 1 pass, summed (0: no draft model)
	plain   time.Duration   // a token of PlainPasses single-token passes back to back
}

// recheckProbe is the re-check's round, set up once: m over a cached
// context of opt.Context made-up tokens, and with a Drafting its source
// over the same context. The quick re-check runs its rounds back to back
// in bursts (recheckRounds); a calibration runs a few between its prompts,
// spread over its whole run (WindowSampler).
type recheckProbe struct {
	m      *model.Model
	widths []int
	ctxLen int
	vocab  int
	toks   []int
	cache  *model.Cache
	res    model.Result
	src    drafter.Source
	prime  func(context.Context) error // the source back to the context, before a round
	dist   [][]float32
}

// recheckRound is one round's times.
type recheckRound struct {
	widths         []time.Duration
	drafted, plain time.Duration
}

func newRecheckProbe(ctx context.Context, m *model.Model, d pairs.Drafting, widths []int, opt CurveOptions) (*recheckProbe, error) {
	opt.defaults()
	maxW := max(slices.Max(widths), PlainPasses+1)
	if opt.Context+maxW > m.CtxLen || (d.Draft != nil && opt.Context+DraftPasses*len(widths)+1 > d.Draft.CtxLen) {
		return nil, fmt.Errorf("profiles: context %d + width %d exceed the models' positions", opt.Context, maxW)
	}
	p := &recheckProbe{m: m, widths: widths, ctxLen: opt.Context, vocab: m.Vocab}
	switch {
	case d.Draft != nil:
		p.vocab = min(p.vocab, d.Draft.Vocab)
	case d.Hidden != nil:
		p.vocab = min(p.vocab, d.Hidden.Vocab())
	}
	p.toks = make([]int, opt.Context+maxW)
	for i := range p.toks {
		p.toks[i] = (i*7 + 3) % p.vocab
	}
	p.cache = m.NewCache(opt.Context + maxW)
	b := model.Batch{Tokens: p.toks[:opt.Context], Want: []int{opt.Context - 1}}
	if d.Hidden != nil {
		b.Want, b.Hidden = nil, true // the source reads every position's state
	}
	if err := m.Forward(ctx, p.cache, b, &p.res); err != nil {
		return nil, err
	}
	switch {
	case d.Draft != nil:
		src := drafter.NewModel(d.Draft, 0, opt.Context+DraftPasses*len(widths)+1, "re-check")
		p.src, p.dist = src, [][]float32{make([]float32, d.Draft.Vocab)}
		p.prime = func(ctx context.Context) error { return primeSource(ctx, src, p.toks[:opt.Context], p.dist) }
	case d.Hidden != nil:
		hs, rows := d.Hidden, slices.Clone(p.res.Hidden)
		p.src, p.dist = hs, [][]float32{make([]float32, hs.Vocab())}
		// the context's states, the root the token after it, and the
		// root's distribution drafted (feeding those states), untimed
		p.prime = func(ctx context.Context) error {
			if err := hs.Begin(ctx, p.toks[:opt.Context+1]); err != nil {
				return err
			}
			if err := hs.ObserveHidden(rows, opt.Context); err != nil {
				return err
			}
			return hs.Expand(ctx, [][]int{{}}, p.dist)
		}
	}
	return p, nil
}

// round times a target pass of each width over the cached context, with a
// source DraftPasses source passes growing a chain after each pass but the
// last (timed after the W = 1 pass), and then PlainPasses + 1
// single-token passes growing the context, as plain decoding runs them,
// the last PlainPasses timed.
func (p *recheckProbe) round(ctx context.Context) (recheckRound, error) {
	out := recheckRound{widths: make([]time.Duration, len(p.widths))}
	c, toks := p.ctxLen, p.toks
	if p.prime != nil {
		if err := p.prime(ctx); err != nil {
			return out, err
		}
	}
	for i, w := range p.widths {
		p.cache.Truncate(c)
		t0 := time.Now()
		if err := p.m.Forward(ctx, p.cache, model.Batch{Tokens: toks[c : c+w]}, &p.res); err != nil {
			return out, err
		}
		out.widths[i] = time.Since(t0)
		if p.src == nil || i == len(p.widths)-1 {
			continue // plain decoding's passes, next, follow no drafting
		}
		// a chain drafted after each pass, so that every pass but the
		// first follows drafting as a step's verification does (on the
		// bench pair T_verify(4) over plain decoding's token read 1.43
		// right after the W = 3 pass and 1.50 after drafting); its own
		// tokens each time, or the source would answer from its cache.
		// The chain after W = 1 is timed: the drafter's re-check.
		path := make([]int, 0, DraftPasses)
		t0 = time.Now()
		for k := 0; k < DraftPasses; k++ {
			if err := p.src.Expand(ctx, [][]int{path}, p.dist); err != nil {
				return out, err
			}
			path = append(path, (k*11+5+i*17)%p.vocab)
		}
		if w == 1 {
			out.drafted = time.Since(t0)
		}
	}
	p.cache.Truncate(c)
	var t0 time.Time
	for k := 0; k <= PlainPasses; k++ {
		if k == 1 {
			t0 = time.Now()
		}
		if err := p.m.Forward(ctx, p.cache, model.Batch{Tokens: toks[c+k : c+k+1]}, &p.res); err != nil {
			return out, err
		}
	}
	out.plain = time.Since(t0) / PlainPasses
	return out, nil
}

// recheckRounds times target passes of each width on m over a cached
// context, round after round in RecheckBursts bursts (medians of the
// recheckProbe rounds).
func recheckRounds(ctx context.Context, m *model.Model, d pairs.Drafting, widths []int, opt CurveOptions) (recheckTimes, error) {
	var out recheckTimes
	opt.defaults()
	p, err := newRecheckProbe(ctx, m, d, widths, opt)
	if err != nil {
		return out, err
	}
	times := make([][]time.Duration, len(widths))
	var drafted, plain []time.Duration
	round := func(timed bool) error {
		r, err := p.round(ctx)
		if err != nil || !timed {
			return err
		}
		for i, t := range r.widths {
			times[i] = append(times[i], t)
		}
		if d.Draft != nil {
			drafted = append(drafted, r.drafted)
		}
		plain = append(plain, r.plain)
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
func RescaleAt(curve []latency.Point, anchors []int, factors []float64) []latency.Point {
	out := make([]latency.Point, len(curve))
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

// SpeedProbe reads how fast the machine runs plain decoding on m now, as
// the re-check's rounds read it (PlainPasses single-token passes back to
// back over a cached context), between other work: a load test reads it
// beside each level's rounds, so that each level is priced at the pace
// the shared machine kept beside it, not at the re-check's a minute
// before (on the bench pair a default load test's levels ran 20% apart
// from it within one test).
type SpeedProbe struct {
	p *recheckProbe
}

// SpeedRounds is how many timed rounds a reading takes the median of,
// after an untimed one.
const SpeedRounds = 3

// NewSpeedProbe sets the probe up on m: its cache over the re-check's
// context, prefilled once.
func NewSpeedProbe(ctx context.Context, m *model.Model) (*SpeedProbe, error) {
	p, err := newRecheckProbe(ctx, m, pairs.Drafting{}, []int{1}, CurveOptions{})
	if err != nil {
		return nil, err
	}
	return &SpeedProbe{p: p}, nil
}

// Token is plain decoding's time a token now: the median of SpeedRounds
// rounds' after an untimed one.
func (s *SpeedProbe) Token(ctx context.Context) (time.Duration, error) {
	ts := make([]float64, 0, SpeedRounds)
	for r := 0; r <= SpeedRounds; r++ {
		rd, err := s.p.round(ctx)
		if err != nil {
			return 0, err
		}
		if r > 0 {
			ts = append(ts, float64(rd.plain))
		}
	}
	return time.Duration(costmodel.Median(ts)), nil
}

// Close frees the probe's cache.
func (s *SpeedProbe) Close() { s.p.cache.Free() }
