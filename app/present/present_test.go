package present

import (
	"strings"
	"testing"
	"time"

	"arborist/profiles"
	"arborist/profiles/costmodel"
	"arborist/profiles/latency"
)

// TestHuman: counts and sizes at each suffix, and the boundaries between
// them.
func TestHuman(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 999: "999", 1000: "1.0K", 147_800: "147.8K", 35e6: "35.00M", 7.24e9: "7.24B"} {
		if got := Human(v, ""); got != want {
			t.Errorf("Human(%g) = %q, want %q", v, got, want)
		}
	}
	for b, want := range map[uint64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 157_900: "154.2 KiB", 3 << 20: "3.0 MiB", 5 << 30: "5.00 GiB"} {
		if got := HumanBytes(b); got != want {
			t.Errorf("HumanBytes(%d) = %q, want %q", b, got, want)
		}
	}
}

// TestFamilies: a ranking splits into every family it holds, each with its
// best plan at every number of draft levels, in the strategies' order; the
// plan named as the best is on its family's line even where another plan
// of that family and level priced the same or more.
func TestFamilies(t *testing.T) {
	flat := []latency.Point{{W: 1, Median: 10 * time.Millisecond}, {W: 64, Median: 14 * time.Millisecond}}
	ranked := costmodel.Search(costmodel.Uniform(0.8, 0.4, 8, 4), costmodel.Costs{Verify: flat, Draft: flat[:1]}, costmodel.SearchSpace{MaxGamma: 6, MaxDepth: 4, MaxNodes: 16})
	strategies := profiles.Choices().Strategies
	fams := Families(ranked, nil, strategies)
	seen := map[string]bool{}
	for _, p := range ranked {
		seen[p.Plan.Strategy] = true
	}
	if len(fams) != len(seen) || len(fams) < 4 {
		t.Fatalf("%d families for %d strategies: %+v", len(fams), len(seen), seen)
	}
	order := map[string]int{}
	for i, s := range strategies {
		order[s] = i
	}
	for i, f := range fams {
		if i > 0 && order[fams[i-1].Strategy] >= order[f.Strategy] {
			t.Errorf("family %s listed after %s", f.Strategy, fams[i-1].Strategy)
		}
		for j, p := range f.Best {
			if j > 0 && Levels(f.Best[j-1]) >= Levels(p) {
				t.Errorf("%s: levels out of order", f.Strategy)
			}
			for _, q := range ranked {
				if q.Plan.Strategy == f.Strategy && Levels(q) == Levels(p) && q.Speedup > p.Speedup {
					t.Errorf("%s at %d levels: %s (%.3fx) drawn, %s priced %.3fx", f.Strategy, Levels(p), p.Plan, p.Speedup, q.Plan, q.Speedup)
				}
			}
		}
	}
	// a strategy the order does not name comes last
	if fams := Families(ranked, nil, strategies[1:]); fams[len(fams)-1].Strategy != strategies[0] {
		t.Errorf("unnamed strategy %s not last: %v", strategies[0], fams[len(fams)-1].Strategy)
	}
	// the named best is drawn, even against a tie of its family and level
	named := ranked[len(ranked)/2]
	named.Speedup = 1e6
	found := false
	for _, f := range Families(ranked, &named, strategies) {
		for _, p := range f.Best {
			found = found || (p.Plan.String() == named.Plan.String() && p.Speedup == named.Speedup)
		}
	}
	if !found {
		t.Errorf("the named best %s is on no line", named.Plan)
	}
}

// TestMeasuredNote: a speedup reads with its rounds and their range, one
// round as one round, plain decoding as its own baseline, and nothing
// without a baseline.
func TestMeasuredNote(t *testing.T) {
	tot, base := profiles.Totals{Tokens: 200, Decode: time.Second}, profiles.Totals{Tokens: 100, Decode: time.Second}
	r := &profiles.RunResult{Totals: tot, Base: &base, Speedup: 2.1, Rounds: []float64{2, 2.1, 2.4, 1.9},
		RoundTPS: [][2]float64{{200, 100}, {210, 100}, {240, 100}, {190, 100}}}
	// the figures beside the speedup are the rounds' medians, not the
	// first round's (200 against 100)
	if got, want := MeasuredNote(r), "2.10x over plain decoding, the median of 4 interleaved rounds (1.90-2.40x; medians 205.0 against 100.0 tokens/s)"; got != want {
		t.Errorf("four rounds: %q, want %q", got, want)
	}
	r.Rounds, r.Speedup = []float64{2}, 2
	if got, want := MeasuredNote(r), "2.00x over plain decoding (200.0 against 100.0 tokens/s, one round)"; got != want {
		t.Errorf("one round: %q, want %q", got, want)
	}
	r.SelfBaseline = true
	if got := MeasuredNote(r); !strings.Contains(got, "its own baseline") {
		t.Errorf("plain decoding: %q", got)
	}
	if got := MeasuredNote(&profiles.RunResult{Totals: tot}); got != "" {
		t.Errorf("no baseline: %q", got)
	}
}

// TestAheadNote: a run that drafted ahead says on how many steps and how
// often the verdict met what was prepared; one that did not says nothing.
func TestAheadNote(t *testing.T) {
	if n := AheadNote(&profiles.Totals{Steps: 10}); n != "" {
		t.Errorf("nothing drafted ahead: %q", n)
	}
	n := AheadNote(&profiles.Totals{Steps: 10, Ahead: 8, AheadHits: 6, Wait: 5 * time.Millisecond})
	if !strings.Contains(n, "drafted ahead on 8 steps") || !strings.Contains(n, "on 6 (75%)") || !strings.Contains(n, "waiting 0.500 ms a step") {
		t.Errorf("note: %q", n)
	}
}

// TestPredictorVerdict: the verdict names exactly the policies that were
// faster on held-out prompts (a predictor faster than the best fixed depth
// but slower than the best threshold is not said to be slower than both),
// and offers the plan when it beat both; the summary ends with it.
func TestPredictorVerdict(t *testing.T) {
	r := &profiles.PredictorReport{ID: 1, Plan: profiles.Plan{Strategy: "egt"}}
	r.Stats.Fixed = []float64{1.414, 1.672, 1.641}
	r.Stats.BestFixed = 2
	r.Stats.Threshold, r.Stats.ThresholdSpeedup = 0.35, 1.797
	r.Stats.Predictor = 1.748
	v := PredictorVerdict(r)
	if !strings.Contains(v, "best threshold (0.35, 1.797x)") || strings.Contains(v, "fixed depth (") || !strings.Contains(v, "tune leaves it out") {
		t.Errorf("faster than the fixed depth, slower than the threshold: %q", v)
	}
	if s := PredictorSummary(r); !strings.HasPrefix(s, "Depth predictor 1 for") || !strings.HasSuffix(s, v) || !strings.Contains(s, "held-out") {
		t.Errorf("summary %q", s)
	}
	r.Stats.Predictor = 1.6
	if v := PredictorVerdict(r); !strings.Contains(v, "best fixed depth (2, 1.672x) and the best threshold") {
		t.Errorf("slower than both: %q", v)
	}
	r.Stats.Predictor, r.Stats.Beats = 1.9, true
	if v := PredictorVerdict(r); !strings.Contains(v, "tune prices and offers") || strings.Contains(v, "slower") {
		t.Errorf("faster than both: %q", v)
	}
}

// TestSplit: a split reads as how much each part made the prediction high
// (+) or low (-), and as nothing where the runs measured no steps.
func TestSplit(t *testing.T) {
	ms := time.Millisecond
	e := profiles.ErrorSplit{AALPredicted: 4, AALMeasured: 4, StepPredicted: 8 * ms, StepMeasured: 10 * ms, BasePredicted: 4 * ms, BaseMeasured: 5 * ms}
	// a step 25% longer than priced made the prediction high; plain
	// decoding's token priced 20% short made it low
	if got, w := Split(e), "tokens a step 4.00 against 4.00 (+0%), a step 8ms against 10ms (+25%), plain decoding's token 4ms against 5ms (-20%)"; got != w {
		t.Errorf("split reads %q, want %q", got, w)
	}
	if got := Split(profiles.ErrorSplit{}); got != "" {
		t.Errorf("no steps: %q", got)
	}
}

// TestPrice: a prediction reads with its interval where it has one.
func TestPrice(t *testing.T) {
	pr := profiles.Prediction{Speedup: 2.93, Low: 2.4, High: 3.41}
	if got := Price(pr); got != "2.93x (2.40-3.41x)" {
		t.Errorf("with an interval: %q", got)
	}
	pr.Low, pr.High = 0, 0
	if got := Price(pr); got != "2.93x" {
		t.Errorf("without: %q", got)
	}
}

// TestCount: one is singular, any other count plural.
func TestCount(t *testing.T) {
	for n, want := range map[int]string{0: "0 requests", 1: "1 request", 2: "2 requests"} {
		if got := Count(n, "request"); got != want {
			t.Errorf("%d: %q", n, got)
		}
	}
}
