package spec

import (
	"context"

	"arborist/engine/tree"
)

// ar is plain autoregressive decoding: no draft, one token per pass (the
// 1.00x baseline every speedup is measured against).
func init() {
	register(&Strategy{
		Name:    "ar",
		Summary: "plain decoding: one token per target pass",
		order:   0,
		Expect: func(Plan, func(d, r int) float64) (Expected, error) {
			return Expected{}, nil
		},
		Candidates: func(Space) []Plan { return []Plan{{Strategy: "ar"}} }, // when nothing pays, plain decoding wins
		Examples:   func() []Plan { return []Plan{{Strategy: "ar"}} },
		describe:   func(Plan) string { return "ar" },
		maxTree:    func(*Config) int { return 0 },
		budget:     func(*Config, func(string, int) error) error { return nil }, // drafts nothing
		shrink:     func(p Plan, _ int) Plan { return p },                       // drafts nothing to shrink
		draft: func(*run, context.Context, *Step, int, int) (*tree.Tree, error) {
			return &tree.Tree{RootMode: tree.Sampled}, nil
		},
	})
}
