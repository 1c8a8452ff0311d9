package spec

import (
	"context"
	"fmt"
	"testing"

	"arborist/engine/drafter"
	"arborist/engine/sample"
	"arborist/kernels/quant"
)

// TestRunFromPrefix: a generation started from a prefilled prompt
// (Engine.Prefill, RunFrom) emits what Run emits after the same prompt,
// token for token and step for step (each step's tree, with the
// drafter's probabilities), greedy and sampled, for drafters that read the
// target's hidden states or not (and greedy, token for token, for
// drafters on a device of their own, whose steps follow the devices'
// timing), in float32 and float16 caches, after a prompt longer than an
// attention chunk; the prefix serves many generations unchanged, and the
// drafters keeping their prompt slots from one generation to the next
// change nothing either.
func TestRunFromPrefix(t *testing.T) {
	if testing.Short() {
		t.Skip("long prompts: slower")
	}
	target, second := loadFamily(t, longSampledShape)
	prompt := longPrompt(target.Vocab, 2*cpuAttnChunk+76)
	ctx := context.Background()
	sources := map[string]func() drafter.Source{
		"layer-skip":                func() drafter.Source { return drafter.NewModel(target, 1, target.CtxLen, "layer-skip") },
		"copy on a second device":   func() drafter.Source { return drafter.NewModel(second, 0, second.CtxLen, "copy") },
		"hidden":                    func() drafter.Source { return hiddenSource(target, 1e-9) },
		"hidden on a second device": func() drafter.Source { return hiddenSourceOn(target, 1e-9, second.Backend) },
	}
	cases := []struct {
		source string
		cfg    Config
	}{
		{"layer-skip", configs()["chain4"]},
		{"layer-skip", configs()["egt-thresh"]}, // a depth policy: the last prompt row's hidden state
		{"copy on a second device", configs()["duo"]},
		{"copy on a second device", configs()["egt-pad-tail"]},
		{"hidden", configs()["egt"]},
		{"hidden on a second device", configs()["chain4-tail"]},
	}
	for _, kv := range []quant.Type{quant.F32, quant.F16} {
		target.KVType, second.KVType = kv, kv
		for _, tc := range cases {
			for _, temp := range []float32{0, 0.8} {
				t.Run(fmt.Sprintf("%v/%s/%s/temp=%g", kv, tc.source, tc.cfg.Strategy, temp), func(t *testing.T) {
					cfg := tc.cfg
					cfg.MaxTokens = 24
					cfg.Sample = sample.Params{Temp: temp, Seed: 7}
					cfg.OnStep = func(Step) {} // the steps then carry their trees, with the drafter's probabilities
					// a source drafting on a device of its own drafts as far as
					// the pass's time lets it: its steps, and a sampled run's
					// tokens with them, vary from one generation to the next,
					// whatever the prompt came from
					concurrent := tc.source != "layer-skip" && tc.source != "hidden"
					if concurrent && temp > 0 {
						t.Skip("steps timed by the devices")
					}
					want, err := (&Engine{Target: target, Source: sources[tc.source](), Concurrent: concurrent}).Run(ctx, prompt, cfg)
					if err != nil {
						t.Fatal(err)
					}
					e := &Engine{Target: target, Source: sources[tc.source](), Concurrent: concurrent}
					pre, err := e.Prefill(ctx, prompt)
					if err != nil {
						t.Fatal(err)
					}
					defer pre.Free()
					for i := 0; i < 2; i++ { // the second keeps the drafter's prompt slots
						got, err := e.RunFrom(ctx, pre, cfg)
						if err != nil {
							t.Fatal(err)
						}
						if fmt.Sprint(got.Tokens) != fmt.Sprint(want.Tokens) {
							t.Fatalf("generation %d from the prefix:\n got  %v\n want %v", i+1, got.Tokens, want.Tokens)
						}
						if concurrent {
							continue
						}
						if len(got.Steps) != len(want.Steps) {
							t.Fatalf("generation %d from the prefix took %d steps, Run %d", i+1, len(got.Steps), len(want.Steps))
						}
						for s := range want.Steps {
							if fmt.Sprint(got.Steps[s].Tree) != fmt.Sprint(want.Steps[s].Tree) || got.Steps[s].Accepted != want.Steps[s].Accepted {
								t.Fatalf("generation %d, step %d: drafted %v, %d accepted; Run %v, %d", i+1, s,
									got.Steps[s].Tree, got.Steps[s].Accepted, want.Steps[s].Tree, want.Steps[s].Accepted)
							}
						}
					}
				})
			}
		}
	}
}

// TestRunFromRefuses: a prefix serves only the target it was prefilled
// on, in the cache type it was prefilled in, and keeps every prompt row's
// hidden state only for an engine whose source reads them.
func TestRunFromRefuses(t *testing.T) {
	target, second := loadFamily(t, "custom:dim=64,layers=2,heads=1,kv=1,ffn=128,vocab=300,ctx=256")
	ctx := context.Background()
	prompt := longPrompt(target.Vocab, 40)
	cfg := Config{Plan: Plan{Strategy: "chain", Gamma: 3}, MaxTokens: 8}
	plain := &Engine{Target: target, Source: drafter.NewModel(target, 1, 256, "layer-skip")}
	pre, err := plain.Prefill(ctx, prompt)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.RunFrom(ctx, pre, cfg); err != nil {
		t.Fatalf("the engine it was prefilled on: %v", err)
	}
	if _, err := (&Engine{Target: second, Source: drafter.NewModel(second, 1, 256, "l")}).RunFrom(ctx, pre, cfg); err == nil {
		t.Error("a prefix of another target was accepted")
	}
	if _, err := (&Engine{Target: target, Source: hiddenSource(target, 0.2)}).RunFrom(ctx, pre, cfg); err == nil {
		t.Error("a prefix without the prompt's hidden states was accepted for a hidden-state drafter")
	}
	target.KVType = quant.F16
	defer func() { target.KVType = quant.F32 }()
	if _, err := plain.RunFrom(ctx, pre, cfg); err == nil {
		t.Error("a float32 prefix was accepted for a float16 cache")
	}
	// a prompt of one token has nothing to prefill
	one, err := plain.Prefill(ctx, prompt[:1])
	if err != nil {
		t.Fatal(err)
	}
	target.KVType = quant.F32
	got, err := plain.RunFrom(ctx, one, cfg)
	if err != nil {
		t.Fatal(err)
	}
	want, err := (&Engine{Target: target, Source: drafter.NewModel(target, 1, 256, "layer-skip")}).Run(ctx, prompt[:1], cfg)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got.Tokens) != fmt.Sprint(want.Tokens) {
		t.Errorf("after a one-token prompt: %v from the prefix, %v from Run", got.Tokens, want.Tokens)
	}
}
