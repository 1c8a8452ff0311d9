package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"arborist/app/present"
	"arborist/assets"
	"arborist/profiles"
	"arborist/profiles/latency"
	"arborist/profiles/trainsize"
)

func printCurve(w io.Writer, label string, p *profiles.Profile) {
	src := "measured now"
	if p.Cached {
		src = "from the database (" + p.Curve.Created.Format("2006-01-02 15:04") + "; --fresh to measure again)"
	}
	fmt.Fprintf(w, "%s T(W), %s backend, %d threads, %s:\n", label, p.Curve.Key.Backend, p.Curve.Key.Threads, src)
	base := p.Curve.Points[0].Median
	for _, pt := range p.Curve.Points {
		fmt.Fprintf(w, "  W=%-4d %10s  ±%-9s %6.2fx\n", pt.W, pt.Median.Round(time.Microsecond), pt.Spread.Round(time.Microsecond), float64(pt.Median)/float64(base))
	}
}

// printFamily prints the target's verification curves over context and
// pass size beside the short context's: each width's time and its
// ratio to the short context's one-sequence pass of as many rows.
func printFamily(w io.Writer, r *profiles.ProfileReport) {
	if len(r.Family) == 0 {
		return
	}
	short := r.Target.Curve.Points
	fmt.Fprintf(w, "target T(W) over context and sequences a pass (time, spread, against context %d, one sequence, at the same W):\n", r.Target.Curve.Key.Context)
	for _, p := range r.Family {
		k := p.Curve.Key
		label := fmt.Sprintf("context %d", k.Context)
		if k.Seqs > 1 {
			label = fmt.Sprintf("%d sequences, context %d", k.Seqs, k.Context)
		}
		src := "measured now"
		if p.Cached {
			src = "stored " + p.Curve.Created.Format("2006-01-02 15:04")
		}
		var parts []string
		for _, pt := range p.Curve.Points {
			part := fmt.Sprintf("W=%d %s ±%s", pt.W, pt.Median.Round(time.Microsecond), pt.Spread.Round(time.Microsecond))
			if base := pointAt(short, pt.W); base > 0 {
				part += fmt.Sprintf(" %.2fx", float64(pt.Median)/float64(base))
			}
			parts = append(parts, part)
		}
		fmt.Fprintf(w, "  %s (%s): %s\n", label, src, strings.Join(parts, ", "))
	}
	for _, l := range r.Left {
		fmt.Fprintf(w, "  left out: %s\n", l)
	}
}

// pointAt is the median of pts at width w, 0 when not measured there.
func pointAt(pts []latency.Point, w int) time.Duration {
	for _, p := range pts {
		if p.W == w {
			return p.Median
		}
	}
	return 0
}

func runProfile(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "profile", "--target T [--draft D] [--threads N] [--max-w 64] [--ctx 1024,4096] [--seqs 1,2,4,8] [--fresh] [--db FILE] [--json]")
	var p pairFlags
	p.register(fs)
	db := dbFlag(fs)
	fresh := fs.Bool("fresh", false, "measure again even when the database has a matching curve")
	maxW := fs.Int("max-w", 64, "largest verification width to time")
	ctxFlag := fs.String("ctx", "", "further contexts (cached tokens) to time T_verify(W) at, comma-separated, beside the short one and those the pair's latest calibration reached")
	seqsFlag := fs.String("seqs", "", "sequences a pass holds to time T_verify(W) at (W rows in all, up to --max-w), comma-separated (default 1,2,4,8, those within --max-w)")
	asJSON := jsonFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := p.check(false); err != nil {
		return fail(fs, err)
	}
	if *maxW < 1 {
		return fail(fs, usagef("--max-w must be >= 1"))
	}
	contexts, err := profiles.ParseInts(*ctxFlag)
	if err != nil {
		return fail(fs, usagef("--ctx: %v", err))
	}
	seqs, err := profiles.ParseInts(*seqsFlag)
	if err != nil {
		return fail(fs, usagef("--seqs: %v", err))
	}
	b, err := openBench(ctx, *db)
	if err != nil {
		return err
	}
	defer b.Close()
	r, err := b.Profile(ctx, p.PairSpec, profiles.ProfileOptions{MaxW: *maxW, Fresh: *fresh, Contexts: contexts, Seqs: seqs}, progress(env))
	if err != nil {
		return err
	}
	w := env.Stdout
	if *asJSON {
		return writeJSON(w, r)
	}
	hw := r.Hardware
	fmt.Fprintf(w, "hardware %s: %s, %d cores / %d threads, %s, %.1f GiB RAM, %.1f GB/s read bandwidth\n",
		hw.Fingerprint, hw.CPU, hw.Cores, hw.Threads, hw.SIMD, float64(hw.RAM)/(1<<30), hw.Bandwidth/1e9)
	if hw.GPUs != "" {
		fmt.Fprintf(w, "GPUs: %s\n", hw.GPUs)
	}
	if m := r.Memory; m != nil {
		fmt.Fprintf(w, "device memory (%s): copy %.1f GB/s (datasheet %.1f GB/s), from the host %.1f GB/s, to it %.1f GB/s; %d multiprocessors\n",
			m.Description, m.Copy/1e9, m.Peak/1e9, m.HostToDevice/1e9, m.DeviceToHost/1e9, m.Multiprocessors)
	}
	printCurve(w, "target "+p.Target, r.Target)
	fmt.Fprintln(w, r.Limits.Describe(r.Target.Curve.Points))
	printFamily(w, r)
	var parts []string
	for _, pt := range r.Overhead.Curve.Points {
		parts = append(parts, fmt.Sprintf("W=%d %v", pt.W, pt.Median.Round(time.Microsecond)))
	}
	fmt.Fprintf(w, "bookkeeping per step (mask, token choice, cache compaction): %s\n", strings.Join(parts, ", "))
	if r.Draft != nil {
		printCurve(w, "drafter "+p.Draft, r.Draft)
	}
	if r.DraftAfter != nil {
		var parts []string
		for _, pt := range r.DraftAfter.Curve.Points {
			parts = append(parts, fmt.Sprintf("pass %d +%v", pt.W, pt.Median.Round(time.Microsecond)))
		}
		fmt.Fprintf(w, "drafter passes right after a target pass, through the draft source, beyond its curve (evicted caches, the source's own work): %s\n", strings.Join(parts, ", "))
	}
	if d := r.DraftSteps; d != nil && len(d.Curve.Points) >= 3 {
		pts := d.Curve.Points
		res := ""
		if len(pts) >= 4 {
			res = fmt.Sprintf(", %v a level of a re-sampled step", pts[3].Median.Round(time.Microsecond))
		}
		fmt.Fprintf(w, "drafting measured in the engine (%s): %v a level, the step's first level %v more, %v a further node of a level%s\n",
			strings.TrimPrefix(d.Curve.Key.Kind, "draft-steps "), pts[0].Median.Round(time.Microsecond), pts[1].Median.Round(time.Microsecond), pts[2].Median.Round(time.Microsecond), res)
	}
	return nil
}

func runCalibrate(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "calibrate", "--target T (--draft D | --draft-ngram N | --draft-layers K) --prompts FILE [-n 64] [--db FILE]")
	var p pairFlags
	p.register(fs)
	db := dbFlag(fs)
	prompts := fs.String("prompts", "", "prompt suite `file`, one prompt per line")
	n := fs.Int("n", 64, "tokens per prompt")
	trainPred := fs.Bool("predictor", false, "also train a depth predictor (Yggdrasil) on this calibration, with these prompts and the built-in corpus, and store it")
	sp := sampleFlags(fs) // the sampling the pair will run at: acceptance at 0.8 is not the greedy one
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := p.check(true); err != nil {
		return fail(fs, err)
	}
	smp, err := sp()
	if err != nil {
		return fail(fs, err)
	}
	if *prompts == "" || *n < 1 {
		return fail(fs, usagef("--prompts is required and -n must be positive"))
	}
	texts, err := profiles.ReadPrompts(*prompts)
	if err != nil {
		return err
	}
	b, err := openBench(ctx, *db)
	if err != nil {
		return err
	}
	defer b.Close()
	cal, err := b.Calibrate(ctx, p.PairSpec, texts, *prompts, *n, smp, progress(env))
	if err != nil {
		return err
	}
	w := env.Stdout
	acc := cal.Acc
	fmt.Fprintf(w, "calibration %d: %s with %s over %d prompts, %d steps, %d tokens\n", cal.ID, p.Target, p.SourceName(), cal.Prompts, acc.Steps, acc.Tokens)
	fmt.Fprintln(w, "acceptance by depth (rows) and sibling rank (columns):")
	for d, row := range acc.Rank {
		var cells []string
		for r, v := range row {
			cells = append(cells, fmt.Sprintf("%5.1f%% (n=%d)", 100*v, acc.Counts[d][r]))
		}
		fmt.Fprintf(w, "  depth %d: %s\n", d+1, strings.Join(cells, "  "))
	}
	if len(acc.ResampledCounts) > 0 && len(acc.RegularCounts) > 0 {
		fmt.Fprintf(w, "steps the drafter re-sampled after a rejection: %d of %d; top candidate accepted at depth 1: %.1f%% in regular steps, %.1f%% in re-sampled ones (priced apart)\n",
			acc.ResampledCounts[0][0], acc.Counts[0][0], 100*acc.Regular[0][0], 100*acc.Resampled[0][0])
	}
	fmt.Fprintln(w, "acceptance by drafter probability:")
	for bin, v := range acc.QBins {
		if acc.QCounts[bin] > 0 {
			fmt.Fprintf(w, "  q in [%.1f, %.1f): %5.1f%% of %d\n", float64(bin)/10, float64(bin+1)/10, 100*v, acc.QCounts[bin])
		}
	}
	if acc.Window != nil {
		fmt.Fprintf(w, "between prompts, %s\n", acc.Window)
	}
	if !*trainPred {
		return nil
	}
	fmt.Fprintln(w)
	return trainPredictor(ctx, env, b, p.PairSpec, profiles.PredictorOptions{Prompts: texts, Tokens: *n, Corpus: true}, false)
}

// trainPredictor trains and stores a depth predictor for the pair and
// reports it against the policies it must beat.
func trainPredictor(ctx context.Context, env Env, b *profiles.Bench, ps profiles.PairSpec, opt profiles.PredictorOptions, asJSON bool) error {
	if cost, err := b.PredictorCost(ctx, ps, opt, progress(env)); err == nil {
		w := env.Stdout
		if asJSON {
			w = env.Stderr // stdout holds the JSON document alone
		}
		fmt.Fprintf(w, "depth predictor data (size %s): %s\n", cost.Size, cost)
	}
	r, err := b.TrainPredictor(ctx, ps, opt, progress(env))
	if err != nil {
		if errors.Is(err, profiles.ErrNotCalibrated) {
			return fmt.Errorf("%w (run 'arborist calibrate' first)", err)
		}
		return err
	}
	w := env.Stdout
	if asJSON {
		return writeJSON(w, r)
	}
	printPredictor(w, r)
	return nil
}

// printPredictor writes a trained predictor's report: its held-out speedup
// beside the best fixed depth, the threshold policies, the most common
// best depth and the per-step bound, the ablation of its features, and
// what tune does with it.
func printPredictor(w io.Writer, r *profiles.PredictorReport) {
	st := r.Stats
	fmt.Fprintf(w, "depth predictor %d for %s: %d training steps (%d prompts), %d validation (%d), %d held out (%d prompts it never saw), trained in %v\n",
		r.ID, st.Plan, st.Steps[0], st.Prompts[0], st.Steps[1], st.Prompts[1], st.Steps[2], st.Prompts[2], st.Took.Round(time.Millisecond))
	fmt.Fprintf(w, "labels: the depth this machine's costs reward on each step (tokens minus %.0f tokens/s times the step's time); training steps by best depth:", st.Lambda)
	for l := 1; l < len(st.Labels); l++ {
		fmt.Fprintf(w, " %d: %.0f%%", l, 100*st.Labels[l])
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "held-out speedup over plain decoding (the steps replayed with this machine's costs):")
	fmt.Fprintf(w, "  depth predictor (%s; deeper at p >= %g%s)  %.3fx  (its inference %v a step)\n", st.Chosen, st.Cut, emaNote(st.EMA), st.Predictor, st.Infer.Round(time.Microsecond/10))
	fmt.Fprintf(w, "  best fixed depth (%d)  %.3fx  (each depth:", st.BestFixed, st.Fixed[st.BestFixed-1])
	for l, v := range st.Fixed {
		fmt.Fprintf(w, " %d: %.3fx", l+1, v)
	}
	fmt.Fprintln(w, ")")
	fmt.Fprintf(w, "  best threshold (%g)  %.3fx\n", st.Threshold, st.ThresholdSpeedup)
	fmt.Fprintf(w, "  most common best depth (%d)  %.3fx\n", st.Common, st.CommonSpeedup)
	fmt.Fprintf(w, "  every step at its own best depth (a bound)  %.3fx\n", st.Oracle)
	fmt.Fprintln(w, "features (speedup on validation, then held out):")
	for _, v := range st.Variants {
		mark := " "
		if v.Name == st.Chosen {
			mark = "*"
		}
		fmt.Fprintf(w, " %s %-34s %.3fx  %.3fx\n", mark, v.Name, v.Validation, v.HeldOut)
	}
	fmt.Fprint(w, "decisions (draft level k+1 after k), held-out accuracy against always the most common answer:")
	for k, a := range st.Accuracy {
		fmt.Fprintf(w, " %d->%d: %.0f%% vs %.0f%%", k+1, k+2, 100*a, 100*st.Majority[k])
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, present.PredictorVerdict(r))
}

func emaNote(ema float64) string {
	if ema < 1 {
		return fmt.Sprintf(", smoothed %g", ema)
	}
	return ""
}

func runTrain(ctx context.Context, env Env, args []string) error {
	if len(args) > 0 && args[0] == "drafter" {
		return runTrainDrafter(ctx, env, args[1:])
	}
	usage := "--target T (--draft D | --draft-ngram N | --draft-layers K | --draft-hidden ID) --prompts FILE [--size " + strings.Join(trainsize.Names(), "|") + "] [-n N] [--corpus=false] [--epochs 30] [--strategy egt --egt W,.. --branch B --w-max M] [--db FILE] [--json]"
	if len(args) == 0 || args[0] != "predictor" {
		fmt.Fprintln(env.Stderr, "usage: arborist train predictor "+usage)
		fmt.Fprintln(env.Stderr, "       arborist train drafter "+trainDrafterArgs())
		return usagef("train what? (predictor or drafter)")
	}
	fs := newFlags(env, "train predictor", usage)
	var p pairFlags
	p.register(fs)
	var plf planFlags
	plf.register(fs)
	db := dbFlag(fs)
	prompts := fs.String("prompts", "", "prompt suite `file`, one prompt per line")
	size := fs.String("size", trainsize.Default, "how much to decode: "+sizesHelp(trainsize.Predictor))
	defWork, _ := trainsize.Predictor(trainsize.Default)
	n := fs.Int("n", defWork.Tokens, "tokens per prompt (default: the size's)")
	corpus := fs.Bool("corpus", true, fmt.Sprintf("fill up to the size's prompt count from the built-in prompt corpus (%d prompts)", len(assets.CorpusPrompts())))
	epochs := fs.Int("epochs", 30, "training epochs")
	asJSON := jsonFlag(fs)
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if err := p.check(true); err != nil {
		return fail(fs, err)
	}
	if *prompts == "" || *n < 2 || *epochs < 1 || *epochs > 1000 {
		return fail(fs, usagef("--prompts is required, -n must be above 1 and --epochs in 1..1000"))
	}
	if _, err := trainsize.Predictor(*size); err != nil {
		return fail(fs, usagef("--%v", err))
	}
	opt := profiles.PredictorOptions{Corpus: *corpus, Epochs: *epochs, Size: *size}
	strategySet := false
	fs.Visit(func(f *flag.Flag) {
		strategySet = strategySet || f.Name == "strategy"
		if f.Name == "n" {
			opt.Tokens = *n
		}
	})
	if strategySet {
		plan, err := plf.resolve()
		if err != nil {
			return fail(fs, err)
		}
		growing, ok := plan.AsGrowing()
		if !ok {
			return fail(fs, usagef("a depth predictor decides the depth of an egt plan (or a chain), not %s", plan.Strategy))
		}
		opt.Plan = growing
	}
	texts, err := profiles.ReadPrompts(*prompts)
	if err != nil {
		return err
	}
	opt.Prompts = texts
	b, err := openBench(ctx, *db)
	if err != nil {
		return err
	}
	defer b.Close()
	return trainPredictor(ctx, env, b, p.PairSpec, opt, *asJSON)
}

func runTune(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "tune", "--target T (--draft D | --draft-ngram N | --draft-layers K) [--top 10] [--alpha A] [-o config.yaml] [--validate --prompts FILE [--top N] [--rounds R]] [--db FILE] [--json]")
	var p pairFlags
	p.register(fs)
	db := dbFlag(fs)
	top := fs.Int("top", 10, "plans to list")
	alpha := fs.Float64("alpha", 0, "assume this top-candidate acceptance rate instead of a stored calibration")
	out := fs.String("o", "", "write the best plan as config.yaml to `file`")
	place := fs.Bool("place", false, "also search where each model runs: the target on every available device and a draft model, layer-skip or hidden-state drafter on each (every placement is profiled once); speedups are over plain decoding on --device")
	noRecheck := fs.Bool("no-recheck", false, "use the stored curves as they are (by default tune first re-times T_verify(W) at W = 1, 2, 3, 4, 6 and 8, fewer for a profile narrower than 8, and the drafter, and rescales stale curves)")
	validate := fs.Bool("validate", false, "run the best plan (with --top N: the N best, interleaved) and plain decoding on --prompts and report measured against predicted speedup")
	rounds := fs.Int("rounds", profiles.Choices().Rounds, "passes over the prompt suite for --validate, interleaved with plain decoding (the measured speedup is the median over rounds)")
	prompts := fs.String("prompts", "", "prompt suite `file` for --validate")
	n := fs.Int("n", 128, "tokens per prompt for --validate")
	concFlag := fs.String("concurrency", "", "requests served at once to rank plans at, comma-separated (default 1,2,4,8); given, the tune is for the largest")
	asJSON := jsonFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := p.check(true); err != nil {
		return fail(fs, err)
	}
	conc, err := profiles.ParseConcurrency(*concFlag)
	if err != nil {
		return fail(fs, usagef("--concurrency: %v", err))
	}
	if *alpha < 0 || *alpha >= 1 || *top < 1 {
		return fail(fs, usagef("--alpha must be in [0, 1) and --top positive"))
	}
	if *validate && *place {
		// a placed plan's speedup is over plain decoding on --device, while
		// validation measures on one placement: tune --place to choose,
		// then validate there (--device, --draft-device)
		return fail(fs, usagef("--validate measures one placement: tune with --place to find it, then validate with its --device and --draft-device"))
	}
	if *validate && (*prompts == "" || *n < 1) {
		return fail(fs, usagef("--validate needs --prompts and a positive -n"))
	}
	validateTop := false // --top given with --validate: measure the top plans interleaved
	fs.Visit(func(f *flag.Flag) { validateTop = validateTop || (*validate && f.Name == "top") })
	if *rounds < 1 || *rounds > 100 || (validateTop && *top > 100) {
		return fail(fs, usagef("--rounds must be in 1..100 and --top at most 100 with --validate"))
	}
	// the search, the export and the validation are one workflow of the
	// core; the report below reads what it returns, as far as it got
	opt := profiles.TuneOptions{Alpha: *alpha, NoRecheck: *noRecheck, Place: *place, Export: *out, Inputs: []string{*prompts}, Show: *top, Concurrency: conc}
	if *validate {
		texts, err := profiles.ReadPrompts(*prompts)
		if err != nil {
			return err
		}
		opt.Validate = &profiles.ValidateOptions{MaxTokens: *n, Prompts: texts, Rounds: *rounds}
		if validateTop {
			opt.ValidateTop = *top
		}
	}
	b, err := openBench(ctx, *db)
	if err != nil {
		return err
	}
	defer b.Close()
	t, err := b.Tune(ctx, p.PairSpec, opt, progress(env))
	if t == nil {
		if errors.Is(err, profiles.ErrNotCalibrated) {
			return fmt.Errorf("%w; run 'arborist calibrate' first", err)
		}
		return err
	}
	tuneErr := err
	best := t.Best()
	w := env.Stdout
	if rc := t.Inputs.Recheck; rc != nil && !*asJSON {
		fmt.Fprintln(w, rc)
	}
	if !*asJSON {
		fmt.Fprintf(w, "%d plans scored with the latency-aware model (speedup = AAL * T_plain / (draft + T_verify(W) + overhead); T_plain: plain decoding's time a token), acceptance %s:\n", len(t.Ranked), t.Inputs.Describe())
		if c := best.Context.String(); c != "" {
			fmt.Fprintf(w, "  verification priced at %s\n", c)
		}
		if t.Beyond > 0 {
			fmt.Fprintf(w, "  (%d more verify more tokens a pass than the profile's widest, W = %d: profile with a larger --max-w to price them)\n", t.Beyond, t.Widest)
		}
		fmt.Fprintf(w, "  %-4s %-40s %8s %13s %6s %6s %10s %10s\n", "rank", "plan", "speedup", "range", "AAL", "nodes", "draft", "verify")
	}
	for i, pr := range t.Ranked[:min(*top, len(t.Ranked))] {
		if !*asJSON {
			fmt.Fprintf(w, "  %-4d %-40s %7.2fx %13s %6.2f %6d %10s %10s", i+1, pr.Plan, pr.Speedup, fmt.Sprintf("%.2f-%.2fx", pr.Low, pr.High), pr.AAL, pr.Nodes, pr.Draft.Round(time.Microsecond), pr.Verify.Round(time.Microsecond))
			if where := pr.Where(); where != "" {
				fmt.Fprintf(w, "  %s", where)
			}
			fmt.Fprintln(w)
		}
	}
	if !*asJSON {
		where := ""
		if best.Where() != "" {
			where = ", " + best.Where()
		}
		fmt.Fprintf(w, "best: %s%s, predicted %.2fx (%.2f-%.2fx) (plan %d)\n", best.Plan, where, best.Speedup, best.Low, best.High, t.PlanID)
		printLoads(w, t, *top)
	}
	if *out != "" {
		if t.Export == nil { // the search ran; the export failed
			return tuneErr
		}
		if !*asJSON {
			fmt.Fprintf(w, "wrote %s\n\n%s", *out, t.Export.Equivalents)
		}
	}
	switch {
	case !*validate:
	case validateTop:
		if plans, err := profiles.ValidationPlans(t.Ranked, *top); err == nil && !*asJSON {
			fmt.Fprintf(w, "\nvalidating the top %d plans on %s (%d tokens per prompt, %d round(s), plans and plain decoding interleaved per prompt):\n", len(plans), *prompts, *n, *rounds)
		}
		if v := t.Validation; v != nil && !*asJSON {
			printValidation(w, v)
		}
	default:
		if !*asJSON {
			fmt.Fprintf(w, "\nvalidating on %s (%d tokens per prompt):\n", *prompts, *n)
		}
		if res := t.Run; res != nil && !*asJSON {
			printResult(w, res)
		}
	}
	if tuneErr != nil && (!*asJSON || t.ValidateErr == nil) {
		return tuneErr // a failed validation is in the JSON document
	}
	if *asJSON {
		return writeJSON(w, t)
	}
	return nil
}

// printLoads prints a tune's ranking at each concurrency: plain
// batching, and the best plans fixed and under the goodput policy, by
// aggregate tokens/s, with the time per output token and to the first.
func printLoads(w io.Writer, t *profiles.TuneResult, top int) {
	if len(t.Loads) == 0 {
		return
	}
	fmt.Fprintf(w, "\nat concurrency C (C requests a pass; speedup over plain batching at C; fixed: every request its whole plan, goodput: budgets chosen per pass):\n")
	for _, lv := range t.Loads {
		if lv.Err != "" {
			fmt.Fprintf(w, "  C=%d: not priced: %s\n", lv.Concurrency, lv.Err)
			continue
		}
		fmt.Fprintf(w, "  C=%d:\n", lv.Concurrency)
		fmt.Fprintf(w, "    %-4s %-40s %-8s %6s %10s %8s %13s %10s %10s\n", "rank", "plan", "policy", "nodes", "tokens/s", "speedup", "range", "TPOT", "TTFT")
		for i, lp := range lv.Ranked[:min(top, len(lv.Ranked))] {
			fmt.Fprintf(w, "    %-4d %-40s %-8s %6.1f %10.1f %7.2fx %13s %10s %10s\n", i+1, trimTo(lp.Plan.String(), 40), lp.Policy, lp.Budget, lp.TokensPerSec, lp.Speedup,
				fmt.Sprintf("%.2f-%.2fx", lp.Low, lp.High), lp.TPOT.Round(time.Microsecond), lp.TTFT.Round(time.Microsecond))
		}
		if lv.Left > 0 {
			fmt.Fprintf(w, "    (%d left out: their passes hold more rows than the profile timed; profile with a larger --max-w)\n", lv.Left)
		}
	}
	if t.Load != nil {
		fmt.Fprintf(w, "tuned for %d requests at once: the best plan there %s, %.1f tokens/s, %.2fx plain batching\n", t.Concurrency, t.Load.Policy, t.Load.TokensPerSec, t.Load.Speedup)
	}
}

func runExport(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "export", "--target T (--draft D | --draft-ngram N | --draft-layers K) -o config.yaml [--db FILE]")
	var p pairFlags
	p.register(fs)
	db := dbFlag(fs)
	out := fs.String("o", "config.yaml", "output `file`")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := p.check(true); err != nil {
		return fail(fs, err)
	}
	b, err := openBench(ctx, *db)
	if err != nil {
		return err
	}
	defer b.Close()
	ex, err := b.Export(ctx, p.PairSpec)
	if err != nil {
		if errors.Is(err, profiles.ErrNotTuned) {
			return fmt.Errorf("%w (run 'arborist tune' first)", err)
		}
		return err
	}
	if err := b.Write(ctx, ex.PlanID, ex.YAML, *out); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "wrote %s (plan %d: %s, predicted %.2fx)\n\n%s", *out, ex.PlanID, ex.Best.Plan, ex.Best.Speedup, ex.Equivalents)
	return nil
}
func runRuns(ctx context.Context, env Env, args []string) error {
	sub := "list"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	fs := newFlags(env, "runs", "[list [--limit N] | show ID | compare ID ID...] [--db FILE]")
	db := dbFlag(fs)
	limit := fs.Int("limit", 20, "runs to list")
	show := fs.Int64("show", 0, "same as 'runs show ID'")
	asJSON := jsonFlag(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return fail(fs, err)
	}
	if *show > 0 {
		sub, pos = "show", []string{fmt.Sprint(*show)}
	}
	var ids []int64
	for _, a := range pos {
		id, err := strconv.ParseInt(a, 10, 64)
		if err != nil || id <= 0 {
			return fail(fs, usagef("%q is not a run id", a))
		}
		ids = append(ids, id)
	}
	switch {
	case sub == "list" && len(ids) > 0:
		return fail(fs, usagef("list takes no ids"))
	case sub == "show" && len(ids) != 1:
		return fail(fs, usagef("show takes one run id"))
	case sub == "compare" && len(ids) < 2:
		return fail(fs, usagef("compare takes two or more run ids"))
	case sub != "list" && sub != "show" && sub != "compare":
		return fail(fs, usagef("unknown runs command %q (list, show, compare)", sub))
	}
	b, err := profiles.OpenReadOnly(ctx, *db) // reading writes nothing
	if err != nil {
		return err
	}
	defer b.Close()
	w := env.Stdout
	switch sub {
	case "show":
		if _, err := b.StoredRun(ctx, ids[0]); err != nil { // "no run N", not "no stored steps"
			return err
		}
		steps, err := b.RunSteps(ctx, ids[0])
		if err != nil {
			return err
		}
		if len(steps) == 0 {
			return fmt.Errorf("run %d has no stored steps (see 'arborist runs')", ids[0])
		}
		if *asJSON {
			r, err := b.StoredRun(ctx, ids[0])
			if err != nil {
				return err
			}
			return writeJSON(w, struct {
				Run   *profiles.Run         `json:"run"`
				Steps []profiles.StoredStep `json:"steps"`
			}{r, steps})
		}
		fmt.Fprintf(w, "run %d: %d steps\n  %5s %6s %7s %8s %8s %10s %10s %10s\n", ids[0], len(steps), "step", "prompt", "width", "drafted", "accepted", "draft", "verify", "overhead")
		for _, s := range steps {
			fmt.Fprintf(w, "  %5d %6d %7d %8d %8d %10s %10s %10s\n", s.Index, s.Prompt, s.Width, s.Drafted, s.Accepted, s.Draft.Round(time.Microsecond), s.Verify.Round(time.Microsecond), s.Overhead.Round(time.Microsecond))
		}
		return nil
	case "compare":
		var runs []*profiles.Run
		for _, id := range ids {
			r, err := b.StoredRun(ctx, id)
			if err != nil {
				return err
			}
			runs = append(runs, r)
		}
		if *asJSON {
			return writeJSON(w, runs)
		}
		rows := []struct {
			label string
			f     func(r *profiles.Run) string
		}{
			{"run", func(r *profiles.Run) string { return fmt.Sprintf("#%d (%s)", r.ID, r.Status) }},
			{"plan", planName},
			{"drafter", func(r *profiles.Run) string { return r.Drafter }},
			{"target", func(r *profiles.Run) string { return filepath.Base(r.Target) }},
			{"tokens", func(r *profiles.Run) string { return fmt.Sprint(r.Tokens) }},
			{"tokens/s", func(r *profiles.Run) string { return fmt.Sprintf("%.1f", r.TokensPerSecond) }},
			{"AAL", func(r *profiles.Run) string { return fmt.Sprintf("%.2f", r.AAL) }},
			{"acceptance", func(r *profiles.Run) string { return fmt.Sprintf("%.1f%%", 100*r.Acceptance) }},
			{"measured speedup", func(r *profiles.Run) string { return speedupText(r.MeasuredSpeedup) }},
			{"predicted speedup", func(r *profiles.Run) string { return speedupText(r.PredictedSpeedup) }},
			{"created", func(r *profiles.Run) string { return r.Created.Local().Format("2006-01-02 15:04") }},
		}
		// each run's column as wide as its widest cell (a whole plan's
		// name), up to 64 characters
		widths := make([]int, len(runs))
		for i, r := range runs {
			for _, row := range rows {
				widths[i] = min(64, max(widths[i], len(row.f(r))))
			}
		}
		for _, row := range rows {
			fmt.Fprintf(w, "%-18s", row.label)
			for i, r := range runs {
				fmt.Fprintf(w, " %-*s", widths[i], trimTo(row.f(r), widths[i]))
			}
			fmt.Fprintln(w)
		}
		return nil
	}
	runs, err := b.Runs(ctx, *limit)
	if err != nil {
		return err
	}
	if *asJSON {
		if runs == nil {
			runs = []profiles.Run{} // an empty list, not null
		}
		return writeJSON(w, runs)
	}
	fmt.Fprintf(w, "%4s %-11s %-6s %-30s %8s %6s %7s %8s %9s  %s\n", "id", "status", "strat", "drafter", "tok/s", "AAL", "accept", "speedup", "predicted", "created")
	for _, r := range runs {
		fmt.Fprintf(w, "%4d %-11s %-6s %-30s %8.1f %6.2f %6.1f%% %8s %9s  %s\n", r.ID, r.Status, r.Strategy, r.Drafter, r.TokensPerSecond, r.AAL, 100*r.Acceptance,
			speedupText(r.MeasuredSpeedup), speedupText(r.PredictedSpeedup), r.Created.Local().Format("2006-01-02 15:04"))
	}
	return nil
}

func speedupText(x float64) string {
	if x <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", x)
}

func trimTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "~"
}

// planName is the plan a stored run ran, by name (its strategy alone for
// runs stored before the database kept plans).
func planName(r *profiles.Run) string {
	if p, ok := r.RanPlan(); ok {
		return p.String()
	}
	return r.Strategy
}

// printValidation is the table of a --validate --top run: each plan's
// predicted and measured speedup, the measured best marked.
func printValidation(w io.Writer, v *profiles.Validation) {
	fmt.Fprintf(w, "  plain decoding: %.1f tokens/s (run %d)\n", v.Base.TPS(), v.BaseRunID)
	fmt.Fprintf(w, "  %-4s %-72s %9s %9s %8s %10s %6s %s\n", "rank", "plan", "predicted", "measured", "error", "tokens/s", "run", "")
	for i, p := range v.Plans {
		mark := ""
		if p.Best {
			mark = "<- measured best"
		}
		errPct := 0.0
		if p.Measured > 0 {
			errPct = 100 * (p.Predicted/p.Measured - 1)
		}
		fmt.Fprintf(w, "  %-4d %-72s %8.2fx %8.2fx %+7.0f%% %10.1f %6d %s\n", i+1, p.Label, p.Predicted, p.Measured, errPct, p.Totals.TPS(), p.RunID, mark)
	}
	best := v.Plans[v.Best]
	fmt.Fprintf(w, "measured best: %s at %.2fx (predicted %.2fx); the predicted best reached %.0f%% of it\n",
		best.Label, best.Measured, best.Predicted, 100*v.Plans[0].Measured/max(best.Measured, 1e-9))
	fmt.Fprintln(w, "where each prediction's error comes from (predicted against measured; + made the prediction high):")
	for i, p := range v.Plans {
		if s := present.Split(p.Split); s != "" {
			fmt.Fprintf(w, "  %-4d %s\n", i+1, s)
		}
	}
}
