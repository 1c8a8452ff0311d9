package costmodel

import (
	"fmt"
	"time"
)

// Learned is a trained depth policy (a depth predictor) as the cost model
// prices it. It was trained for one EGT shape (Plan: that shape with depth
// policy "predictor" and the predictor's id) and measured on steps it never
// saw: there it drafted L levels on a share Levels[L] of the steps, and
// kept Share of the draft tokens the shape's full depth keeps on them. Its
// inference adds Infer to every step. Beats says whether it was faster
// there than the shape's best fixed depth and best threshold policy; the
// search offers only a policy that was.
type Learned struct {
	Plan   Plan
	Levels []float64
	Share  float64
	Infer  time.Duration
	Beats  bool
}

// CutReplay replays the EGT p on the probe trees of samples at every depth
// it can stop at: kept[i][L-1] is how many draft tokens step i keeps when
// it drafts L levels (grown as the engine grows them, pruned to p.WMax),
// and best[i][d] the highest path probability among the nodes it grows at
// depth d+1, what a depth policy sees there (missing where the probe grew
// no deeper). False when p does not fit inside the probe tree, or a sample
// did not record its probe.
func CutReplay(p Plan, samples []DepthSample) (kept [][]int, best [][]float64, ok bool) {
	fixed := p
	fixed.DepthPolicy, fixed.DepthMin, fixed.PredictorID = "", 0, 0
	if !replayable(fixed) {
		return nil, nil, false
	}
	for _, s := range samples {
		if !s.HasProbe() {
			return nil, nil, false
		}
	}
	probes := probesOf(samples)
	kept, best = make([][]int, len(probes)), make([][]float64, len(probes))
	for i := range kept {
		kept[i] = make([]int, len(p.EGT))
	}
	for l := 1; l <= len(p.EGT); l++ {
		var seen func(step, level int, b float32)
		if l == len(p.EGT) {
			seen = func(step, level int, b float32) { best[step] = append(best[step], float64(b)) }
		}
		g, _ := replayGrowthSeen(probes, p.EGT[:l], p.Branch, 0, seen)
		for i := range g {
			kept[i][l-1] = g.accepted(i, p.WMax)
		}
	}
	return kept, best, true
}

// CutPrices prices the EGT p, with a fixed depth, cut to each depth it can
// stop at: out[L-1] drafts L levels.
func CutPrices(p Plan, acc *Acceptance, c Costs) ([]Prediction, error) {
	fixed := p
	fixed.DepthPolicy, fixed.DepthMin, fixed.PredictorID = "", 0, 0
	if !fixed.Grows() || len(fixed.EGT) == 0 {
		return nil, fmt.Errorf("profiles: %s is not an Equal-Growth Tree", p)
	}
	out := make([]Prediction, len(fixed.EGT))
	for l := range out {
		cut := fixed
		cut.EGT = fixed.EGT[:l+1]
		pr, err := Predict(cut, acc, c)
		if err != nil {
			return nil, err
		}
		out[l] = pr
	}
	return out, nil
}

// PolicyMix weighs replayed steps as a depth policy that drafts levels[i]
// levels on step i, and keeps kept[i] draft tokens there, would meet them
// (a source that re-samples after a rejection meets re-sampled steps,
// resampled[i], as often as the policy is rejected: steadyWeights, at
// acc's rate). It returns the policy's tokens a step and the weight of the
// steps at each level count (index L), as threshold policies are priced.
func PolicyMix(resampled []bool, levels, kept []int, acc *Acceptance) (aal float64, shares []float64) {
	depth := 0
	for _, l := range levels {
		depth = max(depth, l)
	}
	rate := 0.0
	if acc != nil {
		rate = acc.resampleRate()
	}
	w := steadyWeights(resampled, kept, levels, rate)
	shares = make([]float64, depth+1)
	aal = 1
	for i := range levels {
		shares[levels[i]] += w[i]
		aal += w[i] * float64(kept[i])
	}
	return aal, shares
}

// learnedFor returns the learned policy p names (its predictor id) when it
// was trained for p's shape.
func (a *Acceptance) learnedFor(p Plan) (Learned, error) {
	if a == nil {
		return Learned{}, fmt.Errorf("profiles: depth predictor %d: no calibration to price it on", p.PredictorID)
	}
	shape := func(q Plan) string {
		q.DepthPolicy, q.DepthMin, q.PredictorID = "", 0, 0
		return q.Canonical().Key()
	}
	for _, l := range a.Learned {
		if l.Plan.PredictorID != p.PredictorID {
			continue
		}
		if shape(l.Plan) != shape(p) {
			return Learned{}, fmt.Errorf("profiles: depth predictor %d was trained for %s, not %s: train one for this shape", p.PredictorID, l.Plan, p)
		}
		return l, nil
	}
	if p.PredictorID == 0 {
		return Learned{}, fmt.Errorf("profiles: %s names no depth predictor: train one ('arborist train predictor')", p)
	}
	return Learned{}, fmt.Errorf("profiles: depth predictor %d was not trained on this calibration", p.PredictorID)
}

// predictLearned prices an EGT whose depth a trained predictor chooses, as
// predictThreshold prices a threshold policy: each depth's cut plan at the
// share of steps the predictor drafted that deep on its held-out steps,
// plus its inference on every step, and the full plan's tokens beyond the
// bonus at the share the predictor kept there.
func predictLearned(p Plan, acc *Acceptance, c Costs, cv curves, m *memo) (Prediction, error) {
	l, err := acc.learnedFor(p)
	if err != nil {
		return Prediction{Plan: p}, err
	}
	if len(l.Levels) > len(p.EGT)+1 || !(l.Share >= 0) || l.Infer < 0 {
		return Prediction{Plan: p}, fmt.Errorf("profiles: depth predictor %d: its held-out figures do not fit %s", p.PredictorID, p)
	}
	fixed := p
	fixed.DepthPolicy, fixed.PredictorID = "", 0
	whole, err := predictOn(fixed, acc, c, cv, m)
	if err != nil {
		return whole, err
	}
	out := whole
	out.Plan = p
	var step, dr, ver, nodes float64
	for lv, k := range l.Levels {
		if k == 0 {
			continue
		}
		if lv == 0 {
			return out, fmt.Errorf("profiles: depth predictor %d drafted no level on some steps", p.PredictorID)
		}
		cut := fixed
		cut.EGT = fixed.EGT[:lv]
		pr, err := predictOn(cut, acc, c, cv, m)
		if err != nil {
			return out, err
		}
		step += k * float64(pr.Step)
		dr += k * float64(pr.Draft)
		ver += k * float64(pr.Verify)
		nodes += k * float64(pr.Nodes)
	}
	out.AAL = 1 + (whole.AAL-1)*min(1, l.Share)
	out.Step = time.Duration(step) + l.Infer
	out.Draft, out.Verify = time.Duration(dr)+l.Infer, time.Duration(ver)
	out.Nodes = int(nodes + 0.5)
	out.setSpeedup(c)
	return out, nil
}

// learned lists acc's depth predictors (none without a calibration).
func learned(acc *Acceptance) []Learned {
	if acc == nil {
		return nil
	}
	return acc.Learned
}
