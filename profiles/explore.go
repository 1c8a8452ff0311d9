package profiles

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"arborist/engine/spec"
	"arborist/profiles/costmodel"
	"arborist/profiles/latency"
)

// ExploreOptions is the speedup model's what-if question: the acceptance
// to assume (Alpha, the top candidate's rate, decaying by Decay a sibling
// rank) down to Depth levels, unless Calibrated asks for the pair's stored
// calibration (in Inputs) and there is one; and the costs, from Inputs
// where the pair is profiled, else the measured curves given, else an
// assumed curve.
type ExploreOptions struct {
	Alpha, Decay float64
	Depth        int
	Calibrated   bool
	// Inputs are the pair's stored curves and calibration (nil: none).
	Inputs *Inputs
	// Verify and Draft are curves measured in this sitting (nil: none),
	// Overhead its per-step bookkeeping (0: the assumed 100µs).
	Verify, Draft *Profile
	Overhead      time.Duration
}

// Exploration is the speedup model's answer: what the predictions rest on,
// the speedup of a chain (width 1) and of EGTs of widths 2 to 4 at every
// depth, and the best of every plan the search offers.
type Exploration struct {
	// Acceptance and Curve say what the predictions rest on, in words.
	Acceptance, Curve string
	// Lines are, per width 1..4, the predictions at depths 1..Depth (a
	// depth the model cannot price is left out).
	Lines [][]Prediction
	// Ranked are the plans the search priced, best first (Searched counts
	// them); Best is the first (nil for none) and BestShape its tree as a
	// parent list.
	Ranked    []Prediction
	Searched  int
	Best      *Prediction
	BestShape []int
	// Verify is the verification curve the predictions use.
	Verify []latency.Point

	acc   *costmodel.Acceptance
	costs costmodel.Costs
}

// assumedCurve stands in for a profile: verification cost growing with W as
// on a small CPU, so the model can be explored before profiling.
func assumedCurve() []latency.Point {
	var pts []latency.Point
	for _, w := range []int{1, 2, 4, 8, 16, 32, 64} {
		pts = append(pts, latency.Point{W: w, Median: time.Duration(10+3*(w-1)) * time.Millisecond})
	}
	return pts
}

// Explore prices the what-if question o.
func Explore(o ExploreOptions) *Exploration {
	depth := o.Depth
	x := &Exploration{acc: costmodel.Uniform(o.Alpha, o.Decay, depth, 4)}
	x.Acceptance = fmt.Sprintf("assumed values (acceptance %.0f%%, decay %.2f)", 100*o.Alpha, o.Decay)
	in := o.Inputs
	// the stored calibration only where there is one: without, every plan
	// priced on no acceptance at all read AAL 1.00 and the best was plain
	// decoding whatever the sliders said
	calibrated := o.Calibrated && in.Calibrated()
	if calibrated {
		x.acc, x.Acceptance = in.Acc, "acceptance "+in.Describe()
	} else if o.Calibrated {
		x.Acceptance += "; this pair has no stored calibration"
	}
	x.costs = costmodel.Costs{Verify: assumedCurve(), Overhead: 100 * time.Microsecond}
	x.Curve = "an assumed curve (profile this machine for real figures)"
	switch {
	case in != nil && in.Profiled:
		// the core's costs: the drafter's curve, or a layer-skip or
		// hidden drafter's share of the target's
		x.costs, x.Curve = in.Costs, "the measured T_verify(W) and drafting costs"
	case o.Verify != nil:
		x.costs.Verify, x.Curve = o.Verify.Curve.Points, "the measured T_verify(W)"
		if o.Draft != nil {
			x.costs.Draft = o.Draft.Curve.Points
		}
		if o.Overhead > 0 {
			x.costs.Overhead = o.Overhead
		}
	}
	x.Verify = x.costs.Verify
	for w := 1; w <= 4; w++ {
		var line []Prediction
		for d := 1; d <= depth; d++ {
			p := spec.ChainPlan(d)
			if w > 1 {
				p = spec.EGTPlan(slices.Repeat([]int{w}, d), 2, 64)
			}
			p = p.Canonical() // named, stored and run as the search names it
			if pr, err := costmodel.Predict(p, x.acc, x.costs); err == nil {
				line = append(line, pr)
			}
		}
		x.Lines = append(x.Lines, line)
	}
	// on the pair's calibration, tune's own space: the same plans searched,
	// the same count; on assumed values, the plans the sliders reach
	space := costmodel.SearchSpace{MaxDepth: min(depth, 7), MaxGamma: depth}
	if calibrated {
		space = costmodel.SearchSpace{}
	}
	preds := costmodel.Search(x.acc, x.costs, space)
	// on a tune's re-checked inputs that disagreed with the stored curve,
	// the interval carries the disagreement, as the tune's ranking does
	for i := range preds {
		in.CarryDisagreement(&preds[i])
	}
	x.Ranked, x.Searched = preds, len(preds)
	if len(preds) > 0 {
		b := preds[0]
		x.Best, x.BestShape = &b, costmodel.Shape(b.Plan, x.acc)
	}
	return x
}

// Price prices a plan typed as a strategy and a list of numbers, as the
// Speedup model screen's "your plan" reads it: as the strategy's WhatIf
// hook builds its plan from them (a chain's gamma, a tree's widths per
// depth, an EGT expanding that many nodes per depth, two children each,
// pruned to wMax nodes), and as the screen's starting strategy does for
// a strategy without one (WhatIfStrategies).
func (x *Exploration) Price(strategy, numbers string, wMax int) (Plan, Prediction, error) {
	var nums []int
	for _, f := range strings.Split(numbers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return Plan{}, Prediction{}, fmt.Errorf("%q is not a list of positive numbers", numbers)
		}
		nums = append(nums, n)
	}
	p := spec.WhatIfPlan(strategy, nums, wMax)
	pr, err := costmodel.Predict(p, x.acc, x.costs)
	return p, pr, err
}

// ErrPlacedValidation refuses to validate plans ranked across devices: a
// placed plan's speedup is over plain decoding on the pair's own device,
// while a validation measures on one placement.
var ErrPlacedValidation = fmt.Errorf("validation measures one placement")

// ValidationPlans are the plans a validation of a tune's ranking measures:
// its n best that do different work (plans doing the same work under
// other names are measured once); ErrNotTuned when there are none, and
// ErrPlacedValidation when the ranking placed them across devices.
func ValidationPlans(ranked []Prediction, n int) ([]Prediction, error) {
	plans := costmodel.Distinct(ranked, n)
	for _, p := range plans {
		if p.Backend != "" {
			return nil, ErrPlacedValidation
		}
	}
	if len(plans) == 0 {
		return nil, ErrNotTuned
	}
	return plans, nil
}

// Twinless is preds (best first) with each plan's twins left out: a plan
// whose canonical form is an earlier one's, or whose prediction equals an
// earlier one's in every figure (chain gamma=5 tail=2 and duo gamma=5
// sequences=1 tail=2; egt branch 1, 2 and 3 where no level expands more
// than one child) does the same work under another name, as validation
// counts them (ValidationPlans). Lists of plans show each once.
func Twinless(preds []Prediction) []Prediction {
	seen := map[string]bool{}
	var out []Prediction
	for _, p := range preds {
		plan := p.Plan.Canonical().Key() + "\x00" + p.Backend + "\x00" + p.DraftBackend
		figures := fmt.Sprint(p.AAL, p.Nodes, p.Draft, p.Verify, p.Step, p.PerDepth, p.Backend, p.DraftBackend)
		if seen[plan] || seen[figures] {
			continue
		}
		seen[plan], seen[figures] = true, true
		out = append(out, p)
	}
	return out
}
