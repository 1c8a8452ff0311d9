package spec

import (
	"arborist/engine/sample"
	"arborist/engine/tree"
)

// Verdict is the outcome of verifying one tree.
type Verdict struct {
	Path  []int // accepted node indices, depth 1 first
	Bonus int   // the token the target contributes after the path
	// Ranks holds, for each level visited, the sibling rank of the accepted
	// child (its place among its parent's children), or -1 where none was
	// accepted; Offered the number of children there. Calibration reads
	// acceptance per depth and rank from them.
	Ranks, Offered []int
}

// targetDist gives the target's distribution (after the sampling transforms)
// at batch row r: row 0 is the root, row 1+i node i.
type targetDist func(r int, dst []float32)

// verify walks the tree from the root. In greedy mode it follows the target's
// argmax; otherwise, at each node, it tries the children in order: children
// drawn from q use the multi-draft rule (accept with min(1, p/q), else
// p <- normalize(max(p - q, 0))); ranked (deterministic) children use the
// point-mass rule (accept with the residual p(c), else zero p(c) and
// renormalise). When no child is accepted the bonus is drawn from what is
// left of p. Either way every emitted token is distributed as the target's p.
//
// faults, for tests only, break the rule on purpose so the statistical
// tests can prove they detect a lossy verifier: brokenResidual skips the
// residual step after a rejection; staleBonus, once a whole path down to a
// leaf is accepted, draws the bonus from the previous row's distribution
// instead of the target's distribution after the leaf.
type faults struct {
	brokenResidual bool
	staleBonus     bool
}

func verify(t *tree.Tree, smp *sample.Sampler, greedy bool, logits func(r int) []float32, dist targetDist, vocab int, f faults) Verdict {
	brokenResidual := f.brokenResidual
	var v Verdict
	node := tree.Root
	p := make([]float32, vocab)
	for {
		row := 0
		if node != tree.Root {
			row = 1 + node
		}
		kids := t.Children(node)
		if greedy {
			tok := sample.Argmax(logits(row))
			next, rank := -1, -1
			for i, c := range kids {
				if t.Nodes[c].Token == tok {
					next, rank = c, i
					break
				}
			}
			if len(kids) > 0 {
				v.Ranks, v.Offered = append(v.Ranks, rank), append(v.Offered, len(kids))
			}
			if next < 0 {
				v.Bonus = tok
				return v
			}
			v.Path = append(v.Path, next)
			node = next
			continue
		}
		if !(f.staleBonus && node != tree.Root && len(kids) == 0) {
			dist(row, p)
		}
		mode, q := t.RootMode, t.QRoot
		if node != tree.Root {
			mode, q = t.Mode[node], t.QNode[node]
		}
		next, rank := -1, -1
		for i, c := range kids {
			tok := t.Nodes[c].Token
			rank = i
			switch mode {
			case tree.Sampled:
				qc := q[tok]
				if qc <= 0 || smp.Float()*float64(qc) < float64(p[tok]) {
					next = c
				} else if !brokenResidual {
					residual(p, q)
				}
			case tree.Deterministic:
				if smp.Float() < float64(p[tok]) {
					next = c
				} else if !brokenResidual {
					p[tok] = 0
					normalize(p)
				}
			}
			if next >= 0 {
				break
			}
		}
		if len(kids) > 0 {
			if next < 0 {
				rank = -1
			}
			v.Ranks, v.Offered = append(v.Ranks, rank), append(v.Offered, len(kids))
		}
		if next < 0 {
			v.Bonus = smp.Draw(p)
			return v
		}
		v.Path = append(v.Path, next)
		node = next
	}
}

// residual sets p to normalize(max(p - q, 0)). If p - q has no positive
// mass (p == q), p is left unchanged: the rejection then had probability 0.
func residual(p, q []float32) {
	var sum float64
	for i := range p {
		d := p[i] - q[i]
		if d < 0 {
			d = 0
		}
		sum += float64(d)
	}
	if sum <= 0 {
		return
	}
	inv := 1 / sum
	for i := range p {
		d := p[i] - q[i]
		if d < 0 {
			d = 0
		}
		p[i] = float32(float64(d) * inv)
	}
}

func normalize(p []float32) {
	var sum float64
	for _, v := range p {
		sum += float64(v)
	}
	if sum <= 0 {
		return
	}
	inv := 1 / sum
	for i := range p {
		p[i] = float32(float64(p[i]) * inv)
	}
}
