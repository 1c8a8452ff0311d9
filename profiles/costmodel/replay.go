package costmodel

import (
	"slices"

	"arborist/engine/spec"
)

// An Equal-Growth Tree is grown and pruned by the drafter's path
// probabilities, step by step, but the acceptance tables price the tree
// that is best on average over depth and sibling rank: on the bench pair
// EGT plans came out 8-28% high, and on the demo pair an EGT priced at
// 3.93 tokens a step ran at 3.43, chosen at 80% of the best plan. The
// calibration's probe tree is full (CalibrationWidths: four first tokens,
// three below each, ...), so wherever an EGT's nodes fall inside it, the
// probe holds every node the EGT would draft on that step, with the path
// probability the runtime ranks it by, and the path the target accepted:
// the plan can be replayed on each recorded step exactly as the engine
// grows, prunes and verifies it (replayGrowth), and priced on the tokens
// it would have kept (replayAAL).

// MaxProbeSamples bounds the steps whose probe trees a calibration keeps
// (280 nodes each; a few hundred steps are typical).
const MaxProbeSamples = 1024

// RecordProbe stores a step's drafted tree and accepted path in s
// (DepthSample.Parents, PathP, Path); nothing when the tree is too large
// for the record's types.
func (s *DepthSample) RecordProbe(tree []spec.TreeNode, path []int) {
	if len(tree) == 0 || len(tree) > 1<<15-1 {
		return
	}
	s.Parents, s.PathP, s.Path = make([]int16, len(tree)), make([]float32, len(tree)), make([]int16, len(path))
	for i, n := range tree {
		s.Parents[i], s.PathP[i] = int16(n.Parent), float32(n.PathP)
	}
	for i, n := range path {
		s.Path[i] = int16(n)
	}
}

// Probes is how many of the calibration's steps recorded their probe
// tree, on which EGT plans are replayed (0 for older calibrations).
func (a *Acceptance) Probes() int {
	n := 0
	if a != nil {
		for _, s := range a.Depths {
			if s.HasProbe() {
				n++
			}
		}
	}
	return n
}

// HasProbe says whether the step recorded a probe tree to replay, a path
// probability for every node (a step that drafted nothing, or one of an
// older calibration, did not).
func (s DepthSample) HasProbe() bool { return len(s.Parents) > 0 && len(s.PathP) == len(s.Parents) }

// replayable says whether every node p can draft lies inside the probe
// tree: no deeper than it, and no more children of a node at any depth
// than the probe drafted there.
func replayable(p Plan) bool {
	if !p.Grows() || len(p.EGT) == 0 || len(p.EGT) > len(CalibrationWidths) || p.Branch < 1 || p.WMax < 1 {
		return false
	}
	for d := range p.EGT {
		if p.Branch > CalibrationWidths[d] {
			return false
		}
	}
	return true
}

// replayKey is what an EGT's growth depends on: its shape and its
// threshold depth policy's minimum (0: its fixed depth); its w-max only
// cuts what grew, so plans that differ in w-max (or AOT, or padding) share
// one.
type replayKey struct {
	widths string
	branch int
	least  float64
}

// replayed is an EGT's growth on the recorded steps and the levels it
// drafted on each (replayGrowthUntil).
type replayed struct {
	g      grown
	levels []int
}

// grown is an EGT's growth replayed on the recorded steps: for each step,
// for each depth k of its accepted path up to the first node the tree did
// not grow, the largest place in the path-probability order (0 first)
// among the path's first k+1 nodes. The plan keeps the first w-max nodes
// of that order (its pruning: path probabilities shrink along a path, so
// they hold every kept node's parent), so it accepts the path's first k+1
// nodes exactly when that place is below w-max.
type grown [][]int

// probeStep is one recorded step's probe tree, ready to replay: node v's
// children (the root being node n) are kid[first[v]:first[v+1]], most
// likely first.
type probeStep struct {
	first     []int32
	kid       []int16
	pathP     []float32
	path      []int16
	resampled bool // the source drafted the step by re-sampling (DepthSample.Resampled)
}

// probesOf indexes the steps that recorded their probe tree; a search does
// it once (memo), not once for each of the EGT shapes it replays.
func probesOf(samples []DepthSample) []probeStep {
	var out []probeStep
	for _, s := range samples {
		if !s.HasProbe() {
			continue
		}
		n := len(s.Parents)
		ps := probeStep{first: make([]int32, n+2), kid: make([]int16, n), pathP: s.PathP, path: s.Path, resampled: s.Resampled}
		parent := func(i int) int {
			if p := int(s.Parents[i]); p >= 0 && p < i {
				return p
			}
			return n // the root (a malformed parent counts as the root)
		}
		for i := range n {
			ps.first[parent(i)+1]++
		}
		for v := 1; v < n+2; v++ {
			ps.first[v] += ps.first[v-1]
		}
		fill := append([]int32(nil), ps.first[:n+1]...)
		for i := range n {
			p := parent(i)
			ps.kid[fill[p]] = int16(i)
			fill[p]++
		}
		out = append(out, ps)
	}
	return out
}

// replayGrowth grows (widths, branch) on every step that recorded its
// probe, as the engine's egt does: at each depth the widths[d] frontier
// nodes with the highest path probability (ties in tree order) each get
// their first branch children (the probe drafted children most likely
// first, as TopK does for the EGT). Empty when no step recorded its probe.
func replayGrowth(steps []probeStep, widths []int, branch int) grown {
	g, _ := replayGrowthUntil(steps, widths, branch, 0)
	return g
}

// replayGrowthUntil is replayGrowth under a threshold depth policy of
// minimum least (0: the fixed depth): after each level the engine drafts
// another only while the best path probability among the level's nodes is
// at least least (spec.Threshold). It also returns the levels each step
// drafted.
func replayGrowthUntil(steps []probeStep, widths []int, branch int, least float64) (grown, []int) {
	return replayGrowthSeen(steps, widths, branch, least, nil)
}

// replayGrowthSeen is replayGrowthUntil telling seen, when not nil, the
// highest path probability among the nodes each step grows at each level
// (1 = depth 1): what a depth policy sees there.
func replayGrowthSeen(steps []probeStep, widths []int, branch int, least float64, seen func(step, level int, best float32)) (grown, []int) {
	out := make(grown, 0, len(steps))
	levels := make([]int, 0, len(steps))
	var frontier, next, tree []int
	place := []int32(nil)
	for _, ps := range steps {
		n := len(ps.pathP)
		pathP := func(i int) float32 {
			if i == n {
				return 1
			}
			return ps.pathP[i]
		}
		byP := func(a, b int) int {
			switch pa, pb := pathP(a), pathP(b); {
			case pa > pb:
				return -1
			case pa < pb:
				return 1
			}
			return a - b
		}
		frontier, tree = append(frontier[:0], n), tree[:0]
		drafted := 0
		for d, w := range widths {
			if d > 0 && least > 0 {
				best := float32(0)
				for _, nd := range frontier {
					best = max(best, pathP(nd))
				}
				if float64(best) < least {
					break
				}
			}
			slices.SortStableFunc(frontier, byP)
			next = next[:0]
			for _, par := range frontier[:min(w, len(frontier))] {
				lo, hi := int(ps.first[par]), int(ps.first[par+1])
				for _, k := range ps.kid[lo:min(hi, lo+branch)] {
					next = append(next, int(k))
				}
			}
			if len(next) == 0 {
				break
			}
			drafted++
			if seen != nil {
				best := float32(0)
				for _, nd := range next {
					best = max(best, pathP(nd))
				}
				seen(len(out), drafted, best)
			}
			tree = append(tree, next...)
			frontier = append(frontier[:0], next...)
		}
		slices.SortFunc(tree, byP)
		for len(place) < n {
			place = append(place, -1)
		}
		for i, nd := range tree {
			place[nd] = int32(i)
		}
		row := make([]int, 0, len(ps.path))
		most := -1
		for _, nd := range ps.path {
			if int(nd) < 0 || int(nd) >= n || place[nd] < 0 {
				break // not grown: neither it nor anything below is accepted
			}
			most = max(most, int(place[nd]))
			row = append(row, most)
		}
		for _, nd := range tree {
			place[nd] = -1
		}
		out = append(out, row)
		levels = append(levels, drafted)
	}
	return out, levels
}

// aal is the plan's expected tokens a step on the replayed steps: one
// (the target's own token) plus the path nodes its first wmax nodes hold.
func (g grown) aal(wmax int) float64 {
	if len(g) == 0 {
		return 0
	}
	var sum int
	for i := range g {
		sum += g.accepted(i, wmax)
	}
	return 1 + float64(sum)/float64(len(g))
}

// accepted is how many draft tokens step i keeps with the first wmax
// nodes.
func (g grown) accepted(i, wmax int) int {
	n := 0
	for _, at := range g[i] {
		if at >= wmax {
			break
		}
		n++
	}
	return n
}

// steadyWeights weighs replayed steps (summing to 1) by kind as a plan
// meets them, by steadyMix's model of a source that re-samples: a regular
// step that keeps m <= L-2 of its L levels is followed, at the
// calibration's rate, by a re-sampled step, and that by a regular one; so
// with q = rate * (the share of regular steps that keep so few), regular
// steps weigh 1/(1+q) and re-sampled ones q/(1+q), each kind evenly.
// Without re-sampled steps every step weighs the same. Weighing the kinds
// as if every rejection re-sampled put two thirds of a threshold plan's
// weight on re-sampled steps where its runs re-sampled about one step in
// six, and priced its tokens 21% short.
func steadyWeights(resampled []bool, kept, levels []int, rate float64) []float64 {
	var n [2]int
	trig := 0
	for i, r := range resampled {
		if r {
			n[1]++
			continue
		}
		n[0]++
		if kept[i] <= levels[i]-2 {
			trig++
		}
	}
	out := make([]float64, len(resampled))
	share := [2]float64{1 / float64(max(1, len(resampled))), 1 / float64(max(1, len(resampled)))}
	if n[0] > 0 && n[1] > 0 {
		q := rate * float64(trig) / float64(n[0])
		share = [2]float64{1 / (1 + q) / float64(n[0]), q / (1 + q) / float64(n[1])}
	}
	for i, r := range resampled {
		if r {
			out[i] = share[1]
		} else {
			out[i] = share[0]
		}
	}
	return out
}

// thresholdReplay is a threshold EGT replayed on the probe steps: the
// weight of the steps on which it drafts L levels (index L) and its tokens
// a step, the steps weighed by kind as the plan would meet them
// (steadyWeights).
type thresholdReplay struct {
	steps []float64
	aal   float64
}

// replayThreshold replays p (a threshold EGT) on the calibration's probe
// trees; false when it cannot be (p not replayable, no probes).
func replayThreshold(p Plan, acc *Acceptance, m *memo) (thresholdReplay, bool) {
	fixed := p
	fixed.DepthPolicy, fixed.DepthMin = "", 0
	if acc == nil || !replayable(fixed) || p.DepthMin <= 0 {
		return thresholdReplay{}, false
	}
	probes, r := m.growth(acc, p.EGT, p.Branch, p.DepthMin)
	if len(probes) == 0 {
		return thresholdReplay{}, false
	}
	g, levels := r.g, r.levels
	kept := make([]int, len(g))
	resampled := make([]bool, len(g))
	for i := range g {
		kept[i] = g.accepted(i, p.WMax)
		resampled[i] = probes[i].resampled
	}
	w := steadyWeights(resampled, kept, levels, m.resampleRate(acc))
	out := thresholdReplay{steps: make([]float64, len(p.EGT)+1), aal: 1}
	for i := range g {
		out.steps[levels[i]] += w[i]
		out.aal += w[i] * float64(kept[i])
	}
	return out, true
}

// replayedAAL prices an EGT's tokens a step on the calibration's probe
// trees (false: not an EGT, or no probes recorded): replayed exactly
// where all its nodes lie inside the probe; else (it branches wider deep
// down than the probe drafted) its tables' figure, table, scaled as the
// replay scales the tables' figure for the same shape with the widest
// branch the probe holds. Pricing those on the tables alone would put
// them above the replayed plans by the tables' own error (8-28% on the
// bench pair): a branch-3 EGT of depth 4, priced so, entered the bench
// pair's top five at +13-14%.
func replayedAAL(p Plan, table float64, acc *Acceptance, m *memo) (float64, bool) {
	if !p.Grows() || len(p.EGT) > len(CalibrationWidths) {
		return 0, false
	}
	if aal, ok := replayAAL(p, acc, m); ok || replayable(p) {
		return aal, ok
	}
	q := p
	for q.Branch > 1 && !replayable(q) {
		q.Branch--
	}
	aal, ok := replayAAL(q, acc, m)
	if !ok {
		return 0, false
	}
	ex, err := q.Expect(acc.At)
	if err != nil {
		return 0, false
	}
	tq := 0.0 // summed from zero, not ex.AAL() - 1: the same bits as before
	for _, v := range ex.Values {
		tq += v
	}
	if tq <= 0 {
		return 0, false
	}
	return 1 + (table-1)*(aal-1)/tq, true
}

// replayAAL is p's tokens a step replayed on the calibration's probe
// trees, and whether it could be (p replayable, probes recorded).
func replayAAL(p Plan, acc *Acceptance, m *memo) (float64, bool) {
	if acc == nil || !replayable(p) {
		return 0, false
	}
	_, r := m.growth(acc, p.EGT, p.Branch, 0)
	g := r.g
	if len(g) == 0 {
		return 0, false
	}
	return g.aal(p.WMax), true
}

// CalibrationWidths is the probe tree: wide near the root, where the ranks
// matter most, and deep enough to see acceptance fall with depth.
var CalibrationWidths = []int{4, 3, 2, 2, 1, 1, 1, 1}

// MaxDepthSamples bounds the steps a calibration records for pricing
// depth policies (a few hundred are typical; the record stays small).
const MaxDepthSamples = 8192
