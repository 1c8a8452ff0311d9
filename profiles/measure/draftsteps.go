package measure

import (
	"context"
	"fmt"
	"time"

	"arborist/assets"
	"arborist/engine/spec"
	"arborist/profiles/latency"
	"arborist/profiles/pairs"
)

// draftProbes are the plans DraftStepCosts runs: a chain of one and one
// of three (a further level's cost) and one level of three nodes (a
// further node's cost: the source mixes each node's token into its
// distribution, and a colder token's contribution is computed on demand).
var draftProbes = []spec.Plan{spec.ChainPlan(1), spec.ChainPlan(3), spec.TreePlan([]int{3})}

// DraftStepCosts measures what a draft source without a model file of its
// own (the hidden-state drafter) costs a step, in the engine: short greedy
// runs of the draftProbes plans, interleaved, on prompts of the built-in
// corpus, with the drafting time, levels and nodes of every step recorded.
// A regular step's drafting is a + b * (levels - 1) + c * (nodes -
// levels), from the three plans' means over their regular steps: point
// W=1 is b, a further level; point W=2 is a - b, what the step's first
// level costs beyond that (it feeds the target's hidden states of the
// tokens just accepted, several rows, into the drafter's cache); point W=3
// is c, a further node of a level. Point W=4 is what a level of a
// re-sampled step costs (no layer pass: the source mixes the bonus token
// into the chain it cached, Costs.ResampleLevel). Each run's first step is
// left out: it feeds the whole prompt, and in these 32-token runs it had
// put 120 µs on every step of the chain of one (the model charged the
// bench target's hidden-state drafter 1.10 ms a step of one level where
// 128-token runs took 0.92-0.95). The model used to charge the
// hidden-state drafter a share of T_verify(1) by multiply-adds: on the
// bench target it charged 0.35 ms a pass where the runs measured 1.6-2.0
// ms a step of two levels, its weights being float32 where the target's
// are Q8_0.
func DraftStepCosts(ctx context.Context, eng *spec.Engine, opt CurveOptions) ([]latency.Point, error) {
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
	n := len(draftProbes)
	draft, levels, nodes := make([]float64, n), make([]float64, n), make([]float64, n)
	steps := make([]int, n)
	var resDraft, resLevels float64
	for r := 0; r < rounds+1; r++ {
		ids := tok.Encode(prompts[r%len(prompts)], true, false)
		for i, probe := range draftProbes {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			timed := r > 0 // the first round warms up
			cfg, err := probe.Config()
			if err != nil {
				return nil, err
			}
			cfg.MaxTokens = 32
			first := true
			cfg.OnStep = func(s spec.Step) {
				if s.Depth == 0 {
					return
				}
				if first { // the prompt's states
					first = false
					return
				}
				switch {
				case !timed:
				case s.Resampled:
					resDraft += float64(s.Draft)
					resLevels += float64(s.Depth)
				default:
					draft[i] += float64(s.Draft)
					levels[i] += float64(s.Depth)
					nodes[i] += float64(s.Drafted)
					steps[i]++
				}
			}
			if _, err := eng.Run(ctx, ids, cfg); err != nil {
				return nil, fmt.Errorf("profiles: drafting probe: %w", err)
			}
		}
		if opt.Progress != nil {
			opt.Progress(r+1, rounds+1, latency.Point{})
		}
	}
	for i := range steps {
		if steps[i] == 0 {
			return nil, fmt.Errorf("profiles: the drafting probe ran no drafting steps")
		}
		draft[i], levels[i], nodes[i] = draft[i]/float64(steps[i]), levels[i]/float64(steps[i]), nodes[i]/float64(steps[i])
	}
	b := draft[1] / max(1, levels[1]) // too little spread to separate: an even share
	if levels[1] > levels[0]+0.25 {
		b = max(0, (draft[1]-draft[0])/(levels[1]-levels[0]))
	}
	a := max(b, draft[0]-b*(levels[0]-1)) // a step's own cost: at least a level's
	c := 0.0
	if extra := nodes[2] - levels[2]; extra > 0.25 {
		c = max(0, (draft[2]-a-b*(levels[2]-1))/extra)
	}
	res := 0.0
	if resLevels > 0 {
		res = resDraft / resLevels
	}
	reps := steps[0] + steps[1] + steps[2]
	return []latency.Point{
		{W: 1, Median: time.Duration(b), Reps: reps},
		{W: 2, Median: time.Duration(a - b), Reps: reps},
		{W: 3, Median: time.Duration(c), Reps: reps},
		{W: 4, Median: time.Duration(res), Reps: int(resLevels)},
	}, nil
}

// draftStepCurves turns DraftStepCosts' points into the curves the
// speedup model reads: a level's pass of w nodes costs b + c * (w - 1)
// (the hidden-state drafter runs one row per depth, however many nodes
// share it, and mixes each node's token in), at every width of verify,
// and the first level's extra is the first point of the after-target
// curve; and a re-sampled level's cost (0 where the probe measured none).
func draftStepCurves(pts, verify []latency.Point) (draft, after []latency.Point, resample time.Duration) {
	if len(pts) < 2 {
		return nil, nil, 0
	}
	var c time.Duration
	if len(pts) >= 3 {
		c = pts[2].Median
	}
	if len(pts) >= 4 {
		resample = pts[3].Median
	}
	for _, p := range verify {
		draft = append(draft, latency.Point{W: p.W, Median: pts[0].Median + time.Duration(p.W-1)*c})
	}
	after = []latency.Point{{W: 1, Median: pts[1].Median}, {W: 2, Median: 0}}
	return draft, after, resample
}

// DraftStepOptions are the ProfileModel options of a pair's drafting
// probe (DraftStepCosts), keyed by its source's name, for a pair whose
// source has no model file of its own (Pair.Hidden).
func DraftStepOptions(pair *pairs.Pair, ps pairs.Spec) ProfileOptions {
	return ProfileOptions{Widths: []int{1, 2, 3, 4}, Kind: "draft-steps " + ps.SourceName(),
		Engine: &spec.Engine{Target: pair.Target, Source: pair.Source}}
}
