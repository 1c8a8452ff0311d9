package spec

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"arborist/engine/tree"
)

// egt is Yggdrasil's Equal-Growth Tree: a fixed number of frontier nodes
// expanded per depth, chosen by path probability, pruned to W_max nodes,
// optionally padded, with a depth policy and ahead-of-time drafting; the
// drafting is run.egt in strategies.go.
func init() {
	register(&Strategy{
		Name:    EGTName,
		Summary: "Equal-Growth Tree: nodes expanded per depth by path probability, pruned to w-max",
		order:   3,
		Fields: []Field{
			{Name: "egt_widths", Label: "expanded per depth", Default: "1,2,3,3,2", Help: "frontier nodes expanded at each depth"},
			{Name: "branch", Label: "branch", Default: "2", Help: "children per expanded node"},
			{Name: "w_max", Label: "w-max", Default: "12", Help: "most draft nodes verified after pruning"},
			{Name: "pad", Label: "pad", Default: "false", Help: "pad every tree to w-max nodes (static shapes)"},
			{Name: "aot", Label: "ahead-of-time head", Default: "false", Help: "draft the next step's head while the target verifies"},
			tailField("end positions whose next first level is drafted while the target verifies, most likely first (up to w-max + 1; 0: the head alone, with aot)"),
			{Name: "depth_policy", Label: "depth", Default: "fixed", Choices: []string{"fixed", "threshold", "predictor"},
				Help: "fixed, threshold, or predictor (the stored depth predictor of this pair)"},
			{Name: "depth_min", Label: "minimum", Default: "0.2", Help: "threshold policy: stop when the best path probability falls below this"},
			{Name: "predictor_id", Label: "predictor id", Default: "0", Help: "predictor policy: the stored depth predictor to run, as 'arborist train predictor' printed it (0: the pair's newest)"},
		},
		NeedsSource: true,
		// the speedup model screen's "your plan": widths per depth, two
		// children each, pruned to the node budget
		WhatIf:        func(numbers []int, nodes int) Plan { return EGTPlan(numbers, 2, nodes) },
		WhatIfDefault: true,
		Concurrent:    func(p Plan) bool { return p.AOT || p.Tail > 0 },
		Expect:        egtExpect,
		canonical:     canonicalEGT,
		Grows:         true,
		// a pass adds its expanded nodes times the branch (pruning comes
		// after drafting)
		PassWidths: func(p Plan, ex Expected) []int {
			out := make([]int, len(ex.PerDepth))
			for i, w := range ex.PerDepth {
				out[i] = w * max(1, p.Branch)
			}
			return out
		},
		Candidates: egtCandidates,
		// padded; drafting the head ahead; a tail of four ends
		Examples: func() []Plan {
			return []Plan{
				{Strategy: "egt", EGT: []int{1, 2, 3, 3, 2}, Branch: 2, WMax: 12, Pad: true},
				{Strategy: "egt", EGT: []int{1, 2, 2, 2}, Branch: 2, WMax: 8, AOT: true},
				{Strategy: "egt", EGT: []int{1, 2, 2, 2}, Branch: 2, WMax: 8, Tail: 4},
			}
		},
		describe: func(p Plan) string {
			d := fmt.Sprintf("egt widths=%s branch=%d w-max=%d", Ints(p.EGT), p.Branch, p.WMax)
			if p.Pad {
				d += " pad"
			}
			if p.AOT {
				d += " aot"
			}
			d += describeTail(p)
			switch p.DepthPolicy {
			case "threshold":
				d += fmt.Sprintf(" threshold=%g", p.DepthMin)
			case "predictor":
				d += " depth-predictor"
			}
			return d
		},
		check: func(c *Config) error {
			if len(c.EGT) == 0 || c.Branch < 1 || c.WMax < 1 {
				return fmt.Errorf("spec: egt needs widths per depth, branch >= 1 and w-max >= 1")
			}
			for _, w := range c.EGT {
				if w < 1 {
					return fmt.Errorf("spec: egt width %d must be >= 1", w)
				}
			}
			return checkTail(c)
		},
		oneChain: func(p Plan, depth int) []Unexpressed {
			var out []Unexpressed
			if p.AOT {
				out = append(out, Unexpressed{"ahead-of-time drafting (the next step's head drafted while the target verifies)",
					"drafts only after a verification, so each step pays that drafter pass on its critical path"})
			}
			out = append(out, tailUnexpressed(p)...)
			if p.DepthPolicy == "predictor" {
				out = append(out, Unexpressed{"the trained depth predictor",
					fmt.Sprintf("has no per-step depth model and drafts to the full depth (%d)", depth)})
			}
			return out
		},
		// pruned to fewer nodes (padded to them, if padded), no deeper
		// than that many levels, its tail held to the ends it has
		shrink: func(p Plan, nodes int) Plan {
			p.WMax = min(p.WMax, nodes)
			p.EGT = p.EGT[:min(len(p.EGT), nodes)]
			if p.Tail > 0 {
				p.Tail = min(p.Tail, p.WMax+1)
			}
			return p
		},
		maxTree: func(c *Config) int { return c.WMax },
		budget: func(c *Config, check func(string, int) error) error {
			if err := check("w-max", c.WMax); err != nil {
				return err
			}
			if err := check("branch", c.Branch); err != nil {
				return err
			}
			if err := check("egt depth", len(c.EGT)); err != nil {
				return err
			}
			for _, w := range c.EGT {
				if err := check("egt width", w); err != nil {
					return err
				}
			}
			return nil
		},
		maxDraft: func(c *Config) int {
			n := 0
			for _, w := range c.EGT {
				n += min(w, MaxTreeNodes)
			}
			if c.AOT && len(c.EGT) > 0 {
				n += min(c.EGT[0], MaxTreeNodes) * min(c.Branch, MaxTreeNodes) // the next step's head
			}
			return n + tailSlots(c.Tail, c.WMax+1, 1)
		},
		tailWork: func(c *Config) int { return tailSlots(c.Tail, c.WMax+1, 1) },
		ahead: func(r *run) int {
			if r.cfg.AOT || r.cfg.Tail > 0 {
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
	if p.Pad && p.WMax > len(e.Values) {
		e.Verified = p.WMax
	}
	switch {
	case p.Tail > 0:
		e.Overlap, e.Ahead = true, 1
		e.tailAhead(p.Tail, 1, at)
	case p.AOT:
		e.Overlap = true
		e.Ahead, e.AheadHit = 1, e.aheadHit(at)
	}
	return e, nil
}

// egtCandidates searches EGT shapes rather than listing a few: every
// sequence of per-depth expansion widths that starts at 1 or 2 and never
// narrows, up to width 4 and sp.MaxDepth depths, with 1..3 children per
// expanded node, and the w-max values below the nodes those widths grow
// plus the first at or above it (larger ones are the same plan), each with
// and without ahead-of-time drafting and with the largest of sp.Tails, and (for three levels or more) with
// each of sp.Thresholds as a threshold depth policy; the unpruned tree is also offered
// padded to that w-max (a static width costs more here, but it is what a
// GPU's graph replay needs, so the model prices it).
func egtCandidates(sp Space) []Plan {
	var out []Plan
	var grow func(ws []int)
	grow = func(ws []int) {
		if len(ws) >= 2 {
			for b := 1; b <= 3; b++ {
				grown, frontier := 0, 1
				for _, w := range ws {
					frontier = min(w, frontier) * b
					grown += frontier
				}
				for _, wm := range []int{4, 6, 8, 12, 16, 24, 32} {
					if wm > sp.MaxNodes {
						break
					}
					for _, aot := range []bool{false, true} {
						out = append(out, Plan{Strategy: "egt", EGT: append([]int(nil), ws...), Branch: b, WMax: wm, AOT: aot})
					}
					if len(sp.Tails) > 0 { // the largest: a level ahead at each end costs little
						out = append(out, Plan{Strategy: "egt", EGT: append([]int(nil), ws...), Branch: b, WMax: wm, AOT: true, Tail: slices.Max(sp.Tails)})
					}
					if len(ws) >= 3 { // deep enough for stopping early to matter
						for _, th := range sp.Thresholds {
							out = append(out, Plan{Strategy: "egt", EGT: append([]int(nil), ws...), Branch: b, WMax: wm, DepthPolicy: "threshold", DepthMin: th})
						}
					}
					if wm >= grown {
						if wm > grown {
							out = append(out, Plan{Strategy: "egt", EGT: append([]int(nil), ws...), Branch: b, WMax: wm, Pad: true})
						}
						break
					}
				}
			}
		}
		if len(ws) == sp.MaxDepth {
			return
		}
		lo, hi := 1, 2
		if len(ws) > 0 {
			lo, hi = ws[len(ws)-1], 4
		}
		for w := lo; w <= hi; w++ {
			grow(append(ws, w))
		}
	}
	grow(nil)
	return out
}

// EGTName is the Equal-Growth Tree's name, under which the speedup model
// files its pricing of the strategy (profiles/costmodel/price_egt.go).
const EGTName = "egt"

// EGTPlan is the Equal-Growth Tree expanding widths[d] frontier nodes at
// depth d+1, each into branch children, pruned to wMax nodes, at a fixed
// depth.
func EGTPlan(widths []int, branch, wMax int) Plan {
	return Plan{Strategy: "egt", EGT: widths, Branch: branch, WMax: wMax}
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
		return TreePlan(slices.Repeat([]int{p.Branch}, len(ws)))
	}
	return p
}
