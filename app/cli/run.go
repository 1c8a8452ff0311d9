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
	"arborist/profiles"
)

// planFlags are --strategy and a flag for every plan field a strategy
// offers, built from the strategies' own field metadata (name, kind,
// default, help): a new strategy's fields become flags by themselves.
type planFlags struct {
	strategy string
	values   map[string]func() string // each field's flag, written as Plan.Get writes it
	lists    map[string]bool          // the fields that are integer lists
}

func (f *planFlags) register(fs *flag.FlagSet) {
	choices := profiles.Choices()
	fs.StringVar(&f.strategy, "strategy", choices.DefaultStrategy, "one of "+fmt.Sprint(choices.Strategies))
	f.values = map[string]func() string{}
	f.lists = map[string]bool{}
	for _, pf := range choices.PlanFields {
		f.lists[pf.Name] = pf.Kind == profiles.IntListField
		switch pf.Kind {
		case profiles.IntField:
			def, _ := strconv.Atoi(pf.Default)
			v := fs.Int(pf.Flag, def, pf.Help)
			f.values[pf.Name] = func() string { return strconv.Itoa(*v) }
		case profiles.BoolField:
			v := fs.Bool(pf.Flag, pf.Default == "true", pf.Help)
			f.values[pf.Name] = func() string { return strconv.FormatBool(*v) }
		case profiles.FloatField:
			def, _ := strconv.ParseFloat(pf.Default, 64)
			v := fs.Float64(pf.Flag, def, pf.Help)
			f.values[pf.Name] = func() string { return strconv.FormatFloat(*v, 'g', -1, 64) }
		default:
			v := fs.String(pf.Flag, pf.Default, pf.Help)
			f.values[pf.Name] = func() string { return *v }
		}
	}
}

// resolve reads the plan from the flags (the core's ParsePlan), naming
// the flag whose value it cannot read.
func (f *planFlags) resolve() (profiles.Plan, error) {
	values := map[string]string{}
	for name, v := range f.values {
		values[name] = v()
	}
	probe := profiles.Plan{Strategy: f.strategy}
	for name, list := range f.lists {
		if _, err := profiles.ParseInts(values[name]); list && probe.Reads(name) && err != nil {
			return probe, usagef("--%s: %v", strings.ReplaceAll(name, "_", "-"), err)
		}
	}
	if values["depth_policy"] == "predictor" && !probe.Reads("depth_policy") {
		return probe, usagef("--depth-policy predictor is for strategies with a depth policy (egt)")
	}
	p, err := profiles.ParsePlan(f.strategy, values)
	var fe *profiles.FieldError
	if errors.As(err, &fe) {
		return p, usagef("--%s: %v", strings.ReplaceAll(fe.Field, "_", "-"), fe.Err)
	}
	if err != nil {
		return p, usagef("%v", err)
	}
	if c := p.Canonical(); p.Reads("tail") && c.Tail < p.Tail {
		// a tail beyond the draft's end positions was cut silently
		return p, usagef("--tail %d: the %s plan's draft ends at %d places at most, so --tail can be at most %d", p.Tail, p.Strategy, c.Tail, c.Tail)
	}
	return p, nil
}

func runRun(ctx context.Context, env Env, args []string) (err error) {
	fs := newFlags(env, "run", "--target T (--draft D | --draft-ngram N | --draft-layers K | --draft-hidden ID) --strategy S (--prompt P | --prompts FILE) [-n N] [flags]")
	var pf pairFlags
	pf.register(fs)
	var plf planFlags
	plf.register(fs)
	prompt := fs.String("prompt", "", "prompt text")
	promptsFile := fs.String("prompts", "", "prompt suite `file`, one prompt per line")
	n := fs.Int("n", 128, "tokens to generate per prompt")
	baseline := fs.Bool("baseline", false, "also run ar on the same prompts and print the measured speedup")
	choices := profiles.Choices()
	rounds := fs.Int("rounds", 0, fmt.Sprintf("with --baseline: rounds of the plan and ar, interleaved; the measured speedup is their median (default %d, fewer when a round takes over %s)",
		choices.Rounds, choices.RoundBudget/time.Duration(choices.Rounds)))
	color := fs.Bool("color", false, "colour accepted draft tokens (green) and bonus tokens")
	quiet := fs.Bool("quiet", false, "print only the figures, not the text")
	trace := fs.String("trace", "", "write the per-step trace as JSON lines to `file`")
	config := fs.String("config", "", "replay a plan exported as config.yaml (its models, plan and sampling)")
	db := dbFlag(fs)
	noStore := fs.Bool("no-store", false, "do not store the run")
	allowChanged := fs.Bool("allow-changed-model", false, "replay a config.yaml even if a model file's SHA-256 differs from the one it recorded")
	asJSON := jsonFlag(fs)
	sp := sampleFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	params, err := sp()
	if err != nil {
		return fail(fs, err)
	}
	if *rounds < 0 || *rounds > 100 {
		return fail(fs, usagef("--rounds must be in 1..100 (0 for the default)"))
	}
	b, err := openBench(ctx, *db)
	if err != nil {
		return err
	}
	defer b.Close()
	opt := profiles.RunOptions{Sample: params, MaxTokens: *n, Baseline: *baseline, Rounds: *rounds, NoStore: *noStore}
	ps := pf.PairSpec
	if *config != "" {
		// the core says which flags a config.yaml run takes: those that
		// would change its pair, plan or sampling are refused
		over := profiles.Overrides{Pair: ps, AllowChanged: *allowChanged, NoStore: *noStore}
		fs.Visit(func(f *flag.Flag) { over.Set = append(over.Set, f.Name) })
		r, err := b.ConfigRun(ctx, *config, over)
		if err != nil {
			return err
		}
		if len(r.Refused) > 0 {
			var names []string
			for _, n := range r.Refused {
				names = append(names, "--"+n)
			}
			return fail(fs, usagef("%s: config.yaml holds the pair, the plan and the sampling; edit %s or run without --config", strings.Join(names, ", "), *config))
		}
		for _, n := range r.Notes {
			fmt.Fprintln(env.Stderr, "note: "+n)
		}
		ps = r.Pair
		o := r.Options
		opt.Plan, opt.Sample, opt.Predicted, opt.PredictedOn, opt.Context = o.Plan, o.Sample, o.Predicted, o.PredictedOn, o.Context
	} else if opt.Plan, err = plf.resolve(); err != nil {
		return fail(fs, err)
	}
	pf.PairSpec = ps
	if err := pf.check(opt.Plan.NeedsSource()); err != nil {
		return fail(fs, err)
	}
	if (*prompt == "") == (*promptsFile == "") {
		return fail(fs, usagef("give exactly one of --prompt and --prompts"))
	}
	if *n <= 0 {
		return fail(fs, usagef("-n must be positive"))
	}
	opt.Prompts = []string{*prompt}
	if *promptsFile != "" {
		if opt.Prompts, err = profiles.ReadPrompts(*promptsFile); err != nil {
			return err
		}
	}
	if !*asJSON {
		fmt.Fprintf(env.Stderr, "target %s, %s, %d prompt(s), %d tokens each\n", filepath.Base(ps.Target), opt.Plan, len(opt.Prompts), *n)
	}
	opt.Trace = *trace
	opt.Inputs = []string{*promptsFile, *config}
	text := !*quiet && !*asJSON
	out := &utf8Writer{w: io.Discard}
	if text {
		out.w = env.Stdout
	}
	opt.OnPrompt = func(_ int, p string) {
		if text {
			fmt.Fprint(env.Stdout, p)
		}
	}
	opt.OnToken = func(_ int, piece string, drafted bool) {
		if *color && text {
			if drafted {
				piece = "\x1b[32m" + piece + "\x1b[0m"
			} else {
				piece = "\x1b[1m" + piece + "\x1b[0m"
			}
		}
		out.write(piece)
	}
	opt.OnDone = func(int) {
		out.flush()
		if text {
			fmt.Fprintln(env.Stdout)
		}
	}
	res, err := b.Run(ctx, ps, opt)
	if *asJSON && res != nil {
		if jerr := writeJSON(env.Stdout, res); jerr != nil && err == nil {
			err = jerr
		}
		return err
	}
	if res != nil && (err == nil || res.Base != nil) {
		printResult(env.Stdout, res)
	}
	return err
}

// printResult writes a run's figures as the text report.
func printResult(w io.Writer, res *profiles.RunResult) {
	printSummary(w, res.Label, &res.Totals)
	if h := res.Hidden; h != nil {
		fmt.Fprintf(w, "  hidden drafter: %d of %d steps re-sampled after a rejection (%.1f%% of decode time re-sampling), %d layer rows (%d drafted states), %d hot token-info rows, %d computed on demand\n",
			h.Resampled, h.Steps, 100*h.ResampleShare, h.LayerRows, h.ChainPasses, h.Hot, h.OnDemand)
	}
	if res.SelfBaseline {
		fmt.Fprintf(w, "speedup: %s\n", present.MeasuredNote(res))
		if res.Predicted > 0 {
			fmt.Fprintf(w, "predicted by the plan: %.2fx\n", res.Predicted)
		}
	} else if res.Base != nil {
		printSummary(w, "ar (baseline)", res.Base)
		fmt.Fprintf(w, "speedup: %s\n", present.MeasuredNote(res))
		if res.Predicted > 0 {
			fmt.Fprintf(w, "predicted by the plan: %.2fx; measured is %+.0f%% of it\n", res.Predicted, 100*(res.Speedup/res.Predicted-1))
		}
	} else if res.Predicted > 0 {
		fmt.Fprintf(w, "predicted speedup of the plan: %.2fx (%s)\n", res.Predicted, res.PredictedOn)
	}
	if res.RunID > 0 {
		fmt.Fprintf(w, "stored as run %d (%s)\n", res.RunID, res.Status)
	}
}

func printSummary(w io.Writer, label string, a *profiles.Totals) {
	fmt.Fprintf(w, "\n%s: %d tokens in %.1f ms: %.1f tokens/s\n", label, a.Tokens, ms(a.Decode.Seconds()), a.TPS())
	fmt.Fprintf(w, "  steps %d, AAL %.2f tokens/step, acceptance %.1f%% (%d of %d drafted)\n", a.Steps, a.AAL(), 100*a.Acceptance(), a.Accepted, a.Drafted)
	per := func(d time.Duration) float64 {
		if a.Steps == 0 {
			return 0
		}
		return ms(d.Seconds()) / float64(a.Steps)
	}
	fmt.Fprintf(w, "  per step: draft %.3f ms, verify %.3f ms, overhead %.3f ms, drafting overlapped with verify %.3f ms\n",
		per(a.Draft), per(a.Verify), per(a.Overhead), per(a.Overlap))
	if n := present.AheadNote(a); n != "" {
		fmt.Fprintf(w, "  %s\n", n)
	}
}
