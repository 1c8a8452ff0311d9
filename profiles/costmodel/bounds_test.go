package costmodel

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"arborist/profiles/latency"
)

// TestPredictionsWithinBounds: fed a noisy, non-monotone curve (T_verify(4)
// measured below T_verify(1), as a busy machine reads it) profiled only
// up to W = 8, every plan the search ranks stays within its physical
// bound (speedup at most its tokens a step), verifies no more than the
// profile measured, and carries an interval around its speedup; wider
// plans are counted as left out, never extrapolated.
func TestPredictionsWithinBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var verify []latency.Point
	for w := 1; w <= 8; w++ {
		ms := 6.5 + 0.4*float64(w) + rng.Float64()*3 // noise of several steps
		if w == 4 {
			ms = 2 // far below T_verify(1)
		}
		verify = append(verify, latency.Point{W: w, Median: time.Duration(ms * float64(time.Millisecond)), Spread: 300 * time.Microsecond, Reps: 5})
	}
	acc := Uniform(0.8, 0.4, 8, 4)
	for i := 0; i < 200; i++ {
		acc.Depths = append(acc.Depths, DepthSample{Best: []float64{0.9, 0.8}, Accepted: i % 4})
	}
	c := Costs{Verify: verify, Draft: flat(200 * time.Microsecond), Overhead: 100 * time.Microsecond}
	got := SearchAll(acc, c, SearchSpace{MaxNodes: 48})
	if got.Beyond == 0 || got.Widest != 8 || len(got.Ranked) == 0 {
		t.Fatalf("left out %d, widest %d, ranked %d", got.Beyond, got.Widest, len(got.Ranked))
	}
	for _, pr := range got.Ranked {
		if pr.Speedup > pr.AAL*(1+1e-9) {
			t.Errorf("%s predicted %.2fx above its %.2f tokens a step", pr.Plan, pr.Speedup, pr.AAL)
		}
		if pr.Nodes+1 > 8 {
			t.Errorf("%s verifies %d tokens, the profile measured 8", pr.Plan, pr.Nodes+1)
		}
		if !(pr.Low <= pr.Speedup && pr.Speedup <= pr.High) {
			t.Errorf("%s: interval %.3f-%.3f around %.3f", pr.Plan, pr.Low, pr.High, pr.Speedup)
		}
	}
	// the curve the model reads never falls with W
	m := Monotone(verify)
	for i := 1; i < len(m); i++ {
		if m[i].Median < m[i-1].Median {
			t.Fatalf("monotone curve falls at W=%d: %v", m[i].W, m)
		}
	}
	// a plan beyond the profile is refused by name
	if _, err := Predict(Plan{Strategy: "chain", Gamma: 12}, acc, c); !errors.Is(err, ErrBeyondProfile) {
		t.Errorf("chain gamma=12 on a curve up to W=8: %v", err)
	}
}

// TestMonotone: pool adjacent violators keeps a rising curve as it is and
// replaces a run that falls by its weighted mean.
func TestMonotone(t *testing.T) {
	pts := []latency.Point{{W: 1, Median: 10, Reps: 1}, {W: 2, Median: 4, Reps: 1}, {W: 3, Median: 7, Reps: 1}, {W: 4, Median: 20, Reps: 1}}
	want := []time.Duration{7, 7, 7, 20}
	for i, p := range Monotone(pts) {
		if p.Median != want[i] || p.W != pts[i].W {
			t.Errorf("point %d: %v, want median %v", i, p, want[i])
		}
	}
	if pts[1].Median != 4 {
		t.Error("Monotone changed its input")
	}
	rising := []latency.Point{{W: 1, Median: 1}, {W: 2, Median: 2}}
	for i, p := range Monotone(rising) {
		if p != rising[i] {
			t.Errorf("a rising curve changed: %v", p)
		}
	}
}
