package spec

import (
	"context"
	"fmt"
	"math"

	"arborist/engine/tree"
)

// duo is DuoDecoding: the drafter runs concurrently on its own threads,
// gamma follows T_target / T_draft, several sequences when the drafter is
// unsure; the drafting is run.duoDraft in strategies.go.
// DuoExpect is duo's tree when a step drafts seqs sequences with budget
// gamma: one chain (seqs 1), or the seqs best first-position candidates
// each followed by a chain, gamma/seqs tokens a sequence, as duoDraft
// builds it. probe says the plan may draft several (MaxSeqs > 1): the
// rule's second-position probe then costs a pass of its own whenever
// gamma > 1. tail is the plan's tail budget: the next draft is then
// prepared at that many end positions instead of after the most likely
// path alone. Which count a step uses depends on the drafter's confidence
// there, so the speedup model mixes these trees over calibrated steps;
// Expect alone prices one sequence.
func DuoExpect(gamma, seqs int, probe bool, tail int, at func(d, r int) float64) Expected {
	var e Expected
	if seqs <= 1 {
		e = chainExpect(gamma, at)
	} else {
		per := max(1, gamma/seqs)
		e.PerDepth = []int{1} // the root's pass proposes every first token
		for j := 0; j < seqs; j++ {
			v := at(0, j)
			e.Values = append(e.Values, v)
			e.Parents = append(e.Parents, -1)
			parent := len(e.Values) - 1
			for d := 1; d < per; d++ {
				v *= at(d, 0)
				e.Values = append(e.Values, v)
				e.Parents = append(e.Parents, parent)
				parent = len(e.Values) - 1
				e.PerDepth = append(e.PerDepth, 1) // sequence after sequence
			}
		}
	}
	if probe && gamma > 1 {
		e.PerDepth = append(e.PerDepth, 1)
	}
	e.Overlap = true
	e.Ahead, e.AheadHit = len(e.PerDepth), e.aheadHit(at)
	if tail > 0 {
		e.tailAhead(tail, gamma, at) // the whole next draft at each prepared end
	}
	return e
}

// DuoName is DuoDecoding's name, under which the speedup model files its
// pricing of the strategy (profiles/costmodel/price_duo.go).
const DuoName = "duo"

func init() {
	register(&Strategy{
		Name:    DuoName,
		Summary: "DuoDecoding: concurrent drafter, adaptive gamma, several sequences when unsure",
		order:   4,
		Fields: []Field{
			{Name: "gamma", Label: "gamma", Default: "4", Help: "largest draft budget"},
			{Name: "max_seqs", Label: "sequences", Default: "4", Help: "most draft sequences (1, 2, 3, 4, 6, 8)"},
			tailField("end positions whose next draft is drafted while the target verifies, most likely first (up to gamma + 1; 0: after the most likely path alone)"),
		},
		NeedsSource: true,
		Concurrent:  func(Plan) bool { return true },
		Expect: func(p Plan, at func(d, r int) float64) (Expected, error) {
			if p.Gamma < 1 {
				return Expected{}, fmt.Errorf("spec: duo needs gamma >= 1")
			}
			return DuoExpect(p.Gamma, 1, p.MaxSeqs > 1, p.Tail, at), nil
		},
		canonical: func(p Plan) Plan {
			if p.Gamma >= 1 {
				p.Tail = min(p.Tail, p.Gamma+1) // its sequences share gamma nodes: gamma + 1 ends at most
			}
			return p
		},
		Candidates: func(sp Space) []Plan {
			var out []Plan
			for g := 1; g <= sp.MaxGamma; g++ {
				seqs := []int{0}
				for _, k := range sp.Sequences {
					if k > 1 && k <= g {
						seqs = append(seqs, k)
					}
				}
				for _, k := range seqs {
					out = append(out, Plan{Strategy: "duo", Gamma: g, MaxSeqs: k})
					for _, t := range sp.Tails {
						out = append(out, Plan{Strategy: "duo", Gamma: g, MaxSeqs: k, Tail: t})
					}
				}
			}
			return out
		},
		Examples: func() []Plan {
			return []Plan{{Strategy: "duo", Gamma: 4, MaxSeqs: 3}, {Strategy: "duo", Gamma: 4, MaxSeqs: 3, Tail: 3}}
		},
		// the engine's rule (run.gamma): gamma = round(T_target / T_draft),
		// capped by the plan; T_target is the last verification, of gamma+1
		// tokens, so the rule is iterated to its fixed point
		Sequences: func(p Plan) int { return p.MaxSeqs },
		Adapt: func(p Plan, verify, draft func(w int) float64) Plan {
			d := draft(1)
			if d <= 0 || p.Gamma < 1 {
				return p
			}
			g := 1
			for i := 0; i < 8; i++ {
				next := max(1, min(p.Gamma, int(math.Round(verify(1+g)/d))))
				if next == g {
					break
				}
				g = next
			}
			p.Gamma = g
			return p
		},
		describe: func(p Plan) string {
			return fmt.Sprintf("duo gamma=%d sequences=%d", p.Gamma, max(1, p.MaxSeqs)) + describeTail(p)
		},
		check: func(c *Config) error {
			if c.Gamma < 1 {
				return fmt.Errorf("spec: duo needs a largest draft budget gamma >= 1, got %d", c.Gamma)
			}
			switch c.MaxSeqs {
			case 0:
				c.MaxSeqs = 1
			case 1, 2, 3, 4, 6, 8:
			default:
				return fmt.Errorf("spec: duo max sequences %d must be one of 1, 2, 3, 4, 6, 8", c.MaxSeqs)
			}
			return checkTail(c)
		},
		oneChain: func(p Plan, depth int) []Unexpressed {
			out := tailUnexpressed(p)
			if p.Tail <= 0 {
				out = append(out, Unexpressed{"concurrent drafting (the drafter on its own threads while the target verifies)",
					"drafts and verifies in turn, so each step pays its drafting on the critical path"})
			}
			out = append(out, Unexpressed{p.Strategy + "'s adaptive draft budget (gamma following T_target / T_draft)",
				fmt.Sprintf("drafts the largest budget (%d) every step", depth)})
			if p.MaxSeqs > 1 {
				out = append(out, Unexpressed{fmt.Sprintf("several draft sequences when the drafter is unsure (max_seqs %d)", p.MaxSeqs), "drafts one"})
			}
			return out
		},
		// config.yaml's optimization block may state the sequences
		withSequences: func(p Plan, n int) Plan {
			if p.MaxSeqs == 0 {
				p.MaxSeqs = n
			}
			return p
		},
		// a smaller largest budget (its sequences share it), the tail
		// held to the ends it has
		shrink: func(p Plan, nodes int) Plan {
			p.Gamma = min(p.Gamma, nodes)
			p.Tail = min(p.Tail, p.Gamma+1)
			return p
		},
		maxTree: func(c *Config) int { return c.Gamma * max(1, c.MaxSeqs) },
		budget: func(c *Config, check func(string, int) error) error {
			if err := check("gamma", c.Gamma); err != nil {
				return err
			}
			return check("gamma times max sequences", c.Gamma*max(1, c.MaxSeqs))
		},
		maxDraft: func(c *Config) int { return c.Gamma*max(1, c.MaxSeqs) + tailSlots(c.Tail, c.Gamma+1, c.Gamma) },
		tailWork: func(c *Config) int { return tailSlots(c.Tail, c.Gamma+1, c.Gamma) },
		ahead:    func(r *run) int { return r.gamma() }, // the whole next draft
		draft: func(r *run, ctx context.Context, st *Step, nodes, depth int) (*tree.Tree, error) {
			return r.duoDraft(ctx, st, nodes, depth)
		},
	})
}
