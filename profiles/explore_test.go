package profiles

import (
	"strings"
	"testing"
)

// TestExploreBeforeCalibration: asked for the stored calibration where the
// pair has none, the model prices on the sliders' assumed acceptance and
// says so, so a speculative plan is best where they say it pays; a
// negative control: acceptance near zero makes plain decoding best.
func TestExploreBeforeCalibration(t *testing.T) {
	plain := Choices().PlainStrategy
	for _, in := range []*Inputs{nil, {Profiled: false}} {
		x := Explore(ExploreOptions{Alpha: 0.8, Decay: 0.4, Depth: 8, Calibrated: true, Inputs: in})
		if x.Best == nil || x.Best.Plan.Strategy == plain || x.Best.AAL <= 1.5 || x.Best.Speedup <= 1 {
			t.Fatalf("inputs %+v: best %+v", in, x.Best)
		}
		if !strings.Contains(x.Acceptance, "assumed") || !strings.Contains(x.Acceptance, "no stored calibration") {
			t.Errorf("acceptance described as %q", x.Acceptance)
		}
	}
	x := Explore(ExploreOptions{Alpha: 0.05, Decay: 0.05, Depth: 8, Calibrated: true, Inputs: &Inputs{}})
	if x.Best == nil || x.Best.Speedup > 1.01 {
		t.Errorf("acceptance 5%%: best %+v", x.Best)
	}
}
