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
