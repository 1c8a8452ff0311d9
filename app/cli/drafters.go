package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"arborist/app/present"
	"arborist/profiles"
	"arborist/profiles/trainsize"
)

// trainDrafterArgs is train drafter's usage line, with the defaults the
// trainer really uses.
func trainDrafterArgs() string {
	d := profiles.Choices().DrafterSettings
	return fmt.Sprintf("--target T --prompts FILE [--size %s] [--tokens %d --samples %d --depth %d --epochs %d --d %d ...] [--db FILE] | --resume ID",
		strings.Join(trainsize.Names(), "|"), d.Tokens, d.Samples, d.Depth, d.Epochs, d.D)
}

// sizesHelp lists the training sizes with the work each asks for.
func sizesHelp(work func(string) (trainsize.Work, error)) string {
	var out []string
	for _, name := range trainsize.Names() {
		w, err := work(name)
		if err != nil {
			continue
		}
		prompts := "every prompt and the whole corpus"
		if w.Prompts > 0 {
			prompts = fmt.Sprintf("%d prompts", w.Prompts)
		}
		desc := fmt.Sprintf("%s x %d tokens", prompts, w.Tokens)
		if w.Samples > 1 {
			desc = fmt.Sprintf("%s x %d samples x %d tokens", prompts, w.Samples, w.Tokens)
		}
		if w.Epochs > 0 {
			desc += fmt.Sprintf(", %d epochs", w.Epochs)
		}
		out = append(out, fmt.Sprintf("%s (%s)", name, desc))
	}
	return strings.Join(out, ", ")
}

// runTrainDrafter trains a hidden-state drafter by self-distillation from
// the target and stores it; Ctrl-C leaves a checkpoint to --resume.
func runTrainDrafter(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "train drafter", trainDrafterArgs())
	def := profiles.Choices().DrafterSettings
	var spec profiles.TrainSpec
	s := &spec.Settings
	fs.StringVar(&spec.Target, "target", "", "target GGUF `file`")
	fs.StringVar(&spec.Prompts, "prompts", "", "prompt suite `file` the target continues to make training data")
	fs.IntVar(&spec.Threads, "threads", 0, "CPU threads (default: physical cores)")
	fs.Int64Var(&spec.Resume, "resume", 0, "resume the interrupted training of stored drafter `ID`")
	size := fs.String("size", trainsize.Default, "how much data: "+sizesHelp(trainsize.Drafter)+"; --prompts-max, --tokens, --samples and --epochs override it")
	fs.IntVar(&s.MaxPrompts, "prompts-max", def.MaxPrompts, "prompts continued at most, those of --prompts first, then the corpus spread evenly (0: all)")
	fs.IntVar(&s.Tokens, "tokens", def.Tokens, "tokens the target generates per sample")
	fs.IntVar(&s.Samples, "samples", def.Samples, "samples per prompt (different seeds)")
	fs.IntVar(&s.Depth, "depth", def.Depth, "deepest autoregressive step of the curriculum")
	fs.IntVar(&s.Epochs, "epochs", def.Epochs, "passes over the training data")
	fs.IntVar(&s.D, "d", def.D, "token-info rank (capped by the target's width)")
	fs.Float64Var(&s.LR, "lr", def.LR, "Adam learning rate")
	fs.IntVar(&s.Batch, "batch", def.Batch, "sequences per update")
	fs.Float64Var(&s.Noise, "noise", def.Noise, "share of token-info tokens replaced at random")
	fs.Float64Var(&s.MSEWeight, "mse-weight", def.MSEWeight, "weight of the hidden-state MSE in the loss")
	fs.Float64Var(&s.KLWeight, "kl-weight", def.KLWeight, "weight of KL(target || drafter) in the loss")
	fs.Float64Var(&s.HeldOut, "held-out", def.HeldOut, "share of samples held out for evaluation")
	fs.Float64Var(&s.Temp, "temp", def.Temp, "sampling temperature of the generated data")
	fs.Uint64Var(&s.Seed, "seed", def.Seed, "seed of data, noise and initialisation")
	fs.IntVar(&s.Hot, "hot", def.Hot, "hot tokens whose token-info rows are precomputed")
	fs.IntVar(&s.InitLayer, "init-layer", def.InitLayer, "target block to start from (-1 random; default the middle one of the blocks that change the residual stream)")
	fs.Float64Var(&s.Clip, "clip", def.Clip, "gradient norm clip (0 off)")
	fs.BoolVar(&s.Corpus, "corpus", def.Corpus, "add the built-in prompt corpus (assets/corpus) to --prompts")
	temps := fs.String("temps", joinFloats(def.Temps), "sampling temperatures of the samples, cycled (comma-separated; 0 = greedy)")
	fs.Float64Var(&s.Warmup, "warmup", def.Warmup, "share of the updates the learning rate warms up over (then cosine decay)")
	fs.IntVar(&s.Patience, "patience", def.Patience, "stop after this many full-depth epochs without better held-out acceptance (0 never)")
	fs.StringVar(&s.Precision, "precision", def.Precision, "the training products' inputs: f32, bf16 (mixed precision, needs AVX-512 BF16), or auto (bf16 where the CPU has it)")
	db := dbFlag(fs)
	err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	work, err := trainsize.Drafter(*size)
	if err != nil {
		return fail(fs, usagef("--%v", err))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["size"] && spec.Resume != 0 {
		return fail(fs, usagef("--size with --resume: a resumed training keeps the size it started with"))
	}
	sized := *s
	work.ApplyTo(&sized)
	for name, v := range map[string][2]*int{"prompts-max": {&s.MaxPrompts, &sized.MaxPrompts}, "tokens": {&s.Tokens, &sized.Tokens},
		"samples": {&s.Samples, &sized.Samples}, "epochs": {&s.Epochs, &sized.Epochs}} {
		if !set[name] {
			*v[0] = *v[1] // the size's, where the flag was not given
		}
	}
	if s.Temps, err = parseFloats(*temps); err != nil {
		return fail(fs, usagef("--temps: %v", err))
	}
	if spec.Resume < 0 {
		return fail(fs, usagef("--resume %d: give the id of a stored drafter (arborist drafters list)", spec.Resume))
	}
	if spec.Threads != 0 {
		if err := profiles.CheckThreads("--threads", spec.Threads); err != nil {
			return fail(fs, usagef("%v", err))
		}
	}
	if spec.Resume == 0 {
		if spec.Target == "" || spec.Prompts == "" {
			return fail(fs, usagef("--target and --prompts are required (or --resume ID)"))
		}
		if err := s.Validate(); err != nil {
			return fail(fs, usagef("%v", err))
		}
	}
	b, err := openBench(ctx, *db)
	if err != nil {
		return err
	}
	defer b.Close()
	w := env.Stdout
	if spec.Resume == 0 {
		if texts, err := profiles.ReadPrompts(spec.Prompts); err == nil {
			cost := trainsize.DrafterCost(len(texts), *s)
			named := ""
			if cost.Size != "" {
				named = " (size " + cost.Size + ")"
			}
			fmt.Fprintf(w, "drafter data%s: %s\n", named, cost)
		}
	}
	start := time.Now()
	last := time.Time{}
	estimated := false
	eta := func(e profiles.TrainEvent) string {
		if e.ETA <= 0 {
			return ""
		}
		return ", about " + trainsize.Minutes(e.ETA) + " left"
	}
	id, d, err := b.TrainDrafter(ctx, spec, func(e profiles.TrainEvent) {
		if e.ETA > 0 && !estimated {
			estimated = true
			fmt.Fprintf(env.Stderr, "\r%60s\r", "")
			fmt.Fprintf(w, "estimated %s in all (measured on the first batch, %s so far)\n", trainsize.Minutes(e.Elapsed+e.ETA), trainsize.Minutes(e.Elapsed))
		}
		switch {
		case e.Phase == "start":
			fmt.Fprintf(env.Stderr, "\r%60s\r", "")
			if e.Cached {
				fmt.Fprintln(w, "data: reused from the database (same target, prompts and data settings)")
			}
			fmt.Fprintf(w, "data: %d training tokens, %d held out; %d hot tokens cover %.1f%% of the training tokens\n", e.Tokens[0], e.Tokens[1], e.Hot, 100*e.Cover)
			fmt.Fprintf(w, "drafter: %d parameters, %.1f%% of the target's %d; training products in %s\n", e.Params, 100*float64(e.Params)/float64(max(1, e.TargetParams)), e.TargetParams, e.Precision)
			if e.Before != nil {
				fmt.Fprintf(w, "untrained: held-out loss %.4f (MSE %.4f, KL %.4f), top-1 agreement %.1f%%\n", e.Before.HeldOut, e.Before.MSE, e.Before.KL, 100*e.Before.Agree)
			}
			fmt.Fprintf(w, "stored as drafter %d (checkpointed after every epoch; Ctrl-C and --resume %d to continue)\n", e.ID, e.ID)
		case e.Phase == "data":
			if time.Since(last) > time.Second {
				last = time.Now()
				fmt.Fprintf(env.Stderr, "\rgenerating training data: %d/%d tokens%s   ", e.Done, e.Total, eta(e))
			}
		case e.Phase == "train":
			if time.Since(last) > time.Second || e.Done == e.Total {
				last = time.Now()
				fmt.Fprintf(env.Stderr, "\repoch %d (depth %d): batch %d/%d, loss %.4f%s   ", e.Epoch+1, e.Depth, e.Done, e.Total, e.Loss, eta(e))
			}
		case e.Record != nil:
			r := e.Record
			fmt.Fprintf(env.Stderr, "\r%60s\r", "")
			agree := make([]string, len(r.AgreeAt))
			for i, a := range r.AgreeAt {
				agree[i] = fmt.Sprintf("%.1f%%", 100*a)
			}
			fmt.Fprintf(w, "epoch %2d depth %d: train loss %.4f, held-out loss %.4f (MSE %.4f = %.0f%% of the states' mean square, %.0f%% of their variance; KL %.4f), held-out top-1 agreement at depths 1.. %s, chain acceptance estimate %.1f%%, lr %.2g, %.1fs\n",
				r.Epoch, r.Depth, r.Train, r.HeldOut, r.MSE, 100*r.MSE/max(r.StateMS, 1e-12), 100*r.MSE/max(r.StateVar, 1e-12), r.KL, strings.Join(agree, " "), 100*r.Accept, r.LR, r.Seconds)
		}
	})
	if err != nil {
		if errors.Is(err, context.Canceled) && id > 0 {
			fmt.Fprintf(w, "\ninterrupted: drafter %d keeps its last checkpoint; resume with: arborist train drafter --resume %d --db %s\n", id, id, *db)
		}
		return err
	}
	fmt.Fprintf(w, "trained drafter %d for %s in %s (%d parameters)\n", id, d.Target, time.Since(start).Round(time.Second), d.Params())
	fmt.Fprintf(w, "use it with: arborist run --target %s --draft-hidden %d --db %s ...\n", d.Target, id, *db)
	fmt.Fprintln(w, id)
	return nil
}

func joinFloats(x []float64) string {
	s := make([]string, len(x))
	for i, v := range x {
		s[i] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	return strings.Join(s, ",")
}

func parseFloats(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", f)
		}
		out = append(out, v)
	}
	return out, nil
}

// runDrafters lists, shows, exports and imports stored drafters.
func runDrafters(ctx context.Context, env Env, args []string) error {
	const usage = "list | show ID | export ID -o FILE | import FILE | rm ID"
	if len(args) == 0 {
		fmt.Fprintln(env.Stderr, "usage: arborist drafters "+usage)
		return usagef("drafters what? (list, show, export, import, rm)")
	}
	fs := newFlags(env, "drafters", usage)
	db := dbFlag(fs)
	out := fs.String("o", "", "output `file` (export)")
	pos, err := parse(fs, args[1:])
	if err != nil {
		return fail(fs, err)
	}
	open := profiles.Open
	if args[0] == "list" || args[0] == "show" || args[0] == "export" {
		open = profiles.OpenReadOnly // reading writes nothing
	}
	b, err := open(ctx, *db)
	if err != nil {
		return err
	}
	defer b.Close()
	w := env.Stdout
	idArg := func() (int64, error) {
		if len(pos) != 1 {
			return 0, fail(fs, usagef("give one drafter id"))
		}
		id, err := strconv.ParseInt(pos[0], 10, 64)
		if err != nil {
			return 0, fail(fs, usagef("drafter id %q is not a number", pos[0]))
		}
		return id, nil
	}
	switch args[0] {
	case "list":
		ds, err := b.Drafters(ctx)
		if err != nil {
			return err
		}
		if len(ds) == 0 {
			fmt.Fprintln(w, "no drafters stored: train one with 'arborist train drafter'")
			return nil
		}
		fmt.Fprintf(w, "%4s %-9s %-12s %9s %8s  %-20s %s\n", "id", "status", "target", "size", "held-out", "updated", "target file")
		for _, d := range ds {
			ho := "-"
			if loss, ok := d.HeldOut(); ok {
				ho = fmt.Sprintf("%.4f", loss)
			}
			fmt.Fprintf(w, "%4d %-9s %-12.12s %9s %8s  %-20.19s %s\n", d.ID, d.Status, d.TargetFingerprint, present.HumanBytes(uint64(d.Bytes)), ho, d.Updated, d.TargetPath)
		}
	case "show":
		id, err := idArg()
		if err != nil {
			return err
		}
		info, err := b.DrafterInfo(ctx, id)
		if err != nil {
			return err
		}
		row, d := info.Row, info.Model
		fmt.Fprintf(w, "drafter %d (%s) for %s, fingerprint %s\n", id, row.Status, row.TargetPath, row.TargetFingerprint)
		fmt.Fprintf(w, "shape: width %d, %d heads (%d kv), ffn %d, token-info rank %d, vocabulary %d; %d parameters; %d hot tokens; started from block %d\n",
			d.Dim, d.Heads, d.KVHeads, d.FFN, d.D, d.Vocab, d.Params(), len(d.Hot), d.InitLayer)
		set, _ := json.Marshal(d.Settings)
		fmt.Fprintf(w, "settings: %s\n", set)
		if info.Unfinished {
			fmt.Fprintf(w, "unfinished: %d of %d epochs done; resume with --resume %d\n", info.EpochsDone, d.Settings.Epochs, id)
		}
		for _, r := range d.Losses {
			fmt.Fprintf(w, "epoch %2d depth %d: train %.4f, held-out %.4f (MSE %.4f, KL %.4f), agreement %.1f%%\n", r.Epoch, r.Depth, r.Train, r.HeldOut, r.MSE, r.KL, 100*r.Agree)
		}
	case "export":
		id, err := idArg()
		if err != nil {
			return err
		}
		if *out == "" {
			return fail(fs, usagef("-o FILE is required"))
		}
		size, err := b.ExportDrafter(ctx, id, *out)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "wrote drafter %d to %s (%s)\n", id, *out, present.HumanBytes(uint64(size)))
	case "import":
		if len(pos) != 1 {
			return fail(fs, usagef("give one drafter file"))
		}
		path := pos[0]
		id, target, err := b.ImportDrafter(ctx, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "imported %s as drafter %d (for %s)\n", path, id, target)
	case "rm":
		id, err := idArg()
		if err != nil {
			return err
		}
		if err := b.DeleteDrafter(ctx, id); err != nil {
			return err
		}
		fmt.Fprintf(w, "removed drafter %d\n", id)
	default:
		return fail(fs, usagef("unknown drafters command %q (list, show, export, import, rm)", args[0]))
	}
	return nil
}
