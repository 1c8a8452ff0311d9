package costmodel

import "arborist/engine/spec"

// The chain's part of the speedup model beyond its Expect tree: the
// search offers it with tail budgets.
func init() {
	registerPricer(spec.ChainName, pricer{
		offer: func(sp *SearchSpace, _ *Acceptance) { offerTails(sp) },
	})
}
