package cli

import (
	"context"
	"fmt"

	"arborist/profiles"
	"arborist/profiles/config"
	"arborist/profiles/llamacheck"
)

// runCheckExport measures an export's llama.cpp settings in llama.cpp:
// its plain decoding and the exported speculative settings, interleaved
// over rounds, read from llama.cpp's own timing lines. The last line is
// "llama.cpp speedup: X.XXx (range A-B)".
func runCheckExport(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "check-export", "--llama-cpp DIR --config config.yaml --prompts FILE [--rounds N] [-n N] [--tune [-o tuned.yaml]] [--json]")
	tune := fs.Bool("tune", false, "search llama.cpp's own draft length and cut-off: measure each in llama.cpp and report the fastest (or no speculation)")
	out := fs.String("o", "", "with --tune: write the config with the fastest llama.cpp setting to this `file` (never onto --config)")
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
	case *out != "" && !*tune:
		return fail(fs, usagef("-o writes a tuned config: give --tune"))
	}
	c, err := config.Load(*cfgPath)
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
	opt := llamacheck.Options{LlamaCpp: *dir, Prompts: prompts, MaxTokens: *n, Rounds: *rounds, NoStore: *noStore}
	if *tune {
		return tuneLlama(ctx, env, b, c, opt, []string{*cfgPath, *promptsFile}, *out, *asJSON)
	}
	if !*asJSON {
		fmt.Fprintf(env.Stderr, "checking the exported llama.cpp settings on %d prompt(s), %d tokens each, %d rounds\n", len(prompts), *n, *rounds)
		opt.OnRound = func(i int, r llamacheck.Round) {
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
		return writeJSON(env.Stdout, res)
	}
	version := res.Version
	if version == "" {
		version = "version unknown"
	}
	fmt.Fprintf(env.Stdout, "llama.cpp %s\n  plain:       %s\n  speculative: %s\n", version, res.PlainLine, res.SpeculativeLine)
	if res.Predicted > 0 {
		fmt.Fprintf(env.Stdout, "Arborist's prediction for its own engine: %.2fx (a prediction for Arborist, not for llama.cpp)\n", res.Predicted)
	}
	if res.SpecRun > 0 {
		fmt.Fprintf(env.Stdout, "stored as runs %d (llama.cpp plain) and %d (llama.cpp speculative)\n", res.PlainRun, res.SpecRun)
	}
	fmt.Fprintf(env.Stdout, "llama.cpp speedup: %.2fx (range %.2f-%.2f)\n", res.Speedup, res.Min, res.Max)
	return nil
}

// tuneLlama is check-export --tune: llama.cpp's draft lengths and
// cut-offs measured in llama.cpp, the fastest reported beside the
// exported one and Arborist's prediction, and written into a config with
// -o. The last line is "llama.cpp best: ..." with its speedup and range.
func tuneLlama(ctx context.Context, env Env, b *profiles.Bench, c *config.Config, opt llamacheck.Options, inputs []string, out string, asJSON bool) error {
	if !asJSON {
		fmt.Fprintf(env.Stderr, "tuning llama.cpp's draft length on %d prompt(s), %d tokens each, %d rounds\n", len(opt.Prompts), opt.MaxTokens, opt.Rounds)
		opt.OnRound = func(i int, r llamacheck.Round) {
			fmt.Fprintf(env.Stderr, "round %d: plain %.1f tokens/s, the round's best setting %.2fx\n", i+1, r.Plain, r.Speedup)
		}
	}
	opt.Out, opt.Inputs = out, inputs // refused before the minutes of measuring, written after
	res, err := b.TuneLlamaCpp(ctx, c, opt)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(env.Stdout, res)
	}
	version := res.Version
	if version == "" {
		version = "version unknown"
	}
	fmt.Fprintf(env.Stdout, "llama.cpp %s, speedup over its plain decoding (median of %d rounds, range):\n", version, opt.Rounds)
	for _, s := range res.Settings {
		mark := ""
		switch {
		case res.Best != nil && s.DraftMax == res.Best.DraftMax && s.DraftPMin == res.Best.DraftPMin:
			mark = "  <- best"
		case s.Exported:
			mark = "  (the plain export's)"
		}
		fmt.Fprintf(env.Stdout, "  --draft-max %-2d --draft-p-min %-5g %.2fx (%.2f-%.2f), acceptance %.0f%%%s\n", s.DraftMax, s.DraftPMin, s.Speedup, s.Low, s.High, 100*s.Acceptance, mark)
	}
	if res.Predicted > 0 {
		fmt.Fprintf(env.Stdout, "Arborist's prediction for its own engine: %.2fx (a prediction for Arborist, not for llama.cpp)\n", res.Predicted)
	}
	if res.BestRun > 0 {
		fmt.Fprintf(env.Stdout, "stored as runs %d (llama.cpp plain) and %d (llama.cpp best)\n", res.PlainRun, res.BestRun)
	} else if res.PlainRun > 0 {
		fmt.Fprintf(env.Stdout, "stored as run %d (llama.cpp plain)\n", res.PlainRun)
	}
	if out != "" {
		fmt.Fprintf(env.Stdout, "wrote %s: its llama.cpp line carries the setting measured best\n", out)
	}
	if res.Best == nil {
		fmt.Fprintln(env.Stdout, "llama.cpp best: no speculation (no draft length measured faster than llama.cpp's plain decoding on this machine)")
		return nil
	}
	fmt.Fprintf(env.Stdout, "llama.cpp best: --draft-max %d --draft-p-min %g, %.2fx (range %.2f-%.2f)\n", res.Best.DraftMax, res.Best.DraftPMin, res.Best.Speedup, res.Best.Low, res.Best.High)
	return nil
}
