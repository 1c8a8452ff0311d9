package spec

import (
	"math"
	"sync"
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
	// Context is the tokens the request's target cache holds before the
	// step (its prompt and what it has emitted): what each of its rows
	// attends to (0: not known).
	Context int
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
//
// A step costs more than its pass: each request drafts, samples and
// verifies its rows on its own before and after it, one request after
// another. Own prices that part, and with Learn set both it and the
// curve's scale on this machine now are learned from the passes the
// batch reports (Observe). Pricing the pass alone makes every step look
// cheaper than it is, so the rows a draft adds look dearer than they are
// and the policy drafts too little: on the bench pair at eight requests
// it shrank a chain of six that measured 20% faster at its full size.
type Goodput struct {
	// Latency is the time of one target pass of rows rows (a stored
	// latency curve of the pass size, interpolated).
	Latency func(rows int) time.Duration
	// Pass, when set, is the time of one pass of seqs sequences holding
	// rows rows in all, each sequence after about context cached tokens
	// (the mean of the requests' Load.Context; 0: not known), used
	// instead of Latency: a pass of eight sequences of one row costs
	// more than one sequence's pass of eight rows, in what every
	// sequence adds, not in what a row adds, and what a sequence adds
	// grows with its context.
	Pass func(seqs, rows, context int) time.Duration
	// Own is the time one request's step costs beside the pass at a
	// budget of nodes (nil: none); Learn's, where Learn is set.
	Own func(nodes int) time.Duration
	// Learn, when set, learns Own and the scale of Latency on this
	// machine from the passes (Observe); shared by the copies of the
	// policy a batch holds.
	Learn *StepCosts
	// Margin is the least gain in a pass's goodput, as a fraction, for
	// which the plans shrink below their whole size, and for which the
	// requests draft at all rather than decode plainly (0: any gain).
	Margin float64
}

// ShrinkMargin is the margin serving (and the cost model's pricing of
// it) gives Goodput: the plans run as tuned unless shrinking them is
// priced at least 5% faster, and the requests draft at all only where
// that is priced at least 5% faster than plain batching. A pass's price
// in a server is only so sure. On a 2-core AVX2 machine at eight
// requests after about 35 tokens the policy priced a node a request
// 1.5% above plain batching, where its passes of 16 rows took 1.74x
// the 8-row ones (the curve: 1.71x) and its steps 0.13 ms a request and
// a node beside them: drafting measured 0.75 tokens a millisecond
// against plain batching's 0.80. And on the bench pair on an AVX-512
// machine at eight requests the policy priced its
// shrunk chains (4.6 nodes a request, where the plan has 6) 2-3% above
// the whole plan and they measured 2-4% below it (the plan's 56-row
// passes took 11.7 ms in the server, its own 45-row ones 11.4, where
// the latency curve has 0.17 ms a row), and earlier, pricing the pass
// alone, it had shrunk a chain that measured 20% faster whole. Where
// the load makes drafts dear, shrinking gains more than that and still
// happens.
const ShrinkMargin = 0.05

// Observe implements PassObserver: the pass's record teaches Learn.
func (g Goodput) Observe(st PassStats) {
	if g.Learn != nil && (g.Latency != nil || g.Pass != nil) {
		g.Learn.observe(st, g.passTime(st.Seqs, st.Rows, st.Context))
	}
}

// passTime is a pass of seqs sequences of rows rows in all, after about
// context cached tokens each: Pass's, or Latency's where Pass is not set.
func (g Goodput) passTime(seqs, rows, context int) time.Duration {
	if g.Pass != nil {
		return g.Pass(seqs, rows, context)
	}
	return g.Latency(rows)
}

// meanContext is the loads' mean Context (0 for none).
func meanContext(loads []Load) int {
	if len(loads) == 0 {
		return 0
	}
	sum := 0
	for _, l := range loads {
		sum += l.Context
	}
	return sum / len(loads)
}

// PassObserver is a Policy that learns from the passes it chose budgets
// for: the batch hands it each pass's record.
type PassObserver interface {
	Observe(PassStats)
}

// StepCosts learns what a batch's steps cost beside the latency curve:
// the pass's time against the curve's (the machine may be busier or
// freer than when it was profiled) and each request's own time (its
// drafting, sampling and verifying) as a fixed part and a part a draft
// node, by least squares over the recent passes, each pass weighing
// (1 - stepForget) of the one after it. Until it has seen passes, it
// prices as the curve alone does (scale 1, no own time).
type StepCosts struct {
	mu sync.Mutex
	// scale: the weighted sums of the passes' times and the curve's
	w, pass, curve float64
	// own time a request (y, seconds) against its mean draft nodes (x)
	n, sx, sy, sxx, sxy float64
}

// stepForget is how fast old passes fade: about the last 200 weigh.
const stepForget = 1.0 / 200

// observe counts one pass of st.Decoding requests' steps, whose pass
// the curve priced at curve.
func (c *StepCosts) observe(st PassStats, curve time.Duration) {
	if st.Decoding == 0 || st.Time <= 0 || st.Step < st.Time+st.Prefilled || curve <= 0 {
		return
	}
	k := float64(st.Decoding)
	x := float64(st.Drafted) / k
	// the steps' own time: not the prompts the pass finished (their
	// sources' start, a draft model's prefill of the prompt): counted
	// as theirs, a pass of one step of 7 nodes beside seven prompts put
	// 7.9 ms on that step, and the fit charged every draft node 0.70 ms
	// (0.13 ms measured) and shrank every request to plain decoding
	y := (st.Step - st.Time - st.Prefilled).Seconds() / k
	c.mu.Lock()
	defer c.mu.Unlock()
	f := 1 - stepForget
	c.w = f*c.w + 1
	c.pass = f*c.pass + st.Time.Seconds()
	c.curve = f*c.curve + curve.Seconds()
	c.n = f*c.n + 1
	c.sx = f*c.sx + x
	c.sy = f*c.sy + y
	c.sxx = f*c.sxx + x*x
	c.sxy = f*c.sxy + x*y
}

// costs is what the passes so far teach: the curve's scale, and a
// request's own time at no draft node and a node.
func (c *StepCosts) costs() (scale, fixed, node float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n < 1 || c.curve <= 0 {
		return 1, 0, 0
	}
	scale = c.pass / c.curve
	mx, my := c.sx/c.n, c.sy/c.n
	vx := c.sxx/c.n - mx*mx
	// the node's part where the budgets varied enough to tell it from
	// the fixed part (a fixed plan's never do); otherwise all of it fixed
	if vx > 1e-6 {
		node = max((c.sxy/c.n-mx*my)/vx, 0)
	}
	fixed = max(my-node*mx, 0)
	return scale, fixed, node
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
	scale, ownFixed, ownNode := 1.0, 0.0, 0.0
	if g.Learn != nil {
		scale, ownFixed, ownNode = g.Learn.costs()
	}
	own := func(nodes int) float64 {
		if g.Learn == nil && g.Own != nil {
			return g.Own(nodes).Seconds()
		}
		return ownFixed + ownNode*float64(nodes)
	}
	seqs := len(loads)
	if fixed > 0 {
		seqs++ // the prompts' chunks: at least one sequence more
	}
	base := fixed + len(loads) // the fewest rows the pass holds: a row a request
	context := meanContext(loads)
	// each pass's time is asked for once a call: the growth below prices
	// the same few row counts for every request it weighs at every node
	passes := make([]float64, 0, 64)
	secs := func(rows int, own float64) float64 {
		for len(passes) <= rows-base {
			passes = append(passes, -1)
		}
		t := &passes[rows-base]
		if *t < 0 {
			*t = scale * g.passTime(seqs, rows, context).Seconds()
		}
		return max(*t+own, 1e-12)
	}
	tokens, rows, owned := 0.0, fixed, 0.0
	for i := range loads {
		out[i] = 0
		tokens++
		rows++
		owned += own(0)
	}
	best := tokens / secs(rows, owned)
	plain := best
	margin := 1 + max(g.Margin, 0)
	// the greedy growth below stops at the first step that does not pay,
	// which a curve's steps (a pass one row past a tile costs a tile
	// more) can make short of a larger budget that does: every request at
	// its plan's whole budget is priced too, and kept where it gives more,
	// or less by no more than the margin. Then drafting at all is kept
	// only where it is priced above plain batching by the margin too.
	defer func() {
		var t, o float64
		r := fixed
		for i, l := range loads {
			at := price(i, l.Nodes)
			t, r, o = t+at.tokens, r+at.rows, o+own(l.Nodes)
		}
		chosen := best
		if whole := t / secs(r, o); whole*margin > best {
			for i, l := range loads {
				out[i] = l.Nodes
			}
			chosen = whole
		}
		if chosen < plain*margin {
			clear(out)
		}
	}()
	for {
		pick, to := -1, 0
		var pickDT, pickDE, pickOwn float64
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
				dOwn := own(n) - own(out[i])
				dT := secs(rows+nx.rows-at.rows, owned+dOwn) - secs(rows, owned)
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
					pick, to, pickDT, pickDE, pickRows, pickOwn = i, n, dT, dE, nx.rows-at.rows, dOwn
				}
				break
			}
		}
		if pick < 0 {
			return
		}
		g := (tokens + pickDE) / secs(rows+pickRows, owned+pickOwn)
		if !(g > best) {
			return
		}
		best, tokens, rows, owned = g, tokens+pickDE, rows+pickRows, owned+pickOwn
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
