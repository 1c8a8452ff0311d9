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
)

// PassAnchor is a pass of Seqs sequences of one row each after Context
// cached tokens (ShortContext, or a context below it that a curve of the
// family was measured at): the stored curve's time and the time now
// (SeqsCurve's rounds), Now / Stored, and whether its curve was
// rescaled by it.
type PassAnchor struct {
	Seqs, Context int
	Stored, Now   time.Duration
	Scale         float64
	Rescaled      bool
}

// PassNow times a pass of seqs sequences of one row each after context
// cached tokens, now: the anchor RecheckPasses re-times a curve of passes
// of several sequences at (the median of 7-11 rounds after two untimed),
// and a load test's reading of the machine's pace at a level of seqs
// requests, set against that anchor.
func PassNow(ctx context.Context, m *model.Model, seqs, context int) (time.Duration, error) {
	now, err := SeqsCurve(ctx, m, seqs, []int{seqs}, CurveOptions{Context: context, Warmup: 2, MinReps: 7, MaxReps: 11})
	if err != nil {
		return 0, err
	}
	return now[0].Median, nil
}

// RecheckPasses re-times each curve of passes of several sequences at
// its narrowest pass (one row a sequence) and rescales the curves whose
// pass moved past RecheckTolerance by its own ratio. The quick re-check's
// one-sequence anchors do not carry to them: a pass of eight sequences
// spends most of its time in their attention and the rest in the
// weights, where one sequence's is the weights' read, and with the
// bandwidth a third below the profile's the one-sequence anchors read
// x1.5 while plain batching at eight measured 1,213 tokens/s against the
// 921 their ratio priced.
//
// The same pass size's curves before the short context (family, at
// Context below ShortContext) are re-timed beside it, and where either
// moved, each is rescaled by its own ratio, as is the family's copy of
// the short context's: a pass there is priced by the family's ratio to
// the short context's curve (costmodel.AtContexts), and curves of two
// profiles taken at different moments had put that ratio at 0.69 for
// eight sequences after 32 tokens where timed side by side it read
// 0.83 (a load test's plain batching at eight then predicted 1,911
// tokens/s, measured 1,470).
//
// Returns the curves to price with (copies) and what it found, each
// pass size's short context first.
func RecheckPasses(ctx context.Context, m *model.Model, passes, family []costmodel.PassCurve) ([]costmodel.PassCurve, []costmodel.PassCurve, []PassAnchor, error) {
	out, fam := slices.Clone(passes), slices.Clone(family)
	var found []PassAnchor
	anchor := func(pc costmodel.PassCurve, context int) (PassAnchor, error) {
		a := PassAnchor{Seqs: pc.Seqs, Context: context, Stored: costmodel.Interp(pc.Verify, pc.Seqs)}
		if a.Stored <= 0 {
			return a, fmt.Errorf("profiles: the curve of passes of %d sequences at context %d has no positive time at %d rows", pc.Seqs, context, pc.Seqs)
		}
		now, err := PassNow(ctx, m, pc.Seqs, context)
		if err != nil {
			return a, err
		}
		a.Now = now
		a.Scale = float64(a.Now) / float64(a.Stored)
		return a, nil
	}
	for i, pc := range passes {
		if pc.Seqs < 2 || len(pc.Verify) == 0 {
			continue
		}
		base, err := anchor(pc, ShortContext)
		if err != nil {
			return out, fam, found, err
		}
		// the same size's curves before the short context, beside it
		size := []PassAnchor{base}
		var at []int
		for j, f := range family {
			if f.Seqs != pc.Seqs || f.Context >= ShortContext || f.Context < 1 || len(f.Verify) == 0 {
				continue
			}
			a, err := anchor(f, f.Context)
			if err != nil {
				return out, fam, found, err
			}
			size, at = append(size, a), append(at, j)
		}
		scales := make([]float64, len(size))
		for k, a := range size {
			scales[k] = a.Scale
		}
		if moved(scales...) {
			for k := range size {
				size[k].Rescaled = true
			}
			out[i].Verify = RescaleAt(pc.Verify, []int{pc.Seqs}, []float64{base.Scale})
			for j, f := range family {
				if f.Seqs == pc.Seqs && f.Context == ShortContext {
					fam[j].Verify = RescaleAt(f.Verify, []int{pc.Seqs}, []float64{base.Scale})
				}
			}
			for k, j := range at {
				fam[j].Verify = RescaleAt(family[j].Verify, []int{pc.Seqs}, []float64{size[k+1].Scale})
			}
		}
		found = append(found, size...)
	}
	return out, fam, found, nil
}

// passesLine is the re-check's line of the passes of several sequences.
func passesLine(found []PassAnchor) string {
	var b strings.Builder
	b.WriteString("passes of several sequences re-check (one row each):")
	for i, a := range found {
		if i > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, " %d%s stored %.2f ms, now %.2f ms", a.Seqs, a.at(), float64(a.Stored)/1e6, float64(a.Now)/1e6)
		if a.Rescaled {
			fmt.Fprintf(&b, " (rescaled x%.2f)", a.Scale)
		} else {
			b.WriteString(" (kept)")
		}
	}
	return b.String()
}

// at names an anchor's context where it is not the short one.
func (a PassAnchor) at() string {
	if a.Context > 0 && a.Context != ShortContext {
		return fmt.Sprintf(" after %d tokens", a.Context)
	}
	return ""
}

// BelowAnchor is a one-row pass after Context cached tokens (a context
// below the short one) set against the same pass after ShortContext:
// their ratio in the stored curves and timed now, side by side; and the
// same for a pass of W rows (0: none timed).
type BelowAnchor struct {
	Context       int
	Stored, Now   float64
	W             int
	WStored, WNow float64
	Rescaled      bool
}

// RecheckBelow re-times the ratio each of fam's curves before the short
// context bears to the short context's curve (passes after each, in
// interleaved rounds: of one row, and of the widest row count belowWide
// allows) and rescales the curves whose ratio moved past
// RecheckTolerance to read it now, at both widths and linearly between
// them. A step before the short context is priced by that ratio
// (costmodel.AtContexts), and a curve measured at another moment than
// the short context's carries the machine's drift in it: the curve after
// 32 tokens measured by a tune after calibrate put a pass there at 0.83x
// the stored one after 128, and the load test priced plain decoding's
// token at 1.2 ms where it measured 1.7. The drift is not one factor
// across the widths: a curve after 32 tokens on the bench target read
// one row 1.01x the pass after 128 and 48 rows 1.18x, where side by side
// they are 0.98x and 0.7-0.75x (2-core Zen 3). The short context's curve
// itself is left to RecheckCosts.
func RecheckBelow(ctx context.Context, m *model.Model, fam []costmodel.ContextCurve) ([]costmodel.ContextCurve, []BelowAnchor, error) {
	out := slices.Clone(fam)
	base := slices.IndexFunc(fam, func(f costmodel.ContextCurve) bool { return f.Context == ShortContext && len(f.Verify) > 0 })
	if base < 0 {
		return out, nil, nil
	}
	short := fam[base].Verify
	var found []BelowAnchor
	for i, f := range fam {
		if f.Context < 1 || f.Context >= ShortContext || len(f.Verify) == 0 {
			continue
		}
		w := belowWide(short, f.Verify)
		stored := func(w int) float64 {
			return float64(costmodel.Interp(f.Verify, w)) / float64(costmodel.Interp(short, w))
		}
		now, nowW, err := passRatios(ctx, m, f.Context, w)
		if err != nil {
			return out, found, err
		}
		a := BelowAnchor{Context: f.Context, Stored: stored(1), Now: now}
		widths, factors := []int{1}, []float64{now / a.Stored}
		if w > 0 {
			a.W, a.WStored, a.WNow = w, stored(w), nowW
			widths, factors = append(widths, w), append(factors, nowW/a.WStored)
		}
		if a.Stored > 0 && (a.W == 0 || a.WStored > 0) && moved(factors...) {
			out[i].Verify = RescaleAt(f.Verify, widths, factors)
			a.Rescaled = true
		}
		found = append(found, a)
	}
	return out, found, nil
}

// belowWideCost bounds the wider pass RecheckBelow times: at most this
// many times a one-row pass on the short context's curve, so a large
// model's re-check stays a few seconds.
const belowWideCost = 3

// belowWide is the widest width of short's points, above one and within
// below's, whose pass short prices at most belowWideCost one-row passes
// (0: none).
func belowWide(short, below []latency.Point) int {
	w, one := 0, costmodel.Interp(short, 1)
	for _, p := range short {
		if p.W > 1 && p.W <= below[len(below)-1].W && p.Median <= belowWideCost*one {
			w = p.W
		}
	}
	return w
}

// passRatios times passes after n cached tokens and after ShortContext
// in interleaved rounds, of one row and (w > 0) of w rows, and returns
// the medians' ratios, the first context's over the second's, at one
// row and at w (0 where w is 0).
func passRatios(ctx context.Context, m *model.Model, n, w int) (one, wide float64, err error) {
	// the rounds' "widths" name the passes: 1 and 2 one row after n and
	// after ShortContext, 3 and 4 w rows after each
	contexts := [2]int{n, ShortContext}
	var caches [2]*model.Cache
	defer func() {
		for _, c := range caches {
			if c != nil {
				c.Free()
			}
		}
	}()
	for k, at := range contexts {
		c, err := DepthCache(ctx, m, at, max(w, 1))
		if err != nil {
			return 0, 0, err
		}
		caches[k] = c
	}
	var res model.Result
	toks := make([]int, max(w, 1))
	for i := range toks {
		toks[i] = (n*7 + 3 + 11*i) % m.Vocab
	}
	kinds := []int{1, 2}
	if w > 0 {
		kinds = append(kinds, 3, 4)
	}
	pts, err := timeRounds(ctx, kinds, func(kind int) (time.Duration, error) {
		c, rows := caches[(kind-1)%2], 1
		if kind > 2 {
			rows = w
		}
		c.Truncate(contexts[(kind-1)%2])
		t0 := time.Now()
		err := m.Forward(ctx, c, model.Batch{Tokens: toks[:rows]}, &res) // every row's logits, as VerifyCurve's passes
		return time.Since(t0), err
	}, CurveOptions{Warmup: 2, MinReps: 9, MaxReps: 15})
	if err != nil {
		return 0, 0, err
	}
	ratio := func(a, b int) (float64, error) {
		x, y := costmodel.Interp(pts, a), costmodel.Interp(pts, b)
		if x <= 0 || y <= 0 {
			return 0, fmt.Errorf("profiles: passes after %d and %d tokens not timed", n, ShortContext)
		}
		return float64(x) / float64(y), nil
	}
	if one, err = ratio(1, 2); err != nil || w == 0 {
		return one, 0, err
	}
	wide, err = ratio(3, 4)
	return one, wide, err
}

// belowLine is the re-check's line of the curves before the short
// context.
func belowLine(found []BelowAnchor) string {
	var b strings.Builder
	fmt.Fprintf(&b, "before the short context (passes of one row, and of more, against the same after %d tokens):", ShortContext)
	for i, a := range found {
		if i > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, " after %d tokens stored %.2fx, now %.2fx", a.Context, a.Stored, a.Now)
		if a.W > 0 {
			fmt.Fprintf(&b, ", %d rows stored %.2fx, now %.2fx", a.W, a.WStored, a.WNow)
		}
		if a.Rescaled {
			b.WriteString(" (rescaled)")
		} else {
			b.WriteString(" (kept)")
		}
	}
	return b.String()
}
