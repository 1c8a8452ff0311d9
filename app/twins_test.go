package app

import (
	"strings"
	"testing"

	"fyne.io/fyne/v2"

	"arborist/profiles"
)

// TestTunedListHasNoTwins: the tuned plans list shows a plan once where
// the ranking holds it under two names with the same figures.
func TestTunedListHasNoTwins(t *testing.T) {
	sp := newBench(t).Speedup
	ranked := sp.explored.Ranked
	if len(ranked) < 3 {
		t.Fatalf("%d plans ranked", len(ranked))
	}
	twin := ranked[0]
	twin.Plan.Strategy, twin.Plan.Tail = "duo", twin.Plan.Tail+1 // another name, the same figures
	preds := append([]profiles.Prediction{ranked[0], twin}, ranked[1:]...)
	fyne.DoAndWait(func() { sp.SetRanked(preds) })
	for _, o := range sp.Ranked.Options {
		if strings.Contains(o, twin.Plan.String()) {
			t.Errorf("the twin is listed: %q", o)
		}
	}
	if !strings.Contains(sp.Ranked.Options[0], ranked[0].Plan.String()) || !strings.Contains(sp.Ranked.Options[1], profiles.Twinless(ranked)[1].Plan.String()) {
		t.Errorf("list: %q", sp.Ranked.Options[:2])
	}
}
