package cli

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"arborist/profiles"
	"arborist/profiles/config"
	"arborist/profiles/loadtest"
)

// runLoadTest drives servers of a config.yaml's plan with concurrent
// clients at each level of --concurrency and prints, per level and
// server, aggregate tokens/s and the time to first token and per output
// token (median and 90th percentile); each is stored as a run.
func runLoadTest(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "loadtest", "--config config.yaml [--concurrency 1,4,8] [--prompts FILE] [--rounds 3] [-n 32] [--llama-cpp DIR] [--url U] [--json]")
	def := loadtest.Defaults()
	cfgPath := fs.String("config", "", "the config.yaml whose plan is served")
	levels := fs.String("concurrency", "1,4,8", "the levels: clients sending requests at once, comma-separated")
	promptsFile := fs.String("prompts", "", "prompt suite `file`, one prompt per line (default: the first 8 prompts of the built-in corpus)")
	rounds := fs.Int("rounds", def.Rounds, "rounds, each running every level on every server in turn")
	n := fs.Int("n", def.MaxTokens, "tokens each request asks for")
	perClient := fs.Int("requests", def.PerClient, "requests each client sends a round, one after another, at least (more where the prompts need them: every level sends every prompt)")
	chat := fs.Bool("chat", false, "send chat completions (each prompt as a user message) instead of completions")
	dir := fs.String("llama-cpp", "", "folder of llama.cpp's binaries: also drive llama-server with the exported settings and plainly (-np C)")
	url := fs.String("url", "", "drive the server already running at this base `URL` (http://host:port) instead of starting Arborist's")
	allowChanged := fs.Bool("allow-changed-model", false, "serve the config even if a model file's SHA-256 differs from the one it recorded")
	noStore := fs.Bool("no-store", false, "do not store the results as runs")
	noRecheck := fs.Bool("no-recheck", false, "price the levels on the stored curves as they are (by default the prediction first re-times T_verify(W) as tune does and rescales stale curves)")
	db := dbFlag(fs)
	asJSON := jsonFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *cfgPath == "" {
		return fail(fs, usagef("--config is required"))
	}
	cs, err := profiles.ParseInts(*levels)
	if err != nil || len(cs) == 0 {
		return fail(fs, usagef("--concurrency %q: want levels such as 1,4,8", *levels))
	}
	for _, c := range cs {
		if err := config.CheckConcurrency("--concurrency", c); err != nil {
			return fail(fs, usagef("%v", err))
		}
	}
	switch {
	case *rounds < 1 || *rounds > loadtest.MaxRounds:
		return fail(fs, usagef("--rounds %d must be in 1..%d", *rounds, loadtest.MaxRounds))
	case *n < 1 || *n > loadtest.MaxTokens:
		return fail(fs, usagef("-n %d must be in 1..%d", *n, loadtest.MaxTokens))
	case *perClient < 1 || *perClient > loadtest.MaxPerClient:
		return fail(fs, usagef("--requests %d must be in 1..%d", *perClient, loadtest.MaxPerClient))
	}
	if *url != "" && *dir != "" {
		return fail(fs, usagef("--url drives one server already running; --llama-cpp starts llama-server: give one"))
	}
	opt := loadtest.Options{Config: *cfgPath, Concurrency: cs, Rounds: *rounds, MaxTokens: *n, PerClient: *perClient, Chat: *chat,
		LlamaCpp: *dir, URL: *url, AllowChanged: *allowChanged, NoStore: *noStore, NoRecheck: *noRecheck}
	if *promptsFile != "" {
		if opt.Prompts, err = profiles.ReadPrompts(*promptsFile); err != nil {
			return err
		}
	}
	if *url == "" {
		if opt.Arborist, err = os.Executable(); err != nil {
			return fmt.Errorf("loadtest: this program's path, to run serve: %w", err)
		}
	}
	b, err := openBench(ctx, *db)
	if err != nil {
		return err
	}
	defer b.Close()
	plan, err := b.LoadTestPlan(ctx, opt)
	if err != nil {
		return err
	}
	var prog profiles.Progress
	if !*asJSON {
		est := "no estimate yet (no stored run of this target on this machine): the time left follows each server's round"
		if plan.Estimate > 0 {
			est = fmt.Sprintf("about %s (from %s)", plan.Estimate.Round(time.Second), plan.EstimateFrom)
		}
		fmt.Fprintf(env.Stderr, "load test: %v at once, %d rounds, servers %v: %d requests of %d tokens, %d server starts; %s\n",
			plan.Concurrency, plan.Rounds, plan.Servers, plan.Requests, opt.MaxTokens, plan.Starts, est)
		if len(plan.Dropped) > 0 {
			fmt.Fprintf(env.Stderr, "load test: this llama.cpp build does not know %s: its llama-server runs without them (llama.cpp's defaults)\n", strings.Join(plan.Dropped, ", "))
		}
		prog = progress(env)
	}
	res, err := b.LoadTest(ctx, opt, prog)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(env.Stdout, res)
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/1e6) }
	if res.PredictedOn != "" {
		fmt.Fprintf(env.Stdout, "predictions priced on %s\n", res.PredictedOn)
	}
	fmt.Fprintf(env.Stdout, "%-4s %-20s %22s %18s %18s  %-22s %s\n", "C", "server", "tokens/s (p10-p90)", "TTFT ms (p90)", "TPOT ms (p90)", "predicted tok/s TTFT TPOT", "run")
	for _, l := range res.Levels {
		if l.Err != "" {
			fmt.Fprintf(env.Stdout, "%-4d %-20s failed: %s\n", l.Concurrency, l.Server, firstLine(l.Err))
			continue
		}
		run := "-"
		if l.RunID > 0 {
			run = fmt.Sprint(l.RunID)
		}
		pred := "-"
		if l.Predicted > 0 {
			pred = fmt.Sprintf("%.1f %s %s", l.Predicted, ms(l.PredictedTTFT), ms(l.PredictedTPOT))
		}
		fmt.Fprintf(env.Stdout, "%-4d %-20s %8.1f (%5.1f-%5.1f) %9s (%6s) %9s (%6s)  %-22s %s\n", l.Concurrency, l.Server, l.TPS, l.TPSP10, l.TPSP90,
			ms(l.TTFT), ms(l.TTFTP90), ms(l.TPOT), ms(l.TPOTP90), pred, run)
	}
	fmt.Fprintf(env.Stdout, "load test done in %s\n", res.Wall.Round(time.Second))
	return nil
}

// firstLine is s up to its first line break: a failed server's error
// keeps its output's tail after it.
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
