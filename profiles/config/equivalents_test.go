package config

import (
	"fmt"
	"strings"
	"testing"

	"arborist/engine/spec"
)

// TestEquivalentsEveryFamily maps every plan family with every draft
// source onto each runtime and checks what a user deploys: llama.cpp's
// line carries --draft-p-min (0 for a fixed depth, the threshold for a
// threshold policy), the draft length and bounds, threads, context and the
// plan's sampling; vLLM's and SGLang's name the method of the release they
// were written for and the model form they accept; and every part of a
// plan a runtime has no counterpart for is a "cannot express" line.
func TestEquivalentsEveryFamily(t *testing.T) {
	families := []struct {
		name      string
		plan      spec.Plan
		depth     int // the chain a runtime verifies
		nodes     int // the tree's nodes
		topk      int
		threshold float64
		cannot    []string // what every runtime that speculates cannot express
	}{
		{name: "ar", plan: spec.Plan{Strategy: "ar"}},
		{name: "chain", plan: spec.Plan{Strategy: "chain", Gamma: 4}, depth: 4, nodes: 4, topk: 1},
		{name: "tree", plan: spec.Plan{Strategy: "tree", Widths: []int{3, 2, 1}}, depth: 3, nodes: 15, topk: 3},
		{name: "egt fixed", plan: spec.Plan{Strategy: "egt", EGT: []int{1, 2, 3, 3, 2}, Branch: 2, WMax: 12}, depth: 5, nodes: 12, topk: 2},
		{name: "egt threshold", plan: spec.Plan{Strategy: "egt", EGT: []int{1, 1, 1, 1, 1, 1}, Branch: 1, WMax: 6, DepthPolicy: "threshold", DepthMin: 0.2},
			depth: 6, nodes: 6, topk: 1, threshold: 0.2},
		{name: "egt aot", plan: spec.Plan{Strategy: "egt", EGT: []int{1, 1, 1, 1}, Branch: 1, WMax: 4, AOT: true}, depth: 4, nodes: 4, topk: 1,
			cannot: []string{"ahead-of-time drafting"}},
		{name: "duo", plan: spec.Plan{Strategy: "duo", Gamma: 4, MaxSeqs: 4}, depth: 4, nodes: 4, topk: 1,
			cannot: []string{"concurrent drafting", "adaptive draft budget", "several draft sequences"}},
		{name: "sequoia", plan: spec.Plan{Strategy: "sequoia", Parents: []int{-1, -1, 0, 0, 2}}, depth: 3, nodes: 5, topk: 2},
		{name: "chain tail", plan: spec.Plan{Strategy: "chain", Gamma: 4, Tail: 3}, depth: 4, nodes: 4, topk: 1,
			cannot: []string{"tail drafting"}},
		{name: "duo tail", plan: spec.Plan{Strategy: "duo", Gamma: 4, MaxSeqs: 1, Tail: 2}, depth: 4, nodes: 4, topk: 1,
			cannot: []string{"tail drafting", "adaptive draft budget"}},
	}
	sources := []Draft{
		{Kind: "model", Path: "/m/d.gguf", Device: "cpu", Threads: 2},
		{Kind: "ngram", NGram: 3},
		{Kind: "layers", Layers: 2},
		{Kind: "hidden", DrafterID: 7},
	}
	sampling := "--temp 0.7 --top-k 40 --top-p 0.9 --min-p 0.05 --seed 7"
	for _, f := range families {
		for _, src := range sources {
			c := &Config{Speculation: f.plan, Sampling: Sampling{Temperature: 0.7, TopK: 40, TopP: 0.9, MinP: 0.05, Seed: 7}}
			c.Models.Target = Target{Path: "/m/t.gguf", Device: "cpu", MaxSeqLen: 2048, Threads: 2}
			c.Models.Draft = src
			if f.name == "ar" {
				c.Models.Draft = Draft{Kind: "none"}
			}
			if err := c.Validate(); err != nil {
				t.Fatalf("%s with %s: %v", f.name, src.Kind, err)
			}
			speculates := f.name != "ar" && (src.Kind == "model" || src.Kind == "ngram")
			rts := c.Runtimes()
			if len(rts) != 3 {
				t.Fatalf("%d runtimes, want llama.cpp, vLLM and SGLang", len(rts))
			}
			for _, e := range rts {
				name := fmt.Sprintf("%s with %s, %s", f.name, src.Kind, e.Runtime)
				text := e.Render()
				lines := strings.Join(e.Lines, "\n")
				cannot := strings.Join(e.Cannot, "\n")
				want := func(ok bool, what string) {
					t.Helper()
					if !ok {
						t.Errorf("%s: %s\n%s", name, what, text)
					}
				}
				header := "# " + e.Runtime + " " + e.Version + " ("
				if e.Runtime == "llama.cpp" { // the release the flags are for, not a build
					header = "# llama.cpp (" + e.Program + "): flags for release " + LlamaCppVersion + " or later\n"
				}
				want(e.Version != "" && strings.HasPrefix(text, header), "no header naming the release")
				want(len(e.Lines) == 1, "not one command line")
				want(!strings.Contains(text, " 1 requests"), "a count of one request in the plural")
				if f.name != "ar" && !speculates {
					want(strings.Contains(cannot, "has no") && strings.Contains(cannot, "decodes plainly"), "a source the runtime lacks is not a cannot-express line with the plain fallback")
				}
				if !speculates {
					want(!strings.Contains(lines, "draft") && !strings.Contains(lines, "speculative"), "a plain line drafts")
				}
				if speculates {
					for _, w := range f.cannot {
						want(strings.Contains(cannot, w), "no cannot-express line for "+w)
					}
					branched := f.nodes > f.depth
					if e.Runtime != "SGLang" {
						want(branched == strings.Contains(cannot, "verifies chains only"), "chains-only line wrong for the tree")
					}
					if e.Runtime != "llama.cpp" {
						want((f.threshold > 0) == strings.Contains(cannot, "threshold depth policy"), "threshold policy line wrong")
					}
				}
				switch e.Runtime {
				case "llama.cpp":
					want(strings.Contains(lines, sampling), "the plan's sampling is not carried")
					want(strings.Contains(lines, " -t 2") && strings.Contains(lines, " -c 2048"), "threads or context not carried")
					if speculates && src.Kind == "model" {
						for _, flag := range []string{
							fmt.Sprintf("-md /m/d.gguf --draft-max %d --draft-min 0 --draft-p-min %g ", f.depth, f.threshold),
							" -td 2", " -cd 2048", " -np 1",
						} {
							want(strings.Contains(lines, flag), "lacks "+flag)
						}
						want(!strings.Contains(lines, "-ngl"), "a CPU plan places layers on a GPU")
					}
					if speculates && src.Kind == "ngram" {
						want(strings.HasPrefix(lines, fmt.Sprintf("llama-lookup -m /m/t.gguf --draft %d ", f.depth)), "n-gram is not llama-lookup with the draft length")
					}
				case "vLLM":
					want(strings.HasPrefix(lines, "vllm serve /m/t.gguf --tokenizer "+HFTokenizer), "a GGUF target without --tokenizer")
					want(strings.Contains(text, "experimental"), "GGUF loading not said to be experimental")
					want(strings.Contains(lines, `"temperature": 0.7, "top_p": 0.9, "top_k": 40, "min_p": 0.05`) && strings.Contains(lines, "--seed 7"), "sampling not carried")
					if speculates && src.Kind == "model" {
						want(strings.Contains(lines, fmt.Sprintf(`{"method": "draft_model", "model": "%s", "num_speculative_tokens": %d, "disable_by_batch_size": 1}`, HFDraft, f.depth)), "not the draft_model method")
						want(strings.Contains(text, "not a documented input") && !strings.Contains(lines, "/m/d.gguf"), "a GGUF draft model passed as if accepted")
					}
					if speculates && src.Kind == "ngram" {
						want(strings.Contains(lines, fmt.Sprintf(`"method": "ngram", "num_speculative_tokens": %d, "prompt_lookup_max": 3`, f.depth)), "not the ngram method")
					}
				case "SGLang":
					want(strings.Contains(lines, "--model-path "+HFTarget) && strings.Contains(lines, "--context-length 2048"), "model or context wrong")
					want(strings.Contains(text, "temperature 0.7, top_p 0.9, top_k 40, min_p 0.05"), "sampling not said")
					if speculates && src.Kind == "model" {
						want(strings.Contains(lines, fmt.Sprintf("--speculative-algorithm STANDALONE --speculative-draft-model-path %s --speculative-num-steps %d --speculative-eagle-topk %d --speculative-num-draft-tokens %d",
							HFDraft, f.depth, f.topk, f.nodes+1)), "not the standalone draft-model flags")
						want(strings.Contains(text, "not a documented input"), "a GGUF draft model passed as if accepted")
					}
					if speculates && src.Kind == "ngram" {
						want(strings.Contains(lines, "--speculative-algorithm NGRAM") && strings.Contains(lines, "--speculative-ngram-max-match-window-size 3"), "not the NGRAM flags")
					}
				}
			}
		}
	}
}

// TestEquivalentsPlacement: -ngl and -ngld follow the devices the plan
// places each model on; a CPU target without a drafter gets no GPU flags.
func TestEquivalentsPlacement(t *testing.T) {
	c := &Config{Speculation: spec.Plan{Strategy: "chain", Gamma: 3}, Sampling: Sampling{TopP: 1, Seed: 1}}
	c.Models.Target = Target{Path: "/m/t.gguf", Device: "cuda", Threads: 8}
	c.Models.Draft = Draft{Kind: "model", Path: "/m/d.gguf", Device: "cuda"}
	for _, tc := range []struct{ target, draft, want string }{
		{"cuda", "cuda", " -ngl 99 -ngld 99 "},
		{"cuda", "cpu", " -ngl 99 -ngld 0 "},
		{"cpu", "cuda", " -ngl 0 -ngld 99 "},
	} {
		c.Models.Target.Device, c.Models.Draft.Device = tc.target, tc.draft
		if l := c.Runtimes()[0].Lines[0]; !strings.Contains(l, tc.want) {
			t.Errorf("target on %s, draft on %s: %q lacks %q", tc.target, tc.draft, l, tc.want)
		}
	}
}
