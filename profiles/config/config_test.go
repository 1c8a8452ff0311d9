package config

import (
	"strings"
	"testing"

	"arborist/profiles/costmodel"
	"arborist/profiles/hardware"
	"arborist/profiles/pairs"
)

func TestConfigRoundTripAndErrors(t *testing.T) {
	c := &Config{}
	c.Models.Target = Target{Path: "/m/t.gguf", Device: "cpu", MaxSeqLen: 2048, Threads: 2}
	c.Models.Draft = Draft{Kind: "model", Path: "/m/d.gguf"}
	c.Speculation = costmodel.Plan{Strategy: "tree", Widths: []int{3, 2, 1}}
	c.Sampling.TopP = 1
	b, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse("c.yaml", b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if got.Speculation.Strategy != "tree" || len(got.Speculation.Widths) != 3 || got.Models.Draft.Path != "/m/d.gguf" {
		t.Errorf("round trip: %+v", got)
	}
	if eq := c.Equivalents(); !strings.Contains(eq, "llama-server") || !strings.Contains(eq, "verifies chains only") || !strings.Contains(eq, "sglang") {
		t.Errorf("equivalents:\n%s", eq)
	}
	for _, bad := range []string{
		"models: {target: {path: t.gguf}}\nspeculation: {strategy: chain}\n", // no draft, gamma
		"models: {target: {path: t.gguf}, draft: {kind: ngram, ngram: 3}}\nspeculation: {strategy: chain, gamma: 0}\n",
		"models: {target: {path: t.gguf}}\nspeculation: {strategy: ar}\nsampling: {temperature: -1}\n",
		"models: {target: {path: t.gguf}}\nspeculation: {strategy: ar}\nbogus: 1\n",   // unknown key
		"models: {target: {path: t.gguf}}\nspeculation: {strategy: ar, gamma: [1]}\n", // wrong type
		"\t:::",
		"models: {target: {path: t.gguf}, draft: {kind: hidden}}\nspeculation: {strategy: chain, gamma: 2}\n",                              // neither path nor id
		"models: {target: {path: t.gguf}, draft: {kind: hidden, path: h.gguf, drafter_id: 3}}\nspeculation: {strategy: chain, gamma: 2}\n", // both
	} {
		if _, err := Parse("bad.yaml", []byte(bad)); err == nil || !strings.Contains(err.Error(), "bad.yaml") {
			t.Errorf("%q: err = %v", bad, err)
		}
	}
}

func TestConfigHiddenDrafter(t *testing.T) {
	for _, ref := range []string{"7", "/m/h.gguf"} {
		c := New(pairs.Spec{Target: "/m/t.gguf", DraftHidden: ref}, Hardware{}, 2, 2048, "Q8_0",
			costmodel.Prediction{Plan: costmodel.Plan{Strategy: "chain", Gamma: 2}, Speedup: 1.2, AAL: 1.5})
		b, err := c.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		got, err := Parse("h.yaml", b)
		if err != nil {
			t.Fatalf("%v\n%s", err, b)
		}
		d := got.Models.Draft
		if d.Kind != "hidden" || (ref == "7") != (d.DrafterID == 7) || (ref != "7") != (d.Path == ref) {
			t.Errorf("%s: draft %+v", ref, d)
		}
		if eq := got.Equivalents(); !strings.Contains(eq, "no hidden-state drafter") {
			t.Errorf("equivalents:\n%s", eq)
		}
	}
}

// TestConfigHardwareGPU: config.yaml's gpu_type is the first GPU's name,
// and no CPU affinity is written (Arborist pins no threads).
func TestConfigHardwareGPU(t *testing.T) {
	hw := hardware.DetectHardware()
	hw.Threads = 4
	hw.GPUs = "0: NVIDIA H200 (140 GiB, SM 1980 MHz, memory 3201 MHz, PCIe 5 x16, driver 570.124.06)"
	if g := HardwareOf(hw).GPUType; g != "NVIDIA H200" {
		t.Errorf("gpu_type %q", g)
	}
	if a := HardwareOf(hw).CPUAffinity; a != "" {
		t.Errorf("cpu_affinity %q written", a)
	}
	hw.GPUs = ""
	if g := HardwareOf(hw).GPUType; g != "none" {
		t.Errorf("no GPUs: gpu_type %q", g)
	}
}

// TestConfigMeasuredLlamaCpp: runtimes.llama_cpp is read and checked on
// replay: a draft length in range only with speculation and a draft model,
// a cut-off in [0, 1], a measured speedup within its range, whole numbers
// where whole numbers belong.
func TestConfigMeasuredLlamaCpp(t *testing.T) {
	head := "models: {target: {path: t.gguf}, draft: {kind: model, path: d.gguf}}\nspeculation: {strategy: chain, gamma: 4}\n"
	good := head + "runtimes: {llama_cpp: {version: b6000, speculate: true, draft_max: 3, draft_p_min: 0, measured_speedup: 1.1, measured_low: 1.05, measured_high: 1.2}}\n"
	c, err := Parse("c.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if a := c.LlamaCpp(); a.Depth != 3 || c.Measured.LlamaCpp.Version != "b6000" {
		t.Errorf("draft length %d, %+v", a.Depth, c.Measured.LlamaCpp)
	}
	for _, bad := range []string{
		"speculate: true, draft_max: 0, draft_p_min: 0, measured_speedup: 1.1, measured_low: 1, measured_high: 1.2",
		"speculate: true, draft_max: 65, draft_p_min: 0, measured_speedup: 1.1, measured_low: 1, measured_high: 1.2",
		"speculate: true, draft_max: 2.5, draft_p_min: 0, measured_speedup: 1.1, measured_low: 1, measured_high: 1.2",
		"speculate: false, draft_max: 3, draft_p_min: 0, measured_speedup: 1, measured_low: 1, measured_high: 1",
		"speculate: true, draft_max: 3, draft_p_min: 1.5, measured_speedup: 1.1, measured_low: 1, measured_high: 1.2",
		"speculate: true, draft_max: 3, draft_p_min: 0, measured_speedup: 1.3, measured_low: 1, measured_high: 1.2",
		"speculate: true, draft_max: 3, draft_p_min: 0, measured_speedup: .nan, measured_low: 1, measured_high: 1.2",
		"speculate: true, draft_max: 3, bogus: 1",
	} {
		if _, err := Parse("bad.yaml", []byte(head+"runtimes: {llama_cpp: {"+bad+"}}\n")); err == nil || !strings.Contains(err.Error(), "bad.yaml") {
			t.Errorf("%q: err = %v", bad, err)
		}
	}
	ngram := "models: {target: {path: t.gguf}, draft: {kind: ngram, ngram: 3}}\nspeculation: {strategy: chain, gamma: 4}\n" +
		"runtimes: {llama_cpp: {speculate: true, draft_max: 3, draft_p_min: 0, measured_speedup: 1.1, measured_low: 1, measured_high: 1.2}}\n"
	if _, err := Parse("bad.yaml", []byte(ngram)); err == nil || !strings.Contains(err.Error(), "draft model") {
		t.Errorf("speculation in llama.cpp with an n-gram source: %v", err)
	}
}
