package spec

import (
	"context"
	"fmt"
	"sort"

	"arborist/engine/tree"
)

// egt is Yggdrasil's Equal-Growth Tree: a fixed number of frontier nodes
// expanded per depth, chosen by path probability, pruned to W_max nodes,
// optionally padded, with a depth policy and ahead-of-time drafting; the
// drafting is run.egt in strategies.go.
func init() {
	register(&Strategy{
		Name:        "egt",
		Summary:     "Equal-Growth Tree: nodes expanded per depth by path probability, pruned to w-max",
		order:       3,
		Fields:      []string{"egt_widths", "branch", "w_max", "pad", "aot", "depth_policy", "depth_min", "predictor_id"},
		NeedsSource: true,
		Concurrent:  func(p Plan) bool { return p.AOT },
		Expect:      egtExpect,
		Candidates: func(Space) []Plan {
			var out []Plan
			for _, ws := range [][]int{{1, 1, 2, 2, 2, 2}, {1, 2, 2, 2, 2}, {1, 2, 3, 3, 2}, {1, 1, 1, 2, 2, 2, 2}, {1, 2, 4, 4, 4}} {
				for b := 1; b <= 3; b++ {
					for _, wm := range []int{4, 6, 8, 12, 16, 24} {
						out = append(out, Plan{Strategy: "egt", EGT: ws, Branch: b, WMax: wm})
					}
				}
			}
			return out
		},
		describe: func(p Plan) string {
			return fmt.Sprintf("egt widths=%s branch=%d w-max=%d", Ints(p.EGT), p.Branch, p.WMax)
		},
		check: func(c *Config) error {
			if len(c.Widths) == 0 || c.Branch < 1 || c.WMax < 1 {
				return fmt.Errorf("spec: egt needs widths per depth, branch >= 1 and w-max >= 1")
			}
			for _, w := range c.Widths {
				if w < 1 {
					return fmt.Errorf("spec: egt width %d must be >= 1", w)
				}
			}
			return nil
		},
		maxTree: func(c *Config) int { return c.WMax },
		ahead: func(r *run) int {
			if r.cfg.AOT {
				return 1 // the next step's first level
			}
			return 0
		},
		draft: func(r *run, ctx context.Context, _ *Step, nodes, depth int) (*tree.Tree, error) {
			return r.egt(ctx, nodes, depth)
		},
	})
}

// egtExpect grows the tree as the engine does, ranking frontier nodes by
// their chance of acceptance, and keeps the w-max most valuable nodes
// (values shrink along paths, so they are closed under parents).
func egtExpect(p Plan, at func(d, r int) float64) (Expected, error) {
	var e Expected
	if p.Branch < 1 || p.WMax < 1 || len(p.EGT) == 0 {
		return e, fmt.Errorf("spec: egt needs widths, branch and w-max")
	}
	type node struct {
		parent int
		v      float64
	}
	var nodes []node
	value := func(i int) float64 {
		if i < 0 {
			return 1
		}
		return nodes[i].v
	}
	frontier := []int{-1}
	for d, w := range p.EGT {
		if w < 1 {
			return e, fmt.Errorf("spec: egt width %d must be >= 1", w)
		}
		sort.SliceStable(frontier, func(a, b int) bool { return value(frontier[a]) > value(frontier[b]) })
		chosen := frontier[:min(w, len(frontier))]
		e.PerDepth = append(e.PerDepth, len(chosen))
		var next []int
		for _, par := range chosen {
			for r := 0; r < p.Branch; r++ {
				nodes = append(nodes, node{par, value(par) * at(d, r)})
				next = append(next, len(nodes)-1)
			}
		}
		frontier = next
	}
	order := make([]int, len(nodes))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return nodes[order[a]].v > nodes[order[b]].v })
	keep := map[int]bool{}
	for _, i := range order[:min(len(order), p.WMax)] {
		keep[i] = true
	}
	idx := map[int]int{-1: -1}
	for i, n := range nodes {
		if keep[i] && (n.parent < 0 || keep[n.parent]) {
			idx[i] = len(e.Parents)
			e.Parents = append(e.Parents, idx[n.parent])
			e.Values = append(e.Values, n.v)
		}
	}
	return e, nil
}
