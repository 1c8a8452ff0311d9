package app

import (
	"strings"
	"testing"

	"fyne.io/fyne/v2"

	"arborist/profiles"
	"arborist/profiles/costmodel"
)

// TestBeforeCalibration: with no calibration stored, "use the stored
// calibration" is unticked and disabled, the predictions come from the
// sliders and say they are assumed, and the best plan speculates; a
// stored calibration ticks and enables it.
func TestBeforeCalibration(t *testing.T) {
	wb := newBench(t)
	s, sp := wb.Session, wb.Speedup
	check := func(when string) {
		t.Helper()
		if sp.UseCal.Checked || !sp.UseCal.Disabled() {
			t.Errorf("%s: calibration box ticked %v, disabled %v", when, sp.UseCal.Checked, sp.UseCal.Disabled())
		}
		if !strings.Contains(sp.Mode.Text, "Assumed") || !strings.Contains(sp.Best.Text, "assumed acceptance") {
			t.Errorf("%s: mode %q, best %q", when, sp.Mode.Text, sp.Best.Text)
		}
		if s.Best == nil || s.Best.Plan.Strategy == profiles.Choices().PlainStrategy || s.Best.AAL <= 1.5 {
			t.Errorf("%s: best %+v", when, s.Best)
		}
	}
	check("at start")
	// profiled, not calibrated: the inputs of a pair after Profile
	fyne.DoAndWait(func() { s.SetInputs(&profiles.Inputs{}) })
	check("profiled")
	fyne.DoAndWait(func() { s.SetInputs(&profiles.Inputs{Acc: costmodel.Uniform(0.9, 0.5, 8, 4), CalID: 3}) })
	if !sp.UseCal.Checked || sp.UseCal.Disabled() || !strings.Contains(sp.Mode.Text, "calibration 3") || strings.Contains(sp.Best.Text, "assumed") {
		t.Errorf("calibrated: box ticked %v, disabled %v, mode %q, best %q", sp.UseCal.Checked, sp.UseCal.Disabled(), sp.Mode.Text, sp.Best.Text)
	}
}
