package spec

import (
	"fmt"
	"slices"

	"arborist/engine/tree"
)

// Canonical is the plan in the one form every plan doing the same work
// takes: the same tree drafted by the same passes and verified in one
// pass. A tree of widths 1,1,1, a Sequoia tree that is a chain and an EGT
// of branch 1 at a fixed depth all draft and verify a chain (chain
// gamma=3); EGT widths beyond what a level can expand, and a w-max above
// what the tree grows, change nothing; a parent list with the same number
// of children under every node of a depth is that tree of widths. The
// search ranks, stores, names and counts plans by it.
func (p Plan) Canonical() Plan {
	for i := 0; i < 4; i++ { // egt -> tree -> chain at most
		s, err := Lookup(p.Strategy)
		if err != nil || s.canonical == nil {
			return p
		}
		q := s.canonical(p)
		if q.Strategy == p.Strategy && q.String() == p.String() && slices.Equal(q.Parents, p.Parents) {
			return q
		}
		p = q
	}
	return p
}

// Key identifies a plan by its strategy and every field it reads: two
// plans with one key are the same plan.
func (p Plan) Key() string { return p.Strategy + fmt.Sprint(p.Values()) }

// canonicalTree is a static tree's canonical form: a parent list with
// the same children under every node of a depth is that tree of widths,
// and widths of ones are a chain.
func canonicalTree(p Plan) Plan {
	if p.SampleChildren {
		return p // drafts children at random when sampling: not a chain's work
	}
	if len(p.Widths) == 0 && len(p.Parents) > 0 {
		if ws, ok := widthsOf(p.Parents); ok {
			p.Widths, p.Parents = ws, nil
		}
	}
	if len(p.Widths) > 0 && len(p.Parents) == 0 {
		for _, w := range p.Widths {
			if w != 1 {
				return p
			}
		}
		return Plan{Strategy: "chain", Gamma: len(p.Widths)}
	}
	return p
}

// widthsOf reads a parent list as widths per depth when it is exactly the
// tree tree.FromWidths builds from them.
func widthsOf(parents []int) ([]int, bool) {
	depth := make([]int, len(parents))
	kids := map[int]int{} // node (tree.Root for the root) -> children
	for i, par := range parents {
		if par < tree.Root || par >= i {
			return nil, false
		}
		if par != tree.Root {
			depth[i] = depth[par] + 1
		}
		kids[par]++
	}
	var ws []int
	ws = append(ws, kids[tree.Root])
	for d := 0; ; d++ {
		first := slices.Index(depth, d)
		if first < 0 {
			break
		}
		if kids[first] == 0 {
			break
		}
		ws = append(ws, kids[first])
	}
	s, err := tree.FromWidths(ws)
	if err != nil || !slices.Equal(s.Parents, parents) {
		return nil, false
	}
	return ws, true
}

// canonicalEGT is an Equal-Growth Tree's canonical form: widths held to
// what each level can expand (the frontier the level above grew), w-max
// held to the nodes grown (unless padded, which verifies the padding),
// a fixed depth policy written as the default, a tail budget held to the
// ends the tree has (and written with aot, which it implies); grown in
// full with no pruning, nothing drafted ahead and no padding, it is the
// static tree of its branch at every depth (a chain for branch 1).
func canonicalEGT(p Plan) Plan {
	if p.DepthPolicy == "fixed" {
		p.DepthPolicy = ""
	}
	if p.Branch < 1 || len(p.EGT) == 0 {
		return p
	}
	ws := slices.Clone(p.EGT)
	frontier, grown, full := 1, 0, true
	for i, w := range ws {
		if w > frontier {
			ws[i] = frontier
		}
		full = full && ws[i] == frontier
		frontier = ws[i] * p.Branch
		grown += frontier
	}
	p.EGT = ws
	if !p.Pad && p.WMax > grown {
		p.WMax = grown
	}
	if p.Tail > 0 {
		// tail drafting is drafting ahead at several ends, the head's
		// flag set or not; no more ends than the root and the nodes kept
		p.AOT = true
		p.Tail = min(p.Tail, 1+min(p.WMax, grown))
	}
	if full && !p.Pad && !p.AOT && p.DepthPolicy == "" && p.WMax >= grown {
		widths := make([]int, len(ws))
		for i := range widths {
			widths[i] = p.Branch
		}
		return Plan{Strategy: "tree", Widths: widths}
	}
	return p
}
