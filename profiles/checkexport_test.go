package profiles

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"arborist/engine/spec"
	"arborist/profiles/config"
	"arborist/profiles/llamacheck"
	"arborist/profiles/llamacpp"
)

// standins is testdata/llama-cpp: shell scripts that print llama.cpp's
// version and timing lines (plain decoding at 166.67 tokens/s; the
// speculative example at 170 tokens/s with --draft-p-min below 0.5, 157
// above, varied by one token/s from call to call).
func standins(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", "llama-cpp")
}

func checkConfig(plan spec.Plan) *config.Config {
	c := &config.Config{Speculation: plan, Sampling: config.Sampling{TopP: 1, Seed: 1}, Predicted: &config.Predicted{Speedup: 1.97}}
	c.Models.Target = config.Target{Path: "/m/target.gguf", Device: "cpu", Threads: 2, MaxSeqLen: 512}
	c.Models.Draft = config.Draft{Kind: "model", Path: "/m/draft.gguf", Device: "cpu", Threads: 2}
	return c
}

// TestCheckExportInLlamaCpp: the check runs llama.cpp's plain decoding and
// the exported speculative settings in turn over rounds, reads llama.cpp's
// own timing lines, reports the median round's speedup with the range, and
// stores both sides as runs of the runtime; the exported flags reach
// llama.cpp unchanged, so a threshold plan's --draft-p-min is measured.
func TestCheckExportInLlamaCpp(t *testing.T) {
	dir := standins(t)
	tmp := t.TempDir()
	log := filepath.Join(tmp, "args.log")
	t.Setenv("ARBORIST_STANDIN_LOG", log)
	t.Setenv("ARBORIST_STANDIN_STATE", filepath.Join(tmp, "state"))
	ctx := context.Background()
	b, err := Open(ctx, filepath.Join(tmp, "w.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	fixed := checkConfig(spec.Plan{Strategy: "chain", Gamma: 6})
	rounds := 0
	res, err := b.CheckExport(ctx, fixed, llamacheck.Options{LlamaCpp: dir, Prompts: []string{"Once upon a time", "The cat"}, MaxTokens: 64, Rounds: 3,
		OnRound: func(int, llamacheck.Round) { rounds++ }})
	if err != nil {
		t.Fatal(err)
	}
	// per round, the two prompts' calls run at 169+170, 171+169, 170+171
	// tokens/s against 166.67: medians and range from those
	want := func(a, b float64) float64 { return 128 / (64/a + 64/b) / (1000.0 / 6) }
	r := []float64{want(169, 170), want(171, 169), want(170, 171)}
	if rounds != 3 || len(res.Rounds) != 3 {
		t.Fatalf("%d rounds reported, %d kept", rounds, len(res.Rounds))
	}
	for i, w := range r {
		if math.Abs(res.Rounds[i].Speedup-w) > 1e-4 {
			t.Errorf("round %d: speedup %.5f, want %.5f", i+1, res.Rounds[i].Speedup, w)
		}
	}
	if math.Abs(res.Speedup-r[1]) > 1e-4 || math.Abs(res.Min-r[0]) > 1e-4 || math.Abs(res.Max-r[2]) > 1e-4 {
		t.Errorf("speedup %.4f (range %.4f-%.4f), want %.4f (%.4f-%.4f)", res.Speedup, res.Min, res.Max, r[1], r[0], r[2])
	}
	if res.Version != "6000 (stand-in)" || res.Predicted != 1.97 || math.Abs(res.Acceptance-2.0/3) > 1e-9 {
		t.Errorf("version %q, predicted %v, acceptance %v", res.Version, res.Predicted, res.Acceptance)
	}
	args, _ := os.ReadFile(log)
	for _, w := range []string{
		"llama-speculative-simple -m /m/target.gguf -t 2 -c 512 -md /m/draft.gguf --draft-max 6 --draft-min 0 --draft-p-min 0 -td 2 -cd 512 --temp 0 --top-k 0 --top-p 1 --min-p 0 --seed 1 -n 64 -p Once upon a time",
		"llama-completion -m /m/target.gguf -t 2 -c 512 --temp 0 --top-k 0 --top-p 1 --min-p 0 --seed 1 -n 64 -no-cnv -p The cat",
	} {
		if !strings.Contains(string(args), w) {
			t.Errorf("llama.cpp was not run as %q:\n%s", w, args)
		}
	}
	if n := strings.Count(string(args), "\n"); n != 12 {
		t.Errorf("%d llama.cpp runs, want 2 prompts x 2 sides x 3 rounds", n)
	}
	for _, id := range []int64{res.PlainRun, res.SpecRun} {
		run, err := b.StoredRun(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		switch id {
		case res.SpecRun:
			if run.Strategy != "llama.cpp draft-max=6 p-min=0" || run.MeasuredSpeedup != res.Speedup || run.PredictedSpeedup != 1.97 || run.Drafter != "draft:draft.gguf" || run.Tokens != 384 {
				t.Errorf("stored speculative run: %+v", *run)
			}
		default:
			if run.Strategy != "llama.cpp plain" || run.MeasuredSpeedup != 1 || math.Abs(run.TokensPerSecond-1000.0/6) > 1e-6 {
				t.Errorf("stored plain run: %+v", *run)
			}
		}
	}

	// the threshold plan's p-min reaches llama.cpp, and is slower there
	os.Remove(filepath.Join(tmp, "state"))
	thr := checkConfig(spec.Plan{Strategy: "egt", EGT: []int{1, 1, 1, 1, 1, 1}, Branch: 1, WMax: 6, DepthPolicy: "threshold", DepthMin: 0.75})
	res, err = b.CheckExport(ctx, thr, llamacheck.Options{LlamaCpp: dir, Prompts: []string{"Once"}, MaxTokens: 32, Rounds: 1, NoStore: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Speedup >= 1 || res.SpecRun != 0 {
		t.Errorf("p-min 0.75: speedup %.3f, run %d; want below 1, not stored", res.Speedup, res.SpecRun)
	}
	if args, _ := os.ReadFile(log); !strings.Contains(string(args), "--draft-max 6 --draft-min 0 --draft-p-min 0.75 ") {
		t.Errorf("the threshold did not reach llama.cpp:\n%s", args)
	}

	// what cannot be checked says why
	if _, err := b.CheckExport(ctx, fixed, llamacheck.Options{LlamaCpp: tmp, Prompts: []string{"x"}}); !errors.Is(err, llamacpp.ErrNotFound) {
		t.Errorf("no binaries: %v", err)
	}
	ng := checkConfig(spec.Plan{Strategy: "chain", Gamma: 4})
	ng.Models.Draft = config.Draft{Kind: "ngram", NGram: 3}
	if _, err := b.CheckExport(ctx, ng, llamacheck.Options{LlamaCpp: dir, Prompts: []string{"x"}}); err == nil || !strings.Contains(err.Error(), "nothing to check") {
		t.Errorf("an n-gram plan: %v", err)
	}
	broken := filepath.Join(tmp, "bin")
	os.Mkdir(broken, 0o755)
	for _, n := range []string{"llama-completion", "llama-speculative-simple"} {
		os.WriteFile(filepath.Join(broken, n), []byte("#!/bin/sh\necho 'no timings here'\n"), 0o755)
	}
	if _, err := b.CheckExport(ctx, fixed, llamacheck.Options{LlamaCpp: broken, Prompts: []string{"x"}, NoStore: true}); err == nil || !strings.Contains(err.Error(), "no timing line") {
		t.Errorf("a binary without timing lines: %v", err)
	}
}

// TestTuneLlamaCpp: a tune for llama.cpp measures the exported setting and
// the other draft lengths in llama.cpp, picks the fastest (here the
// stand-in's peak at draft length 3), writes it into the config it
// returns (whose export and replayed file carry it, the input config
// untouched), and stores the plain side and the best setting as runs;
// where no setting beats plain decoding it says so and the exported
// llama.cpp line decodes plainly.
func TestTuneLlamaCpp(t *testing.T) {
	dir := standins(t)
	tmp := t.TempDir()
	log := filepath.Join(tmp, "args.log")
	t.Setenv("ARBORIST_STANDIN_LOG", log)
	t.Setenv("ARBORIST_STANDIN_PEAK", "3")
	ctx := context.Background()
	b, err := Open(ctx, filepath.Join(tmp, "w.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c := checkConfig(spec.Plan{Strategy: "chain", Gamma: 6})
	prompts := []string{"Once upon a time", "The cat"}
	res, err := b.TuneLlamaCpp(ctx, c, llamacheck.Options{LlamaCpp: dir, Prompts: prompts, MaxTokens: 32, Rounds: 2})
	if err != nil {
		t.Fatal(err)
	}
	if c.Measured != nil {
		t.Error("the input config was changed")
	}
	if len(res.Settings) != 6 || res.Exported == nil || res.Exported.DraftMax != 6 || res.Best == nil || res.Best.DraftMax != 3 || res.Best.DraftPMin != 0 {
		t.Fatalf("settings %+v, best %+v", res.Settings, res.Best)
	}
	// 182 tokens/s at the peak against plain decoding's 166.67; the
	// exported length, three away, at 170
	if math.Abs(res.Best.Speedup-182/(1000.0/6)) > 1e-3 || math.Abs(res.Exported.Speedup-170/(1000.0/6)) > 1e-3 || res.Best.Low > res.Best.Speedup || res.Best.High < res.Best.Speedup {
		t.Errorf("best %.4f (%.4f-%.4f), exported %.4f", res.Best.Speedup, res.Best.Low, res.Best.High, res.Exported.Speedup)
	}
	if res.Version != "6000 (stand-in)" || res.PlainRun == 0 || res.BestRun == 0 {
		t.Errorf("version %q, runs %d %d", res.Version, res.PlainRun, res.BestRun)
	}
	calls, _ := os.ReadFile(log)
	if n := strings.Count(string(calls), "llama-speculative-simple"); n != 6*2*2 {
		t.Errorf("%d speculative calls; want 6 settings x 2 prompts x 2 rounds", n)
	}
	// the tuned config carries the setting through a file
	data, err := res.Config.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := config.Parse(filepath.Join(tmp, "tuned.yaml"), data)
	if err != nil {
		t.Fatal(err)
	}
	a := back.LlamaCpp()
	if a.Depth != 3 || a.PMin != 0 || !strings.Contains(strings.Join(a.Draft, " "), "--draft-max 3 ") {
		t.Errorf("replayed llama.cpp args: %+v", a)
	}
	eq := back.Runtimes()
	if !strings.Contains(eq[0].Lines[0], "--draft-max 3") || !strings.Contains(strings.Join(eq[0].Notes, " "), "measured fastest in llama.cpp") {
		t.Errorf("export: %+v", eq[0])
	}
	// every setting slower than plain decoding: no speculation
	t.Setenv("ARBORIST_STANDIN_SLOW", "1")
	res, err = b.TuneLlamaCpp(ctx, c, llamacheck.Options{LlamaCpp: dir, Prompts: prompts, MaxTokens: 32, Rounds: 1, NoStore: true})
	if err != nil {
		t.Fatal(err)
	}
	tl := res.Config.Measured.LlamaCpp
	if res.Best != nil || tl.Speculate || tl.DraftMax != 0 || tl.Speedup >= 1 {
		t.Fatalf("no setting pays: best %+v, tuned %+v", res.Best, tl)
	}
	if a := res.Config.LlamaCpp(); a.Draft != nil {
		t.Errorf("plain decoding exported with draft args %v", a.Draft)
	}
	eq = res.Config.Runtimes()
	if strings.Contains(eq[0].Lines[0], "-md") || !strings.Contains(strings.Join(eq[0].Notes, " "), "no speculation") {
		t.Errorf("export without speculation: %+v", eq[0])
	}
	if _, err := b.CheckExport(ctx, res.Config, llamacheck.Options{LlamaCpp: dir, Prompts: prompts, NoStore: true}); err == nil || !strings.Contains(err.Error(), "plain decoding") {
		t.Errorf("checking a plain export: %v", err)
	}
}
