package spec

import (
	"context"
	"slices"
	"sort"
	"testing"
	"time"

	"arborist/engine/drafter"
	"arborist/engine/model"
	"arborist/kernels"
	"arborist/kernels/cpu"
	"arborist/kernels/devicetest"
)

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }

// loadOn loads a shared model on dev (closed with the test).
func loadOn(t testing.TB, name string, dev kernels.Device) *model.Model {
	t.Helper()
	m, err := model.Load(modelPath(t, name), dev)
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
	ar, err := (&Engine{Target: plain}).Run(ctx, prompt, Config{Plan: Plan{Strategy: "ar"}, MaxTokens: n})
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
		src := drafter.NewModel(dm, 0, target.CtxLen, "copy")
		// the steady state: from the end of step 3 (the budget rule has its
		// estimates) to the end of the run
		var t0, d0, ts0, ds0 time.Duration
		var w0 time.Time
		cfg := Config{Plan: Plan{Strategy: "duo", Gamma: 8, MaxSeqs: 1}, MaxTokens: n, OnStep: func(s Step) {
			if s.Index == 3 {
				t0, d0, w0 = tdev.Busy(), ddev.Busy(), time.Now()
				ts0, ds0 = tdev.Slept(), ddev.Slept()
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
		// the stand-ins keep their script only while the host has CPU to
		// spare: when a device's busy time runs 25% over its scripted
		// latency (a loaded machine: other tests, builds), what is measured
		// is the host's contention, not the engine's overlap
		fidelity := min(float64(tdev.Slept()-ts0)/float64(busyT), float64(ddev.Slept()-ds0)/float64(busyD))
		if fidelity < 0.8 {
			t.Logf("ratio %.1f: the host is too loaded to judge overlap (the stand-ins' scripted latency is %.0f%% of their busy time)", ratio(tc.target, tc.draft), 100*fidelity)
		} else if shorter <= 0 || float64(hidden) < 0.8*float64(shorter) {
			t.Errorf("ratio %.1f: the devices were busy at once for %v of the shorter one's %v (target %v, drafter %v, wall %v): below 80%%", ratio(tc.target, tc.draft), hidden, shorter, busyT, busyD, wall)
		}
		t.Logf("ratio %.1f: %d steps, median budget %d, AAL %.2f, both devices busy for %v of the less busy one's %v (%.0f%%, script fidelity %.0f%%); %.0f tokens/s (plain decoding on the target's device: at most %.0f)",
			ratio(tc.target, tc.draft), len(res.Steps), drafted[len(drafted)/2], res.AAL(), hidden.Round(time.Millisecond), shorter.Round(time.Millisecond),
			100*float64(hidden)/float64(shorter), 100*fidelity, res.TokensPerSecond(), float64(len(res.Steps)-4)/busyT.Seconds())
	}
}

// TestDuoSequenceRule: theta = p11 * p21; candidates above it start their
// own sequences, counted down to 8, 6, 4, 3, 2 or 1 and to the budget.
func TestDuoSequenceRule(t *testing.T) {
	q1 := []float32{0.05, 0.4, 0.3, 0.2, 0.03, 0.02}
	top := []int{1, 2, 3, 0, 4, 5} // by falling probability
	for _, c := range []struct {
		p21   float32
		top   int // how many candidates the plan's MaxSeqs allows
		gamma int
		want  int
	}{
		{0.5, 6, 8, 2},        // theta 0.2: 0.4 and 0.3 (0.2 is not above)
		{0.9, 6, 8, 1},        // theta 0.36: only the top one
		{0.1, 6, 8, 4},        // theta 0.04: five above, rounded down to 4
		{0.1, 6, 3, 3},        // the same, capped by a budget of 3
		{0.1, 2, 8, 2},        // MaxSeqs 2 lists two candidates
		{0.01, 6, 8, 6},       // theta 0.004: all six
		{0.99, 6, 1, 1},       // a budget of one token: one sequence
		{0.05, 6, 1 << 20, 4}, // theta 0.02: five above 0.02 (0.02 itself is not)
	} {
		if got := duoSeqs(q1, top[:c.top], c.p21, c.gamma); got != c.want {
			t.Errorf("p21 %v, %d candidates, gamma %d: %d sequences, want %d", c.p21, c.top, c.gamma, got, c.want)
		}
	}
}

// TestDuoSequencesOnTwoDevices: with an unsure drafter (the target's first
// four layers, on their own stand-in device) the rule starts several sequences on
// some steps, the budget is split between them, and the output is still
// plain decoding's.
func TestDuoSequencesOnTwoDevices(t *testing.T) {
	plain := loadOn(t, "stories260K.gguf", cpu.New(1))
	prompt := plain.Tok.Encode("Once upon a time", true, false)
	ctx := context.Background()
	ar, err := (&Engine{Target: plain}).Run(ctx, prompt, Config{Plan: Plan{Strategy: "ar"}, MaxTokens: 48})
	if err != nil {
		t.Fatal(err)
	}
	target := loadOn(t, "stories260K.gguf", devicetest.NewSlow(cpu.New(1), 300*time.Microsecond, 0))
	self := loadOn(t, "stories260K.gguf", devicetest.NewSlow(cpu.New(1), 60*time.Microsecond, 0))
	src := drafter.NewModel(self, 4, target.CtxLen, "layers:4")
	res, err := (&Engine{Target: target, Source: src, Concurrent: true}).Run(ctx, prompt, Config{Plan: Plan{Strategy: "duo", Gamma: 8, MaxSeqs: 4}, MaxTokens: 48})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Tokens, ar.Tokens) {
		t.Fatalf("duo with several sequences on two devices wrote %v, plain decoding %v", res.Tokens, ar.Tokens)
	}
	multi := 0
	for _, s := range res.Steps {
		if s.Seqs > 1 {
			multi++
			if s.Seqs > 4 {
				t.Errorf("step %d: %d sequences, above MaxSeqs 4", s.Index, s.Seqs)
			}
		}
	}
	if multi == 0 {
		t.Errorf("an unsure drafter never started a second sequence in %d steps", len(res.Steps))
	}
	t.Logf("%d of %d steps drafted several sequences; acceptance %.0f%%", multi, len(res.Steps), 100*res.Acceptance())
}
