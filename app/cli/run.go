package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"arborist/engine/model"
	"arborist/engine/sample"
	"arborist/engine/spec"
	"arborist/engine/tree"
	"arborist/profiles"
	"arborist/profiles/store"
)

// runFlags are the flags of `arborist run`.
type runFlags struct {
	pairFlags
	strategy               string
	gamma                  int
	widths, parents        string
	sampleChildren         bool
	egtWidths              string
	branch, wmax           int
	pad, aot               bool
	depthPolicy            string
	depthMin               float64
	maxSeqs                int
	prompt, prompts        string
	n                      int
	baseline, color, quiet bool
	trace                  string
	config, db             string
	noStore                bool
	allowChanged           bool
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		v, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not an integer list", s)
		}
		out = append(out, v)
	}
	return out, nil
}

func runRun(ctx context.Context, env Env, args []string) (err error) {
	fs := newFlags(env, "run", "--target T (--draft D | --draft-ngram N | --draft-layers K) --strategy S (--prompt P | --prompts FILE) [-n N] [flags]")
	var f runFlags
	f.pairFlags.register(fs)
	fs.StringVar(&f.strategy, "strategy", "chain", "ar, chain, tree, egt or duo")
	fs.IntVar(&f.gamma, "gamma", 4, "chain: draft length; duo: largest draft budget")
	fs.StringVar(&f.widths, "widths", "", "tree: children per node at each depth, e.g. 3,2,1")
	fs.StringVar(&f.parents, "parents", "", "tree: parent list, -1 for depth 1, e.g. -1,-1,0,0,2")
	fs.BoolVar(&f.sampleChildren, "sample-children", false, "tree, sampled runs: draw children from q instead of ranking them")
	fs.StringVar(&f.egtWidths, "egt-widths", "1,2,3,3,2", "egt: frontier nodes expanded at each depth")
	fs.IntVar(&f.branch, "branch", 2, "egt: children per expanded node")
	fs.IntVar(&f.wmax, "w-max", 12, "egt: most draft nodes verified after pruning")
	fs.BoolVar(&f.pad, "pad", false, "egt: pad every tree to w-max nodes (static shapes)")
	fs.BoolVar(&f.aot, "aot", false, "egt: draft the next step's head while the target verifies")
	fs.StringVar(&f.depthPolicy, "depth-policy", "fixed", "egt: fixed, threshold, or predictor (the stored depth predictor of this pair)")
	fs.Float64Var(&f.depthMin, "depth-min", 0.2, "egt threshold policy: stop when the best path probability falls below this")
	fs.IntVar(&f.maxSeqs, "max-seqs", 4, "duo: most draft sequences (1, 2, 3, 4, 6, 8)")
	fs.StringVar(&f.prompt, "prompt", "", "prompt text")
	fs.StringVar(&f.prompts, "prompts", "", "prompt suite `file`, one prompt per line")
	fs.IntVar(&f.n, "n", 128, "tokens to generate per prompt")
	fs.BoolVar(&f.baseline, "baseline", false, "also run ar on the same prompts and print the measured speedup")
	fs.BoolVar(&f.color, "color", false, "colour accepted draft tokens (green) and bonus tokens")
	fs.BoolVar(&f.quiet, "quiet", false, "print only the figures, not the text")
	fs.StringVar(&f.trace, "trace", "", "write the per-step trace as JSON lines to `file`")
	fs.StringVar(&f.config, "config", "", "replay a plan exported as config.yaml (its models, plan and sampling)")
	fs.BoolVar(&f.allowChanged, "allow-changed-model", false, "replay a config.yaml even if a model file's SHA-256 differs from the one it recorded")
	fs.StringVar(&f.db, "db", store.DefaultPath(), "database `file` where the run is stored")
	fs.BoolVar(&f.noStore, "no-store", false, "do not store the run")
	sp := sampleFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	params, err := sp()
	if err != nil {
		return fail(fs, err)
	}
	predicted := 0.0
	if f.config != "" {
		c, err := profiles.LoadConfig(f.config)
		if err != nil {
			return err
		}
		hashCache := f.db // where model hashes are cached; none with --no-store
		if f.noStore {
			hashCache = ""
		}
		if err := profiles.CheckConfigModels(ctx, hashCache, c, f.allowChanged); err != nil { // issue 17: a swapped model is refused
			return err
		}
		applyConfig(&f, c)
		if c.Predicted != nil {
			predicted = c.Predicted.Speedup
		}
		params = sample.Params{Temp: float32(c.Sampling.Temperature), TopK: c.Sampling.TopK, TopP: float32(c.Sampling.TopP), MinP: float32(c.Sampling.MinP), Seed: c.Sampling.Seed}
		if params.TopP == 0 {
			params.TopP = 1
		}
	}
	if err := f.pairFlags.check(f.strategy != "ar"); err != nil {
		return fail(fs, err)
	}
	if (f.prompt == "") == (f.prompts == "") {
		return fail(fs, usagef("give exactly one of --prompt and --prompts"))
	}
	if f.n <= 0 {
		return fail(fs, usagef("-n must be positive"))
	}
	cfg := spec.Config{Strategy: f.strategy, Gamma: f.gamma, Branch: f.branch, WMax: f.wmax, Pad: f.pad, AOT: f.aot,
		MaxSeqs: f.maxSeqs, SampleChildren: f.sampleChildren, Sample: params, MaxTokens: f.n, StopAtEOS: true}
	switch {
	case f.widths != "":
		ws, err := parseInts(f.widths)
		if err != nil {
			return fail(fs, usagef("--widths: %v", err))
		}
		if cfg.Static, err = tree.FromWidths(ws); err != nil {
			return fail(fs, usagef("--widths: %v", err))
		}
	case f.parents != "":
		ps, err := parseInts(f.parents)
		if err != nil {
			return fail(fs, usagef("--parents: %v", err))
		}
		if cfg.Static, err = tree.FromParents(ps); err != nil {
			return fail(fs, usagef("--parents: %v", err))
		}
	}
	if cfg.Widths, err = parseInts(f.egtWidths); err != nil {
		return fail(fs, usagef("--egt-widths: %v", err))
	}
	switch f.depthPolicy {
	case "fixed":
	case "threshold":
		cfg.Depth = spec.Threshold{Max: len(cfg.Widths), Min: f.depthMin}
	case "predictor":
		if f.strategy != "egt" {
			return fail(fs, usagef("--depth-policy predictor is for --strategy egt"))
		}
	default:
		return fail(fs, usagef("--depth-policy %q: want fixed, threshold or predictor", f.depthPolicy))
	}
	if err := cfg.Validate(); err != nil {
		return fail(fs, usagef("%v", err))
	}
	prompts := []string{f.prompt}
	if f.prompts != "" {
		if prompts, err = profiles.ReadPrompts(f.prompts); err != nil {
			return err
		}
	}

	pair, err := f.pairFlags.open(params, f.strategy == "duo" || (f.strategy == "egt" && f.aot), f.db)
	if err != nil {
		return err
	}
	defer pair.Close()
	target, src, concurrent := pair.Target, pair.Source, pair.Concurrent
	tThreads := pair.Backend.Threads()
	var trace *json.Encoder
	if f.trace != "" {
		tf, cerr := os.Create(f.trace)
		if cerr != nil {
			return cerr
		}
		defer tf.Close()
		tw := &profiles.ErrWriter{W: tf} // issue 17: a failing trace write is an error
		defer func() {
			if err == nil && tw.Err != nil {
				err = fmt.Errorf("--trace %s: %w", f.trace, tw.Err)
			}
		}()
		trace = json.NewEncoder(tw)
	}
	eng := &spec.Engine{Target: target, Source: src, Concurrent: concurrent}
	if f.strategy == "ar" {
		eng.Source = nil
	}
	w := env.Stdout
	label := f.strategy
	if src != nil && eng.Source != nil {
		label += " with " + src.Name()
	}
	fmt.Fprintf(env.Stderr, "target %s (%d threads), %s, %d prompt(s), %d tokens each\n", filepath.Base(f.Target), tThreads, label, len(prompts), f.n)
	if f.depthPolicy == "predictor" {
		pol, err := predictorPolicy(ctx, env, f.db, pair, f.PairSpec, cfg)
		if err != nil {
			return err
		}
		cfg.Depth = pol
	}
	var rec *recorder
	if !f.noStore {
		st, err := store.Open(ctx, f.db)
		if err != nil {
			return fmt.Errorf("%w (use --no-store to run without storing)", err)
		}
		defer st.Close()
		rec = &recorder{st: st, run: &store.Run{Hardware: profiles.DetectHardware().Fingerprint, Target: f.Target, Drafter: f.SourceName(),
			Strategy: f.strategy, Settings: cfg, Prompts: prompts, PredictedSpeedup: predicted}}
		if _, err := st.CreateRun(ctx, rec.run); err != nil {
			return err
		}
	}
	agg, err := runSuite(ctx, env, eng, target, prompts, cfg, &f, trace, rec)
	if rec != nil {
		status := "done"
		if err != nil {
			status = "failed"
			if ctx.Err() != nil {
				status = "stopped"
			}
		}
		if ferr := rec.finish(context.WithoutCancel(ctx), status, agg); ferr != nil && err == nil {
			err = ferr
		}
	}
	if err != nil {
		return err
	}
	printSummary(w, label, agg)
	if hs := pair.Hidden; hs != nil {
		st := hs.Stats()
		step := agg.decode
		fmt.Fprintf(w, "  hidden drafter: %d of %d steps re-sampled after a rejection (%.1f%% of decode time re-sampling), %d layer rows (%d drafted states), %d hot token-info rows, %d computed on demand\n",
			st.Resampled, st.Steps, 100*st.Resample.Seconds()/max(1e-9, step.Seconds()), st.LayerRows, st.ChainPasses, hs.Hot(), st.OnDemand)
	}
	if f.baseline {
		base := cfg
		base.Strategy = "ar"
		fast := f
		fast.quiet = true
		arEng := &spec.Engine{Target: target}
		ar, err := runSuite(ctx, env, arEng, target, prompts, base, &fast, nil, nil)
		if err != nil {
			return err
		}
		printSummary(w, "ar (baseline)", ar)
		fmt.Fprintf(w, "speedup: %.2fx over ar (%.1f vs %.1f tokens/s)\n", agg.tps()/ar.tps(), agg.tps(), ar.tps())
		if predicted > 0 {
			fmt.Fprintf(w, "predicted by the plan: %.2fx; measured is %+.0f%% of it\n", predicted, 100*(agg.tps()/ar.tps()/predicted-1))
		}
		if rec != nil {
			rec.run.MeasuredSpeedup = agg.tps() / ar.tps()
			if err := rec.st.FinishRun(ctx, rec.run); err != nil {
				return err
			}
		}
		if params.Greedy() && agg.text != ar.text {
			return fmt.Errorf("greedy output differs from ar: speculative decoding was not lossless")
		}
	}
	return nil
}

// aggregate sums a suite's results.
type aggregate struct {
	tokens, steps, drafted, accepted int
	decode, prefill                  time.Duration
	draft, verify, overhead, overlap time.Duration
	text                             string
}

func (a *aggregate) tps() float64 {
	if a.decode <= 0 {
		return 0
	}
	return float64(a.tokens) / a.decode.Seconds()
}

func runSuite(ctx context.Context, env Env, eng *spec.Engine, target *model.Model, prompts []string, cfg spec.Config, f *runFlags, trace *json.Encoder, rec *recorder) (*aggregate, error) {
	agg := &aggregate{}
	var text strings.Builder
	for pi, p := range prompts {
		ids := target.Tok.Encode(p, true, false)
		if err := profiles.CheckRoom(len(ids), cfg.MaxTokens, target.CtxLen); err != nil { // issue 17: refused, not cut short
			return agg, fmt.Errorf("prompt %d: %w", pi+1, err)
		}
		out := &utf8Writer{w: io.Discard}
		if !f.quiet {
			out.w = env.Stdout
			fmt.Fprintf(env.Stdout, "%s", p)
		}
		c := cfg
		c.OnToken = func(id int, drafted bool) {
			piece := target.Tok.Piece(id)
			text.WriteString(piece)
			if f.color && !f.quiet {
				if drafted {
					piece = "\x1b[32m" + piece + "\x1b[0m"
				} else {
					piece = "\x1b[1m" + piece + "\x1b[0m"
				}
			}
			out.write(piece)
		}
		c.OnStep = func(s spec.Step) {
			if trace != nil {
				trace.Encode(struct {
					Prompt int `json:"prompt"`
					spec.Step
				}{pi, s})
			}
			if rec != nil {
				rec.add(ctx, pi, s)
			}
		}
		res, err := eng.Run(ctx, ids, c)
		if rec != nil {
			if ferr := rec.flush(ctx); ferr != nil && err == nil {
				err = ferr
			}
		}
		out.flush()
		if !f.quiet {
			fmt.Fprintln(env.Stdout)
		}
		if err != nil {
			return nil, err
		}
		text.WriteString("\x00")
		agg.tokens += len(res.Tokens)
		agg.steps += len(res.Steps)
		agg.decode += res.Decode
		agg.prefill += res.Prefill
		d, v, o, ov := res.Totals()
		agg.draft += d
		agg.verify += v
		agg.overhead += o
		agg.overlap += ov
		for _, s := range res.Steps {
			agg.drafted += s.Drafted
			agg.accepted += s.Accepted
		}
	}
	agg.text = text.String()
	return agg, nil
}

func printSummary(w io.Writer, label string, a *aggregate) {
	fmt.Fprintf(w, "\n%s: %d tokens in %.1f ms: %.1f tokens/s\n", label, a.tokens, ms(a.decode.Seconds()), a.tps())
	aal, acc := 0.0, 0.0
	if a.steps > 0 {
		aal = float64(a.tokens) / float64(a.steps)
	}
	if a.drafted > 0 {
		acc = float64(a.accepted) / float64(a.drafted)
	}
	fmt.Fprintf(w, "  steps %d, AAL %.2f tokens/step, acceptance %.1f%% (%d of %d drafted)\n", a.steps, aal, 100*acc, a.accepted, a.drafted)
	per := func(d time.Duration) float64 {
		if a.steps == 0 {
			return 0
		}
		return ms(d.Seconds()) / float64(a.steps)
	}
	fmt.Fprintf(w, "  per step: draft %.3f ms, verify %.3f ms, overhead %.3f ms, drafting overlapped with verify %.3f ms\n",
		per(a.draft), per(a.verify), per(a.overhead), per(a.overlap))
}

// recorder stores a run's steps as they come, in batches: a crash loses at
// most the batch in flight.
type recorder struct {
	st    *store.Store
	run   *store.Run
	buf   []store.Step
	index int
	err   error
}

func (r *recorder) add(ctx context.Context, prompt int, s spec.Step) {
	r.buf = append(r.buf, profiles.StepRecord(r.index, prompt, s))
	r.index++
	if len(r.buf) >= 16 {
		r.flush(ctx)
	}
}

func (r *recorder) flush(ctx context.Context) error {
	if r.err == nil && len(r.buf) > 0 {
		r.err = r.st.AppendSteps(context.WithoutCancel(ctx), r.run.ID, r.buf)
	}
	r.buf = r.buf[:0]
	return r.err
}

func (r *recorder) finish(ctx context.Context, status string, a *aggregate) error {
	r.flush(ctx)
	r.run.Status = status
	if status != "done" { // issue 17: a stopped or failed run's totals come from its stored steps
		return errors.Join(r.st.FinishFromSteps(ctx, r.run.ID, status), r.err)
	}
	if a != nil {
		r.run.Tokens, r.run.Steps, r.run.Decode, r.run.TokensPerSecond = a.tokens, a.steps, a.decode, a.tps()
		if a.steps > 0 {
			r.run.AAL = float64(a.tokens) / float64(a.steps)
		}
		if a.drafted > 0 {
			r.run.Acceptance = float64(a.accepted) / float64(a.drafted)
		}
	}
	if err := r.st.FinishRun(ctx, r.run); err != nil {
		return err
	}
	return r.err
}

// applyConfig sets the run's models and plan from an exported config.
func applyConfig(f *runFlags, c *profiles.Config) {
	f.Target = c.Models.Target.Path
	if c.Models.Target.Threads > 0 {
		f.Threads = c.Models.Target.Threads
	}
	f.Draft, f.NGram, f.Layers, f.DraftHidden = "", 0, 0, ""
	switch c.Models.Draft.Kind {
	case "hidden":
		f.DraftHidden = c.Models.Draft.Path
		if c.Models.Draft.DrafterID > 0 {
			f.DraftHidden = strconv.FormatInt(c.Models.Draft.DrafterID, 10)
		}
	case "model":
		f.Draft = c.Models.Draft.Path
	case "ngram":
		f.NGram = c.Models.Draft.NGram
	case "layers":
		f.Layers = c.Models.Draft.Layers
	}
	s := c.Speculation
	f.strategy, f.pad, f.aot = s.Strategy, s.Pad, s.AOT
	if s.Gamma > 0 {
		f.gamma = s.Gamma
	}
	if len(s.Widths) > 0 {
		f.widths, f.parents = intList(s.Widths), ""
	}
	if len(s.EGT) > 0 {
		f.egtWidths = intList(s.EGT)
	}
	if s.Branch > 0 {
		f.branch = s.Branch
	}
	if s.WMax > 0 {
		f.wmax = s.WMax
	}
	if s.DepthPolicy != "" {
		f.depthPolicy, f.depthMin = s.DepthPolicy, s.DepthMin
	}
	if c.Optimization.MaxSequences > 0 {
		f.maxSeqs = c.Optimization.MaxSequences
	}
}

func intList(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// predictorPolicy loads the newest depth predictor trained for the pair and
// the latency curves it weighs depths with.
func predictorPolicy(ctx context.Context, env Env, db string, pair *profiles.Pair, ps profiles.PairSpec, cfg spec.Config) (*profiles.PredictorPolicy, error) {
	st, err := store.Open(ctx, db)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	hw, err := profiles.KnownHardware(ctx, st, ps.Threads, false)
	if err != nil {
		return nil, err
	}
	costs, tid, err := profiles.PairCosts(ctx, st, hw, pair, ps, curveProgress(env))
	if err != nil {
		return nil, err
	}
	id, blob, err := st.LatestPredictor(ctx, tid, ps.SourceName())
	if err != nil {
		return nil, err
	}
	if id == 0 {
		return nil, fmt.Errorf("no depth predictor for %s with %s in %s: run 'arborist calibrate --predictor' first", ps.Target, ps.SourceName(), db)
	}
	pred, err := profiles.UnmarshalPredictor(blob)
	if err != nil {
		return nil, err
	}
	if pred.In != pair.Target.Dim {
		return nil, fmt.Errorf("depth predictor %d expects hidden states of %d, the target has %d", id, pred.In, pair.Target.Dim)
	}
	widths := cfg.Widths
	if len(widths) > pred.Depth {
		widths = widths[:pred.Depth]
	}
	return &profiles.PredictorPolicy{P: pred, Costs: costs, Widths: widths, Branch: cfg.Branch}, nil
}
