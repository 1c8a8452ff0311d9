package app

import (
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"

	"arborist/app/present"
	"arborist/profiles"
	"arborist/profiles/costmodel"
)

// TestOnePricePerPlan: a pair's stored plan is listed at the price stored
// with it (with its interval), not at the ranking's re-scoring, and Run
// shows that same price; the other plans show their intervals too.
func TestOnePricePerPlan(t *testing.T) {
	wb := newBench(t)
	sp, s := wb.Speedup, wb.Session
	ranked := profiles.Twinless(sp.explored.Ranked)[:5]
	for i := range ranked {
		ranked[i].Low, ranked[i].High = ranked[i].Speedup*0.9, ranked[i].Speedup*1.1
	}
	stored := ranked[2]
	stored.Speedup, stored.Low, stored.High = 2.93, 2.5, 3.4 // as tuned, before the re-scoring
	st := &profiles.PairState{PlanID: 4, Plan: stored, Ranked: ranked}
	fyne.DoAndWait(func() { sp.pairShown(st, nil) })
	want := "3. " + stored.Plan.String() + ": 2.93x (2.50-3.40x)"
	if len(sp.Ranked.Options) < 5 || !strings.HasPrefix(sp.Ranked.Options[2], want) {
		t.Fatalf("list %q, want %q third", sp.Ranked.Options, want)
	}
	if !strings.Contains(sp.Ranked.Options[0], present.Price(ranked[0])) || !strings.Contains(sp.Ranked.Options[0], "-") {
		t.Errorf("no interval: %q", sp.Ranked.Options[0])
	}
	if s.Tuned == nil || s.Tuned.Speedup != 2.93 {
		t.Fatalf("the session's plan: %+v", s.Tuned)
	}
	fyne.DoAndWait(wb.Run.useTuned)
	if !strings.Contains(wb.Run.PlanNote.Text, "2.93x (2.50-3.40x)") {
		t.Errorf("Run shows %q", wb.Run.PlanNote.Text)
	}
}

// TestTuneAsksItsCalibrationsTemperature: Calibrate and Tune take a
// temperature; a tune at another temperature than its calibration's is
// refused with the reason, and at the same one it is not.
func TestTuneAsksItsCalibrationsTemperature(t *testing.T) {
	wb := newBench(t)
	sp, s := wb.Speedup, wb.Session
	fyne.DoAndWait(func() { s.SetInputs(&profiles.Inputs{Acc: costmodel.Uniform(0.8, 0.5, 8, 4), CalID: 3}) })
	sp.Temp.SetText("0.8")
	test.Tap(sp.Tune)
	if !strings.Contains(sp.WorkStatus.Text, "calibration 3 was measured at temperature 0") {
		t.Errorf("status %q", sp.WorkStatus.Text)
	}
	if smp, err := sp.sampling(); err != nil || smp.Temp != 0.8 {
		t.Errorf("sampling %+v, %v", smp, err)
	}
	sp.Temp.SetText("-1")
	if _, err := sp.sampling(); err == nil {
		t.Error("a negative temperature accepted")
	}
	sp.Temp.SetText("0")
	sp.WorkStatus.SetText("")
	test.Tap(sp.Tune) // no pair: refused for that, not for the temperature
	if strings.Contains(sp.WorkStatus.Text, "was measured at temperature") {
		t.Errorf("same temperature refused: %q", sp.WorkStatus.Text)
	}
}

// TestGenerationLengthCaveat: a prediction holds for the generation length
// its calibration used; with a token budget more than twice as long or
// short, the Run screen says it was made for generations of that length,
// and within it says nothing of the kind.
func TestGenerationLengthCaveat(t *testing.T) {
	wb := newBench(t)
	s, r := wb.Session, wb.Run
	acc := costmodel.Uniform(0.8, 0.5, 8, 4)
	acc.MaxTokens = 64
	plan, err := profiles.ParsePlan("chain", map[string]string{"gamma": "4"})
	if err != nil {
		t.Fatal(err)
	}
	fyne.DoAndWait(func() {
		s.SetInputs(&profiles.Inputs{Acc: acc, CalID: 3})
		s.Tuned = &costmodel.Prediction{Plan: plan, Speedup: 2.5, Low: 2.2, High: 2.8}
		s.Changed()
		r.Tokens.SetText("100")
		r.useTuned()
	})
	const caveat = "made for generations of 64 tokens"
	if !strings.Contains(r.PlanNote.Text, "predicted 2.50x") || strings.Contains(r.PlanNote.Text, caveat) {
		t.Errorf("100 tokens against 64: %q", r.PlanNote.Text)
	}
	for _, n := range []string{"1024", "16"} {
		fyne.DoAndWait(func() { r.Tokens.SetText(n) })
		if !strings.Contains(r.PlanNote.Text, caveat) || !strings.Contains(r.PlanNote.Text, "up to "+n+" a prompt") {
			t.Errorf("%s tokens against 64: %q", n, r.PlanNote.Text)
		}
	}
	if note := r.lengthNote(plan, 1024); note == "" {
		t.Error("no caveat for the run's stats")
	}
	acc.MaxTokens = 0 // a calibration stored before its length was
	if note := r.lengthNote(plan, 1024); note != "" {
		t.Errorf("a length not known: %q", note)
	}
}

// TestRunMarksAssumedPrice: a plan tuned before any calibration is
// priced with the sliders' assumed acceptance; the Run screen says so
// beside its price (as the Speedup model and Export screens do), and says
// nothing of the kind for a plan tuned on a calibration.
func TestRunMarksAssumedPrice(t *testing.T) {
	wb := newBench(t)
	s, r := wb.Session, wb.Run
	plan, err := profiles.ParsePlan("chain", map[string]string{"gamma": "4"})
	if err != nil {
		t.Fatal(err)
	}
	for _, assumed := range []bool{true, false} {
		fyne.DoAndWait(func() {
			s.Tuned, s.TunedAssumed = &costmodel.Prediction{Plan: plan, Speedup: 1.7, Low: 1.4, High: 1.8}, assumed
			s.Changed()
			r.Tokens.SetText("32")
			r.useTuned()
		})
		if got := strings.Contains(r.PlanNote.Text, "assumed acceptance"); got != assumed || !strings.Contains(r.PlanNote.Text, "predicted 1.70x") {
			t.Errorf("tuned assumed %v: %q", assumed, r.PlanNote.Text)
		}
	}
	// a tune on the sliders marks its chosen plan assumed, one on a
	// calibration not
	sp := wb.Speedup
	for _, in := range []*profiles.Inputs{{}, {Acc: costmodel.Uniform(0.8, 0.5, 8, 4), CalID: 3}} {
		fyne.DoAndWait(func() {
			s.Rechecked = nil
			s.SetInputs(in)
			sp.choose(costmodel.Prediction{Plan: plan, Speedup: 1.7}, "chosen")
		})
		if want := !in.Calibrated(); s.TunedAssumed != want {
			t.Errorf("inputs calibrated %v: TunedAssumed %v", in.Calibrated(), s.TunedAssumed)
		}
	}
}
