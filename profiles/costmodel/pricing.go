package costmodel

// pricer is a strategy's own part of the speedup model, beyond the tree
// its Expect hook gives (which priceExpected prices for every strategy,
// and replay.go replays for a grown tree). Each lives in the strategy's
// file of this package, price_NAME.go, registered under the strategy's
// name: the model finds it through the strategy of the plan it prices,
// never by naming one, and TestEveryStrategyPriced requires one of every
// strategy whose plan fields need it.
type pricer struct {
	// price, when set, prices the plans whose tokens or time depend on
	// more than that tree (a depth policy that stops on the drafter's
	// confidence, several sequences when the drafter is unsure) on the
	// curves cv; ok false leaves the plan to the general model.
	price func(p Plan, acc *Acceptance, c Costs, cv curves, m *memo) (pr Prediction, ok bool, err error)
	// offer, when set, fills the search space's knobs the strategy's
	// Candidates read (spec.Space: Thresholds, Sequences, Tails) that the
	// caller left unset, with what acc can price.
	offer func(sp *SearchSpace, acc *Acceptance)
}

// pricers holds each strategy's pricer by name; the price_NAME.go files'
// init functions fill it and it is only read afterwards.
var pricers = map[string]pricer{}

func registerPricer(strategy string, p pricer) {
	if _, dup := pricers[strategy]; dup {
		panic("costmodel: strategy " + strategy + " priced twice")
	}
	pricers[strategy] = p
}

// offerTails offers the tail budgets the search tries (SearchTails), to a
// strategy whose plans may draft a tail.
func offerTails(sp *SearchSpace) {
	if sp.Tails == nil {
		sp.Tails = SearchTails
	}
}
