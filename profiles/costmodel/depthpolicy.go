package costmodel

import (
	"fmt"
	"time"
)

// SearchThresholds are the minimum path probabilities the search tries as
// an EGT threshold depth policy.
var SearchThresholds = []float64{0.1, 0.2, 0.35, 0.5}

// predictThreshold prices an EGT plan whose depth policy stops growing the
// tree once the best frontier path falls below DepthMin, on the
// calibration's own steps rather than on the acceptance table alone: the
// policy's worth is that it stops exactly when the drafter is unsure, when
// the target would have rejected the deeper levels anyway, and a model
// that took depth and acceptance as independent would price every stop as
// lost tokens. For each calibration step the levels the policy would draft
// (L: one, then one more while the best path at the last level is at
// least DepthMin, up to the plan's depth) come from its recorded best path
// probabilities; the step costs what the fixed plan cut to L levels costs,
// and of the tokens the full plan expects beyond the bonus, the policy
// keeps the share the calibration's accepted paths keep when cut to L
// (sum of min(accepted, L) over sum of min(accepted, depth)). Speedup is
// expected tokens over expected time, as throughput is.
//
// Where the calibration recorded its probe trees and the plan's nodes lie
// inside them, both come from replaying the policy on each probe instead
// (replayThreshold): the levels the engine would draft, stopping on the
// best path probability of the level it grew, and the tokens it would
// keep. The share above counts the probe's accepted paths, which ran
// through any sibling and ended where the probe was rejected: on the
// hidden-state pair it priced the threshold 0.35 plan's tokens 16% short
// in every tune of a set (1.93 a step against 2.29 measured) while that
// plan measured best in all three.
func predictThreshold(p Plan, acc *Acceptance, c Costs, cv curves, m *memo) (Prediction, error) {
	if acc == nil || len(acc.Depths) == 0 {
		return Prediction{Plan: p}, fmt.Errorf("profiles: a threshold depth policy is priced on the calibration's steps, and this calibration did not record them: calibrate again")
	}
	if p.DepthMin < 0 || p.DepthMin > 1 || len(p.EGT) == 0 {
		return Prediction{Plan: p}, fmt.Errorf("profiles: cannot model %s", p)
	}
	st := m.stops(acc.Depths, len(p.EGT), p.DepthMin)
	price := func(q Plan) (Prediction, error) {
		if m == nil {
			return predictOn(q, acc, c, cv, nil)
		}
		k := memoKey{q.String(), cv.split}
		if pr, ok := m.preds[k]; ok {
			return pr, nil
		}
		pr, err := predictOn(q, acc, c, cv, m)
		if err == nil {
			m.preds[k] = pr
		}
		return pr, err
	}
	fixed := p
	fixed.DepthPolicy, fixed.DepthMin = "", 0
	whole, err := price(fixed)
	if err != nil {
		return whole, err
	}
	out := whole
	out.Plan = p
	levels, aal := st.steps, 1+(whole.AAL-1)*st.share
	if rp, ok := replayThreshold(p, acc, m); ok {
		levels, aal = rp.steps, rp.aal
	}
	var step, dr, ver, nodes float64
	for l, k := range levels {
		if k == 0 {
			continue
		}
		cut := fixed
		cut.EGT = fixed.EGT[:l]
		pr, err := price(cut)
		if err != nil {
			return out, err
		}
		w := k
		step += w * float64(pr.Step)
		dr += w * float64(pr.Draft)
		ver += w * float64(pr.Verify)
		nodes += w * float64(pr.Nodes)
	}
	out.AAL = aal
	out.Step, out.Draft, out.Verify = time.Duration(step), time.Duration(dr), time.Duration(ver)
	out.Nodes = int(nodes + 0.5)
	out.setSpeedup(c)
	return out, nil
}

// stopMix is how a threshold policy meets the calibration's steps: the
// weight of the steps on which it drafts L levels (index L), and the share
// of the full plan's tokens beyond the bonus it keeps. It depends on the
// plan's depth and minimum only, so a search weighs the steps once for
// every plan that shares them (memo.stops).
type stopMix struct {
	steps []float64
	share float64
}

// stopsOf weighs samples for a threshold policy of depth levels and
// minimum path probability least (predictThreshold).
func stopsOf(samples []DepthSample, depth int, least float64) stopMix {
	levels := func(s DepthSample) int {
		l := 1
		for l < depth && l <= len(s.Best) && s.Best[l-1] >= least {
			l++
		}
		return l
	}
	weight := sampleWeights(samples, levels)
	st := stopMix{steps: make([]float64, depth+1), share: 1}
	var kept, full float64
	for i, s := range samples {
		l := levels(s)
		st.steps[l] += weight[i]
		kept += weight[i] * float64(min(s.Accepted, l))
		full += weight[i] * float64(min(s.Accepted, depth))
	}
	if full > 0 {
		st.share = kept / full
	}
	return st
}

// sampleWeights weighs the calibration's steps (summing to 1) as a plan
// that drafts levels(s) levels would meet them. With a source that
// re-samples after a rejection, a step is re-sampled exactly when the one
// before was not accepted in full, and the probe tree, rejected almost
// every step, recorded mostly re-sampled steps, which accept less (on the
// bench target 33% at depth 1 against 71%): a plan that stops early is
// accepted in full far more often. So regular and re-sampled steps are
// weighed by the plan's own steady share of regular steps, r = f_res /
// (1 - f_reg + f_res), f_k the share of kind-k steps the plan accepts in
// full; with one kind only, every step weighs the same.
func sampleWeights(samples []DepthSample, levels func(DepthSample) int) []float64 {
	var n, whole [2]float64
	for _, s := range samples {
		k := 0
		if s.Resampled {
			k = 1
		}
		n[k]++
		if s.Accepted >= levels(s) {
			whole[k]++
		}
	}
	out := make([]float64, len(samples))
	share := [2]float64{1 / float64(max(1, len(samples))), 1 / float64(max(1, len(samples)))}
	if n[0] >= minSplitSteps && n[1] >= minSplitSteps {
		fReg, fRes := whole[0]/n[0], whole[1]/n[1]
		r := 1.0
		if d := 1 - fReg + fRes; d > 0 {
			r = fRes / d
		}
		share = [2]float64{r / n[0], (1 - r) / n[1]}
	}
	for i, s := range samples {
		if s.Resampled {
			out[i] = share[1]
		} else {
			out[i] = share[0]
		}
	}
	return out
}
