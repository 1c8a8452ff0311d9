package app

import (
	"strings"
	"testing"
	"time"

	"arborist/profiles"
	"arborist/profiles/costmodel"
	"arborist/profiles/latency"
)

func standInCurve(base time.Duration) []latency.Point {
	var pts []latency.Point
	for _, w := range []int{1, 4, 16, 64} {
		pts = append(pts, latency.Point{W: w, Median: base + time.Duration(w)*base/10, Spread: base / 50})
	}
	return pts
}

// TestFamilySpec: one line per measured context, and the suite's range
// marked by the curves at its ends; a suite reaching past the longest
// measured context is marked only up to it and the note says so.
func TestFamilySpec(t *testing.T) {
	fam := []profiles.ContextCurve{{Context: 128, Verify: standInCurve(time.Millisecond)}, {Context: 1024, Verify: standInCurve(2 * time.Millisecond)}, {Context: 4096, Verify: standInCurve(5 * time.Millisecond)}}
	spec, note := familySpec(fam, profiles.ContextRange{Low: 128, High: 1024, Steps: 10, First: 300, Last: 900, Longest: 4096})
	if len(spec.Series) != 5 || spec.Series[0].Name != "context 128" || !strings.Contains(spec.Series[3].Name, "300") || !strings.Contains(spec.Series[4].Name, "900") {
		t.Fatalf("series: %v", names(spec.Series))
	}
	// the marks are drawn dashed over the measured curves, and say so
	for i, s := range spec.Series {
		if mark := i >= 3; s.Dashed != mark || mark != strings.Contains(s.Name, "dashed") {
			t.Errorf("series %s: dashed %v", s.Name, s.Dashed)
		}
	}
	// the marks lie between the measured curves around them
	if y := spec.Series[3].Y[0]; y <= spec.Series[0].Y[0] || y >= spec.Series[1].Y[0] {
		t.Errorf("the mark at 300 tokens: %.3f ms, not between context 128's and 1024's", y)
	}
	if !strings.Contains(note, "contexts 128-1024") {
		t.Errorf("note %q", note)
	}
	spec, note = familySpec(fam, profiles.ContextRange{Low: 128, High: 4096, Steps: 10, First: 300, Last: 9000, Beyond: 3, Longest: 4096})
	if last := spec.Series[len(spec.Series)-1]; !strings.Contains(last.Name, "4096") || last.Y[0] != spec.Series[2].Y[0] {
		t.Errorf("the longest mark past the measured: %s %v", last.Name, last.Y)
	}
	if !strings.Contains(note, "past the longest measured (4096)") {
		t.Errorf("note %q", note)
	}
	// no calibration: the family alone
	if spec, _ := familySpec(fam, profiles.ContextRange{}); len(spec.Series) != 3 {
		t.Errorf("without a suite: %v", names(spec.Series))
	}
}

func names(ss []Series) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}

// TestConcurrencySpecs: plain batching and the two best plans, fixed and
// under goodput, each a line over the concurrencies priced, with error
// bars covering the intervals; a level not priced is named in the note.
func TestConcurrencySpecs(t *testing.T) {
	chain := func(g int) profiles.Plan { return profiles.Plan{Strategy: "chain", Gamma: g} }
	lp := func(c int, p profiles.Plan, policy string, speedup float64) costmodel.LoadPrediction {
		return costmodel.LoadPrediction{Concurrency: c, Plan: p, Policy: policy, Speedup: speedup, Low: speedup * 0.9, High: speedup * 1.2,
			TPOT: time.Duration(float64(10*time.Millisecond) / speedup)}
	}
	var levels []profiles.LoadRanking
	for _, c := range []int{1, 4} {
		levels = append(levels, profiles.LoadRanking{Concurrency: c, Ranked: []costmodel.LoadPrediction{
			lp(c, chain(4), "goodput", 2), lp(c, chain(4), "fixed", 1.9), lp(c, chain(2), "fixed", 1.5), lp(c, chain(2), "goodput", 1.6),
			lp(c, chain(6), "fixed", 1.2), lp(c, profiles.Plan{Strategy: "ar"}, "plain", 1)}})
	}
	levels = append(levels, profiles.LoadRanking{Concurrency: 8, Err: "passes of 8 sequences not measured"})
	sp, tp, note := concurrencySpecs(levels)
	if len(sp.Series) != 5 || len(tp.Series) != 5 {
		t.Fatalf("series: %v", names(sp.Series))
	}
	for i, s := range sp.Series {
		if len(s.X) != 2 || s.X[0] != 1 || s.X[1] != 4 || strings.Contains(s.Name, "gamma 6") {
			t.Errorf("series %s: %v", s.Name, s.X)
		}
		if s.Err[0] < s.Y[0]*0.2-1e-9 {
			t.Errorf("%s: bar %.3f does not cover the interval up to %.3f", s.Name, s.Err[0], s.Y[0]*1.2)
		}
		if tp.Series[i].Y[0] <= 0 {
			t.Errorf("%s: time a token %.3f", s.Name, tp.Series[i].Y[0])
		}
	}
	if !strings.Contains(note, "C=8") {
		t.Errorf("note %q", note)
	}
}
