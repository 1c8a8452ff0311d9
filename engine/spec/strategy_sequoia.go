package spec

import (
	"context"
	"fmt"
	"math"

	"arborist/engine/tree"
)

// sequoia verifies the static tree Sequoia's dynamic programme builds from
// the calibrated acceptance by depth and sibling rank (tree.Optimal): for
// each size n the tree with the largest expected accepted length, so the
// latency model only has to pick n. The plan stores the tree as a parent
// list (what ran is what was stored, whatever later calibrations say); it
// drafts and verifies exactly like a static tree (run.static).
func init() {
	register(&Strategy{
		Name:        "sequoia",
		Summary:     "Sequoia: the tree of each size with the largest expected accepted length under the calibrated acceptance",
		order:       5,
		Fields:      []Field{{Name: "parents", Label: "or parents"}}, // the tree tune built, as a parent list
		NeedsSource: true,
		Expect: func(p Plan, at func(d, r int) float64) (Expected, error) {
			if len(p.Parents) == 0 {
				return Expected{}, fmt.Errorf("spec: sequoia needs its tree as a parent list")
			}
			return treeExpect(Plan{Parents: p.Parents}, at)
		},
		Candidates: sequoiaCandidates,
		// the DP's tree of 10 nodes under an acceptance decaying with
		// depth and rank
		Examples: func() []Plan {
			at := func(d, r int) float64 { return 0.8 * math.Pow(0.4, float64(r)) / float64(d+1) }
			shapes, _, err := tree.Optimal(at, 10, 6, 4)
			if err != nil {
				panic(err)
			}
			return []Plan{{Strategy: "sequoia", Parents: shapes[len(shapes)-1].Parents}}
		},
		// a Sequoia tree that is a tree of widths (or a chain) is that
		// plan (whose own canonical form Canonical then takes)
		canonical: func(p Plan) Plan {
			if ws, ok := widthsOf(p.Parents); ok {
				return TreePlan(ws)
			}
			return p
		},
		describe: func(p Plan) string {
			depth, d := 0, make([]int, len(p.Parents))
			for i, par := range p.Parents {
				if par >= 0 && par < i {
					d[i] = d[par] + 1
				}
				depth = max(depth, d[i]+1)
			}
			return fmt.Sprintf("sequoia n=%d depth=%d", len(p.Parents), depth)
		},
		check: func(c *Config) error {
			if len(c.static.Parents) == 0 {
				return fmt.Errorf("spec: sequoia needs its tree as a parent list")
			}
			return nil
		},
		shrink: func(p Plan, nodes int) Plan {
			q := shrinkStatic(p, nodes)
			q.Strategy = p.Strategy
			return q
		},
		maxTree: func(c *Config) int { return len(c.static.Parents) },
		budget:  func(c *Config, check func(string, int) error) error { return check("tree size", len(c.static.Parents)) },
		draft: func(r *run, ctx context.Context, _ *Step, nodes, depth int) (*tree.Tree, error) {
			return r.static(ctx, nodes, depth)
		},
	})
}

// sequoiaRanks bounds the children of a node in the DP's trees: acceptance
// beyond the fourth candidate is rarely measured and never worth a node.
const sequoiaRanks = 8

// sequoiaCandidates lists the DP's tree of every size up to
// sp.OptimalNodes; without an acceptance model (sp.Accept) there is none.
func sequoiaCandidates(sp Space) []Plan {
	if sp.Accept == nil {
		return nil
	}
	n := min(sp.OptimalNodes, MaxTreeNodes)
	if n < 1 {
		return nil
	}
	shapes, _, err := tree.Optimal(sp.Accept, n, max(sp.MaxDepth, sp.MaxGamma), sequoiaRanks)
	if err != nil {
		return nil
	}
	out := make([]Plan, len(shapes))
	for i, s := range shapes {
		out[i] = Plan{Strategy: "sequoia", Parents: s.Parents}
	}
	return out
}
