package costmodel

import (
	"fmt"
	"slices"
	"time"

	"arborist/profiles/latency"
)

// ContextCurve is the target's verification curve T_verify(W) measured
// on one sequence after Context cached tokens.
type ContextCurve struct {
	Context int
	Verify  []latency.Point
}

// ContextRange says at what context a prediction's verification passes
// were priced. Low and High are the shortest and longest measured
// contexts the calibration's steps were priced between; Steps how many
// steps were priced at their own context (prompt plus the tokens decoded
// before them); First and Last the contexts the calibration's steps
// reached; Beyond how many of them were past the longest measured curve
// (Longest) and left out of the price, never extrapolated. Steps 0: every
// pass was priced on the one curve at Low (the calibration recorded no
// contexts, only one context was measured, or every step was past it).
type ContextRange struct {
	Low     int `json:"low"`
	High    int `json:"high"`
	Steps   int `json:"steps,omitempty"`
	First   int `json:"first,omitempty"`
	Last    int `json:"last,omitempty"`
	Beyond  int `json:"beyond,omitempty"`
	Longest int `json:"longest,omitempty"`
}

// String names the range a prediction rests on: "context 128" or
// "contexts 128-4096 (812 steps at 140-3900 tokens; 12 past 4096 left
// out)".
func (r ContextRange) String() string {
	if r.Low == 0 && r.High == 0 {
		return ""
	}
	s := fmt.Sprintf("contexts %d-%d", r.Low, r.High)
	if r.Low == r.High {
		s = fmt.Sprintf("context %d", r.Low)
	}
	switch {
	case r.Steps > 0 && r.Beyond > 0:
		return s + fmt.Sprintf(" (%d steps at %d-%d tokens; %d past %d, the longest measured, left out)", r.Steps, r.First, r.Last, r.Beyond, r.Longest)
	case r.Steps > 0:
		return s + fmt.Sprintf(" (%d steps at %d-%d tokens)", r.Steps, r.First, r.Last)
	case r.Last > 0:
		return s + fmt.Sprintf(" (the calibration's steps reached %d-%d tokens, not priced at theirs: profile again to measure them)", r.First, r.Last)
	}
	return s
}

// AtContexts prices every verification pass at the context it runs at:
// c.Verify (measured at context base, one of family's, and perhaps
// rescaled by a re-check since) is scaled at each width W by
//
//	m(W) = mean over the calibration's steps i of T(W, n_i) / T(W, base)
//
// where n_i is step i's context (acc.Depths[i].Context, its prompt plus
// the tokens decoded before it), and T(W, n) the family's curves
// interpolated linearly in W and then in context between the two
// measured contexts around n (AtContext). A step's time is linear in
// T_verify, so pricing the plan on the mean curve is pricing each step
// at its own context. A step shorter than the shortest measured context
// is priced at it (a pass costs no less than at a shorter context, so this errs slow); a
// step past the longest measured context is left out of the mean, never
// extrapolated, and counted in the range's Beyond. Plain decoding's token
// (c.Plain) is scaled by m(1), or, where the re-check timed it at a long
// context too (c.Long), interpolated in context between the two for each
// step; split curves (measured at the short context) are scaled by m(W):
// the baseline runs at the same contexts. The drafter's curves, measured
// at the short context, are scaled where the re-check timed its passes
// at the long context too: by the mean over the steps of that ratio,
// interpolated in context.
// Where steps ran before the short context, Above is Verify priced with
// them at it, and each pass size's curve of passes of several sequences
// (Passes) is priced there on its own curves over context (PassFamily;
// passesBelow).
// The result's Context says what the prices rest on.
func AtContexts(c Costs, base int, family []ContextCurve, acc *Acceptance) Costs {
	fam := sortedFamily(family)
	if len(fam) == 0 {
		return c
	}
	lo, hi := fam[0].Context, fam[len(fam)-1].Context
	c.Context = ContextRange{Low: lo, High: lo, Longest: hi}
	var ctxs []int
	if acc != nil {
		for _, d := range acc.Depths {
			if d.Context <= 0 {
				continue
			}
			if c.Context.First == 0 || d.Context < c.Context.First {
				c.Context.First = d.Context
			}
			c.Context.Last = max(c.Context.Last, d.Context)
			if d.Context > hi {
				c.Context.Beyond++
				continue
			}
			ctxs = append(ctxs, d.Context)
		}
	}
	if len(ctxs) == 0 || len(fam) == 1 {
		// one curve prices every pass, as before curves over context
		c.Context.Beyond = 0
		return c
	}
	c.Context.Steps = len(ctxs)
	c.Context.High = contextAbove(fam, slices.Max(ctxs))
	return atSteps(c, base, fam, ctxs)
}

// sortedFamily is family's curves that price (a context, points),
// shortest context first.
func sortedFamily(family []ContextCurve) []ContextCurve {
	fam := slices.Clone(family)
	fam = slices.DeleteFunc(fam, func(f ContextCurve) bool { return len(f.Verify) == 0 || f.Context < 1 })
	slices.SortFunc(fam, func(a, b ContextCurve) int { return a.Context - b.Context })
	return fam
}

// atSteps is AtContexts's pricing of c at the steps' contexts ctxs (each
// within fam, sorted, of two curves or more).
func atSteps(c Costs, base int, fam []ContextCurve, ctxs []int) Costs {
	memo := map[int]float64{}
	at := func(w int) float64 {
		if m, ok := memo[w]; ok {
			return m
		}
		memo[w] = meanRatio(fam, w, base, ctxs, func(n int) int { return n })
		return memo[w]
	}
	scale := func(pts []latency.Point) []latency.Point { return scaleBy(pts, at) }
	c.Short, c.Verify = c.Verify, scale(c.Verify)
	if slices.Min(ctxs) < base {
		// steps before the short context: Verify is cheaper there, and
		// the passes of several sequences are priced on their own curves
		c.Above = scaleBy(c.Short, func(w int) float64 { return meanRatio(fam, w, base, ctxs, func(n int) int { return max(n, base) }) })
		c.Passes = passesBelow(c.Passes, c.PassFamily, base, ctxs)
	}
	// share is how far context n is from base to the long context the
	// re-check timed (0 at base and below, 1 there and beyond)
	long := c.Long
	share := func(n int) float64 {
		if n <= base {
			return 0
		}
		return min(1, float64(n-base)/float64(long.At-base))
	}
	switch {
	case c.Plain > 0 && long.Plain > 0 && long.At > base:
		// timed at both ends: linear in context between them, each
		// step's context its own, as the curves are
		sum := 0.0
		for _, n := range ctxs {
			switch {
			case n < base: // before the short context, by the curves' ratio
				sum += float64(c.Plain) * meanRatio(fam, 1, base, []int{n}, func(n int) int { return n })
			case n <= long.At:
				sum += float64(c.Plain) + float64(long.Plain-c.Plain)*share(n)
			default: // past it, by the curves' growth from it
				sum += float64(long.Plain) * float64(AtContext(fam, 1, n)) / float64(AtContext(fam, 1, long.At))
			}
		}
		c.Plain = time.Duration(sum / float64(len(ctxs)))
	case c.Plain > 0:
		c.Plain = time.Duration(float64(c.Plain) * at(1))
	}
	draft := 1.0 // the drafter's passes at the steps' contexts over the short one's
	if long.DraftScale > 0 && long.At > base {
		sum := 0.0
		for _, n := range ctxs {
			sum += 1 + (long.DraftScale-1)*share(n)
		}
		draft = sum / float64(len(ctxs))
	}
	scaleDraft := func(pts []latency.Point) []latency.Point {
		if pts == nil || draft == 1 {
			return pts
		}
		out := make([]latency.Point, len(pts))
		for i, p := range pts {
			p.Median = time.Duration(float64(p.Median) * draft)
			p.Spread = time.Duration(float64(p.Spread) * draft)
			out[i] = p
		}
		return out
	}
	c.Draft, c.DraftAfter = scaleDraft(c.Draft), scaleDraft(c.DraftAfter)
	if len(c.Splits) > 0 {
		c.Splits = slices.Clone(c.Splits)
		for i := range c.Splits {
			c.Splits[i].Verify = scale(c.Splits[i].Verify)
			c.Splits[i].Beside = scale(c.Splits[i].Beside)
			c.Splits[i].Draft = scaleDraft(c.Splits[i].Draft)
			c.Splits[i].DraftBeside = scaleDraft(c.Splits[i].DraftBeside)
		}
	}
	return c
}

// meanRatio is the mean over the steps' contexts ctxs of T(w, at(n)) /
// T(w, base) on the family fam (AtContext), 1 where either is unpriced.
func meanRatio(fam []ContextCurve, w, base int, ctxs []int, at func(int) int) float64 {
	b := float64(AtContext(fam, w, base))
	if b <= 0 {
		return 1
	}
	sum := 0.0
	for _, n := range ctxs {
		t := float64(AtContext(fam, w, at(n)))
		if t <= 0 {
			return 1
		}
		sum += t
	}
	return sum / float64(len(ctxs)) / b
}

// scaleBy is pts with each point's time and spread times m(W) (nil for
// nil).
func scaleBy(pts []latency.Point, m func(w int) float64) []latency.Point {
	if pts == nil {
		return nil
	}
	out := make([]latency.Point, len(pts))
	for i, p := range pts {
		f := m(p.W)
		p.Median = time.Duration(float64(p.Median) * f)
		p.Spread = time.Duration(float64(p.Spread) * f)
		out[i] = p
	}
	return out
}

// passesBelow prices each pass size's curve of passes (at the short
// context base) at the steps' contexts ctxs where they run before it: by
// the mean over the steps of T_S(W, min(n, base)) / T_S(W, base) on that
// pass size's own stored curves over context (family), a step before the
// shortest of them priced at it. A pass size with no curve below base is
// left at base (it errs slow there), and what a step past base costs
// more is PassCost's (each sequence's share on Costs.Above). The eight
// sequences' one-row pass of the bench target on a 2-core AVX2 machine
// cost 0.7-0.8x after 16-32 tokens what it did after 128, where one
// sequence's cost 0.83-0.92x: the one-sequence curves' difference,
// counted for each sequence, would price it at about half.
func passesBelow(passes, family []PassCurve, base int, ctxs []int) []PassCurve {
	out := slices.Clone(passes)
	for i, p := range out {
		var fam []ContextCurve
		for _, f := range family {
			if f.Seqs == p.Seqs && f.Context <= base {
				fam = append(fam, ContextCurve{Context: f.Context, Verify: f.Verify})
			}
		}
		if fam = sortedFamily(fam); len(fam) < 2 || fam[len(fam)-1].Context != base {
			continue
		}
		out[i].Verify = scaleBy(p.Verify, func(w int) float64 { return meanRatio(fam, w, base, ctxs, func(n int) int { return min(n, base) }) })
	}
	return out
}

// AtContext is T_verify(w) after n cached tokens on the family fam
// (sorted by context): interpolated linearly between the measured
// contexts around n, the shortest curve's below it, and 0 past the
// longest (never extrapolated: the caller leaves such a pass out).
func AtContext(fam []ContextCurve, w, n int) time.Duration {
	if len(fam) == 0 || n > fam[len(fam)-1].Context {
		return 0
	}
	if n <= fam[0].Context {
		return Interp(fam[0].Verify, w)
	}
	for i := 1; i < len(fam); i++ {
		if n <= fam[i].Context {
			a, b := fam[i-1], fam[i]
			ta, tb := float64(Interp(a.Verify, w)), float64(Interp(b.Verify, w))
			f := float64(n-a.Context) / float64(b.Context-a.Context)
			return time.Duration(ta + f*(tb-ta))
		}
	}
	return 0
}

// contextAbove is the shortest measured context of fam at or above n.
func contextAbove(fam []ContextCurve, n int) int {
	for _, f := range fam {
		if f.Context >= n {
			return f.Context
		}
	}
	return fam[len(fam)-1].Context
}
