package profiles

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"arborist/engine/hidden"
	"arborist/engine/model"
	"arborist/engine/model/modeltest"
	"arborist/engine/spec"
	"arborist/kernels"
	"arborist/kernels/cpu"
	"arborist/profiles/config"
	"arborist/profiles/costmodel"
	"arborist/profiles/latency"
	"arborist/profiles/measure"
	"arborist/profiles/pairs"
)

// A second CPU backend under another name stands in, in these tests, for
// a second device (a GPU target with a CPU drafter runs the same code).
func init() {
	kernels.Register(kernels.Registration{
		Name:           "cpu-second",
		New:            func(threads int) (kernels.Device, error) { return cpu.New(threads), nil },
		DefaultThreads: func() int { return 1 },
		Kernels:        cpu.Kernels,
	})
}

// TestPairOnTwoDevices: every draft source that can move (a draft model,
// the layer-skip drafter, the hidden-state drafter) opens on the draft
// device, on a backend of its own, concurrent with the target; n-gram
// drafting stays where it is; greedy duo and AOT egt on the pair write
// exactly what plain decoding writes.
func TestPairOnTwoDevices(t *testing.T) {
	target, m, hfile := storiesWithHidden(t)
	prompt := m.Tok.Encode("Once upon a time", true, false)
	ctx := context.Background()
	ar, err := (&spec.Engine{Target: m}).Run(ctx, prompt, spec.Config{Plan: spec.Plan{Strategy: "ar"}, MaxTokens: 40})
	if err != nil {
		t.Fatal(err)
	}
	for name, ps := range map[string]pairs.Spec{
		"draft model": {Target: target, Draft: target},
		"layer-skip":  {Target: target, Layers: 2},
		"hidden":      {Target: target, DraftHidden: hfile},
	} {
		ps.Threads, ps.DraftBackend = 1, "cpu-second"
		p, err := pairs.Open(ps, false)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !p.Concurrent || p.DraftBackend == p.Backend || p.DraftBackend.Threads() != 1 {
			t.Errorf("%s: concurrent %v, drafter on the target's backend %v", name, p.Concurrent, p.DraftBackend == p.Backend)
		}
		for _, cfg := range []spec.Config{{Plan: spec.Plan{Strategy: "duo", Gamma: 4}}, {Plan: spec.Plan{Strategy: "egt", EGT: []int{1, 2, 2}, Branch: 2, WMax: 6, AOT: true}}, {Plan: spec.Plan{Strategy: "chain", Gamma: 3}}} {
			cfg.MaxTokens = 40
			res, err := (&spec.Engine{Target: p.Target, Source: p.Source, Concurrent: p.Concurrent}).Run(ctx, prompt, cfg)
			if err != nil {
				t.Fatalf("%s %s: %v", name, cfg.Strategy, err)
			}
			if !slices.Equal(res.Tokens, ar.Tokens) {
				t.Errorf("%s %s on two devices: %v, plain decoding %v", name, cfg.Strategy, res.Tokens, ar.Tokens)
			}
		}
		p.Close()
	}
	// on one device, a concurrent plan gives every source but n-gram its
	// own backend and threads (AOT and duo for every draft source)
	for name, ps := range map[string]pairs.Spec{"layer-skip": {Target: target, Layers: 2}, "hidden": {Target: target, DraftHidden: hfile}} {
		ps.Threads = 2
		p, err := pairs.Open(ps, true)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !p.Concurrent || p.DraftBackend == p.Backend || p.Backend.Threads() != 1 || p.DraftBackend.Threads() != 1 {
			t.Errorf("%s, concurrent on one device: concurrent %v, threads %d + %d", name, p.Concurrent, p.Backend.Threads(), p.DraftBackend.Threads())
		}
		cfg := spec.Config{Plan: spec.Plan{Strategy: "egt", EGT: []int{1, 2, 2}, Branch: 2, WMax: 6, AOT: true}, MaxTokens: 40}
		res, err := (&spec.Engine{Target: p.Target, Source: p.Source, Concurrent: p.Concurrent}).Run(ctx, prompt, cfg)
		if err != nil || !slices.Equal(res.Tokens, ar.Tokens) {
			t.Errorf("%s with AOT: %v, %v; plain decoding %v", name, err, res.Tokens, ar.Tokens)
		}
		p.Close()
	}
	// n-gram drafting has no device: it stays on the host, not concurrent
	p, err := pairs.Open(pairs.Spec{Target: target, NGram: 3, Threads: 1, DraftBackend: "cpu-second"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if p.Concurrent || p.DraftBackend != p.Backend {
		t.Errorf("n-gram on a draft device: concurrent %v", p.Concurrent)
	}
	p.Close()
	if _, err := pairs.Open(pairs.Spec{Target: target, Threads: 1, DraftBackend: "cpu-second"}, false); err == nil {
		t.Error("a draft device without a draft source was accepted")
	}
	if _, err := pairs.Open(pairs.Spec{Target: target, Draft: target, Threads: 1, DraftBackend: "tpu"}, false); err == nil {
		t.Error("an unknown draft device was accepted")
	}
}

// TestEquivalentsTwoDevices: the llama.cpp command places each model as
// the plan does (-ngl, -ngld: a draft model on the CPU beside a GPU
// target, on the GPU beside a CPU target, both on the GPU), and a split
// says where vLLM and SGLang cannot follow.
func TestEquivalentsTwoDevices(t *testing.T) {
	c := config.New(pairs.Spec{Target: "/m/t.gguf", Draft: "/m/d.gguf"}, config.Hardware{}, 8, 4096, "Q4_K", costmodel.Prediction{Plan: costmodel.Plan{Strategy: "duo", Gamma: 4}, Speedup: 1.5, AAL: 3})
	c.Models.Target.Device, c.Models.Draft.Device = "cuda", "cpu"
	eq := c.Equivalents()
	for _, want := range []string{"-ngl 99 -ngld 0", "drafts on cpu while the target verifies on cuda", "cannot place it elsewhere"} {
		if !strings.Contains(eq, want) {
			t.Errorf("equivalents lack %q:\n%s", want, eq)
		}
	}
	c.Models.Draft.Device = "cuda"
	if eq := c.Equivalents(); !strings.Contains(eq, "-ngl 99 -ngld 99") || strings.Contains(eq, "DuoDecoding's split") {
		t.Errorf("both on the GPU, yet:\n%s", eq)
	}
	c.Models.Target.Device = "cpu" // a small card: the drafter on the GPU
	if eq := c.Equivalents(); !strings.Contains(eq, "-ngl 0 -ngld 99") || !strings.Contains(eq, "cannot place it elsewhere") {
		t.Errorf("drafter on the GPU, target on the CPU, yet:\n%s", eq)
	}
	c.Models.Draft.Device = "cpu"
	if eq := c.Equivalents(); strings.Contains(eq, "-ngl") {
		t.Errorf("both on the CPU, yet:\n%s", eq)
	}
	c = config.New(pairs.Spec{Target: "/m/t.gguf"}, config.Hardware{}, 8, 4096, "Q4_K", costmodel.Prediction{Plan: costmodel.Plan{Strategy: "ar"}, Speedup: 1, AAL: 1})
	c.Models.Target.Device = "cuda"
	if eq := c.Equivalents(); !strings.Contains(eq, "-ngl 99 --temp") {
		t.Errorf("plain decoding on the GPU, yet:\n%s", eq)
	}
}

// TestRecheckDraftingKinds: a pair drafts between the re-check's passes as
// its steps do: a draft model and a hidden-state source (fed the context's
// hidden states) do, a layer-skip source does not; the calibration's engine
// says the same (DraftingOf); a window read with each drafts the same way,
// its moments' ratios are positive, and a re-check pools it only once it
// has MinWindowSlots moments and drafts as it did.
func TestRecheckDraftingKinds(t *testing.T) {
	target, _, hfile := storiesWithHidden(t)
	ctx := context.Background()
	for name, c := range map[string]struct {
		ps   pairs.Spec
		kind string
	}{
		"draft model": {pairs.Spec{Target: target, Draft: target}, "draft model"},
		"hidden":      {pairs.Spec{Target: target, DraftHidden: hfile}, "hidden-state drafter"},
		"layer-skip":  {pairs.Spec{Target: target, Layers: 2}, ""},
	} {
		c.ps.Threads = 1
		p, err := pairs.Open(c.ps, false)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		dr := p.Drafting()
		if dr.Kind() != c.kind || pairs.DraftingOf(&spec.Engine{Target: p.Target, Source: p.Source}).Kind() != c.kind {
			t.Errorf("%s: drafting %q (engine %q), want %q", name, dr.Kind(), pairs.DraftingOf(&spec.Engine{Target: p.Target, Source: p.Source}).Kind(), c.kind)
		}
		ws, err := measure.NewWindowSampler(ctx, p.Target, dr, 8)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		stored, err := measure.VerifyCurve(ctx, p.Target, []int{1, 2, 4, 8}, measure.CurveOptions{MinReps: 3, MaxReps: 3})
		if err != nil {
			t.Fatal(err)
		}
		var curve []latency.Point
		for _, pt := range stored {
			curve = append(curve, latency.Point{W: pt.W, Median: pt.Median, Reps: pt.Reps})
		}
		for k := 0; k < costmodel.MinWindowSlots; k++ {
			if k == costmodel.MinWindowSlots-1 { // one moment short: not pooled
				_, rc, err := measure.RecheckCosts(ctx, p.Target, dr, costmodel.Costs{Verify: curve}, 1, 0, ws.Window())
				if err != nil || rc.WindowMoments != 0 || len(rc.Anchors) != len(measure.RecheckAnchors(8)) {
					t.Fatalf("%s: %d moments pooled of %d, %d anchors, %v", name, rc.WindowMoments, k, len(rc.Anchors), err)
				}
			}
			if err := ws.Sample(ctx); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		w := ws.Window()
		if w.Drafting != c.kind || len(w.Slots) != costmodel.MinWindowSlots {
			t.Fatalf("%s: window drafting %q, %d moments", name, w.Drafting, len(w.Slots))
		}
		for _, slot := range w.Slots {
			for _, r := range slot {
				if !(r > 0) {
					t.Fatalf("%s: moment %v", name, slot)
				}
			}
		}
		if _, rc, err := measure.RecheckCosts(ctx, p.Target, dr, costmodel.Costs{Verify: curve}, 1, 0, w); err != nil || rc.WindowMoments != costmodel.MinWindowSlots {
			t.Errorf("%s: %d moments pooled, %v", name, rc.WindowMoments, err)
		}
		if c.kind != "" { // a re-check that drafts otherwise does not pool it
			if _, rc, _ := measure.RecheckCosts(ctx, p.Target, pairs.Drafting{}, costmodel.Costs{Verify: curve}, 1, 0, w); rc.WindowMoments != 0 {
				t.Errorf("%s: a window drafted with %q pooled by a re-check without drafting", name, c.kind)
			}
		}
		p.Close()
	}
}

// storiesWithHidden loads stories260K on one thread (closed when the test
// ends) and saves an untrained hidden-state drafter for it: the target's
// path, the loaded target and the drafter's file.
func storiesWithHidden(t *testing.T) (target string, m *model.Model, hfile string) {
	t.Helper()
	target = modeltest.Stories260K(t)
	be := cpu.New(1)
	t.Cleanup(be.Close)
	m, err := model.Load(target, be)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	d, err := hidden.New(m, 16, m.Layers/2, 1)
	if err != nil {
		t.Fatal(err)
	}
	hfile = filepath.Join(t.TempDir(), "h.gguf")
	if err := d.Save(hfile, nil); err != nil {
		t.Fatal(err)
	}
	return target, m, hfile
}
