package costmodel_test

import (
	"context"
	"testing"

	"arborist/engine/drafter"
	"arborist/engine/model"
	"arborist/engine/model/modeltest"
	"arborist/engine/sample"
	"arborist/engine/spec"
	"arborist/kernels/cpu"
	"arborist/profiles/costmodel"
	"arborist/profiles/measure"
)

// TestReplayMatchesTheEngine: on the first step of a prompt, the EGT the
// engine runs and the EGT replayed on the calibration's probe tree of that
// same step (the same context, so the same drafter and target) accept
// exactly the same number of tokens, for plans of every branch the probe
// holds: the replay is the engine's growth, pruning and verification, not
// an estimate of them. Bench target and its noisy drafter, greedy.
func TestReplayMatchesTheEngine(t *testing.T) {
	target, draft := noisyPair(t)
	ctx := context.Background()
	plans := []costmodel.Plan{
		{Strategy: "egt", EGT: []int{1, 2, 2}, Branch: 2, WMax: 6},
		{Strategy: "egt", EGT: []int{2, 2, 2, 2}, Branch: 2, WMax: 12},
		{Strategy: "egt", EGT: []int{1, 1, 1, 1, 1, 1}, Branch: 1, WMax: 4},
		{Strategy: "egt", EGT: []int{1, 3}, Branch: 3, WMax: 5},
		{Strategy: "egt", EGT: []int{1, 1, 2, 2}, Branch: 2, WMax: 4},
	}
	mismatch := 0
	for _, prompt := range []string{"Once upon a time", "The little dog ran", "Lily and Ben", "One day, a bird"} {
		ids := target.Tok.Encode(prompt, true, false)
		eng := &spec.Engine{Target: target, Source: drafter.NewModel(draft, 0, target.CtxLen, "noisy")}
		acc, err := measure.Calibrate(ctx, eng, [][]int{ids}, 16, sample.Params{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		first := acc.Depths[:1]
		if len(first[0].Parents) == 0 || len(first[0].Path) != first[0].Accepted {
			t.Fatalf("%q: the probe was not recorded (%d nodes, path %v, %d accepted)", prompt, len(first[0].Parents), first[0].Path, first[0].Accepted)
		}
		for _, p := range plans {
			eng := &spec.Engine{Target: target, Source: drafter.NewModel(draft, 0, target.CtxLen, "noisy")}
			res, err := eng.Run(ctx, ids, spec.Config{Plan: p, MaxTokens: 16})
			if err != nil {
				t.Fatal(err)
			}
			got := costmodel.ReplayedAccepted(first, p)
			t.Logf("%q, %s: %v accepted", prompt, p, got)
			if want := float64(res.Steps[0].Accepted); got != want {
				t.Errorf("%q, %s: replayed %v accepted, the engine %v", prompt, p, got, want)
				mismatch++
			}
		}
	}
	if mismatch > 0 {
		t.Fatalf("%d of the replays differ from the engine", mismatch)
	}
}

// TestReplayThresholdMatchesTheEngine: a threshold EGT replayed on a
// calibration's first probe tree drafts as many levels and keeps as many
// tokens as the engine's first step of the same plan, over prompts and
// thresholds where the policy stops at every depth; the negative control,
// the same replay without the threshold, misses the engine's levels.
// Bench target and its noisy drafter, greedy.
func TestReplayThresholdMatchesTheEngine(t *testing.T) {
	target, draft := noisyPair(t)
	ctx := context.Background()
	// w-max holds every node: the engine reports the depth left after
	// pruning, the replay the levels drafted (what they cost);
	// TestReplayMatchesTheEngine prunes
	shapes := []costmodel.Plan{
		{Strategy: "egt", EGT: []int{1, 1, 1, 1, 1, 1}, Branch: 1, WMax: 6},
		{Strategy: "egt", EGT: []int{1, 2, 2, 2}, Branch: 2, WMax: 14},
	}
	stopped := map[int]bool{}
	mismatch, unthresholded := 0, 0
	for _, prompt := range []string{"Once upon a time", "The little dog ran", "Lily and Ben", "One day, a bird", "Tom had a red"} {
		ids := target.Tok.Encode(prompt, true, false)
		eng := &spec.Engine{Target: target, Source: drafter.NewModel(draft, 0, target.CtxLen, "noisy")}
		acc, err := measure.Calibrate(ctx, eng, [][]int{ids}, 16, sample.Params{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		first := acc.Depths[:1]
		for _, shape := range shapes {
			for _, least := range []float64{0.2, 0.35, 0.5, 0.8} {
				p := shape
				p.DepthPolicy, p.DepthMin = "threshold", least
				eng := &spec.Engine{Target: target, Source: drafter.NewModel(draft, 0, target.CtxLen, "noisy")}
				res, err := eng.Run(ctx, ids, spec.Config{Plan: p, MaxTokens: 16,
					Depth: spec.Threshold{Max: len(p.EGT), Min: least}})
				if err != nil {
					t.Fatal(err)
				}
				levels, accepted := costmodel.ReplayedUntil(first, p, least)
				step := res.Steps[0]
				stopped[levels] = true
				if levels != step.Depth || accepted != step.Accepted {
					t.Errorf("%q, %s: replayed %d levels, %d accepted; the engine %d, %d", prompt, p, levels, accepted, step.Depth, step.Accepted)
					mismatch++
				}
				if all, _ := costmodel.ReplayedUntil(first, p, 0); all >= 0 && all != step.Depth {
					unthresholded++
				}
			}
		}
	}
	if mismatch > 0 {
		t.Fatalf("%d of the replays differ from the engine", mismatch)
	}
	if len(stopped) < 3 || unthresholded == 0 {
		t.Fatalf("the cases stop at depths %v only, and the replay without the threshold missed the engine's depth %d times: too weak a test", stopped, unthresholded)
	}
}

// noisyPair is the bench target and its noisy drafter (skipped without
// ../shared).
func noisyPair(t *testing.T) (target, draft *model.Model) {
	t.Helper()
	p := modeltest.Shared(t, "models/bench/target-60m-q8_0.gguf")
	be := cpu.New(cpu.DefaultThreads())
	t.Cleanup(be.Close)
	target, err := model.Load(p, be)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { target.Close() })
	draft, err = model.Load(modeltest.Shared(t, "models/bench/draft-noisy-0.05.gguf"), target.Backend)
	if err != nil {
		t.Skipf("noisy drafter: %v", err)
	}
	t.Cleanup(func() { draft.Close() })
	return target, draft
}
