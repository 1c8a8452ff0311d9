package spec

import (
	"context"
	"fmt"
	"slices"

	"arborist/engine/tree"
)

// chain drafts gamma tokens one after another (classic speculative
// sampling); the drafting itself is run.chain in strategies.go. With a
// tail budget it drafts the next chain, at the most likely end positions
// of this one, while the target verifies.
func init() {
	register(&Strategy{
		Name:    ChainName,
		Summary: "gamma tokens drawn one after another from the drafter",
		order:   1,
		Fields: []Field{
			{Name: "gamma", Label: "gamma", Default: "4", Help: "draft length"},
			tailField("end positions whose next chain is drafted while the target verifies, most likely first (up to gamma + 1; 0: none)"),
		},
		NeedsSource: true,
		Default:     true,
		WhatIf:      func(numbers []int, _ int) Plan { return ChainPlan(numbers[0]) },
		// a chain is the EGT that expands one node a depth into one child
		growing: func(p Plan) Plan {
			return EGTPlan(slices.Repeat([]int{1}, p.Gamma), 1, p.Gamma)
		},
		Concurrent: func(p Plan) bool { return p.Tail > 0 },
		Expect: func(p Plan, at func(d, r int) float64) (Expected, error) {
			if p.Gamma < 1 {
				return Expected{}, fmt.Errorf("spec: chain needs gamma >= 1")
			}
			e := chainExpect(p.Gamma, at)
			if p.Tail > 0 {
				// the whole next chain is drafted at each prepared end
				e.Overlap, e.Ahead = true, p.Gamma
				e.tailAhead(p.Tail, p.Gamma, at)
			}
			return e, nil
		},
		canonical: func(p Plan) Plan {
			if p.Gamma >= 1 {
				p.Tail = min(p.Tail, p.Gamma+1) // a chain of gamma ends at gamma + 1 places
			}
			return p
		},
		Candidates: func(sp Space) []Plan {
			var out []Plan
			for g := 1; g <= sp.MaxGamma; g++ {
				out = append(out, Plan{Strategy: "chain", Gamma: g})
				if len(sp.Tails) == 0 {
					continue
				}
				tails := append([]int{1}, sp.Tails...)
				tails = append(tails, g+1) // every end position
				seen := map[int]bool{}
				for _, t := range tails {
					if t = min(t, g+1); !seen[t] {
						seen[t] = true
						out = append(out, Plan{Strategy: "chain", Gamma: g, Tail: t})
					}
				}
			}
			return out
		},
		Examples: func() []Plan {
			return []Plan{{Strategy: "chain", Gamma: 4}, {Strategy: "chain", Gamma: 4, Tail: 5}} // a tail at every end
		},
		describe: func(p Plan) string { return fmt.Sprintf("chain gamma=%d", p.Gamma) + describeTail(p) },
		check: func(c *Config) error {
			if c.Gamma < 1 {
				return fmt.Errorf("spec: chain needs gamma >= 1, got %d", c.Gamma)
			}
			return checkTail(c)
		},
		oneChain: func(p Plan, _ int) []Unexpressed { return tailUnexpressed(p) },
		// a shorter chain, its tail held to the ends it has
		shrink: func(p Plan, nodes int) Plan {
			p.Gamma = min(p.Gamma, nodes)
			p.Tail = min(p.Tail, p.Gamma+1)
			return p
		},
		maxTree: func(c *Config) int { return c.Gamma },
		budget: func(c *Config, check func(string, int) error) error {
			return check("gamma", c.Gamma)
		},
		maxDraft: func(c *Config) int { return c.Gamma + tailSlots(c.Tail, c.Gamma+1, c.Gamma) },
		tailWork: func(c *Config) int { return tailSlots(c.Tail, c.Gamma+1, c.Gamma) },
		ahead: func(r *run) int {
			if r.cfg.Tail > 0 {
				return r.cfg.Gamma // the whole next chain
			}
			return 0
		},
		draft: func(r *run, ctx context.Context, _ *Step, nodes, depth int) (*tree.Tree, error) {
			tr := &tree.Tree{RootMode: tree.Sampled}
			return tr, r.chain(ctx, tr, tree.Root, nil, min(r.cfg.Gamma, nodes, depth))
		},
	})
}

// ChainName is the chain's name, under which the speedup model files its
// pricing of the strategy (profiles/costmodel/price_chain.go).
const ChainName = "chain"

// ChainPlan is the chain of gamma tokens.
func ChainPlan(gamma int) Plan { return Plan{Strategy: "chain", Gamma: gamma} }

// tailField is the tail budget's field, as every strategy that drafts a
// tail offers it (help says what a continuation is there).
func tailField(help string) Field {
	return Field{Name: "tail", Label: "tail ends", Default: "0", Help: help}
}

// describeTail is the tail budget in a plan's description ("" for none).
func describeTail(p Plan) string {
	if p.Tail > 0 {
		return fmt.Sprintf(" tail=%d", p.Tail)
	}
	return ""
}

// tailUnexpressed is tail drafting as a runtime that drafts one chain
// after each verification cannot express it (none without a tail).
func tailUnexpressed(p Plan) []Unexpressed {
	if p.Tail <= 0 {
		return nil
	}
	return []Unexpressed{{
		What:    fmt.Sprintf("tail drafting (the next draft prepared at the %d most likely end positions while the target verifies)", p.Tail),
		Instead: "drafts only after a verification, from the end it reached",
	}}
}

// checkTail refuses a negative tail budget, and one that would draft
// more ahead a step than an Equal-Growth Tree may grow before pruning
// (every prepared end drafts its own continuation, and the drafter's
// cache is reserved for them before the run).
func checkTail(c *Config) error {
	switch {
	case c.Tail < 0:
		return fmt.Errorf("spec: tail %d must be >= 0", c.Tail)
	case c.Tail > MaxTreeNodes:
		return fmt.Errorf("spec: tail %d is above the limit of %d end positions", c.Tail, MaxTreeNodes)
	}
	if s := registry[c.Strategy]; s != nil && s.tailWork != nil {
		if n := s.tailWork(c); n > 16*MaxTreeNodes {
			return fmt.Errorf("spec: tail %d drafts %d tokens ahead a step, more than %d", c.Tail, n, 16*MaxTreeNodes)
		}
	}
	return nil
}

// tailSlots bounds the drafter-cache slots tail drafting of budget tail
// adds to a step whose draft ends at most at ends places, continuations
// depth levels deep: at each prepared end its leaf token, the guessed
// bonus and the levels after it, and the continuation a hit carries into
// the next step (0 without a tail).
func tailSlots(tail, ends, depth int) int {
	if tail <= 0 {
		return 0
	}
	return min(tail, ends)*(1+depth) + depth
}
