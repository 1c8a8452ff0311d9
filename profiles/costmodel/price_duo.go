package costmodel

import (
	"fmt"
	"time"

	"arborist/engine/spec"
)

// DuoDecoding's part of the speedup model: how many sequences a step
// drafts follows the drafter's confidence on that step, so a plan that may
// draft several is priced on the calibration's steps (predictSequences),
// and the search offers several where the calibration recorded what the
// rule reads.
func init() {
	registerPricer(spec.DuoName, pricer{
		price: func(p Plan, acc *Acceptance, c Costs, cv curves, _ *memo) (Prediction, bool, error) {
			if p.Sequences() <= 1 {
				return Prediction{}, false, nil // one chain: its Expect tree
			}
			pr, err := predictSequences(p, acc, c, cv)
			return pr, true, err
		},
		offer: func(sp *SearchSpace, acc *Acceptance) {
			if sp.Sequences == nil && acc.recordsFirstLevel() {
				sp.Sequences = searchSequences
			}
			offerTails(sp)
		},
	})
}

// searchSequences are the MaxSeqs values the search tries for duo beside
// one sequence (the probe tree offers four first-position candidates, so
// more cannot be priced).
var searchSequences = []int{2, 4}

// recordsFirstLevel reports whether the calibration recorded each step's
// first-position candidates (older calibrations did not).
func (a *Acceptance) recordsFirstLevel() bool {
	if a == nil {
		return false
	}
	for _, s := range a.Depths {
		if len(s.Top) > 0 {
			return true
		}
	}
	return false
}

// predictSequences prices a duo plan that may draft several sequences
// (MaxSeqs > 1): how many a step drafts follows the drafter's confidence
// (spec.DuoSeqs over its first-position candidates and the probability
// after the best), so the plan is the mix, over the calibration's steps,
// of the trees of the counts the rule picks there (spec.DuoExpect), each
// priced as usual; tokens and time are mixed separately, as throughput is.
func predictSequences(p Plan, acc *Acceptance, c Costs, cv curves) (Prediction, error) {
	if !acc.recordsFirstLevel() {
		return Prediction{Plan: p}, fmt.Errorf("profiles: duo with several sequences is priced on the calibration's steps, and this calibration did not record them: calibrate again")
	}
	counts := map[int]int{}
	n := 0
	for _, s := range acc.Depths {
		if len(s.Top) == 0 {
			continue
		}
		counts[spec.DuoSeqs(s.Top[:min(len(s.Top), p.Sequences())], s.P21, p.Gamma)]++
		n++
	}
	out := Prediction{Plan: p}
	var step, dr, ver, nodes float64
	most := 0
	for k, cnt := range counts {
		pr := priceExpected(p, spec.DuoExpect(p.Gamma, k, true, p.Tail, acc.At), c, cv)
		w := float64(cnt) / float64(n)
		if cnt > most || (cnt == most && len(pr.PerDepth) < len(out.PerDepth)) {
			most, out.PerDepth = cnt, pr.PerDepth
		}
		out.AAL += w * pr.AAL
		step += w * float64(pr.Step)
		dr += w * float64(pr.Draft)
		ver += w * float64(pr.Verify)
		nodes += w * float64(pr.Nodes)
	}
	out.Step, out.Draft, out.Verify = time.Duration(step), time.Duration(dr), time.Duration(ver)
	out.Nodes = int(nodes + 0.5)
	out.setSpeedup(c)
	return out, nil
}
