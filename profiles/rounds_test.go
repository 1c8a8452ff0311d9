package profiles

import (
	"context"
	"errors"
	"strings"
	"testing"

	"arborist/engine/spec"
)

// TestRunBaselineRounds: a run against plain decoding times both in
// interleaved rounds, stores the median of their ratios as the measured
// speedup and says so; a round's output must equal plain decoding's too.
func TestRunBaselineRounds(t *testing.T) {
	ps := storiesPair(t)
	ctx := context.Background()
	b := openBench(t)
	var seen []int
	opt := RunOptions{Plan: spec.Plan{Strategy: "chain", Gamma: 3}, MaxTokens: 16, Prompts: []string{"Once upon a time", "The cat"},
		Baseline: true, Rounds: 4, OnRound: func(r, n int) {
			if n != 4 {
				t.Errorf("round %d of %d, want of 4", r, n)
			}
			seen = append(seen, r)
		}}
	res, err := b.Run(ctx, ps, opt)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rounds) != 4 || len(seen) != 3 || seen[0] != 2 || seen[2] != 4 || !res.Identical {
		t.Fatalf("rounds %v, announced %v, identical %v", res.Rounds, seen, res.Identical)
	}
	if med, lo, hi := medianRange(res.Rounds); res.Speedup != med || lo <= 0 || hi < lo {
		t.Errorf("speedup %v, rounds %v", res.Speedup, res.Rounds)
	}
	if first := res.Totals.TPS() / res.Base.TPS(); res.Rounds[0] != first {
		t.Errorf("first round %v, the stored run against its baseline %v", res.Rounds[0], first)
	}
	st, _ := b.db(ctx)
	if run, err := st.Run(ctx, res.RunID); err != nil || run.MeasuredSpeedup != res.Speedup {
		t.Errorf("stored measured speedup %v, want %v (%v)", run.MeasuredSpeedup, res.Speedup, err)
	} else if _, lo, hi := medianRange(res.Rounds); run.MeasuredLow != lo || run.MeasuredHigh != hi || run.TPSLow <= 0 || run.TPSHigh < run.TPSLow {
		// the rounds' spread is stored with the run, for Compare
		t.Errorf("stored spread %v-%vx, %v-%v tokens/s; rounds %v", run.MeasuredLow, run.MeasuredHigh, run.TPSLow, run.TPSHigh, res.Rounds)
	}

	// the default: the catalog's rounds for a suite this short
	opt.Rounds, opt.OnRound = 0, nil
	if res, err := b.Run(ctx, ps, opt); err != nil || len(res.Rounds) != Choices().Rounds {
		t.Fatalf("default rounds: %v, %v", res.Rounds, err)
	}
	opt.Rounds = 101
	if _, err := b.Run(ctx, ps, opt); err == nil || !strings.Contains(err.Error(), "101 rounds") {
		t.Errorf("101 rounds: %v", err)
	}

	// stopped during the second round: the run keeps the first round's
	// figure, stored, and reports the stop
	cctx, cancel := context.WithCancel(ctx)
	opt.Rounds, opt.OnRound = 3, func(int, int) { cancel() }
	res, err = b.Run(cctx, ps, opt)
	if !errors.Is(err, context.Canceled) || res == nil || len(res.Rounds) != 1 || res.Speedup != res.Rounds[0] {
		t.Fatalf("stopped in round 2: %v, %+v", err, res)
	}
	if run, err := st.Run(ctx, res.RunID); err != nil || run.MeasuredSpeedup != res.Speedup || run.Status != "done" {
		t.Errorf("stopped run stored as %+v (%v)", run, err)
	}
}
