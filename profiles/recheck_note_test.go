package profiles

import (
	"strings"
	"testing"
	"time"

	"arborist/profiles/costmodel"
	"arborist/profiles/measure"
)

// TestCarryDisagreement: after a re-check that found T_verify(8) 30%
// slower (T_verify(1) as stored), a plan verifying 8 tokens is priced
// 1/1.3 of what the stored curve gave: its interval widens up to the
// stored curve's figure, its speedup stays. A re-check that agreed, plain
// decoding, and a plan whose widths both moved alike keep their interval.
func TestCarryDisagreement(t *testing.T) {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	chain := costmodel.Prediction{Plan: costmodel.Plan{Strategy: "chain", Gamma: 7}, Nodes: 7, Speedup: 2, Low: 1.8, High: 2.2}
	slow := &Inputs{Recheck: &measure.Recheck{Rescaled: true, Anchors: []measure.Anchor{
		{W: 1, Stored: ms(1), Now: ms(1)}, {W: 4, Stored: ms(1.5), Now: ms(1.65)}, {W: 8, Stored: ms(2), Now: ms(2.6)}}}}
	pr := chain
	slow.CarryDisagreement(&pr)
	if pr.Speedup != 2 || pr.Low != 1.8 || pr.High < 2.2*1.3-1e-9 || pr.High > 2.2*1.3+1e-9 {
		t.Errorf("widened to %.3f-%.3f (speedup %.2f), want 1.800-%.3f", pr.Low, pr.High, pr.Speedup, 2.2*1.3)
	}
	// a plan verifying 5 tokens reads the anchor at 4
	small := costmodel.Prediction{Plan: costmodel.Plan{Strategy: "chain", Gamma: 4}, Nodes: 4, Speedup: 2, Low: 1.8, High: 2.2}
	slow.CarryDisagreement(&small)
	if small.High < 2.2*1.1-1e-9 || small.High > 2.2*1.1+1e-9 {
		t.Errorf("gamma 4: high %.3f, want %.3f", small.High, 2.2*1.1)
	}
	// faster now: the stored curve priced lower, the low end widens
	fast := &Inputs{Recheck: &measure.Recheck{Rescaled: true, Anchors: []measure.Anchor{{W: 1, Stored: ms(1), Now: ms(1)}, {W: 8, Stored: ms(2), Now: ms(1.5)}}}}
	pr = chain
	fast.CarryDisagreement(&pr)
	if pr.Low > 1.8*0.75+1e-9 || pr.High != 2.2 {
		t.Errorf("faster: %.3f-%.3f", pr.Low, pr.High)
	}
	for name, in := range map[string]*Inputs{
		"agreed":  {Recheck: &measure.Recheck{Anchors: []measure.Anchor{{W: 1, Stored: ms(1), Now: ms(1)}, {W: 8, Stored: ms(2), Now: ms(2.1)}}}},
		"uniform": {Recheck: &measure.Recheck{Rescaled: true, Anchors: []measure.Anchor{{W: 1, Stored: ms(1), Now: ms(1.3)}, {W: 8, Stored: ms(2), Now: ms(2.6)}}}},
		"none":    {},
	} {
		pr := chain
		in.CarryDisagreement(&pr)
		if pr.Low != 1.8 || pr.High != 2.2 {
			t.Errorf("%s: widened to %.3f-%.3f", name, pr.Low, pr.High)
		}
	}
	ar := costmodel.Prediction{Plan: costmodel.Plan{Strategy: "ar"}, Speedup: 1, Low: 1, High: 1}
	slow.CarryDisagreement(&ar)
	if ar.Low != 1 || ar.High != 1 {
		t.Errorf("plain decoding widened: %+v", ar)
	}
}

// TestDisagreementNoteNamesTheAnchorThatMoved: a re-check that rescaled
// the curve because T_verify(1) moved 40% while its widest anchor agreed
// says so, naming the width that moved, never "0% slower" under
// "disagrees beyond its spread".
func TestDisagreementNoteNamesTheAnchorThatMoved(t *testing.T) {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	in := &Inputs{Recheck: &measure.Recheck{Rescaled: true, Anchors: []measure.Anchor{
		{W: 1, Stored: ms(1), Now: ms(1.4)}, {W: 4, Stored: ms(1.5), Now: ms(1.6)}, {W: 8, Stored: ms(2), Now: ms(2)}}}}
	ratio, ok := in.Disagreement()
	if !ok || ratio != 1.4 {
		t.Fatalf("disagreement %v (%v), want 1.4, T_verify(1)'s", ratio, ok)
	}
	note := in.DisagreementNote()
	if !strings.Contains(note, "T_verify(1) takes 1.40 ms now against 1.00 ms stored, 40% slower") {
		t.Errorf("note %q does not name the anchor that moved", note)
	}
	if (&Inputs{Recheck: &measure.Recheck{Anchors: in.Recheck.Anchors}}).DisagreementNote() != "" {
		t.Error("a re-check that kept the curve has a note")
	}
}
