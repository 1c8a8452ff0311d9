package spec

import (
	"context"
	"fmt"
	"math"
	"sort"

	"arborist/engine/tree"
)

// tree verifies a static shape (widths per depth or a parent list), the
// k-th child of a node being the drafter's k-th most likely token; the
// drafting is run.static in strategies.go.
func init() {
	register(&Strategy{
		Name:    "tree",
		Summary: "a static tree: children per node at each depth, ranked by drafter probability",
		order:   2,
		Fields: []Field{
			{Name: "widths", Label: "children per depth", Help: "children per node at each depth, e.g. 3,2,1"},
			{Name: "parents", Label: "or parents", Help: "parent list, -1 for depth 1, e.g. -1,-1,0,0,2"},
			{Name: "sample_children", Label: "sample children", Default: "false", Help: "sampled runs: draw children from q instead of ranking them"},
		},
		NeedsSource: true,
		WhatIf:      func(numbers []int, _ int) Plan { return TreePlan(numbers) },
		Expect:      treeExpect,
		canonical:   canonicalTree,
		// a pass adds the nodes at the next depth
		PassWidths: func(p Plan, ex Expected) []int {
			out := make([]int, len(ex.PerDepth))
			for _, d := range ex.Depths() {
				if d <= len(out) {
					out[d-1]++
				}
			}
			for i := range out {
				out[i] = max(1, out[i])
			}
			return out
		},
		Candidates: func(sp Space) []Plan {
			// widths 1..3 per depth, never widening with depth
			var out []Plan
			var grow func(ws []int, nodes, level int)
			grow = func(ws []int, nodes, level int) {
				if len(ws) > 0 {
					out = append(out, Plan{Strategy: "tree", Widths: append([]int(nil), ws...)})
				}
				if len(ws) == sp.MaxDepth {
					return
				}
				maxW := 3
				if len(ws) > 0 {
					maxW = ws[len(ws)-1]
				}
				for w := 1; w <= maxW; w++ {
					if nodes+level*w > sp.MaxNodes {
						break
					}
					grow(append(ws, w), nodes+level*w, level*w)
				}
			}
			grow(nil, 0, 1)
			return out
		},
		Examples: func() []Plan {
			return []Plan{{Strategy: "tree", Widths: []int{3, 2, 1}}, {Strategy: "tree", Parents: []int{-1, -1, 0, 0, 2, 4}}}
		},
		describe: func(p Plan) string {
			if len(p.Widths) == 0 && len(p.Parents) > 0 {
				return "tree parents " + Ints(p.Parents)
			}
			return "tree " + Ints(p.Widths)
		},
		check: func(c *Config) error {
			if len(c.static.Parents) == 0 {
				return fmt.Errorf("spec: tree needs a shape (widths per depth or a parent list)")
			}
			return nil
		},
		oneChain: func(p Plan, _ int) []Unexpressed {
			if !p.SampleChildren {
				return nil
			}
			return []Unexpressed{{"children drawn from the drafter (sample_children)", "drafts the top token"}}
		},
		shrink: func(p Plan, nodes int) Plan {
			q := shrinkStatic(p, nodes)
			q.SampleChildren = p.SampleChildren
			return q
		},
		maxTree: func(c *Config) int { return len(c.static.Parents) },
		budget:  func(c *Config, check func(string, int) error) error { return check("tree size", len(c.static.Parents)) },
		draft: func(r *run, ctx context.Context, _ *Step, nodes, depth int) (*tree.Tree, error) {
			return r.static(ctx, nodes, depth)
		},
	})
}

// treeExpect prices a static tree: the r-th child at depth d is accepted
// with at(d, r) once its parent was.
func treeExpect(p Plan, at func(d, r int) float64) (Expected, error) {
	var e Expected
	if len(p.Widths) == 0 && len(p.Parents) > 0 {
		st, err := tree.FromParents(p.Parents)
		if err != nil {
			return e, err
		}
		depth := make([]int, len(st.Parents))
		kids := map[int]int{} // children seen so far, per parent: the next one's rank
		count := []int{1}     // nodes per level; level 0 is the root
		for i, par := range st.Parents {
			v := 1.0
			if par >= 0 {
				depth[i] = depth[par] + 1
				v = e.Values[par]
			}
			e.Values = append(e.Values, v*at(depth[i], kids[par]))
			e.Parents = append(e.Parents, par)
			kids[par]++
			for len(count) <= depth[i]+1 {
				count = append(count, 0)
			}
			count[depth[i]+1]++
		}
		// one drafter pass per level, over every node of the level above
		e.PerDepth = count[:len(count)-1]
		return e, nil
	}
	if len(p.Widths) == 0 {
		return e, fmt.Errorf("spec: tree needs widths per depth")
	}
	level := []int{-1}
	value := func(i int) float64 {
		if i < 0 {
			return 1
		}
		return e.Values[i]
	}
	for d, w := range p.Widths {
		if w < 1 {
			return e, fmt.Errorf("spec: tree width %d at depth %d", w, d+1)
		}
		e.PerDepth = append(e.PerDepth, len(level))
		var next []int
		for _, par := range level {
			for r := 0; r < w; r++ {
				e.Values = append(e.Values, value(par)*at(d, r))
				e.Parents = append(e.Parents, par)
				next = append(next, len(e.Values)-1)
			}
		}
		level = next
	}
	return e, nil
}

// TreePlan is the static tree of widths children per node at each depth.
func TreePlan(widths []int) Plan { return Plan{Strategy: "tree", Widths: widths} }

// StaticTreePlan is the static tree of shape, by its parent list.
func StaticTreePlan(shape tree.Static) Plan { return Plan{Strategy: "tree", Parents: shape.Parents} }

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
		return ChainPlan(len(p.Widths))
	}
	return p
}

// shrinkAt ranks a static tree's nodes when it is shrunk: acceptance
// falling with the sibling rank, so a node's value (the product along its
// path) is below its parent's and its elder siblings', and the most
// valuable nodes are closed under both, as the drafting needs (a node's
// k-th child is the drafter's k-th token).
func shrinkAt(_, r int) float64 { return 0.6 * math.Pow(0.4, float64(r)) }

// shrinkStatic is the tree of p's static shape (widths or parents) cut to
// its nodes most valuable under shrinkAt, as a parent list in the shape's
// order (ties go to the earlier node).
func shrinkStatic(p Plan, nodes int) Plan {
	var parents []int
	if len(p.Widths) > 0 {
		st, err := tree.FromWidths(p.Widths)
		if err != nil {
			return p
		}
		parents = st.Parents
	} else {
		parents = p.Parents
	}
	ex, err := treeExpect(Plan{Parents: parents}, shrinkAt)
	if err != nil || nodes >= len(parents) {
		return p
	}
	order := make([]int, len(parents))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return ex.Values[order[a]] > ex.Values[order[b]] })
	keep := make([]bool, len(parents))
	for _, i := range order[:nodes] {
		keep[i] = true
	}
	at := make([]int, len(parents)) // old index -> new
	var out []int
	for i, par := range parents {
		if !keep[i] {
			continue
		}
		at[i] = len(out)
		if par >= 0 {
			par = at[par]
		}
		out = append(out, par)
	}
	return Plan{Strategy: p.Strategy, Parents: out}
}
