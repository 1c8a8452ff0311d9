package spec

import (
	"context"
	"fmt"

	"arborist/engine/tree"
)

// chain drafts gamma tokens one after another (classic speculative
// sampling); the drafting itself is run.chain in strategies.go.
func init() {
	register(&Strategy{
		Name:        "chain",
		Summary:     "gamma tokens drawn one after another from the drafter",
		order:       1,
		Fields:      []Field{{Name: "gamma", Label: "gamma", Default: "4", Help: "draft length"}},
		NeedsSource: true,
		Expect: func(p Plan, at func(d, r int) float64) (Expected, error) {
			if p.Gamma < 1 {
				return Expected{}, fmt.Errorf("spec: chain needs gamma >= 1")
			}
			return chainExpect(p.Gamma, at), nil
		},
		Candidates: func(sp Space) []Plan {
			var out []Plan
			for g := 1; g <= sp.MaxGamma; g++ {
				out = append(out, Plan{Strategy: "chain", Gamma: g})
			}
			return out
		},
		describe: func(p Plan) string { return fmt.Sprintf("chain gamma=%d", p.Gamma) },
		check: func(c *Config) error {
			if c.Gamma < 1 {
				return fmt.Errorf("spec: chain needs gamma >= 1, got %d", c.Gamma)
			}
			return nil
		},
		maxTree: func(c *Config) int { return c.Gamma },
		draft: func(r *run, ctx context.Context, _ *Step, nodes, depth int) (*tree.Tree, error) {
			tr := &tree.Tree{RootMode: tree.Sampled}
			return tr, r.chain(ctx, tr, tree.Root, nil, min(r.cfg.Gamma, nodes, depth))
		},
	})
}
