package costmodel

import (
	"math"
	"strings"
	"testing"
	"time"
)

// TestCutReplay: on the hand-worked probe of TestReplayEGT, the EGT
// widths 1,1 branch 2 keeps, with w-max 3, 1 token of every path at depth
// 1 and 1, 1, 2 at depth 2; the frontier's best path is 0.6 at depth 1 and
// 0.33 at depth 2 (node 2, under node 0, the one node expanded).
func TestCutReplay(t *testing.T) {
	probe := []int16{-1, -1, 0, 0, 1, 1}
	pathP := []float32{0.6, 0.3, 0.33, 0.24, 0.27, 0.015}
	var samples []DepthSample
	for _, path := range [][]int16{{1, 4}, {0, 3}, {0, 2}} {
		samples = append(samples, DepthSample{Accepted: len(path), Parents: probe, PathP: pathP, Path: path})
	}
	p := Plan{Strategy: "egt", EGT: []int{1, 1}, Branch: 2, WMax: 3}
	kept, best, ok := CutReplay(p, samples)
	if !ok {
		t.Fatal("not replayed")
	}
	want := [][]int{{1, 1}, {1, 1}, {1, 2}}
	for i := range want {
		if kept[i][0] != want[i][0] || kept[i][1] != want[i][1] || len(best[i]) != 2 || math.Abs(best[i][0]-0.6) > 1e-6 || math.Abs(best[i][1]-0.33) > 1e-6 {
			t.Errorf("step %d: kept %v, best %v; want %v, [0.6 0.33]", i, kept[i], best[i], want[i])
		}
	}
	if _, _, ok := CutReplay(Plan{Strategy: "egt", EGT: []int{1, 1, 1}, Branch: 3, WMax: 8}, samples); ok {
		t.Error("a shape wider than the probe was replayed")
	}
	if _, _, ok := CutReplay(p, append(samples, DepthSample{Accepted: 1})); ok {
		t.Error("a step without its probe was replayed")
	}
}

// TestLearnedPolicyPricedAndOffered: a depth predictor is priced as the
// mix of its shape cut to the depths it drafted on its held-out steps,
// with its inference on every step and the share of tokens it kept; the
// search offers it only when it beat the fixed depths and thresholds, and
// a plan naming another predictor or another shape is refused.
func TestLearnedPolicyPricedAndOffered(t *testing.T) {
	acc := Uniform(0.7, 0.5, 8, 4)
	c := Costs{Verify: flat(time.Millisecond), Draft: flat(100 * time.Microsecond)}
	shape := Plan{Strategy: "egt", EGT: []int{1, 1, 1, 1}, Branch: 1, WMax: 4}
	l := Learned{Plan: shape, Levels: []float64{0, 0.5, 0, 0, 0.5}, Share: 0.8, Infer: 20 * time.Microsecond, Beats: true}
	l.Plan.DepthPolicy, l.Plan.PredictorID = "predictor", 7
	acc.Learned = []Learned{l}
	pr, err := Predict(l.Plan, acc, c)
	if err != nil {
		t.Fatal(err)
	}
	full, _ := Predict(shape, acc, c)
	one := shape
	one.EGT = shape.EGT[:1]
	cut, _ := Predict(one, acc, c)
	if want := 1 + (full.AAL-1)*0.8; math.Abs(pr.AAL-want) > 1e-9 {
		t.Errorf("AAL %v, want %v", pr.AAL, want)
	}
	if want := (full.Step+cut.Step)/2 + l.Infer; pr.Step < want-time.Microsecond || pr.Step > want+time.Microsecond {
		t.Errorf("step %v, want %v", pr.Step, want)
	}
	if pr.Speedup > pr.AAL || pr.Low > pr.Speedup || pr.High < pr.Speedup {
		t.Errorf("out of bounds: %+v", pr)
	}
	offered := func() bool {
		for _, r := range Search(acc, c, SearchSpace{MaxDepth: 3, MaxNodes: 8}) {
			if r.Plan.DepthPolicy == "predictor" && r.Plan.PredictorID == 7 {
				return true
			}
		}
		return false
	}
	if !offered() {
		t.Error("a predictor that beat the fixed depths is not offered")
	}
	acc.Learned[0].Beats = false
	if offered() {
		t.Error("a predictor that did not beat the fixed depths is offered")
	}
	other := l.Plan
	other.PredictorID = 8
	if _, err := Predict(other, acc, c); err == nil || !strings.Contains(err.Error(), "not trained on this calibration") {
		t.Errorf("another predictor: %v", err)
	}
	wider := l.Plan
	wider.Branch = 2
	if _, err := Predict(wider, acc, c); err == nil || !strings.Contains(err.Error(), "was trained for") {
		t.Errorf("another shape: %v", err)
	}
}

// TestPolicyMixWeighsKinds: with one kind of step every step weighs the
// same; the shares sum to one.
func TestPolicyMixWeighsKinds(t *testing.T) {
	aal, shares := PolicyMix([]bool{false, false, false, false}, []int{1, 2, 2, 3}, []int{1, 0, 2, 3}, nil)
	if math.Abs(aal-(1+6.0/4)) > 1e-12 || len(shares) != 4 || shares[2] != 0.5 || shares[1] != 0.25 || shares[3] != 0.25 {
		t.Errorf("aal %v, shares %v", aal, shares)
	}
}
