package measure

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"arborist/engine/model"
	"arborist/profiles/costmodel"
	"arborist/profiles/latency"
	"arborist/profiles/pairs"
)

// ContextRecheck is the re-check's rounds run again after the longest
// context the prices rest on: the stored curve there against its passes
// now, and plain decoding's token there now.
//
// The quick re-check times the short context only, and
// costmodel.AtContexts carries what it found to every context by the
// stored ratio T(W, n) / T(W, short). That holds while the machine is
// slower or faster as a whole, not when only part of a pass is: on the
// bench pair, with the memory bandwidth 25% below the profile's, a short
// pass read x1.48 its stored time while decoding after 1,900 tokens
// (whose attention is not bound by the bandwidth) ran faster than
// stored, and a tune on long prompts priced plain decoding's token there
// at 10.0 ms against the 6.0 ms its validation measured: a prediction 66%
// high from that alone.
type ContextRecheck struct {
	Context int      // the context re-timed
	Anchors []Anchor // the stored curve there against now, by width
	// Plain is plain decoding's token after Context tokens now
	// (PlainPasses single-token passes back to back, median of the
	// rounds).
	Plain time.Duration
	// Drafted is the drafter's DraftPasses passes after a target pass
	// there (0: not timed: no draft model, or one too short for the
	// context), and DraftScale its ratio to the same passes at the short
	// context in the quick re-check.
	Drafted    time.Duration
	DraftScale float64
	Rescaled   bool // the curves over context were rescaled
	Elapsed    time.Duration
	// Skipped says why nothing was timed (the rounds' passes after the
	// context past the model's positions): the curves over context are
	// priced as stored. Empty when the re-check ran.
	Skipped string
}

// String is the line tune and run print under the quick re-check's.
func (r *ContextRecheck) String() string {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }
	if r.Skipped != "" {
		return fmt.Sprintf("re-check after %d tokens: not run (%s); the curves over context priced as stored", r.Context, r.Skipped)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "re-check after %d tokens:", r.Context)
	for i, a := range r.Anchors {
		if i > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, " W=%d stored %s, now %s", a.W, ms(a.Stored), ms(a.Now))
	}
	if r.Rescaled {
		b.WriteString("; curves over context rescaled (")
		for i, a := range r.Anchors {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "x%.2f at W=%d", a.Scale, a.W)
		}
		fmt.Fprintf(&b, " there, the short context's re-check at %d, in proportion between)", ShortContext)
	} else {
		b.WriteString("; kept")
	}
	fmt.Fprintf(&b, "; plain decoding %s a token there", ms(r.Plain))
	if r.DraftScale > 0 {
		fmt.Fprintf(&b, "; %d drafter passes after a target pass %s there, x%.2f the short context's", DraftPasses, ms(r.Drafted), r.DraftScale)
	}
	return b.String()
}

// Long is what the cost model takes of it (costmodel.AtContexts): none
// where it was skipped.
func (r *ContextRecheck) Long() costmodel.LongContext {
	if r.Skipped != "" {
		return costmodel.LongContext{}
	}
	return costmodel.LongContext{At: r.Context, Plain: r.Plain, DraftScale: r.DraftScale}
}

// RecheckContext runs the quick re-check's rounds (recheckRounds: its
// anchor widths, a drafted chain after each where d has a draft model
// that holds the context, and plain decoding's passes) after long cached
// tokens, where fam (the curves over context) has a curve, and returns
// the family to price with and what it found. short is the quick
// re-check at the short context, already run. Where either moved past
// RecheckTolerance, every curve of fam is rescaled: the short context's
// by short's factors, long's and longer ones by this re-check's, and
// those between by factors interpolated in context.
func RecheckContext(ctx context.Context, m *model.Model, d pairs.Drafting, fam []costmodel.ContextCurve, long int, short *Recheck) ([]costmodel.ContextCurve, ContextRecheck, error) {
	t0 := time.Now()
	r := ContextRecheck{Context: long}
	fam = slices.Clone(fam)
	slices.SortFunc(fam, func(a, b costmodel.ContextCurve) int { return a.Context - b.Context })
	i := slices.IndexFunc(fam, func(c costmodel.ContextCurve) bool { return c.Context == long })
	s := slices.IndexFunc(fam, func(c costmodel.ContextCurve) bool { return c.Context == ShortContext })
	if s < 0 || i <= s || len(fam[i].Verify) == 0 || len(short.Anchors) == 0 {
		return fam, r, fmt.Errorf("profiles: no curve at context %d beside the short context's to re-check", long)
	}
	curve := fam[i].Verify
	widths := RecheckAnchors(curve[len(curve)-1].W)
	if need := long + max(slices.Max(widths), PlainPasses+1); need > m.CtxLen {
		// a curve profiled right up to the model's positions (a narrow
		// --max-w): the rounds' passes do not fit after it
		r.Skipped = fmt.Sprintf("its passes reach position %d, past the model's %d", need, m.CtxLen)
		return fam, r, nil
	}
	if d.Draft != nil && long+DraftPasses*len(widths)+1 > d.Draft.CtxLen {
		d = pairs.Drafting{} // the draft model cannot hold the context: the widths follow target passes
	}
	d.Hidden = nil // a hidden-state source's states over the context are not kept for this
	// fewer rounds than the short re-check: each pass here costs several
	// of its passes, and plain decoding's token here is what it serves
	t, err := recheckRounds(ctx, m, d, widths, CurveOptions{Context: long, Warmup: 1, MinReps: 6, MaxReps: 9})
	if err != nil {
		return fam, r, err
	}
	r.Plain = t.plain
	if d.Draft != nil && short.DraftPasses > 0 && short.NowDraft > 0 && t.drafted > 0 {
		r.Drafted = t.drafted
		r.DraftScale = float64(t.drafted) / float64(short.NowDraft)
	}
	var factors []float64
	if r.Anchors, factors, err = anchorsOf(curve, widths, t.widths); err != nil {
		return fam, r, fmt.Errorf("profiles: the curve at context %d %w", long, err)
	}
	r.Elapsed = time.Since(t0)
	var sw []int
	var sf []float64
	for _, a := range short.Anchors {
		sw, sf = append(sw, a.W), append(sf, a.Scale)
	}
	if !short.Rescaled {
		sf = slices.Repeat([]float64{1}, len(sw))
	}
	if !moved(factors...) && !short.Rescaled {
		return fam, r, nil
	}
	if !moved(factors...) {
		factors = slices.Repeat([]float64{1}, len(widths))
	} else {
		r.Rescaled = true
	}
	return RescaleContexts(fam, long, sw, sf, widths, factors), r, nil
}

// RescaleContexts rescales every curve of fam (sorted by context): the
// short context's and those before it by the factors sf at widths sw,
// those from context long on by lf at lw, and those between by the two
// sets' factors (each interpolated in width, RescaleAt) interpolated in
// context.
func RescaleContexts(fam []costmodel.ContextCurve, long int, sw []int, sf []float64, lw []int, lf []float64) []costmodel.ContextCurve {
	out := slices.Clone(fam)
	base := ShortContext
	for i := range out {
		share := 1.0
		if c := out[i].Context; c < long && long > base {
			share = max(0, float64(c-base)/float64(long-base))
		}
		s, l := RescaleAt(out[i].Verify, sw, sf), RescaleAt(out[i].Verify, lw, lf)
		v := make([]latency.Point, len(s))
		for k := range s {
			v[k] = s[k]
			v[k].Median = s[k].Median + time.Duration(share*float64(l[k].Median-s[k].Median))
			v[k].Spread = s[k].Spread + time.Duration(share*float64(l[k].Spread-s[k].Spread))
		}
		out[i].Verify = v
	}
	return out
}
