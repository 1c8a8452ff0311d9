package profiles

import (
	"context"
	"fmt"
	"slices"
	"time"

	"arborist/engine/model"
	"arborist/profiles/costmodel"
	"arborist/profiles/measure"
	"arborist/profiles/pairs"
	"arborist/profiles/store"
)

// familyCurve is one curve of the target's verification family a
// profile measures: at a context, of passes of seqs sequences.
type familyCurve struct {
	context, seqs int
	widths        []int
}

// familyPlan lists the target's verification curves a profile measures
// beyond the short context's one-sequence curve: one at each context of
// opt.Contexts and of the pair's latest calibration, and passes of each
// of opt.Seqs sequences at the short context and at each of those
// contexts below it (a pass of several short requests is priced on
// them: its sequences' attention is a larger share of it than of one
// sequence's pass, so the one-sequence curves do not carry it there; a
// pass of several sequences past the short context is priced by what
// each sequence's rows add on the one-sequence curves). Every context is checked
// before anything is measured: one asked for past the target's trained
// positions or the machine's memory is refused, naming both figures; a
// calibration's past the memory is left out and said so (r.Left).
func (b *Bench) familyPlan(ctx context.Context, st *store.Store, pair *pairs.Pair, ps PairSpec, opt ProfileOptions, r *ProfileReport) ([]familyCurve, error) {
	m := pair.Target
	var out []familyCurve
	widths := measure.ContextWidths(opt.MaxW)
	asked := slices.Clone(opt.Contexts)
	slices.Sort(asked)
	for _, n := range slices.Compact(asked) {
		if n < 1 {
			return nil, fmt.Errorf("--ctx %d: a context is a positive number of tokens", n)
		}
		if err := measure.CheckContext(m, n+opt.MaxW); err != nil {
			return nil, fmt.Errorf("--ctx %d (with passes of up to %d tokens): %w", n, opt.MaxW, err)
		}
		if n != measure.ShortContext {
			out = append(out, familyCurve{context: n, seqs: 1, widths: widths})
		}
	}
	if ps.Sources() > 0 {
		tid, err := targetID(ctx, st, pair)
		if err != nil {
			return nil, err
		}
		var acc costmodel.Acceptance
		id, err := st.LatestCalibration(ctx, tid, ps.SourceName(), &acc)
		if err != nil {
			return nil, err
		}
		if id > 0 {
			for _, n := range measure.CalibrationContexts(&acc, m.CtxLen-opt.MaxW) {
				if slices.ContainsFunc(out, func(f familyCurve) bool { return f.context == n }) {
					continue
				}
				if err := measure.CheckContext(m, n+opt.MaxW); err != nil {
					r.Left = append(r.Left, fmt.Sprintf("context %d, which calibration %d reached: %v", n, id, err))
					continue
				}
				out = append(out, familyCurve{context: n, seqs: 1, widths: widths})
			}
		}
	}
	slices.SortFunc(out, func(a, b familyCurve) int { return a.context - b.context })
	seqs := opt.Seqs
	if seqs == nil {
		seqs = defaultSeqs()
	}
	for _, s := range seqs {
		if s < 1 || s > model.MaxRows {
			return nil, fmt.Errorf("--seqs %d: a pass holds 1 to %d sequences", s, model.MaxRows)
		}
		if s > opt.MaxW && opt.Seqs != nil {
			return nil, fmt.Errorf("--seqs %d: more sequences than the %d rows a pass is timed at (--max-w)", s, opt.MaxW)
		}
		w := measure.SeqsWidths(s, opt.MaxW)
		if s < 2 || len(w) == 0 {
			continue
		}
		out = append(out, familyCurve{context: measure.ShortContext, seqs: s, widths: w})
		for _, f := range out {
			if f.seqs == 1 && f.context < measure.ShortContext {
				out = append(out, familyCurve{context: f.context, seqs: s, widths: w})
			}
		}
	}
	return out, nil
}

// profileFamily measures (or reuses) the family's curves, saying which
// and about how long is left: the first estimate scales the short
// context's curve by the KV bytes a pass reads beside the weights, later
// ones by how the curves measured so far compared with theirs.
func profileFamily(ctx context.Context, st *store.Store, pair *pairs.Pair, r *ProfileReport, family []familyCurve, popt func(string, []int) measure.ProfileOptions, progress Progress) error {
	m := pair.Target
	short := r.Target.Curve.Points
	guess := func(f familyCurve) time.Duration {
		// (unsigned byte counts: a context before the short one reads less)
		kv := (float64(m.KVBytesAs(f.context, m.KVType)) - float64(m.KVBytesAs(measure.ShortContext, m.KVType))) * float64(f.seqs)
		scale := 1.0
		if wb := r.Limits.WeightBytes; wb > 0 && kv > 0 {
			scale += kv / wb
		}
		var round time.Duration
		for _, w := range f.widths {
			round += costmodel.Interp(short, w)
		}
		// warm-up, a few settling passes, and about eight rounds
		return time.Duration(scale * float64(round) * 11)
	}
	var guessed, took time.Duration
	for i, f := range family {
		left := time.Duration(0)
		for _, g := range family[i:] {
			left += guess(g)
		}
		if guessed > 0 && took > 0 {
			left = time.Duration(float64(left) * float64(took) / float64(guessed))
		}
		progress.send("verify family", i, len(family), fmt.Sprintf("%s: about %s left", describeFamily(f.context, f.seqs), left.Round(time.Second)))
		o := popt("verify", f.widths)
		o.Curve.Context, o.Seqs = f.context, f.seqs
		t0 := time.Now()
		p, err := measure.ProfileModel(ctx, st, r.Hardware, m, pair.Backend, o)
		if err != nil {
			return fmt.Errorf("%s: %w", describeFamily(f.context, f.seqs), err)
		}
		if !p.Cached {
			guessed += guess(f)
			took += time.Since(t0)
		}
		r.Family = append(r.Family, p)
	}
	progress.send("verify family", len(family), len(family), "")
	return nil
}

// describeFamily names a curve of the family: "context 4096" or "passes
// of 4 sequences at context 128".
func describeFamily(context, seqs int) string {
	if seqs > 1 {
		return fmt.Sprintf("passes of %d sequences at context %d", seqs, context)
	}
	return fmt.Sprintf("context %d", context)
}

// rankLoads ranks plain batching and the tune's best plans at each
// concurrency of opt (costmodel.RankLoads) and records the concurrency
// the tune was for, with its stored plan priced there. A placed tune
// ranks the plans of its own placement only (the pass curves are its).
func (t *TuneResult) rankLoads(opt TuneOptions, first placement) {
	in := t.Inputs
	levels := opt.Concurrency
	if levels == nil {
		levels = costmodel.DefaultConcurrency
	}
	levels = slices.Clone(levels)
	slices.Sort(levels)
	levels = slices.Compact(levels)
	t.Concurrency = 1
	if opt.Concurrency != nil {
		t.Concurrency = levels[len(levels)-1]
	}
	var own []costmodel.Prediction
	for _, pr := range t.Ranked {
		if !opt.Place || (pr.Backend == first.Backend && pr.DraftBackend == first.DraftBackend) {
			own = append(own, pr)
		}
	}
	t.Loads = in.Loads(own, levels)
	best := t.Ranked[0]
	if opt.Concurrency != nil {
		t.Ranked[0].StopsAt = stopsAt(t.Loads)
	}
	for _, lv := range t.Loads {
		if lv.Concurrency != t.Concurrency {
			continue
		}
		for _, lp := range lv.Ranked {
			if lp.Plan.String() == best.Plan.String() && (t.Load == nil || lp.TokensPerSec > t.Load.TokensPerSec) {
				l := lp
				t.Load = &l
			}
		}
	}
	if opt.Concurrency != nil && t.Load != nil {
		t.Ranked[0].Adaptive = t.Load.Policy == costmodel.PolicyGoodput
	}
}

// stopsAt is the first priced concurrency where plain batching ranks
// first: from there speculation stops paying (0 where no level says so).
func stopsAt(levels []costmodel.LoadLevel) int {
	for _, lv := range levels {
		if lv.Err == "" && len(lv.Ranked) > 0 && lv.Best().Policy == costmodel.PolicyPlain {
			return lv.Concurrency
		}
	}
	return 0
}

// ParseConcurrency reads a list of concurrencies ("1,4,8"): each a
// positive number of requests, at most model.MaxRows (one row each).
func ParseConcurrency(s string) ([]int, error) {
	cs, err := ParseInts(s)
	if err != nil {
		return nil, err
	}
	for _, c := range cs {
		if c < 1 || c > model.MaxRows {
			return nil, fmt.Errorf("a concurrency of %d: 1 to %d requests", c, model.MaxRows)
		}
	}
	return cs, nil
}

// The cost model's figures over context and concurrency, as the faces
// read them.
type (
	ContextRange = costmodel.ContextRange
	ContextCurve = costmodel.ContextCurve
	LoadRanking  = costmodel.LoadLevel
)

// Loads ranks plain batching and the best plans of ranked (a ranking at
// one request, best first), fixed and under the goodput policy, at each
// concurrency of levels on the inputs' curves (costmodel.RankLoads); nil
// when the inputs are not profiled or calibrated.
func (in *Inputs) Loads(ranked []Prediction, levels []int) []LoadRanking {
	if in == nil || in.Acc == nil || !in.Profiled || len(ranked) == 0 {
		return nil
	}
	price := func(p costmodel.Plan) (costmodel.Prediction, error) { return costmodel.Predict(p, in.Acc, in.Costs) }
	return costmodel.RankLoads(ranked, in.Acc, in.Costs, levels, in.Acc.Requests(), loadPlans, price)
}

// Contexts are the target's stored one-sequence verification curves by
// context, shortest first (nil when none is stored), and Context the
// range the inputs' prices rest on: what the latency chart draws.
func (in *Inputs) Contexts() []ContextCurve {
	if in == nil {
		return nil
	}
	fam := measure.ContextCurves(in.Family)
	slices.SortFunc(fam, func(a, b ContextCurve) int { return a.Context - b.Context })
	return fam
}

// AtContext is T_verify(w) after n cached tokens on fam (sorted by
// context), interpolated between measured contexts; 0 past the longest.
func AtContext(fam []ContextCurve, w, n int) time.Duration { return costmodel.AtContext(fam, w, n) }
