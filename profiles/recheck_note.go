package profiles

import (
	"fmt"
	"math"

	"arborist/profiles/costmodel"
	"arborist/profiles/measure"
)

// Disagreement says how far a tune's re-check found T_verify from the
// stored curve when it rescaled the curve (beyond measure.RecheckTolerance,
// about twice the spread of repeated profiles): the time now over the
// stored time (above 1: the machine is slower now) of the anchor that
// moved most, which is the one that went beyond the tolerance (the
// widest may have agreed). ok is false when the re-check kept the curve
// or did not run.
func (in *Inputs) Disagreement() (ratio float64, ok bool) {
	a, ok := in.moved()
	if !ok {
		return 0, false
	}
	return float64(a.Now) / float64(a.Stored), true
}

// moved is the re-check's anchor whose time moved most from the stored
// curve's, when the re-check rescaled the curve.
func (in *Inputs) moved() (measure.Anchor, bool) {
	if in == nil || in.Recheck == nil || !in.Recheck.Rescaled {
		return measure.Anchor{}, false
	}
	var best measure.Anchor
	far := -1.0
	for _, a := range in.Recheck.Anchors {
		if a.Stored <= 0 || a.Now <= 0 {
			continue
		}
		if d := math.Abs(math.Log(float64(a.Now) / float64(a.Stored))); d >= far { // the wider of two alike
			best, far = a, d
		}
	}
	return best, far >= 0
}

// DisagreementNote says, when the re-check disagreed with the stored curve
// beyond its spread, that the machine is busier or freer than when it was
// profiled, that the tune priced its plans on this minute's machine, and
// that a profile stores the machine as it is now; "" when it agreed.
func (in *Inputs) DisagreementNote() string {
	ratio, ok := in.Disagreement()
	if !ok {
		return ""
	}
	a, _ := in.moved()
	how, pct := "slower: the machine is busier", 100*(ratio-1)
	if ratio < 1 {
		how, pct = "faster: the machine is freer", 100*(1-ratio)
	}
	return fmt.Sprintf("The re-check disagrees with the stored profile beyond its spread: T_verify(%d) takes %.2f ms now against %.2f ms stored, %.0f%% %s than when it was profiled. These plans are priced on this minute's machine, the stored curve is left as it is; profile again to store the machine as it is now.",
		a.W, float64(a.Now)/1e6, float64(a.Stored)/1e6, pct, how)
}

// CarryDisagreement widens pr's interval to hold the price the stored
// curve gave it, when the re-check disagreed with that curve beyond its
// spread and rescaled it: the figures priced on this minute's machine
// are one of two readings, and the interval says so. A speedup is plain
// decoding's token over the step, so a plan verifying W tokens moves by
// the scale at 1 over the scale at W (the widest anchor at or below W):
// where those agree (plain decoding, or a uniform rescale) nothing
// moved and nothing widens.
func (in *Inputs) CarryDisagreement(pr *costmodel.Prediction) {
	if _, ok := in.Disagreement(); !ok || !pr.Plan.NeedsSource() || pr.Speedup <= 0 {
		return
	}
	s1, sw := 1.0, 1.0
	for _, a := range in.Recheck.Anchors {
		if a.Stored <= 0 || a.Now <= 0 {
			continue
		}
		scale := float64(a.Now) / float64(a.Stored)
		if a.W == 1 {
			s1 = scale
		}
		if a.W <= 1+pr.Nodes {
			sw = scale
		}
	}
	g := sw / s1 // the stored curve's speedup over this minute's
	if g == 1 {
		return
	}
	low, high := pr.Low, pr.High
	if low <= 0 || high <= 0 {
		low, high = pr.Speedup, pr.Speedup
	}
	pr.Low, pr.High = min(low, low*g), max(high, high*g)
}
