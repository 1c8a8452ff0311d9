package config

import (
	"strings"
	"testing"

	"arborist/engine/spec"
)

// servingConfig is a chain plan with a draft model (or n-gram drafting)
// tuned for concurrency requests at once.
func servingConfig(kind string, concurrency int) *Config {
	c := &Config{Speculation: spec.Plan{Strategy: "chain", Gamma: 4}, Sampling: Sampling{TopP: 1, Seed: 1}}
	c.Models.Target = Target{Path: "/m/t.gguf", Device: "cpu", MaxSeqLen: 2048, Threads: 2}
	c.Models.Draft = Draft{Kind: "model", Path: "/m/d.gguf"}
	if kind == "ngram" {
		c.Models.Draft = Draft{Kind: "ngram", NGram: 3}
	}
	c.Serving = Serving{Concurrency: concurrency, Policy: PolicyPlan}
	return c
}

// TestExportsForConcurrency: each runtime's line is sized for the
// concurrency config.yaml records, at 1 and at 8: llama.cpp's -np and -c
// (the context times the sequences), vLLM's --max-num-seqs and its
// disable_by_batch_size one below the level where speculation stops (the
// priced level, else twice the concurrency), SGLang's
// --max-running-requests, and what a runtime cannot switch by load a
// cannot-express line.
func TestExportsForConcurrency(t *testing.T) {
	for _, tc := range []struct {
		c       int
		stopsAt int // serving.speculation_stops_at (0: not priced)
		llama   []string
		vllm    []string
		sglang  []string
	}{
		{c: 1, llama: []string{" -c 2048 ", " -np 1 ", "-md /m/d.gguf --draft-max 4"},
			vllm:   []string{`"num_speculative_tokens": 4, "disable_by_batch_size": 1}`, " --max-num-seqs 1 "},
			sglang: []string{"--speculative-num-steps 4", " --max-running-requests 1 "}},
		{c: 8, llama: []string{" -c 16384 ", " -np 8 ", "-md /m/d.gguf --draft-max 4", " -cd 2048 "},
			vllm:   []string{`"num_speculative_tokens": 4, "disable_by_batch_size": 15}`, " --max-num-seqs 8 "},
			sglang: []string{"--speculative-num-steps 4", " --max-running-requests 8 "}},
		{c: 8, stopsAt: 12, llama: []string{" -np 8 ", "--draft-max 4"},
			vllm:   []string{`"disable_by_batch_size": 11}`, " --max-num-seqs 8 "},
			sglang: []string{"--speculative-num-steps 4", " --max-running-requests 8 "}},
	} {
		c := servingConfig("model", tc.c)
		c.Serving.SpeculationStopsAt = tc.stopsAt
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		rts := c.Runtimes()
		for i, want := range [][]string{tc.llama, tc.vllm, tc.sglang} {
			e := rts[i]
			l := e.Lines[0] + " "
			for _, w := range want {
				if !strings.Contains(l, w) {
					t.Errorf("C=%d stops at %d, %s: %q lacks %q", tc.c, tc.stopsAt, e.Runtime, l, w)
				}
			}
		}
		if cannot := strings.Join(rts[0].Cannot, "\n"); !strings.Contains(cannot, "turning speculation off at") {
			t.Errorf("C=%d: llama.cpp does not say it cannot turn speculation off by load:\n%s", tc.c, rts[0].Render())
		}
		if cannot := strings.Join(rts[2].Cannot, "\n"); !strings.Contains(cannot, "turning speculation off at") {
			t.Errorf("C=%d: SGLang does not say it cannot turn speculation off by load:\n%s", tc.c, rts[2].Render())
		}
		if cannot := strings.Join(rts[1].Cannot, "\n"); strings.Contains(cannot, "turning speculation off") {
			t.Errorf("C=%d: vLLM can turn speculation off by load, yet a cannot-express line says not:\n%s", tc.c, rts[1].Render())
		}
	}
}

// TestExportsPlainPastTheLevel: where the cost model says speculation
// stops paying at or below the concurrency, every runtime's line decodes
// plainly and says why (a negative control: below it they draft).
func TestExportsPlainPastTheLevel(t *testing.T) {
	for _, stopsAt := range []int{4, 16} {
		c := servingConfig("model", 8)
		c.Serving.SpeculationStopsAt = stopsAt
		for _, e := range c.Runtimes() {
			l := e.Lines[0]
			drafts := strings.Contains(l, "draft") || strings.Contains(l, "speculative")
			if drafts != (stopsAt > 8) {
				t.Errorf("stops at %d, serving 8: %s drafts = %v\n%s", stopsAt, e.Runtime, drafts, e.Render())
			}
			if stopsAt <= 8 && !strings.Contains(e.Render(), "stops paying at 4 requests at once") {
				t.Errorf("%s: the plain line does not say why\n%s", e.Runtime, e.Render())
			}
			if stopsAt <= 8 && strings.Contains(e.Render(), "has no") {
				t.Errorf("%s: a plain line by load is said to lack the drafter\n%s", e.Runtime, e.Render())
			}
		}
	}
}

// TestServingRoundTrip: the serving block is written and read back;
// configs written before it read as one request at a time, the plan; the
// adaptive policy says so where a runtime cannot express it.
func TestServingRoundTrip(t *testing.T) {
	c := servingConfig("ngram", 8)
	c.Serving = Serving{Concurrency: 8, Policy: PolicyAdaptive, SpeculationStopsAt: 16}
	b, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "serving:\n  concurrency: 8\n  policy: adaptive\n  speculation_stops_at: 16\n") {
		t.Errorf("serving block not written:\n%s", b)
	}
	got, err := Parse("c.yaml", b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Serving != c.Serving || got.Concurrency() != 8 || got.Policy() != PolicyAdaptive || got.SpeculationStopsAt() != 16 {
		t.Errorf("round trip: %+v", got.Serving)
	}
	if eq := got.Equivalents(); !strings.Contains(eq, "cannot express: the adaptive policy") {
		t.Errorf("the adaptive policy is not a cannot-express line:\n%s", eq)
	}
	old, err := Parse("old.yaml", []byte("models: {target: {path: t.gguf}, draft: {kind: ngram, ngram: 3}}\nspeculation: {strategy: chain, gamma: 2}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if old.Concurrency() != 1 || old.Policy() != PolicyPlan || old.SpeculationStopsAt() != 2 {
		t.Errorf("a config without serving: concurrency %d, policy %s, stops at %d", old.Concurrency(), old.Policy(), old.SpeculationStopsAt())
	}
}

// TestServingRefused: a concurrency or level outside 1..MaxConcurrency, an
// unknown policy and the adaptive policy of a plan that does not draft are
// refused on load, naming the field.
func TestServingRefused(t *testing.T) {
	base := "models: {target: {path: t.gguf}, draft: {kind: ngram, ngram: 3}}\nspeculation: {strategy: chain, gamma: 2}\n"
	for _, tc := range []struct{ serving, want string }{
		{"serving: {concurrency: -1}\n", "serving.concurrency -1"},
		{"serving: {concurrency: 257}\n", "serving.concurrency 257: want 1 to 256"},
		{"serving: {concurrency: 1.5}\n", "not a whole number"},
		{"serving: {concurrency: many}\n", "invalid config"},
		{"serving: {concurrency: 4, speculation_stops_at: 1000}\n", "serving.speculation_stops_at 1000"},
		{"serving: {concurrency: 4, policy: greedy}\n", `serving.policy "greedy"`},
		{"serving: {concurrency: 4, batch: 2}\n", "batch"},
	} {
		_, err := Parse("bad.yaml", []byte(base+tc.serving))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "bad.yaml") {
			t.Errorf("%q: err = %v, want %q", tc.serving, err, tc.want)
		}
	}
	plain := "models: {target: {path: t.gguf}, draft: {kind: none}}\nspeculation: {strategy: ar}\n"
	if _, err := Parse("bad.yaml", []byte(plain+"serving: {concurrency: 2, policy: adaptive}\n")); err == nil || !strings.Contains(err.Error(), "does not draft") {
		t.Errorf("adaptive without drafting: %v", err)
	}
	for _, ok := range []string{base + "serving: {concurrency: 256, policy: plain}\n", plain + "serving: {concurrency: 8, policy: plan}\n"} {
		if _, err := Parse("ok.yaml", []byte(ok)); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	if err := CheckConcurrency("--concurrency", 0); err == nil || !strings.Contains(err.Error(), "--concurrency 0") {
		t.Errorf("CheckConcurrency(0) = %v", err)
	}
}
