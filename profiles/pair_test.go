package profiles

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"arborist/engine/hidden"
	"arborist/engine/model"
	"arborist/engine/sample"
	"arborist/engine/spec"
	"arborist/kernels"
	"arborist/kernels/cpu"
)

// A second CPU backend under another name stands in, in these tests, for
// a second device (a GPU target with a CPU drafter runs the same code).
func init() {
	backends["cpu-second"] = BackendInfo{
		Name:           "cpu-second",
		Available:      func() error { return nil },
		New:            func(threads int) (kernels.Device, error) { return cpu.New(threads), nil },
		DefaultThreads: func() int { return 1 },
		Kernels:        cpu.Kernels,
	}
}

// TestPairOnTwoDevices: every draft source that can move (a draft model,
// the layer-skip drafter, the hidden-state drafter) opens on the draft
// device, on a backend of its own, concurrent with the target; n-gram
// drafting stays where it is; greedy duo and AOT egt on the pair write
// exactly what plain decoding writes.
func TestPairOnTwoDevices(t *testing.T) {
	dir := sharedDir(t)
	target := filepath.Join(dir, "models", "stories260K.gguf")
	// an untrained hidden-state drafter, saved as a file
	be := cpu.New(1)
	defer be.Close()
	m, err := model.Load(target, be)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	d, err := hidden.New(m, 16, m.Layers/2, 1)
	if err != nil {
		t.Fatal(err)
	}
	hfile := filepath.Join(t.TempDir(), "h.gguf")
	if err := d.Save(hfile, nil); err != nil {
		t.Fatal(err)
	}
	prompt := m.Tok.Encode("Once upon a time", true, false)
	ctx := context.Background()
	ar, err := (&spec.Engine{Target: m}).Run(ctx, prompt, spec.Config{Strategy: "ar", MaxTokens: 40})
	if err != nil {
		t.Fatal(err)
	}
	for name, ps := range map[string]PairSpec{
		"draft model": {Target: target, Draft: target},
		"layer-skip":  {Target: target, Layers: 2},
		"hidden":      {Target: target, DraftHidden: hfile},
	} {
		ps.Threads, ps.DraftBackend = 1, "cpu-second"
		p, err := OpenPair(ps, sample.Params{}, false)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !p.Concurrent || p.DraftBackend == p.Backend || p.DraftBackend.Threads() != 1 {
			t.Errorf("%s: concurrent %v, drafter on the target's backend %v", name, p.Concurrent, p.DraftBackend == p.Backend)
		}
		for _, cfg := range []spec.Config{{Strategy: "duo", Gamma: 4}, {Strategy: "egt", Widths: []int{1, 2, 2}, Branch: 2, WMax: 6, AOT: true}, {Strategy: "chain", Gamma: 3}} {
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
	for name, ps := range map[string]PairSpec{"layer-skip": {Target: target, Layers: 2}, "hidden": {Target: target, DraftHidden: hfile}} {
		ps.Threads = 2
		p, err := OpenPair(ps, sample.Params{}, true)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !p.Concurrent || p.DraftBackend == p.Backend || p.Backend.Threads() != 1 || p.DraftBackend.Threads() != 1 {
			t.Errorf("%s, concurrent on one device: concurrent %v, threads %d + %d", name, p.Concurrent, p.Backend.Threads(), p.DraftBackend.Threads())
		}
		cfg := spec.Config{Strategy: "egt", Widths: []int{1, 2, 2}, Branch: 2, WMax: 6, AOT: true, MaxTokens: 40}
		res, err := (&spec.Engine{Target: p.Target, Source: p.Source, Concurrent: p.Concurrent}).Run(ctx, prompt, cfg)
		if err != nil || !slices.Equal(res.Tokens, ar.Tokens) {
			t.Errorf("%s with AOT: %v, %v; plain decoding %v", name, err, res.Tokens, ar.Tokens)
		}
		p.Close()
	}
	// n-gram drafting has no device: it stays on the host, not concurrent
	p, err := OpenPair(PairSpec{Target: target, NGram: 3, Threads: 1, DraftBackend: "cpu-second"}, sample.Params{}, false)
	if err != nil {
		t.Fatal(err)
	}
	if p.Concurrent || p.DraftBackend != p.Backend {
		t.Errorf("n-gram on a draft device: concurrent %v", p.Concurrent)
	}
	p.Close()
	if _, err := OpenPair(PairSpec{Target: target, Threads: 1, DraftBackend: "cpu-second"}, sample.Params{}, false); err == nil {
		t.Error("a draft device without a draft source was accepted")
	}
	if _, err := OpenPair(PairSpec{Target: target, Draft: target, Threads: 1, DraftBackend: "tpu"}, sample.Params{}, false); err == nil {
		t.Error("an unknown draft device was accepted")
	}
}

// TestEquivalentsTwoDevices: the llama.cpp command places each model as
// the plan does (-ngl, -ngld: a draft model on the CPU beside a GPU
// target, on the GPU beside a CPU target, both on the GPU), and a split
// says where vLLM and SGLang cannot follow.
func TestEquivalentsTwoDevices(t *testing.T) {
	c := NewConfig(PairSpec{Target: "/m/t.gguf", Draft: "/m/d.gguf"}, HardwareConfig{}, 8, 4096, "Q4_K", Prediction{Plan: Plan{Strategy: "duo", Gamma: 4}, Speedup: 1.5, AAL: 3})
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
	c = NewConfig(PairSpec{Target: "/m/t.gguf"}, HardwareConfig{}, 8, 4096, "Q4_K", Prediction{Plan: Plan{Strategy: "ar"}, Speedup: 1, AAL: 1})
	c.Models.Target.Device = "cuda"
	if eq := c.Equivalents(); !strings.Contains(eq, "-ngl 99 --temp") {
		t.Errorf("plain decoding on the GPU, yet:\n%s", eq)
	}
}
