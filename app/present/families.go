package present

import (
	"cmp"
	"slices"

	"arborist/profiles"
)

// Family is one plan family of a ranking (a strategy): its best plan at
// each number of draft levels a step drafts.
type Family struct {
	Strategy string
	// Best holds the family's best plan for each number of draft levels
	// that any of its plans drafts (Levels), fewest levels first.
	Best []profiles.Prediction
}

// Levels is how many draft levels a plan's step drafts: its drafter
// passes (0 for plain decoding). An EGT pruned to fewer levels than it
// drafts, and a duo plan's probe of the second position, count the passes
// they cost.
func Levels(p profiles.Prediction) int { return len(p.PerDepth) }

// Families splits a ranking (best first, as the search and Tune give it)
// into its plan families, in order (the strategies' listing order, as the
// core's catalog gives it; strategies it does not name come after, by
// name): every family the ranking holds, each with its best plan at every
// number of draft levels. best, when not nil, is the plan the caller names
// as the ranking's best: it is its family's plan at its number of levels,
// so a chart drawn from the families marks that plan on its line.
func Families(ranked []profiles.Prediction, best *profiles.Prediction, order []string) []Family {
	type cell struct {
		strategy string
		levels   int
	}
	top := map[cell]profiles.Prediction{}
	put := func(p profiles.Prediction, force bool) {
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
	rank := map[string]int{}
	for i, s := range order {
		rank[s] = i
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
		oa, ka := rank[a.Strategy]
		ob, kb := rank[b.Strategy]
		switch {
		case ka != kb: // named strategies first
			if ka {
				return -1
			}
			return 1
		case oa != ob:
			return oa - ob
		}
		return cmp.Compare(a.Strategy, b.Strategy)
	})
	fams := make([]Family, len(out))
	for i, f := range out {
		slices.SortFunc(f.Best, func(a, b profiles.Prediction) int { return Levels(a) - Levels(b) })
		fams[i] = *f
	}
	return fams
}
