package cli

import (
	"context"
	"flag"
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
	"arborist/kernels"
	"arborist/profiles"
	"arborist/profiles/store"
)

func dbFlag(fs *flag.FlagSet) *string {
	return fs.String("db", store.DefaultPath(), "Arborist database `file`")
}

// curveProgress prints curve measurements as they come.
func curveProgress(env Env) func(kind string, done, total int, p profiles.Point) {
	return func(kind string, done, total int, p profiles.Point) {
		fmt.Fprintf(env.Stderr, "\r  %s curve: round %d of at most %d (W=%d: %s)   ", kind, done, total, p.W, p.Median.Round(time.Microsecond))
		if done == total {
			fmt.Fprintln(env.Stderr)
		}
	}
}

// curveFor returns a model's stored or freshly measured latency curve.
func curveFor(ctx context.Context, env Env, st *store.Store, hw store.Hardware, m *model.Model, be kernels.Backend, kind string, fresh bool, maxW int) (*profiles.Profile, error) {
	opt := profiles.ProfileOptions{Kind: kind, Fresh: fresh, Widths: profiles.DefaultWidths(maxW)}
	progress := curveProgress(env)
	opt.Curve.Progress = func(done, total int, p profiles.Point) { progress(kind, done, total, p) }
	return profiles.ProfileModel(ctx, st, hw, m, be, opt)
}

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

func runProfile(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "profile", "--target T [--draft D] [--threads N] [--max-w 64] [--fresh] [--db FILE]")
	var p pairFlags
	p.register(fs)
	db := dbFlag(fs)
	fresh := fs.Bool("fresh", false, "measure again even when the database has a matching curve")
	maxW := fs.Int("max-w", 64, "largest verification width to time")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := p.check(false); err != nil {
		return fail(fs, err)
	}
	if *maxW < 1 {
		return fail(fs, usagef("--max-w must be >= 1"))
	}
	st, err := store.Open(ctx, *db)
	if err != nil {
		return err
	}
	defer st.Close()
	pair, err := p.open(sample.Params{}, false, *db)
	if err != nil {
		return err
	}
	defer pair.Close()
	hw, err := profiles.KnownHardware(ctx, st, p.Threads, *fresh)
	if err != nil {
		return err
	}
	w := env.Stdout
	fmt.Fprintf(w, "hardware %s: %s, %d cores / %d threads, %s, %.1f GiB RAM, %.1f GB/s read bandwidth\n",
		hw.Fingerprint, hw.CPU, hw.Cores, hw.Threads, hw.SIMD, float64(hw.RAM)/(1<<30), hw.Bandwidth/1e9)
	tp, err := curveFor(ctx, env, st, hw, pair.Target, pair.Backend, "verify", *fresh, *maxW)
	if err != nil {
		return err
	}
	printCurve(w, "target "+pair.Target.Path, tp)
	lim, err := profiles.ModelLimits(ctx, pair.Target, pair.Backend.Threads(), hw.Bandwidth)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, lim.Describe(tp.Curve.Points))
	op, err := profiles.ProfileModel(ctx, st, hw, pair.Target, pair.Backend, profiles.ProfileOptions{Kind: "overhead", Widths: []int{1, 8, 32}, Fresh: *fresh})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "bookkeeping per step (mask, token choice, cache compaction): W=1 %v, W=8 %v, W=32 %v\n",
		op.Curve.Points[0].Median.Round(time.Microsecond), op.Curve.Points[1].Median.Round(time.Microsecond), op.Curve.Points[2].Median.Round(time.Microsecond))
	if pair.DraftModel != nil {
		dp, err := curveFor(ctx, env, st, hw, pair.DraftModel, pair.Backend, "draft", *fresh, min(*maxW, 16))
		if err != nil {
			return err
		}
		printCurve(w, "drafter "+p.Draft, dp)
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
	trainPred := fs.Bool("predictor", false, "also train the depth predictor (Yggdrasil) and store it")
	depth := fs.Int("depth", 5, "depth predictor: deepest draft level it predicts (Dmax)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := p.check(true); err != nil {
		return fail(fs, err)
	}
	if *prompts == "" || *n < 1 {
		return fail(fs, usagef("--prompts is required and -n must be positive"))
	}
	w0, err := openWorkload(ctx, &p, *db, *prompts)
	if err != nil {
		return err
	}
	defer w0.Close()
	st, pair, ids, texts := w0.st, w0.pair, w0.ids, w0.texts
	eng := &spec.Engine{Target: pair.Target, Source: pair.Source}
	acc, err := profiles.Calibrate(ctx, eng, ids, *n, func(done, total int) {
		fmt.Fprintf(env.Stderr, "\r  calibrating: prompt %d of %d", done, total)
		if done == total {
			fmt.Fprintln(env.Stderr)
		}
	})
	if err != nil {
		return err
	}
	md, err := profiles.DescribeModel(pair.Target)
	if err != nil {
		return err
	}
	mid, err := st.PutModel(ctx, &md)
	if err != nil {
		return err
	}
	id, err := st.SaveCalibration(ctx, mid, p.SourceName(), *prompts, acc)
	if err != nil {
		return err
	}
	w := env.Stdout
	fmt.Fprintf(w, "calibration %d: %s with %s over %d prompts, %d steps, %d tokens\n", id, p.Target, p.SourceName(), len(texts), acc.Steps, acc.Tokens)
	fmt.Fprintln(w, "acceptance by depth (rows) and sibling rank (columns):")
	for d, row := range acc.Rank {
		var cells []string
		for r, v := range row {
			cells = append(cells, fmt.Sprintf("%5.1f%% (n=%d)", 100*v, acc.Counts[d][r]))
		}
		fmt.Fprintf(w, "  depth %d: %s\n", d+1, strings.Join(cells, "  "))
	}
	fmt.Fprintln(w, "acceptance by drafter probability:")
	for b, v := range acc.QBins {
		if acc.QCounts[b] > 0 {
			fmt.Fprintf(w, "  q in [%.1f, %.1f): %5.1f%% of %d\n", float64(b)/10, float64(b+1)/10, 100*v, acc.QCounts[b])
		}
	}
	if !*trainPred {
		return nil
	}
	if *depth < 1 {
		return fail(fs, usagef("--depth must be >= 1"))
	}
	return trainPredictor(ctx, env, st, eng, ids, *n, *depth, id)
}

// trainPredictor collects chain-drafting data for the pair, trains the depth
// predictor, stores it with calibration calID and reports its accuracy.
func trainPredictor(ctx context.Context, env Env, st *store.Store, eng *spec.Engine, ids [][]int, n, depth int, calID int64) error {
	fmt.Fprintf(env.Stderr, "  collecting depth-predictor data (chains of %d) ...\n", depth)
	samples, err := profiles.DepthSamples(ctx, eng, ids, n, depth)
	if err != nil {
		return err
	}
	pred := profiles.NewPredictor(eng.Target.Dim, 128, depth, 1)
	err = pred.Train(samples, profiles.TrainOptions{Progress: func(ep, total int, loss float64) {
		fmt.Fprintf(env.Stderr, "\r  training: epoch %d/%d, loss %.4f", ep, total, loss)
		if ep == total {
			fmt.Fprintln(env.Stderr)
		}
	}})
	if err != nil {
		return err
	}
	blob, err := pred.Marshal()
	if err != nil {
		return err
	}
	pid, err := st.SavePredictor(ctx, calID, blob, pred.Stats)
	if err != nil {
		return err
	}
	w := env.Stdout
	fmt.Fprintf(w, "depth predictor %d: %d training steps, %d held out (the last prompts), trained in %v\n", pid, pred.Stats.Samples, pred.Stats.HeldOut, pred.Stats.Took.Round(time.Millisecond))
	for d := range pred.Stats.Accuracy {
		fmt.Fprintf(w, "  depth %d: held-out accuracy %5.1f%% (accepted in %5.1f%% of held-out steps)\n", d+1, 100*pred.Stats.Accuracy[d], 100*pred.Stats.BaseRate[d])
	}
	return nil
}

func runTrain(ctx context.Context, env Env, args []string) error {
	if len(args) > 0 && args[0] == "drafter" {
		return runTrainDrafter(ctx, env, args[1:])
	}
	if len(args) == 0 || args[0] != "predictor" {
		fmt.Fprintln(env.Stderr, "usage: arborist train predictor --target T --draft D --prompts FILE [-n 128] [--depth 5] [--db FILE]")
		fmt.Fprintln(env.Stderr, "       arborist train drafter "+trainDrafterArgs)
		return usagef("train what? (predictor or drafter)")
	}
	fs := newFlags(env, "train predictor", "--target T (--draft D | --draft-ngram N | --draft-layers K) --prompts FILE [-n 128] [--depth 5] [--db FILE]")
	var p pairFlags
	p.register(fs)
	db := dbFlag(fs)
	prompts := fs.String("prompts", "", "prompt suite `file`, one prompt per line")
	n := fs.Int("n", 128, "tokens per prompt")
	depth := fs.Int("depth", 5, "deepest draft level predicted (Dmax)")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if err := p.check(true); err != nil {
		return fail(fs, err)
	}
	if *prompts == "" || *n < 2 || *depth < 1 {
		return fail(fs, usagef("--prompts is required, -n must be above 1 and --depth positive"))
	}
	w0, err := openWorkload(ctx, &p, *db, *prompts)
	if err != nil {
		return err
	}
	defer w0.Close()
	st, pair := w0.st, w0.pair
	md, err := profiles.DescribeModel(pair.Target)
	if err != nil {
		return err
	}
	tid, err := st.PutModel(ctx, &md)
	if err != nil {
		return err
	}
	var acc profiles.Acceptance
	calID, err := st.LatestCalibration(ctx, tid, p.SourceName(), &acc)
	if err != nil {
		return err
	}
	if calID == 0 {
		return fmt.Errorf("no calibration of %s with %s in %s: run 'arborist calibrate' first", p.Target, p.SourceName(), st.Path)
	}
	return trainPredictor(ctx, env, st, &spec.Engine{Target: pair.Target, Source: pair.Source}, w0.ids, *n, *depth, calID)
}

// tuneInputs loads the pair's curves and calibration for the speedup model.
type tuneInputs struct {
	pair  *profiles.Pair
	hw    store.Hardware
	acc   *profiles.Acceptance
	costs profiles.Costs
	tid   int64
	calID int64
}

func loadTuneInputs(ctx context.Context, env Env, st *store.Store, p *pairFlags, alpha float64) (*tuneInputs, error) {
	pair, err := p.open(sample.Params{}, false, st.Path)
	if err != nil {
		return nil, err
	}
	in := &tuneInputs{pair: pair}
	if in.hw, err = profiles.KnownHardware(ctx, st, p.Threads, false); err != nil {
		pair.Close()
		return nil, err
	}
	in.costs, in.tid, err = profiles.PairCosts(ctx, st, in.hw, pair, p.PairSpec, curveProgress(env))
	if err != nil {
		pair.Close()
		return nil, err
	}
	if alpha > 0 {
		in.acc = profiles.Uniform(alpha, 0.4, 8, 4)
		return in, nil
	}
	var acc profiles.Acceptance
	id, err := st.LatestCalibration(ctx, in.tid, p.SourceName(), &acc)
	if err != nil {
		pair.Close()
		return nil, err
	}
	if id == 0 {
		pair.Close()
		return nil, fmt.Errorf("no calibration of %s with %s in %s: run 'arborist calibrate' first, or assume an acceptance rate with --alpha", p.Target, p.SourceName(), st.Path)
	}
	in.acc, in.calID = &acc, id
	return in, nil
}

func runTune(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "tune", "--target T (--draft D | --draft-ngram N | --draft-layers K) [--top 10] [--alpha A] [-o config.yaml] [--db FILE]")
	var p pairFlags
	p.register(fs)
	db := dbFlag(fs)
	top := fs.Int("top", 10, "plans to list")
	alpha := fs.Float64("alpha", 0, "assume this top-candidate acceptance rate instead of a stored calibration")
	out := fs.String("o", "", "write the best plan as config.yaml to `file`")
	validate := fs.Bool("validate", false, "run the best plan and plain decoding on --prompts and report measured against predicted speedup")
	prompts := fs.String("prompts", "", "prompt suite `file` for --validate")
	n := fs.Int("n", 128, "tokens per prompt for --validate")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := p.check(true); err != nil {
		return fail(fs, err)
	}
	if *alpha < 0 || *alpha >= 1 || *top < 1 {
		return fail(fs, usagef("--alpha must be in [0, 1) and --top positive"))
	}
	if *validate && (*prompts == "" || *n < 1) {
		return fail(fs, usagef("--validate needs --prompts and a positive -n"))
	}
	st, err := store.Open(ctx, *db)
	if err != nil {
		return err
	}
	defer st.Close()
	in, err := loadTuneInputs(ctx, env, st, &p, *alpha)
	if err != nil {
		return err
	}
	defer in.pair.Close()
	preds := profiles.Search(in.acc, in.costs, profiles.SearchSpace{})
	w := env.Stdout
	fmt.Fprintf(w, "%d plans scored with the latency-aware model (speedup = AAL * T_verify(1) / (draft + T_verify(W) + overhead)):\n", len(preds))
	fmt.Fprintf(w, "  %-4s %-40s %8s %6s %6s %10s %10s\n", "rank", "plan", "speedup", "AAL", "nodes", "draft", "verify")
	for i, pr := range preds[:min(*top, len(preds))] {
		fmt.Fprintf(w, "  %-4d %-40s %7.2fx %6.2f %6d %10s %10s\n", i+1, pr.Plan, pr.Speedup, pr.AAL, pr.Nodes, pr.Draft.Round(time.Microsecond), pr.Verify.Round(time.Microsecond))
	}
	best := preds[0]
	hid, _ := st.PutHardware(ctx, &in.hw)
	planID, err := st.SavePlan(ctx, hid, in.tid, best.Plan.Strategy, best, best.Speedup)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "best: %s, predicted %.2fx (plan %d)\n", best.Plan, best.Speedup, planID)
	path := *out
	if path == "" && *validate { // issue 17: in a fresh private folder, not a predictable name
		tmp, err := os.MkdirTemp("", "arborist-plan-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		path = filepath.Join(tmp, fmt.Sprintf("plan-%d.yaml", planID))
	}
	if path == "" {
		return nil
	}
	cfg := exportConfig(ctx, st, &p, in, best)
	if err := writeConfig(ctx, st, planID, cfg, path); err != nil {
		return err
	}
	fmt.Fprintf(w, "wrote %s\n\n%s", path, cfg.Equivalents())
	in.pair.Close() // validation loads the pair afresh, with the plan's threads
	if !*validate {
		return nil
	}
	fmt.Fprintf(w, "\nvalidating on %s (%d tokens per prompt):\n", *prompts, *n)
	return runRun(ctx, env, []string{"--config", path, "--prompts", *prompts, "-n", fmt.Sprint(*n), "--baseline", "--quiet", "--db", *db})
}

func exportConfig(ctx context.Context, st *store.Store, p *pairFlags, in *tuneInputs, best profiles.Prediction) *profiles.Config {
	precision := ""
	if tc := in.pair.Target.File.TypeCounts(); len(tc) > 0 {
		precision = tc[0].Type.String()
	}
	c := profiles.NewConfig(p.PairSpec, profiles.ConfigHardware(in.hw), in.pair.Backend.Threads(), in.pair.Target.CtxLen, precision, best)
	// a real SHA-256 of each model file, cached in the store (issue 17)
	c.Models.Target.SHA256, _ = profiles.ModelSHA256(ctx, st, in.pair.Target.Path)
	if in.pair.DraftModel != nil {
		c.Models.Draft.SHA256, _ = profiles.ModelSHA256(ctx, st, in.pair.DraftModel.Path)
	}
	on := fmt.Sprintf("hardware %s; T_verify curve of %d points", in.hw.Fingerprint, len(in.costs.Verify))
	if in.calID > 0 {
		on += fmt.Sprintf("; calibration %d", in.calID)
	} else {
		on += "; assumed acceptance (--alpha)"
	}
	c.Predicted.MeasuredOn = on
	return c
}

func writeConfig(ctx context.Context, st *store.Store, planID int64, cfg *profiles.Config, path string) error {
	b, err := cfg.Marshal()
	if err != nil {
		return err
	}
	if _, err := profiles.ParseConfig(path, b); err != nil {
		return fmt.Errorf("exported config does not parse back: %w", err)
	}
	if err := profiles.WriteFile(path, b); err != nil { // issue 17: temporary file and rename, never through a symlink
		return err
	}
	return st.SaveExport(ctx, planID, string(b))
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
	st, err := store.Open(ctx, *db)
	if err != nil {
		return err
	}
	defer st.Close()
	in, err := loadTuneInputs(ctx, env, st, &p, 0.5)
	if err != nil {
		return err
	}
	defer in.pair.Close()
	var best profiles.Prediction
	planID, err := st.LatestPlan(ctx, in.tid, &best)
	if err != nil {
		return err
	}
	if planID == 0 {
		return fmt.Errorf("no plan for %s in %s: run 'arborist tune' first", p.Target, st.Path)
	}
	cfg := exportConfig(ctx, st, &p, in, best)
	cfg.Predicted.MeasuredOn = fmt.Sprintf("plan %d of %s", planID, st.Path)
	if err := writeConfig(ctx, st, planID, cfg, *out); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "wrote %s (plan %d: %s, predicted %.2fx)\n\n%s", *out, planID, best.Plan, best.Speedup, cfg.Equivalents())
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
	st, err := store.OpenReadOnly(ctx, *db) // issue 17: reading writes nothing
	if err != nil {
		return err
	}
	defer st.Close()
	w := env.Stdout
	switch sub {
	case "show":
		if _, err := st.Run(ctx, ids[0]); err != nil { // issue 17: "no run N", not "no stored steps"
			return err
		}
		steps, err := st.RunSteps(ctx, ids[0])
		if err != nil {
			return err
		}
		if len(steps) == 0 {
			return fmt.Errorf("run %d has no stored steps (see 'arborist runs')", ids[0])
		}
		fmt.Fprintf(w, "run %d: %d steps\n  %5s %6s %7s %8s %8s %10s %10s %10s\n", ids[0], len(steps), "step", "prompt", "width", "drafted", "accepted", "draft", "verify", "overhead")
		for _, s := range steps {
			fmt.Fprintf(w, "  %5d %6d %7d %8d %8d %10s %10s %10s\n", s.Index, s.Prompt, s.Width, s.Drafted, s.Accepted, s.Draft.Round(time.Microsecond), s.Verify.Round(time.Microsecond), s.Overhead.Round(time.Microsecond))
		}
		return nil
	case "compare":
		var runs []*store.Run
		for _, id := range ids {
			r, err := st.Run(ctx, id)
			if err != nil {
				return err
			}
			runs = append(runs, r)
		}
		row := func(label string, f func(r *store.Run) string) {
			fmt.Fprintf(w, "%-18s", label)
			for _, r := range runs {
				fmt.Fprintf(w, " %-24s", trimTo(f(r), 24))
			}
			fmt.Fprintln(w)
		}
		row("run", func(r *store.Run) string { return fmt.Sprintf("#%d (%s)", r.ID, r.Status) })
		row("strategy", func(r *store.Run) string { return r.Strategy })
		row("drafter", func(r *store.Run) string { return r.Drafter })
		row("target", func(r *store.Run) string { return filepath.Base(r.Target) })
		row("tokens", func(r *store.Run) string { return fmt.Sprint(r.Tokens) })
		row("tokens/s", func(r *store.Run) string { return fmt.Sprintf("%.1f", r.TokensPerSecond) })
		row("AAL", func(r *store.Run) string { return fmt.Sprintf("%.2f", r.AAL) })
		row("acceptance", func(r *store.Run) string { return fmt.Sprintf("%.1f%%", 100*r.Acceptance) })
		row("measured speedup", func(r *store.Run) string { return speedupText(r.MeasuredSpeedup) })
		row("predicted speedup", func(r *store.Run) string { return speedupText(r.PredictedSpeedup) })
		row("created", func(r *store.Run) string { return r.Created.Local().Format("2006-01-02 15:04") })
		return nil
	}
	runs, err := st.Runs(ctx, *limit)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%4s %-8s %-6s %-30s %8s %6s %7s %8s %9s  %s\n", "id", "status", "strat", "drafter", "tok/s", "AAL", "accept", "speedup", "predicted", "created")
	for _, r := range runs {
		fmt.Fprintf(w, "%4d %-8s %-6s %-30s %8.1f %6.2f %6.1f%% %8s %9s  %s\n", r.ID, r.Status, r.Strategy, r.Drafter, r.TokensPerSecond, r.AAL, 100*r.Acceptance,
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

// workload is what calibrate and train predictor work on: the database, the
// opened pair, and the prompt suite encoded for the target.
type workload struct {
	st    *store.Store
	pair  *profiles.Pair
	texts []string
	ids   [][]int
}

func openWorkload(ctx context.Context, p *pairFlags, db, prompts string) (*workload, error) {
	texts, err := profiles.ReadPrompts(prompts)
	if err != nil {
		return nil, err
	}
	st, err := store.Open(ctx, db)
	if err != nil {
		return nil, err
	}
	pair, err := p.open(sample.Params{}, false, db)
	if err != nil {
		st.Close()
		return nil, err
	}
	w := &workload{st: st, pair: pair, texts: texts}
	for _, t := range texts {
		w.ids = append(w.ids, pair.Target.Tok.Encode(t, true, false))
	}
	return w, nil
}

// Close releases the pair and the database.
func (w *workload) Close() {
	w.pair.Close()
	w.st.Close()
}
