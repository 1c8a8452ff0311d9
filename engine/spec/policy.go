package spec

import (
	"math"
	"time"
)

// Speculation that adapts to the load. In a pass shared by many requests,
// every drafted node of one request is a row all of them wait for: a plan
// that pays at one request can lose at eight. Before each pass a Policy
// chooses every running request's draft budget, from none (a plain decode
// step: one row) up to its plan's size; the request's step then runs its
// plan shrunk to that budget (Plan.Shrink: the same shape, fewer nodes).
// Every budget is lossless: a step verifies whatever it drafted with the
// same rules.

// Load is what a policy knows of one running request before a pass.
type Load struct {
	// Plan is the request's plan, as given.
	Plan Plan
	// Nodes is the most draft nodes the request may verify in the pass:
	// its plan's size, or less where its cache has less room left.
	Nodes int
	// Accept is the request's running acceptance: the chance that the
	// draft token of sibling rank r at depth d (0: the root's children)
	// is accepted when its parent was, from the steps it has run, a
	// prior's until it has some (rankStats).
	Accept func(d, r int) float64
}

// Policy chooses, before each pass, how many draft nodes each running
// request verifies in it.
type Policy interface {
	// Budgets writes into out[i] the draft nodes of loads[i]'s step, from
	// 0 (a plain decode step) to loads[i].Nodes. fixed is the rows the
	// pass holds beside the requests' steps (new requests' prefill
	// chunks).
	Budgets(fixed int, loads []Load, out []int)
}

// Fixed gives every request its plan's whole budget, whatever the load:
// the plans as tuned at one request.
type Fixed struct{}

// Budgets implements Policy.
func (Fixed) Budgets(_ int, loads []Load, out []int) {
	for i, l := range loads {
		out[i] = l.Nodes
	}
}

// Plain gives every request none: plain batched decoding, one row a
// request a pass.
type Plain struct{}

// Budgets implements Policy.
func (Plain) Budgets(_ int, loads []Load, out []int) {
	for i := range loads {
		out[i] = 0
	}
}

// Goodput chooses the budgets that maximise the expected tokens a pass
// emits per second of it (its goodput), SmartSpec's rule (arXiv
// 2406.14066): every request starts at none, then the next node goes, one
// at a time, to the request whose next node adds the most expected tokens
// per unit of added pass time, until the pass's goodput no longer rises.
// A request's expected tokens at a budget are its plan shrunk to it priced
// under its running acceptance (Plan.Expect: the bonus token and each
// node's chance of acceptance); the pass's time is Latency of its rows.
// So a flat latency (a pass of many rows costs what a pass of one does)
// gives every request its whole plan, and a latency that grows with every
// row gives none to requests whose drafts are seldom accepted.
type Goodput struct {
	// Latency is the time of one target pass of rows rows (a stored
	// latency curve of the pass size, interpolated).
	Latency func(rows int) time.Duration
}

// Budgets implements Policy.
func (g Goodput) Budgets(fixed int, loads []Load, out []int) {
	// value[i][n] and rows[i][n]: request i's expected tokens and rows at
	// budget n, priced when the allocation first looks at n
	type priced struct {
		tokens float64
		rows   int
	}
	cache := make([][]priced, len(loads))
	price := func(i, n int) priced {
		c := cache[i]
		for len(c) <= n {
			c = append(c, priced{tokens: -1})
		}
		cache[i] = c
		if c[n].tokens < 0 {
			c[n] = priced{1, 1}
			if n > 0 {
				p := loads[i].Plan.Shrink(n)
				if ex, err := p.Expect(loads[i].Accept); err == nil {
					c[n] = priced{ex.AAL(), 1 + max(len(ex.Values), ex.Verified)}
				}
			}
		}
		return c[n]
	}
	// a latency of zero (a stand-in's) is the flattest one: every row free
	secs := func(rows int) float64 { return max(g.Latency(rows).Seconds(), 1e-12) }
	tokens, rows := 0.0, fixed
	for i := range loads {
		out[i] = 0
		tokens++
		rows++
	}
	best := tokens / secs(rows)
	for {
		pick, to := -1, 0
		var pickDT, pickDE float64
		var pickRows int
		for i, l := range loads {
			at := price(i, out[i])
			// the next budget that adds expected tokens (a shrunk plan
			// may stay the same over several budgets, or pad)
			for n := out[i] + 1; n <= l.Nodes; n++ {
				nx := price(i, n)
				dE := nx.tokens - at.tokens
				if dE <= 0 {
					continue
				}
				dT := secs(rows+nx.rows-at.rows) - secs(rows)
				// the most tokens per added second; where the pass costs
				// no more, the most tokens
				better := pick < 0
				if !better {
					switch {
					case dT <= 0 && pickDT <= 0:
						better = dE > pickDE
					case dT <= 0:
						better = true
					case pickDT > 0:
						better = dE/dT > pickDE/pickDT
					}
				}
				if better {
					pick, to, pickDT, pickDE, pickRows = i, n, dT, dE, nx.rows-at.rows
				}
				break
			}
		}
		if pick < 0 {
			return
		}
		g := (tokens + pickDE) / secs(rows+pickRows)
		if !(g > best) {
			return
		}
		best, tokens, rows = g, tokens+pickDE, rows+pickRows
		out[pick] = to
	}
}

// rankStats is a run's acceptance by depth and sibling rank, counted from
// its verdicts, for the load-adaptive policy: where rank r was offered at
// depth d (its parent accepted), how often it was the one accepted.
type rankStats struct {
	offered, accepted [][]float64 // [depth][rank]
}

// add counts a verdict's levels: the rank accepted at each (-1: none) and
// the children offered there.
func (a *rankStats) add(ranks, offered []int) {
	for d := range ranks {
		for len(a.offered) <= d {
			a.offered, a.accepted = append(a.offered, nil), append(a.accepted, nil)
		}
		for len(a.offered[d]) < offered[d] {
			a.offered[d], a.accepted[d] = append(a.offered[d], 0), append(a.accepted[d], 0)
		}
		for r := 0; r < offered[d]; r++ {
			a.offered[d][r]++
		}
		if r := ranks[d]; r >= 0 {
			a.accepted[d][r]++
		}
	}
}

// PriorWeight is how many steps' weight a policy's prior acceptance has
// against what a request has seen at a depth and rank.
const PriorWeight = 4

// DefaultPrior is the acceptance a request is assumed to have before its
// steps show its own: a draft's top token accepted six times in ten, each
// rank below it less than half as often (the calibrated acceptance of the
// pair is better, where the caller has one).
func DefaultPrior(_, r int) float64 { return 0.6 * math.Pow(0.4, float64(r)) }

// at is the running acceptance at depth d and rank r: what was seen there,
// with prior's weight PriorWeight until there is more.
func (a *rankStats) at(prior func(d, r int) float64, d, r int) float64 {
	var off, acc float64
	if d < len(a.offered) && r < len(a.offered[d]) {
		off, acc = a.offered[d][r], a.accepted[d][r]
	}
	return (acc + PriorWeight*prior(d, r)) / (off + PriorWeight)
}
