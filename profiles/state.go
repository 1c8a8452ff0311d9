package profiles

import (
	"slices"

	"arborist/engine/spec"
	"arborist/profiles/costmodel"
)

// What the GUI shows of a pair, read or derived from what the core
// already gives: the plan families of a ranking, as the speedup chart
// draws them.

// Family is one plan family of a ranking (a strategy): its best plan at
// each number of draft levels a step drafts.
type Family struct {
	Strategy string
	// Best holds the family's best plan for each number of draft levels
	// that any of its plans drafts (Levels), fewest levels first.
	Best []Prediction
}

// Levels is how many draft levels a plan's step drafts: its drafter
// passes (0 for plain decoding). An EGT pruned to fewer levels than it
// drafts, and a duo plan's probe of the second position, count the passes
// they cost.
func Levels(p Prediction) int { return len(p.PerDepth) }

// Families splits a ranking (best first, as Search and Tune give it) into
// its plan families, in the strategies' listing order: every family the
// ranking holds, each with its best plan at every number of draft levels.
// best, when not nil, is the plan the caller names as the ranking's best:
// it is its family's plan at its number of levels, so a chart drawn from
// the families marks that plan on its line.
func Families(ranked []Prediction, best *Prediction) []Family {
	type cell struct {
		strategy string
		levels   int
	}
	top := map[cell]Prediction{}
	put := func(p Prediction, force bool) {
		k := cell{p.Plan.Strategy, Levels(p)}
		if q, ok := top[k]; !ok || force || p.Speedup > q.Speedup {
			top[k] = p
		}
	}
	for _, p := range ranked {
		put(p, false)
	}
	if best != nil {
		put(*best, true)
	}
	order := map[string]int{}
	for i, s := range spec.Strategies() {
		order[s] = i
	}
	by := map[string]*Family{}
	var out []*Family
	for k, p := range top {
		f := by[k.strategy]
		if f == nil {
			f = &Family{Strategy: k.strategy}
			by[k.strategy] = f
			out = append(out, f)
		}
		f.Best = append(f.Best, p)
	}
	slices.SortFunc(out, func(a, b *Family) int {
		oa, ka := order[a.Strategy]
		ob, kb := order[b.Strategy]
		switch {
		case ka != kb: // registered strategies first
			if ka {
				return -1
			}
			return 1
		case oa != ob:
			return oa - ob
		}
		return compareStrings(a.Strategy, b.Strategy)
	})
	fams := make([]Family, len(out))
	for i, f := range out {
		slices.SortFunc(f.Best, func(a, b Prediction) int { return Levels(a) - Levels(b) })
		fams[i] = *f
	}
	return fams
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// ExploreRanking is Explore and the ranking its best comes from: every
// plan its search priced, best first, for the speedup chart's families.
//
// Explore keeps only the ranking's best, so the search runs a second time
// here over the same space; an Exploration that kept its ranking would
// save that.
func ExploreRanking(o ExploreOptions) (*Exploration, []Prediction) {
	x := Explore(o)
	ranked := costmodel.Search(x.acc, x.costs, costmodel.SearchSpace{MaxDepth: min(o.Depth, 7), MaxGamma: o.Depth})
	return x, ranked
}
