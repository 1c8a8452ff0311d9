package spec

import (
	"context"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"arborist/engine/drafter"
	"arborist/engine/model"
	"arborist/engine/sample"
	"arborist/kernels"
	"arborist/kernels/cpu"
	"arborist/kernels/devicetest"
)

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }

// loadOn loads a shared model on dev (closed with the test).
func loadOn(t *testing.T, name string, dev kernels.Device) *model.Model {
	t.Helper()
	m, err := model.Load(filepath.Join(sharedModels(t), name), dev)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(); dev.Close() })
	return m
}

// TestDuoOnTwoDevices runs DuoDecoding as published: the target on one
// device and the drafter on another, each a stand-in with scripted
// latencies (devicetest.Slow: sleeping takes no CPU, so the two run truly
// at once on two cores). For two latency ratios it proves
//   - concurrency: once the budget rule has its estimates, the two
//     devices' busy times add up to more than the wall time by over 80%
//     of the shorter one (had they taken turns, the wall time would be at
//     least their sum);
//   - adaptation: the draft budget settles at round(T_target / T_draft);
//   - losslessness: the output equals plain decoding on the target device.
//
// The drafter is the target's own weights on the second device, so every
// draft is accepted and the budget alone sets the step.
func TestDuoOnTwoDevices(t *testing.T) {
	const n = 64
	plain := loadOn(t, "stories260K.gguf", cpu.New(1))
	prompt := plain.Tok.Encode("Once upon a time", true, false)
	ctx := context.Background()
	ar, err := (&Engine{Target: plain}).Run(ctx, prompt, Config{Strategy: "ar", MaxTokens: n})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		target, draft time.Duration // per matrix product
		gamma         int
	}{{2 * time.Millisecond, 667 * time.Microsecond, 3}, {2 * time.Millisecond, 400 * time.Microsecond, 5}} {
		tdev := devicetest.NewSlow(cpu.New(1), tc.target, 0)
		ddev := devicetest.NewSlow(cpu.New(1), tc.draft, 0)
		target := loadOn(t, "stories260K.gguf", tdev)
		dm := loadOn(t, "stories260K.gguf", ddev)
		src := drafter.NewModel(dm, 0, target.CtxLen, sample.Params{}, "copy")
		// the steady state: from the end of step 3 (the budget rule has its
		// estimates) to the end of the run
		var t0, d0 time.Duration
		var w0 time.Time
		cfg := Config{Strategy: "duo", Gamma: 8, MaxSeqs: 1, MaxTokens: n, OnStep: func(s Step) {
			if s.Index == 3 {
				t0, d0, w0 = tdev.Busy(), ddev.Busy(), time.Now()
			}
		}}
		res, err := (&Engine{Target: target, Source: src, Concurrent: true}).Run(ctx, prompt, cfg)
		wall := time.Since(w0)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.Tokens, ar.Tokens) {
			t.Fatalf("ratio %.1f: duo on two devices wrote %v, plain decoding %v", ratio(tc.target, tc.draft), res.Tokens, ar.Tokens)
		}
		// each device's busy time (its products and their scripted
		// latency, as slept); had they taken turns, the run would have
		// lasted at least their sum
		busyT, busyD := tdev.Busy()-t0, ddev.Busy()-d0
		hidden, shorter := busyT+busyD-wall, min(busyT, busyD)
		var drafted []int
		for i, s := range res.Steps {
			if i >= 3 && i < len(res.Steps)-1 { // after the rule's first estimates, before the context's end
				drafted = append(drafted, s.Drafted)
			}
		}
		sort.Ints(drafted)
		if len(drafted) == 0 {
			t.Fatalf("ratio %.1f: only %d steps", ratio(tc.target, tc.draft), len(res.Steps))
		}
		if g := drafted[len(drafted)/2]; g < tc.gamma-1 || g > tc.gamma+1 {
			t.Errorf("ratio %.1f: median draft budget %d (%v), want %d +- 1", ratio(tc.target, tc.draft), g, drafted, tc.gamma)
		}
		if shorter <= 0 || float64(hidden) < 0.8*float64(shorter) {
			t.Errorf("ratio %.1f: the devices were busy at once for %v of the shorter one's %v (target %v, drafter %v, wall %v): below 80%%", ratio(tc.target, tc.draft), hidden, shorter, busyT, busyD, wall)
		}
		t.Logf("ratio %.1f: %d steps, median budget %d, AAL %.2f, both devices busy for %v of the less busy one's %v (%.0f%%); %.0f tokens/s (plain decoding on the target's device: at most %.0f)",
			ratio(tc.target, tc.draft), len(res.Steps), drafted[len(drafted)/2], res.AAL(), hidden.Round(time.Millisecond), shorter.Round(time.Millisecond),
			100*float64(hidden)/float64(shorter), res.TokensPerSecond(), float64(len(res.Steps)-4)/busyT.Seconds())
	}
}
