package profiles

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"arborist/profiles/store"
)

// Acceptance is what calibration learns about a target/drafter pair:
// Rank[d][r] is the probability that, once verification has reached depth d
// (0 = the root's children), the target's token is the drafter's rank-r
// candidate there. Greedy verification accepts at most one child per node,
// so a path's chance of acceptance is the product of its ranks' entries.
type Acceptance struct {
	Rank   [][]float64 `json:"rank"`
	Counts [][]int     `json:"counts"` // observations behind each entry
	// QBins[b] is the acceptance rate of draft tokens whose drafter
	// probability fell in [b/10, (b+1)/10).
	QBins   []float64 `json:"q_bins"`
	QCounts []int     `json:"q_counts"`
	Steps   int       `json:"steps"`
	Tokens  int       `json:"tokens"`
}

// At returns Rank[d][r], extending the table with its last depth (deeper
// levels behave like the deepest measured one) and 0 for unmeasured ranks.
func (a *Acceptance) At(d, r int) float64 {
	if a == nil || len(a.Rank) == 0 {
		return 0
	}
	row := a.Rank[min(d, len(a.Rank)-1)]
	if r >= len(row) {
		return 0
	}
	return row[r]
}

// Uniform is an assumed acceptance: alpha for the top candidate at every
// depth, and decay times the previous rank's chance for each further rank.
func Uniform(alpha, decay float64, depth, ranks int) *Acceptance {
	a := &Acceptance{}
	for d := 0; d < depth; d++ {
		row := make([]float64, ranks)
		p, left := alpha, 1.0
		for r := range row {
			row[r] = math.Min(p, left)
			left -= row[r]
			p *= decay
		}
		a.Rank = append(a.Rank, row)
	}
	return a
}

// Costs are the measured latencies the speedup model reasons with.
type Costs struct {
	Verify   []store.Point // target T_verify(W)
	Draft    []store.Point // drafter forward over W tokens (nil: drafting is free, e.g. n-gram)
	Overhead time.Duration // per-step bookkeeping (sampling, masks, compaction)
}

// Interp returns the latency at W, interpolating linearly between measured
// widths and extrapolating from the last two beyond the curve.
func Interp(pts []store.Point, w int) time.Duration {
	if len(pts) == 0 {
		return 0
	}
	if w <= pts[0].W {
		return pts[0].Median
	}
	for i := 1; i < len(pts); i++ {
		if w <= pts[i].W {
			a, b := pts[i-1], pts[i]
			f := float64(w-a.W) / float64(b.W-a.W)
			return a.Median + time.Duration(f*float64(b.Median-a.Median))
		}
	}
	if len(pts) == 1 {
		return time.Duration(float64(pts[0].Median) * float64(w) / float64(pts[0].W))
	}
	a, b := pts[len(pts)-2], pts[len(pts)-1]
	slope := float64(b.Median-a.Median) / float64(b.W-a.W)
	return b.Median + time.Duration(slope*float64(w-b.W))
}

// Plan is a speculation plan the model can score and the engine can run.
type Plan struct {
	Strategy string `json:"strategy" yaml:"strategy"`
	Gamma    int    `json:"gamma,omitempty" yaml:"gamma,omitempty"`
	Widths   []int  `json:"widths,omitempty" yaml:"widths,omitempty"`         // tree: children per node at each depth
	EGT      []int  `json:"egt_widths,omitempty" yaml:"egt_widths,omitempty"` // egt: nodes expanded per depth
	Branch   int    `json:"branch,omitempty" yaml:"branch,omitempty"`
	WMax     int    `json:"w_max,omitempty" yaml:"w_max,omitempty"`
}

// String is a compact description, e.g. "chain gamma=4" or "tree 3,2,1".
func (p Plan) String() string {
	switch p.Strategy {
	case "chain", "duo":
		return fmt.Sprintf("%s gamma=%d", p.Strategy, p.Gamma)
	case "tree":
		return "tree " + ints(p.Widths)
	case "egt":
		return fmt.Sprintf("egt widths=%s branch=%d w-max=%d", ints(p.EGT), p.Branch, p.WMax)
	}
	return p.Strategy
}

func ints(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

// Prediction is the latency-aware model's verdict on a plan.
type Prediction struct {
	Plan     Plan
	AAL      float64       // expected tokens per step, bonus included
	Nodes    int           // draft tokens verified per step
	Draft    time.Duration // sum of drafter passes
	Verify   time.Duration // T_verify(1 + Nodes)
	Step     time.Duration // Draft + Verify + Overhead
	Speedup  float64       // AAL * T_verify(1) / Step
	PerDepth []int         // drafter pass widths
}

// Predict scores a plan:
// speedup = AAL * T_verify(1) / (sum T_draft + T_verify(W) + T_overhead).
func Predict(p Plan, acc *Acceptance, c Costs) (Prediction, error) {
	pr := Prediction{Plan: p}
	var values []float64 // acceptance chance of each verified node
	switch p.Strategy {
	case "ar":
	case "chain", "duo":
		if p.Gamma < 1 {
			return pr, fmt.Errorf("profiles: %s needs gamma >= 1", p.Strategy)
		}
		v := 1.0
		for d := 0; d < p.Gamma; d++ {
			v *= acc.At(d, 0)
			values = append(values, v)
			pr.PerDepth = append(pr.PerDepth, 1)
		}
	case "tree":
		level := []float64{1}
		for d, w := range p.Widths {
			if w < 1 {
				return pr, fmt.Errorf("profiles: tree width %d at depth %d", w, d+1)
			}
			pr.PerDepth = append(pr.PerDepth, len(level))
			var next []float64
			for _, pv := range level {
				for r := 0; r < w; r++ {
					next = append(next, pv*acc.At(d, r))
				}
			}
			values = append(values, next...)
			level = next
		}
	case "egt":
		if p.Branch < 1 || p.WMax < 1 || len(p.EGT) == 0 {
			return pr, fmt.Errorf("profiles: egt needs widths, branch and w-max")
		}
		frontier := []float64{1}
		for d, w := range p.EGT {
			sort.Sort(sort.Reverse(sort.Float64Slice(frontier)))
			chosen := frontier[:min(w, len(frontier))]
			pr.PerDepth = append(pr.PerDepth, len(chosen))
			var next []float64
			for _, pv := range chosen {
				for r := 0; r < p.Branch; r++ {
					next = append(next, pv*acc.At(d, r))
				}
			}
			values = append(values, next...)
			frontier = next
		}
		// pruning keeps the w-max most valuable nodes (values shrink along
		// paths, so the top set is closed under parents)
		sort.Sort(sort.Reverse(sort.Float64Slice(values)))
		values = values[:min(len(values), p.WMax)]
	default:
		return pr, fmt.Errorf("profiles: cannot model strategy %q", p.Strategy)
	}
	pr.AAL = 1
	for _, v := range values {
		pr.AAL += v
	}
	pr.Nodes = len(values)
	for _, w := range pr.PerDepth {
		pr.Draft += Interp(c.Draft, w)
	}
	pr.Verify = Interp(c.Verify, 1+pr.Nodes)
	pr.Step = pr.Draft + pr.Verify + c.Overhead
	if p.Strategy == "duo" && pr.Draft < pr.Verify {
		// the drafter works while the target verifies: only the longer side counts
		pr.Step = pr.Verify + c.Overhead
	}
	if pr.Step > 0 {
		pr.Speedup = pr.AAL * float64(Interp(c.Verify, 1)) / float64(pr.Step)
	}
	return pr, nil
}

// SearchSpace bounds the plans Search enumerates.
type SearchSpace struct {
	MaxGamma int // chains up to this length (default 12)
	MaxDepth int // trees up to this depth (default 6)
	MaxNodes int // trees up to this many nodes (default 48)
}

// Search enumerates plain decoding, chains, static trees (widths 1..3 per depth, never
// widening with depth) and Equal-Growth Trees, scores each with Predict, and
// returns them best first. It covers a few hundred plans.
func Search(acc *Acceptance, c Costs, sp SearchSpace) []Prediction {
	if sp.MaxGamma <= 0 {
		sp.MaxGamma = 12
	}
	if sp.MaxDepth <= 0 {
		sp.MaxDepth = 6
	}
	if sp.MaxNodes <= 0 {
		sp.MaxNodes = 48
	}
	plans := []Plan{{Strategy: "ar"}} // when nothing pays, plain decoding wins
	for g := 1; g <= sp.MaxGamma; g++ {
		plans = append(plans, Plan{Strategy: "chain", Gamma: g})
	}
	var grow func(ws []int, nodes, level int)
	grow = func(ws []int, nodes, level int) {
		if len(ws) > 0 {
			plans = append(plans, Plan{Strategy: "tree", Widths: append([]int(nil), ws...)})
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
	for _, ws := range [][]int{{1, 1, 2, 2, 2, 2}, {1, 2, 2, 2, 2}, {1, 2, 3, 3, 2}, {1, 1, 1, 2, 2, 2, 2}, {1, 2, 4, 4, 4}} {
		for b := 1; b <= 3; b++ {
			for _, wm := range []int{4, 6, 8, 12, 16, 24} {
				plans = append(plans, Plan{Strategy: "egt", EGT: ws, Branch: b, WMax: wm})
			}
		}
	}
	var out []Prediction
	for _, p := range plans {
		if pr, err := Predict(p, acc, c); err == nil {
			out = append(out, pr)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Speedup > out[j].Speedup })
	return out
}

// Shape returns the tree a plan verifies, as a parent list (-1 for depth 1),
// for drawing: chains are paths, trees follow their widths, and EGT keeps
// the nodes its pruning would keep under the acceptance model.
func Shape(p Plan, acc *Acceptance) []int {
	var parents []int
	switch p.Strategy {
	case "chain", "duo":
		for d := 0; d < p.Gamma; d++ {
			parents = append(parents, d-1)
		}
	case "tree":
		level := []int{-1}
		for _, w := range p.Widths {
			var next []int
			for _, par := range level {
				for r := 0; r < w; r++ {
					parents = append(parents, par)
					next = append(next, len(parents)-1)
				}
			}
			level = next
		}
	case "egt":
		type node struct {
			parent int
			v      float64
		}
		var nodes []node
		frontier := []int{-1}
		value := func(i int) float64 {
			if i < 0 {
				return 1
			}
			return nodes[i].v
		}
		for d, w := range p.EGT {
			sort.SliceStable(frontier, func(a, b int) bool { return value(frontier[a]) > value(frontier[b]) })
			var next []int
			for _, par := range frontier[:min(w, len(frontier))] {
				for r := 0; r < p.Branch; r++ {
					nodes = append(nodes, node{par, value(par) * acc.At(d, r)})
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
				idx[i] = len(parents)
				parents = append(parents, idx[n.parent])
			}
		}
	}
	return parents
}
