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
