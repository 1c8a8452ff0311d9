package spec

import (
	"context"
	"math"
	"sort"
	"time"

	"arborist/engine/sample"
	"arborist/engine/tree"
)

// draft grows this step's tree with the configured strategy (an empty
// one, a plain decode step, when drafts is false).
func (r *run) draft(ctx context.Context, st *Step, drafts bool) (*tree.Tree, error) {
	nodes, depth := r.room()
	if !drafts || nodes == 0 || depth == 0 || !registry[r.cfg.Strategy].NeedsSource {
		return &tree.Tree{RootMode: tree.Sampled}, nil
	}
	return registry[r.cfg.Strategy].draft(r, ctx, st, nodes, depth)
}

// expand asks the source for the distributions after each node's path.
func (r *run) expand(ctx context.Context, tr *tree.Tree, nodes []int) ([][]float32, error) {
	paths := make([][]int, len(nodes))
	dst := make([][]float32, len(nodes))
	for i, n := range nodes {
		if n != tree.Root {
			for _, k := range tr.Path(n) {
				paths[i] = append(paths[i], tr.Nodes[k].Token)
			}
		}
		dst[i] = make([]float32, r.vocab)
	}
	if err := r.e.Source.Expand(ctx, paths, dst); err != nil {
		return dst, err
	}
	if r.readRoot {
		for i, n := range nodes {
			if n == tree.Root {
				r.rootTop1, r.rootEntropy = summarise(dst[i])
			}
		}
	}
	return dst, nil
}

// summarise returns q's highest probability and its entropy in nats.
func summarise(q []float32) (top, entropy float64) {
	for _, v := range q {
		if v > 0 {
			p := float64(v)
			top = math.Max(top, p)
			entropy -= p * math.Log(p)
		}
	}
	return top, entropy
}

func (r *run) setQ(tr *tree.Tree, node int, mode tree.ChildMode, q []float32) {
	if r.cfg.Sample.Greedy() {
		q = nil // greedy verification never reads q
	}
	if node == tree.Root {
		tr.RootMode, tr.QRoot = mode, q
		return
	}
	tr.Mode[node], tr.QNode[node] = mode, q
}

func allZero(q []float32) bool {
	for _, v := range q {
		if v != 0 {
			return false
		}
	}
	return true
}

// pick chooses the next chain token from q: the argmax when greedy, a draw
// from q otherwise.
func (r *run) pick(q []float32) int {
	if r.cfg.Sample.Greedy() {
		return sample.Argmax(q)
	}
	return r.dsmp.Draw(q)
}

// chain appends up to n tokens below parent, each drawn from the drafter's
// distribution after the previous one. q, when given, is the distribution
// after parent (already computed).
func (r *run) chain(ctx context.Context, tr *tree.Tree, parent int, q []float32, n int) error {
	for i := 0; i < n; i++ {
		if q == nil {
			qs, err := r.expand(ctx, tr, []int{parent})
			if err != nil {
				return err
			}
			q = qs[0]
		}
		if allZero(q) {
			return nil
		}
		tok := r.pick(q)
		r.setQ(tr, parent, tree.Sampled, q)
		parent = tr.Add(parent, tok, q[tok])
		q = nil
	}
	return nil
}

// static grows the configured shape level by level, one drafter pass per
// level, giving each node's k-th child the k-th most likely token.
func (r *run) static(ctx context.Context, room, depthRoom int) (*tree.Tree, error) {
	shape := r.cfg.static.Parents
	tr := &tree.Tree{}
	// map shape node -> tree node (-2: not drafted)
	at := make([]int, len(shape))
	for i := range at {
		at[i] = -2
	}
	level := []int{tree.Root} // shape indices of the current level (Root first)
	levelNode := []int{tree.Root}
	for d := 1; len(level) > 0 && d <= depthRoom; d++ {
		qs, err := r.expand(ctx, tr, levelNode)
		if err != nil {
			return nil, err
		}
		var next, nextNode []int
		for li, sp := range level {
			var kids []int
			for i, p := range shape {
				if p == sp {
					kids = append(kids, i)
				}
			}
			if len(kids) == 0 {
				continue
			}
			q := qs[li]
			if allZero(q) {
				continue
			}
			toks := tree.TopK(q, len(kids))
			mode := tree.Deterministic
			if r.cfg.SampleChildren && !r.cfg.Sample.Greedy() {
				mode = tree.Sampled
				for k := range toks {
					toks[k] = r.dsmp.Draw(q)
				}
			}
			r.setQ(tr, levelNode[li], mode, q)
			for k, tok := range toks {
				if q[tok] <= 0 || tr.Len() >= room {
					break
				}
				n := tr.Add(levelNode[li], tok, q[tok])
				at[kids[k]] = n
				next = append(next, kids[k])
				nextNode = append(nextNode, n)
			}
		}
		level, levelNode = next, nextNode
	}
	return tr, nil
}

// egt grows an Equal-Growth Tree: at depth d the EGT[d-1] frontier nodes
// with the highest path probability are expanded, each into its Branch most
// likely children, in one drafter pass per depth; the DepthPolicy may stop
// early. The tree is then pruned to WMax nodes and padded to a fixed shape.
func (r *run) egt(ctx context.Context, room, depthRoom int) (*tree.Tree, error) {
	c := &r.cfg
	tr := &tree.Tree{}
	frontier := []int{tree.Root}
	best := 1.0
	policy := c.Depth
	if policy == nil {
		policy = FixedDepth{D: len(c.EGT)}
	}
	state := func(d int) DepthState {
		return DepthState{Depth: d, Best: best, Hidden: r.hidden, Last: r.root, Top1: r.rootTop1, Entropy: r.rootEntropy}
	}
	for d := 0; d < len(c.EGT) && d < depthRoom && policy.Next(state(d)); d++ {
		sort.SliceStable(frontier, func(a, b int) bool { return pathP(tr, frontier[a]) > pathP(tr, frontier[b]) })
		chosen := frontier[:min(len(frontier), c.EGT[d])]
		qs, err := r.expand(ctx, tr, chosen)
		if err != nil {
			return nil, err
		}
		var next []int
		best = 0
		for i, n := range chosen {
			q := qs[i]
			r.setQ(tr, n, tree.Deterministic, q)
			for _, tok := range tree.TopK(q, c.Branch) {
				if q[tok] <= 0 {
					break
				}
				k := tr.Add(n, tok, q[tok])
				next = append(next, k)
				best = math.Max(best, tr.Nodes[k].PathP)
			}
		}
		if len(next) == 0 {
			break
		}
		frontier = next
	}
	budget := min(c.WMax, room)
	tr = tr.Prune(budget, nil)
	if c.Pad {
		tr.Pad(budget, r.root)
	}
	return tr, nil
}

func pathP(tr *tree.Tree, n int) float64 {
	if n == tree.Root {
		return 1
	}
	return tr.Nodes[n].PathP
}

// ---- duo ----

// duoState carries DuoDecoding's live timing estimates between steps.
type duoState struct {
	steps       int
	tTarget     float64 // EMA of one verification pass, seconds
	tDraft      float64 // EMA of one drafter pass, seconds
	draftPasses int
	aheadHit    bool // the last ahead-of-time drafting guessed right (its passes are done)
}

func ema(old, v float64) float64 {
	if old == 0 {
		return v
	}
	return 0.7*old + 0.3*v
}

// gamma is the hardware-aware draft budget T_target / T_draft, 1 on the
// first step, capped by the configured Gamma.
func (r *run) gamma() int {
	s := &r.duo
	if s.steps == 0 || s.tDraft <= 0 {
		return 1
	}
	g := int(math.Round(s.tTarget / s.tDraft))
	return max(1, min(g, r.cfg.Gamma))
}

var seqCounts = []int{8, 6, 4, 3, 2, 1}

// duoSeqs is DuoDecoding's uncertainty rule: with theta = p11 * p21 (the
// drafter's top-1 probability at the first position times its top-1 at the
// second), each first-position candidate of top (the MaxSeqs best) above
// theta starts a sequence; the count is rounded down to one of 8, 6, 4, 3,
// 2, 1 and to at most gamma, so every sequence gets a token of the budget.
func duoSeqs(q1 []float32, top []int, p21 float32, gamma int) int {
	tops := make([]float64, len(top))
	for i, j := range top {
		tops[i] = float64(q1[j])
	}
	return DuoSeqs(tops, float64(p21), gamma)
}

// DuoSeqs is duoSeqs over the probabilities of the first-position
// candidates a plan lets start a sequence (best first): the one rule the
// engine drafts by and the speedup model prices with.
func DuoSeqs(tops []float64, p21 float64, gamma int) int {
	if len(tops) == 0 {
		return 1
	}
	theta := tops[0] * p21
	n := 0
	for _, q := range tops {
		if q > theta {
			n++
		}
	}
	for _, c := range seqCounts {
		if c <= n && c <= gamma {
			return c
		}
	}
	return 1
}

// duoDraft drafts one or more sequences: when the drafter is unsure (several
// first-position candidates above theta = p11 * p21) each candidate starts
// its own sequence, and the budget is split between them.
func (r *run) duoDraft(ctx context.Context, st *Step, room, depthRoom int) (*tree.Tree, error) {
	tr := &tree.Tree{}
	if len(r.res.Steps) > 0 {
		last := r.res.Steps[len(r.res.Steps)-1]
		r.duo.tTarget = ema(r.duo.tTarget, last.Verify.Seconds())
	}
	gamma := min(r.gamma(), room, depthRoom)
	r.duo.steps++
	t0 := time.Now()
	qs, err := r.expand(ctx, tr, []int{tree.Root})
	if err != nil {
		return nil, err
	}
	q1 := qs[0]
	if allZero(q1) {
		return tr, nil
	}
	top := tree.TopK(q1, r.cfg.MaxSeqs)
	k := 1
	if r.cfg.MaxSeqs > 1 && gamma > 1 {
		// theta = p11 * p21: top-1 at the first position times top-1 after it
		tmp := &tree.Tree{}
		c := tmp.Add(tree.Root, top[0], q1[top[0]])
		q2s, err := r.expand(ctx, tmp, []int{c})
		if err != nil {
			return nil, err
		}
		k = duoSeqs(q1, top, q2s[0][sample.Argmax(q2s[0])], gamma)
	}
	st.Seqs = k
	if k == 1 {
		// a single sequence: the ordinary chain (children drawn from q)
		if err := r.chain(ctx, tr, tree.Root, q1, gamma); err != nil {
			return nil, err
		}
	} else {
		r.setQ(tr, tree.Root, tree.Deterministic, q1)
		per := max(1, gamma/k)
		for _, j := range top[:k] {
			c := tr.Add(tree.Root, j, q1[j])
			if err := r.chain(ctx, tr, c, nil, per-1); err != nil {
				return nil, err
			}
		}
	}
	if !r.duo.aheadHit { // after a hit these passes were mostly done ahead: finishAOT timed them
		passes := max(1, tr.MaxDepth())
		r.duo.tDraft = ema(r.duo.tDraft, time.Since(t0).Seconds()/float64(passes))
	}
	return tr, nil
}
