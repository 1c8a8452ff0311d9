package app

import (
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"

	"arborist/profiles"
	"arborist/profiles/measure"
)

// TestRecheckDisagreementOffersReprofile: a tune whose re-check found
// T_verify beyond the stored curve's spread says so, which way (busier or
// freer) and by how much, and offers to profile again; that offer opens
// the Profile screen set to measure afresh. A re-check that kept the
// curve offers nothing.
func TestRecheckDisagreementOffersReprofile(t *testing.T) {
	wb := newBench(t)
	sp := wb.Speedup
	slow := &profiles.Inputs{Recheck: &measure.Recheck{Rescaled: true, Anchors: []measure.Anchor{
		{W: 1, Stored: time.Millisecond, Now: 1300 * time.Microsecond}, {W: 8, Stored: 2 * time.Millisecond, Now: 2600 * time.Microsecond}}}}
	if note := slow.DisagreementNote(); !strings.Contains(note, "T_verify(8) takes 2.60 ms now against 2.00 ms stored, 30% slower: the machine is busier") {
		t.Errorf("slower: %q", note)
	}
	fast := &profiles.Inputs{Recheck: &measure.Recheck{Rescaled: true, Anchors: []measure.Anchor{{W: 8, Stored: 2 * time.Millisecond, Now: 1500 * time.Microsecond}}}}
	if note := fast.DisagreementNote(); !strings.Contains(note, "25% faster: the machine is freer") {
		t.Errorf("faster: %q", note)
	}
	kept := &profiles.Inputs{Recheck: &measure.Recheck{Anchors: []measure.Anchor{{W: 8, Stored: 2 * time.Millisecond, Now: 2050 * time.Microsecond}}}}
	if note := kept.DisagreementNote(); note != "" {
		t.Errorf("a re-check within the spread: %q", note)
	}

	fyne.DoAndWait(func() { sp.showReprofile(kept) })
	if sp.Reprofile.Visible() {
		t.Error("Profile again offered after a re-check that agreed")
	}
	fyne.DoAndWait(func() { sp.showReprofile(slow) })
	if !sp.Reprofile.Visible() {
		t.Fatal("no offer to profile again after a re-check that disagreed")
	}
	test.Tap(sp.Reprofile) // no pair loaded: the profile itself is refused
	waitFor(t, "the profile's refusal", wb.Session.idle)
	if got := wb.Tabs.Selected().Text; got != wb.Profile.Title() || !wb.Profile.Fresh.Checked || sp.Reprofile.Visible() {
		t.Errorf("Profile again opened %q, measure again %v, still offered %v", got, wb.Profile.Fresh.Checked, sp.Reprofile.Visible())
	}
}

// TestRecheckStaysOnItsScreen: a tune whose re-check disagreed prices the
// Speedup screen on its re-checked inputs while the session keeps the
// stored ones (the other screens show the stored curve); the explanation
// and Profile again outlast the next status; new stored inputs (a
// profile, a calibration, another pair) answer them. A tune whose
// re-check agreed makes its inputs the session's, offering nothing.
func TestRecheckStaysOnItsScreen(t *testing.T) {
	wb := newBench(t)
	s, sp := wb.Session, wb.Speedup
	stored := &profiles.Inputs{}
	fyne.DoAndWait(func() { s.SetInputs(stored) })
	ranked := []profiles.Prediction{{Plan: profiles.Plan{Strategy: "chain", Gamma: 7}, Nodes: 7, Speedup: 2, Low: 1.8, High: 2.6, AAL: 3}}
	slow := &profiles.Inputs{Recheck: &measure.Recheck{Rescaled: true, Anchors: []measure.Anchor{
		{W: 1, Stored: time.Millisecond, Now: time.Millisecond}, {W: 2, Stored: 1200 * time.Microsecond, Now: 1560 * time.Microsecond},
		{W: 8, Stored: 2 * time.Millisecond, Now: 2600 * time.Microsecond}}}}
	fyne.DoAndWait(func() { sp.showTune(&profiles.TuneResult{Inputs: slow, Ranked: ranked}) })
	if s.Inputs != stored || s.Rechecked != slow || sp.inputs() != slow {
		t.Errorf("after a disagreeing re-check: the session's inputs replaced %v, re-checked kept %v, the screen prices on them %v", s.Inputs != stored, s.Rechecked == slow, sp.inputs() == slow)
	}
	if !sp.Disagreement.Visible() || !strings.Contains(sp.Disagreement.Text, "30% slower") || !sp.Reprofile.Visible() {
		t.Fatalf("no explanation or offer: %v %q %v", sp.Disagreement.Visible(), sp.Disagreement.Text, sp.Reprofile.Visible())
	}
	// the screen's best plan carries the disagreement in its interval, as
	// the tune's ranking does: one interval for one plan on the screen
	var here, stored0 *profiles.Prediction
	fyne.DoAndWait(func() {
		here = sp.explored.Best
		o := profiles.ExploreOptions{Alpha: sp.Alpha.Value, Decay: sp.Decay.Value, Depth: int(sp.MaxDepth.Value), Calibrated: sp.UseCal.Checked, Inputs: stored}
		stored0 = profiles.Explore(o).Best
	})
	if here == nil || stored0 == nil || here.Plan.String() != stored0.Plan.String() || here.High <= stored0.High {
		t.Errorf("the screen's best after the disagreeing re-check: %+v, on the stored inputs %+v", here, stored0)
	}
	// the next status (a validation, a redraw) leaves them
	fyne.DoAndWait(func() { sp.WorkStatus.SetText("Validated 5 plans against plain decoding."); s.Changed() })
	if !sp.Disagreement.Visible() || !strings.Contains(sp.Disagreement.Text, "30% slower") || !sp.Reprofile.Visible() {
		t.Error("the next status hid the disagreement")
	}
	// a profile (new stored inputs) answers it
	fresh := &profiles.Inputs{}
	fyne.DoAndWait(func() { s.SetInputs(fresh) })
	if s.Rechecked != nil || sp.inputs() != fresh || sp.Disagreement.Visible() || sp.Reprofile.Visible() {
		t.Errorf("after new stored inputs: re-checked %v, offer shown %v %v", s.Rechecked != nil, sp.Disagreement.Visible(), sp.Reprofile.Visible())
	}
	// a re-check that agreed: its inputs are the session's
	agreed := &profiles.Inputs{Recheck: &measure.Recheck{Anchors: []measure.Anchor{{W: 8, Stored: 2 * time.Millisecond, Now: 2050 * time.Microsecond}}}}
	fyne.DoAndWait(func() { sp.showTune(&profiles.TuneResult{Inputs: agreed, Ranked: ranked}) })
	if s.Inputs != agreed || s.Rechecked != nil || sp.Disagreement.Visible() || sp.Reprofile.Visible() {
		t.Errorf("after an agreeing re-check: session's %v, re-checked %v, offer %v", s.Inputs == agreed, s.Rechecked != nil, sp.Reprofile.Visible())
	}
}
