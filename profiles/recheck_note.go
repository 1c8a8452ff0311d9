package profiles

import "fmt"

// Disagreement says how far a tune's re-check found T_verify from the
// stored curve when it rescaled the curve (beyond measure.RecheckTolerance,
// about twice the spread of repeated profiles): the widest anchor's time
// now over its stored time (above 1: the machine is slower now). ok is
// false when the re-check kept the curve or did not run.
func (in *Inputs) Disagreement() (ratio float64, ok bool) {
	if in == nil || in.Recheck == nil || !in.Recheck.Rescaled {
		return 0, false
	}
	a := in.Recheck.Widest()
	if a.Stored <= 0 || a.Now <= 0 {
		return 0, false
	}
	return float64(a.Now) / float64(a.Stored), true
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
	a := in.Recheck.Widest()
	how, pct := "slower: the machine is busier", 100*(ratio-1)
	if ratio < 1 {
		how, pct = "faster: the machine is freer", 100*(1-ratio)
	}
	return fmt.Sprintf("The re-check disagrees with the stored profile beyond its spread: T_verify(%d) takes %.2f ms now against %.2f ms stored, %.0f%% %s than when it was profiled. These plans are priced on this minute's machine, the stored curve is left as it is; profile again to store the machine as it is now.",
		a.W, float64(a.Now)/1e6, float64(a.Stored)/1e6, pct, how)
}
