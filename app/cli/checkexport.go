package cli

import (
	"context"
	"fmt"
	"strings"

	"arborist/profiles"
)

// runCheckExport measures an export's llama.cpp settings in llama.cpp:
// its plain decoding and the exported speculative settings, interleaved
// over rounds, read from llama.cpp's own timing lines. The last line is
// "llama.cpp speedup: X.XXx (range A-B)".
func runCheckExport(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "check-export", "--llama-cpp DIR --config config.yaml --prompts FILE [--rounds N] [-n N] [--json]")
	dir := fs.String("llama-cpp", "", "folder of llama.cpp's binaries (llama-completion or llama-cli, and llama-speculative-simple; default: PATH)")
	cfgPath := fs.String("config", "", "the exported config.yaml")
	promptsFile := fs.String("prompts", "", "prompt suite `file`, one prompt per line")
	rounds := fs.Int("rounds", 3, "rounds, each decoding every prompt plainly and with the exported settings in turn")
	n := fs.Int("n", 128, "tokens to generate per prompt")
	noStore := fs.Bool("no-store", false, "do not store the results as runs")
	db := dbFlag(fs)
	asJSON := jsonFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *cfgPath == "":
		return fail(fs, usagef("--config is required"))
	case *promptsFile == "":
		return fail(fs, usagef("--prompts is required"))
	case *rounds < 1 || *rounds > 100:
		return fail(fs, usagef("--rounds %d must be in 1..100", *rounds))
	case *n < 1:
		return fail(fs, usagef("-n %d must be positive", *n))
	}
	c, err := profiles.LoadConfig(*cfgPath)
	if err != nil {
		return err
	}
	prompts, err := profiles.ReadPrompts(*promptsFile)
	if err != nil {
		return err
	}
	b, err := openBench(ctx, *db)
	if err != nil {
		return err
	}
	defer b.Close()
	opt := profiles.CheckOptions{LlamaCpp: *dir, Prompts: prompts, MaxTokens: *n, Rounds: *rounds, NoStore: *noStore}
	if !*asJSON {
		fmt.Fprintf(env.Stderr, "checking the exported llama.cpp settings on %d prompt(s), %d tokens each, %d rounds\n", len(prompts), *n, *rounds)
		opt.OnRound = func(i int, r profiles.CheckRound) {
			acc := ""
			if r.Drafted > 0 {
				acc = fmt.Sprintf(", acceptance %.0f%%", 100*float64(r.Accepted)/float64(r.Drafted))
			}
			fmt.Fprintf(env.Stdout, "round %d: plain %.1f tokens/s, speculative %.1f tokens/s%s: %.2fx\n", i+1, r.Plain, r.Spec, acc, r.Speedup)
		}
	}
	res, err := b.CheckExport(ctx, c, opt)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(env.Stdout, struct {
			*profiles.CheckResult
			Min float64 `json:"speedup_min"`
			Max float64 `json:"speedup_max"`
		}{res, res.Min, res.Max})
	}
	version := res.Version
	if version == "" {
		version = "version unknown"
	}
	fmt.Fprintf(env.Stdout, "llama.cpp %s\n  plain:       %s\n  speculative: %s\n", version, strings.Join(res.Plain, " "), strings.Join(res.Speculative, " "))
	if res.Predicted > 0 {
		fmt.Fprintf(env.Stdout, "Arborist's prediction for its own engine: %.2fx (a prediction for Arborist, not for llama.cpp)\n", res.Predicted)
	}
	if res.SpecRun > 0 {
		fmt.Fprintf(env.Stdout, "stored as runs %d (llama.cpp plain) and %d (llama.cpp speculative)\n", res.PlainRun, res.SpecRun)
	}
	fmt.Fprintf(env.Stdout, "llama.cpp speedup: %.2fx (range %.2f-%.2f)\n", res.Speedup, res.Min, res.Max)
	return nil
}
