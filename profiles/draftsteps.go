package profiles

import (
	"context"
	"fmt"
	"time"

	"arborist/assets"
	"arborist/engine/hidden"
	"arborist/engine/spec"
	"arborist/profiles/store"
)

// draftStepGammas are the chain lengths DraftStepCosts runs: two, so the
// drafting time of a step separates into a first-pass cost and a cost per
// further level.
var draftStepGammas = []int{1, 3}

// DraftStepCosts measures what a draft source without a model file of its
// own (the hidden-state drafter) costs a step, in the engine: a few short
// greedy chain runs of lengths 1 and 3, interleaved, on prompts of the
// built-in corpus, with the drafting time of every step recorded. A step's
// drafting is a + b * passes, passes being the drafter's layer passes over
// its own drafted states (fewer than the levels when a level is
// re-sampled from the last step's chain): point W=1 is b, a further
// level's pass; point W=2 is a - b, what the step's first pass costs
// beyond that (it feeds the target's hidden states of the tokens just
// accepted, several rows, into the drafter's cache). The model used to charge the
// hidden-state drafter a share of T_verify(1) by multiply-adds: on the
// bench target it charged 0.35 ms a pass where the runs measured 1.6-2.0
// ms a step of two levels, its weights being float32 where the target's
// are Q8_0.
func DraftStepCosts(ctx context.Context, eng *spec.Engine, opt CurveOptions) ([]Point, error) {
	if eng.Source == nil {
		return nil, fmt.Errorf("profiles: no draft source to time")
	}
	opt.defaults()
	prompts := assets.CorpusPrompts()
	tok := eng.Target.Tok
	if tok == nil || len(prompts) == 0 {
		return nil, fmt.Errorf("profiles: no tokenizer or prompts for the drafting probe")
	}
	rounds := max(3, opt.MinReps)
	// the regressor: the drafter's layer passes over drafted states per
	// step where the source counts them (a re-sampled level needs none),
	// else the levels drafted
	counter, _ := eng.Source.(interface{ Stats() hidden.Stats })
	var draft, passes [2]float64
	var steps [2]int
	for r := 0; r < rounds+1; r++ {
		ids := tok.Encode(prompts[r%len(prompts)], true, false)
		for i, g := range draftStepGammas {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			timed := r > 0 // the first round warms up
			var before hidden.Stats
			if counter != nil {
				before = counter.Stats()
			}
			n := 0
			cfg := spec.Config{Strategy: "chain", Gamma: g, MaxTokens: 32, OnStep: func(s spec.Step) {
				if timed {
					draft[i] += float64(s.Draft)
					if counter == nil {
						passes[i] += float64(max(0, s.Depth-1))
					}
					n++
				}
			}}
			if _, err := eng.Run(ctx, ids, cfg); err != nil {
				return nil, fmt.Errorf("profiles: drafting probe: %w", err)
			}
			if timed {
				steps[i] += n
				if counter != nil {
					passes[i] += float64(counter.Stats().ChainPasses - before.ChainPasses)
				}
			}
		}
		if opt.Progress != nil {
			opt.Progress(r+1, rounds+1, Point{})
		}
	}
	if steps[0] == 0 || steps[1] == 0 {
		return nil, fmt.Errorf("profiles: the drafting probe ran no drafting steps")
	}
	d0, d1 := draft[0]/float64(steps[0]), draft[1]/float64(steps[1])
	p0, p1 := passes[0]/float64(steps[0]), passes[1]/float64(steps[1])
	b := d1 / max(1, p1+1) // too little spread to separate: an even share
	if p1 > p0+0.25 {
		b = max(0, (d1-d0)/(p1-p0))
	}
	a := max(b, d0-b*p0) // a step's own cost: at least a pass
	return []Point{
		{W: 1, Median: time.Duration(b), Reps: steps[0] + steps[1]},
		{W: 2, Median: time.Duration(a - b), Reps: steps[0] + steps[1]},
	}, nil
}

// draftStepCurves turns DraftStepCosts' points into the curves the
// speedup model reads: a drafter pass of b whatever its width (the
// hidden-state drafter runs one row per depth, however many nodes share
// it) at every width of verify, and the first pass's extra as the first
// point of the after-target curve.
func draftStepCurves(pts, verify []store.Point) (draft, after []store.Point) {
	if len(pts) < 2 {
		return nil, nil
	}
	for _, p := range verify {
		draft = append(draft, store.Point{W: p.W, Median: pts[0].Median})
	}
	after = []store.Point{{W: 1, Median: pts[1].Median}, {W: 2, Median: 0}}
	return draft, after
}

// DraftStepOptions are the ProfileModel options of a pair's drafting
// probe (DraftStepCosts), keyed by its source's name, for a pair whose
// source has no model file of its own (Pair.Hidden).
func DraftStepOptions(pair *Pair, ps PairSpec) ProfileOptions {
	return ProfileOptions{Widths: []int{1, 2}, Kind: "draft-steps " + ps.SourceName(),
		Engine: &spec.Engine{Target: pair.Target, Source: pair.Source}}
}
