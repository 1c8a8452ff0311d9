package spec

import (
	"context"
	"slices"
	"sort"
	"time"

	"arborist/engine/sample"
	"arborist/engine/tree"
)

// aotHead is the drafting that runs while the target verifies (Yggdrasil's
// ahead-of-time head drafting and tail speculation; DuoDecoding's parallel
// drafter). It guesses where the verification will end and with which
// bonus token, and drafts the next step's first levels from there into
// the source's cache: the head guesses the most likely path accepted in
// full and the drafter's own top token as the bonus; tail drafting
// (Config.Tail) guesses at the most likely end positions of the draft,
// each with the drafter's best token that is none of that end's children
// (the target's bonus at a rejection never is one of them). All guesses
// are drafted together, one batched drafter pass a level. If the verdict
// matches a guess, the next step finds that work done (the source keeps
// the matching continuation at Commit and drops the others); otherwise it
// is all dropped. The target's cache is never touched, so output is what
// it would have been without it.
type aotHead struct {
	ends    []aheadEnd
	done    chan struct{}
	err     error
	started time.Time
	elapsed time.Duration
	passes  int // drafter passes run (the bonus guesses and each level after them)
	hit     bool
}

// aheadEnd is one guessed outcome of the verification.
type aheadEnd struct {
	path []int // the draft tokens accepted if verification ends here
	not  []int // the end's children in the draft: the bonus is none of them
	// guess is path, the guessed bonus and the continuation drafted
	// after it (the drafter's top token at each level); path alone until
	// the bonus is guessed.
	guess []int
	live  bool // still drafting (the drafter proposed something at every level so far)
}

// headDepth is how many levels of the next step are drafted ahead (the
// strategy's ahead; 0 for strategies that do not draft ahead).
func (r *run) headDepth() int {
	if s := registry[r.cfg.Strategy]; s.ahead != nil {
		return s.ahead(r)
	}
	return 0
}

// startAOT launches the drafting ahead for the step after tr, when the
// strategy asks for it and the source can run beside the target. The
// guesses are read from tr here, before verification starts, so the
// drafting goroutine touches only the source and its own state.
func (r *run) startAOT(ctx context.Context, tr *tree.Tree) {
	r.aot = nil
	depth := r.headDepth()
	if depth == 0 || !r.e.Concurrent || tr.Len() == 0 {
		return
	}
	var ends []aheadEnd
	if r.cfg.Tail > 0 {
		ends = tailEnds(tr, r.cfg.Tail, &r.accept)
	} else {
		ends = []aheadEnd{{path: bestPath(tr)}}
	}
	h := &aotHead{ends: ends, done: make(chan struct{}), started: time.Now()}
	r.aot = h
	go func() {
		defer close(h.done)
		defer func() { h.elapsed = time.Since(h.started) }()
		if mu := r.aheadMu; mu != nil {
			mu.Lock()
			defer mu.Unlock()
		}
		h.err = r.draftAhead(ctx, h, depth)
	}()
}

// draftAhead guesses the bonus token at each of h's ends, then drafts
// depth levels after each guess, every level of every end in one drafter
// pass. An end whose drafter proposes nothing stops there.
func (r *run) draftAhead(ctx context.Context, h *aotHead, depth int) error {
	src := r.e.Source
	paths := make([][]int, len(h.ends))
	qs := make([][]float32, len(h.ends))
	for i := range h.ends {
		paths[i] = h.ends[i].path
		qs[i] = make([]float32, r.vocab)
	}
	h.passes++
	if err := src.Expand(ctx, paths, qs); err != nil {
		return err
	}
	for i := range h.ends {
		e := &h.ends[i]
		if allZero(qs[i]) {
			continue // no proposal after this end: nothing to guess
		}
		for _, c := range e.not {
			qs[i][c] = -1
		}
		e.guess = append(slices.Clone(e.path), sample.Argmax(qs[i]))
		e.live = true
	}
	for d := 0; d < depth; d++ {
		var live []int
		paths = paths[:0]
		for i := range h.ends {
			if h.ends[i].live {
				live = append(live, i)
				paths = append(paths, h.ends[i].guess)
			}
		}
		if len(live) == 0 {
			return nil
		}
		h.passes++
		if err := src.Expand(ctx, paths, qs[:len(live)]); err != nil {
			return err
		}
		for k, i := range live {
			e := &h.ends[i]
			if allZero(qs[k]) {
				e.live = false
				continue
			}
			e.guess = append(e.guess, sample.Argmax(qs[k]))
		}
	}
	return nil
}

// bestPath is the draft's most likely path: the most likely child from
// the root down to a leaf (the head's guess).
func bestPath(tr *tree.Tree) []int {
	var path []int
	node := tree.Root
	for {
		bestC, bestP := -1, -1.0
		for _, c := range tr.Children(node) {
			if p := tr.Nodes[c].PathP; p > bestP {
				bestC, bestP = c, p
			}
		}
		if bestC < 0 {
			return path
		}
		path = append(path, tr.Nodes[bestC].Token)
		node = bestC
	}
}

// tailEnds are the n end positions of tr where verification most likely
// stops, most likely first: the root and every node v, reached when its
// whole path is accepted and stopping there when none of its children is,
// reach(v) * (1 - the children's chances), each token's chance of
// acceptance as acc has learnt it from its drafter probability (a leaf
// always stops). Pads are no end.
func tailEnds(tr *tree.Tree, n int, acc *acceptStats) []aheadEnd {
	kids := make([][]int, 1+len(tr.Nodes)) // [0] the root, [1+i] node i
	reach := make([]float64, 1+len(tr.Nodes))
	reach[0] = 1
	for i, nd := range tr.Nodes {
		if !nd.Pad {
			kids[1+nd.Parent] = append(kids[1+nd.Parent], i)
			reach[1+i] = reach[1+nd.Parent] * acc.p(nd.Q)
		}
	}
	type cand struct {
		node int
		stop float64
	}
	var cands []cand
	for i := range kids {
		if i > 0 && tr.Nodes[i-1].Pad {
			continue
		}
		taken := 0.0
		for _, c := range kids[i] {
			taken += acc.p(tr.Nodes[c].Q)
		}
		cands = append(cands, cand{i - 1, reach[i] * max(0, 1-taken)})
	}
	sort.SliceStable(cands, func(a, b int) bool { return cands[a].stop > cands[b].stop })
	out := make([]aheadEnd, 0, min(n, len(cands)))
	for _, c := range cands[:min(n, len(cands))] {
		var e aheadEnd
		if c.node != tree.Root {
			for _, k := range tr.Path(c.node) {
				e.path = append(e.path, tr.Nodes[k].Token)
			}
		}
		for _, k := range kids[1+c.node] {
			e.not = append(e.not, tr.Nodes[k].Token)
		}
		out = append(out, e)
	}
	return out
}

// acceptStats learns, over a run, how often the verifier accepts a draft
// token of each drafter probability (in tenths), so that tail drafting
// ranks end positions by the chance verification stops there and not by
// the drafter's raw probabilities: greedy verification accepts the
// drafter's top token whenever it is the target's, however unsure the
// drafter was (on the bench target, the noisy stories260K drafter's
// chain tokens of probability 0.5 to 0.7 were accepted 37 times in 39,
// those of 0.1 to 0.2 18 in 29), so raw probabilities put the root first
// where the chain's leaf was the likeliest end.
// Until a tenth has seen tokens its rate is the probability itself.
type acceptStats struct {
	tried, accepted [10]float64
}

// acceptPrior is how many tokens' weight a tenth's own probability has
// against what the run has seen there.
const acceptPrior = 2

func qBin(q float32) int { return min(9, max(0, int(q*10))) }

// add counts the tokens a verdict examined.
func (a *acceptStats) add(tries []Try) {
	for _, t := range tries {
		b := qBin(t.Q)
		a.tried[b]++
		if t.Accepted {
			a.accepted[b]++
		}
	}
}

// p is the chance a draft token of drafter probability q is accepted.
func (a *acceptStats) p(q float32) float64 {
	b := qBin(q)
	return (a.accepted[b] + acceptPrior*float64(q)) / (a.tried[b] + acceptPrior)
}

// aheadDone is what the drafting ahead of a step came to.
type aheadDone struct {
	elapsed time.Duration // how long it ran, alongside verification and after
	ends    int           // end positions prepared
	hit     bool          // the verdict matched one of them
}

// finishAOT waits for the drafting ahead and reports how long it ran
// alongside verification (the overlap), how many ends it prepared, and
// whether the verdict (accepted, bonus) matched one of its guesses.
func (r *run) finishAOT(ctx context.Context, accepted []int, bonus int) (aheadDone, error) {
	h := r.aot
	if h == nil {
		return aheadDone{}, nil
	}
	<-h.done
	if h.err != nil {
		r.aot = nil
		if ctx.Err() != nil {
			return aheadDone{}, ctx.Err()
		}
		return aheadDone{}, h.err
	}
	for _, e := range h.ends {
		g := e.guess
		if len(g) > len(accepted) && g[len(accepted)] == bonus && slices.Equal(g[:len(accepted)], accepted) {
			h.hit = true
			break
		}
	}
	if h.passes > 0 {
		// the drafter's real work per pass, for DuoDecoding's budget rule:
		// after a hit the next step's drafting finds these passes done, so
		// its own critical-path time says nothing about the drafter
		r.duo.tDraft = ema(r.duo.tDraft, h.elapsed.Seconds()/float64(h.passes))
	}
	r.duo.aheadHit = h.hit
	return aheadDone{elapsed: h.elapsed, ends: len(h.ends), hit: h.hit}, nil
}

// stopAOT waits for any head drafting still running (on error paths).
func (r *run) stopAOT() {
	if r.aot != nil {
		<-r.aot.done
		r.aot = nil
	}
}
