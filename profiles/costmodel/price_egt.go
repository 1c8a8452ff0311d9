package costmodel

import "arborist/engine/spec"

// The Equal-Growth Tree's part of the speedup model beyond its Expect
// tree (which replay.go replays on the calibration's probe trees, as the
// engine grows and prunes it): a depth policy that stops on the drafter's
// confidence is priced on the calibration's steps (predictThreshold,
// predictLearned), and the search offers threshold policies where the
// calibration recorded those steps, and the largest tail budget.
func init() {
	registerPricer(spec.EGTName, pricer{
		price: func(p Plan, acc *Acceptance, c Costs, cv curves, m *memo) (Prediction, bool, error) {
			var pr Prediction
			var err error
			switch p.DepthPolicy {
			case "threshold":
				pr, err = predictThreshold(p, acc, c, cv, m)
			case "predictor":
				pr, err = predictLearned(p, acc, c, cv, m)
			default:
				return pr, false, nil // a fixed depth: its Expect tree
			}
			return pr, true, err
		},
		offer: func(sp *SearchSpace, acc *Acceptance) {
			if sp.Thresholds == nil && acc != nil && len(acc.Depths) > 0 {
				sp.Thresholds = SearchThresholds
			}
			offerTails(sp)
		},
	})
}
