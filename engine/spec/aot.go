package spec

import (
	"context"
	"time"

	"arborist/engine/sample"
	"arborist/engine/tree"
)

// aotHead is the drafting that runs while the target verifies (Yggdrasil's
// ahead-of-time head drafting; DuoDecoding's parallel drafter). It guesses
// the most likely outcome of the verification (the best path accepted, and
// the drafter's own top token as the bonus) and drafts the next step's head
// from there into the source's cache. If the guess comes true, the next
// step finds that work done; otherwise it is dropped at Commit.
type aotHead struct {
	guess   []int // guessed accepted tokens followed by the guessed bonus
	done    chan struct{}
	err     error
	started time.Time
	elapsed time.Duration
	passes  int // drafter passes run (the bonus guess and the levels after it)
	hit     bool
}

// headDepth is how many levels of the next step AOT drafts ahead (the
// strategy's ahead; 0 for strategies that do not draft ahead).
func (r *run) headDepth() int {
	if s := registry[r.cfg.Strategy]; s.ahead != nil {
		return s.ahead(r)
	}
	return 0
}

// startAOT launches head drafting for the step after tr, when the strategy
// asks for it and the source can run beside the target.
func (r *run) startAOT(ctx context.Context, tr *tree.Tree) {
	r.aot = nil
	depth := r.headDepth()
	if depth == 0 || !r.e.Concurrent || tr.Len() == 0 {
		return
	}
	// the best path: follow the most likely child from the root
	var guess []int
	node := tree.Root
	for {
		bestC, bestP := -1, -1.0
		for _, c := range tr.Children(node) {
			if p := tr.Nodes[c].PathP; p > bestP {
				bestC, bestP = c, p
			}
		}
		if bestC < 0 {
			break
		}
		guess = append(guess, tr.Nodes[bestC].Token)
		node = bestC
	}
	h := &aotHead{guess: guess, done: make(chan struct{}), started: time.Now()}
	r.aot = h
	go func() {
		defer close(h.done)
		defer func() { h.elapsed = time.Since(h.started) }()
		src := r.e.Source
		q := make([]float32, r.vocab)
		path := append([]int(nil), guess...)
		// the guessed bonus: the drafter's top token after the guessed path
		h.passes++
		if h.err = src.Expand(ctx, [][]int{path}, [][]float32{q}); h.err != nil {
			return
		}
		path = append(path, sample.Argmax(q))
		h.guess = append([]int(nil), path...)
		for d := 0; d < depth; d++ {
			h.passes++
			if h.err = src.Expand(ctx, [][]int{path}, [][]float32{q}); h.err != nil || allZero(q) {
				return
			}
			path = append(path, sample.Argmax(q))
		}
	}()
}

// finishAOT waits for the head drafting and reports how long it ran
// alongside verification (the overlap), and whether its guess came true.
func (r *run) finishAOT(ctx context.Context, accepted []int, bonus int) (time.Duration, error) {
	h := r.aot
	if h == nil {
		return 0, nil
	}
	<-h.done
	if h.err != nil {
		r.aot = nil
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		return 0, h.err
	}
	h.hit = len(h.guess) > len(accepted) && h.guess[len(accepted)] == bonus
	for i := 0; h.hit && i < len(accepted); i++ {
		h.hit = h.guess[i] == accepted[i]
	}
	if h.passes > 0 {
		// the drafter's real work per pass, for DuoDecoding's budget rule:
		// after a hit the next step's drafting finds these passes done, so
		// its own critical-path time says nothing about the drafter
		r.duo.tDraft = ema(r.duo.tDraft, h.elapsed.Seconds()/float64(h.passes))
	}
	r.duo.aheadHit = h.hit
	return h.elapsed, nil
}

// stopAOT waits for any head drafting still running (on error paths).
func (r *run) stopAOT() {
	if r.aot != nil {
		<-r.aot.done
		r.aot = nil
	}
}
