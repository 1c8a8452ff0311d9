package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"arborist/profiles"
	"arborist/profiles/trainsize"
)

func runBench(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "bench", "--model M [--threads N] [--reps R] [--widths 1,2,4,...] [--ctx 1024,4096,...] [--db F] [--no-store] [--json]")
	path := fs.String("model", "", "GGUF model `file`")
	var backend string
	var threads int
	backendFlags(fs, &backend, &threads)
	def := profiles.BenchDefaults()
	reps := fs.Int("reps", def.Reps, "repetitions of the decode run (the median is reported)")
	widthsFlag := fs.String("widths", profiles.FormatInts(def.Widths), "verification widths W to time")
	n := fs.Int("n", def.Tokens, "tokens per decode run")
	ctxFlag := fs.String("ctx", "", "context depths (cached positions) at which to time decode runs and the passes as well, e.g. 1024,4096")
	var kv string
	kvFlag(fs, &kv)
	db := dbFlag(fs)
	noStore := fs.Bool("no-store", false, "with --ctx, do not keep the measurement at depth in the database (the workbench's Profile screen shows the newest)")
	asJSON := jsonFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *path == "" {
		return fail(fs, usagef("--model is required"))
	}
	widths, err := profiles.ParseInts(*widthsFlag)
	if err != nil {
		return fail(fs, usagef("--widths: %v; want a list such as 1,2,4,8", err))
	}
	if len(widths) == 0 {
		return fail(fs, usagef("--widths: want a list such as 1,2,4,8"))
	}
	var depths []int
	if *ctxFlag != "" {
		if depths, err = profiles.ParseInts(*ctxFlag); err != nil || len(depths) == 0 {
			return fail(fs, usagef("--ctx: want a list of depths such as 1024,4096"))
		}
	}
	if err := checkBackend(backend, threads); err != nil {
		return fail(fs, err)
	}
	if err := checkKV(kv); err != nil {
		return fail(fs, err)
	}
	if *reps <= 0 || *n <= 1 {
		return fail(fs, usagef("--reps must be positive and -n above 1"))
	}
	opt := profiles.BenchOptions{Model: *path, Backend: backend, Threads: threads, Reps: *reps, Tokens: *n, Widths: widths, KV: kv, Ctx: depths}
	opt.Progress = benchProgress(progress(env), profiles.BenchStages(opt), time.Now())
	r, err := profiles.BenchModel(ctx, opt)
	if err != nil {
		return err
	}
	if len(depths) > 0 && !*noStore { // kept as the model's newest speed at depth; the figures print either way
		if err := keepBench(ctx, *db, r); err != nil {
			fmt.Fprintf(env.Stderr, "bench: the measurement at depth was not kept in %s: %v\n", *db, err)
		}
	}
	if *asJSON {
		return writeJSON(env.Stdout, r)
	}
	w := env.Stdout
	lim := r.Limits
	fmt.Fprintf(w, "model %s: %d params, %.1f MiB of weights; %d threads, kernels %s\n", *path, r.Params, float64(r.WeightBytes)/(1<<20), r.Threads, r.Kernels)
	if m := r.Memory; m != nil {
		fmt.Fprintf(w, "device memory (%s): copy %.1f GB/s (datasheet %.1f GB/s); decode roofline %.0f tokens/s (%s / copy rate)\n",
			m.Description, m.Copy/1e9, m.Peak/1e9, r.Roofline, tokenBytes(r))
		fmt.Fprintf(w, "transfers: from the host %.1f GB/s, to it %.1f GB/s; %d multiprocessors; %.1fM multiply-adds per token\n",
			m.HostToDevice/1e9, m.DeviceToHost/1e9, m.Multiprocessors, lim.MACs/1e6)
	} else {
		bw, pk := r.BandwidthProbes, r.PeakProbes
		fmt.Fprintf(w, "memory read bandwidth: %.1f GB/s (%d threads), the median of %d reads as long as a decode run, one before the runs and one after each (%.1f-%.1f; the fastest single pass %.1f); decode roofline %.0f tokens/s (%s / bandwidth)\n",
			r.Bandwidth/1e9, r.Threads, len(bw), slices.Min(bw)/1e9, slices.Max(bw)/1e9, r.BandwidthBest/1e9, r.Roofline, tokenBytes(r))
		how := fmt.Sprintf("the better of probes with no memory traffic before the decode runs and after the passes (%.1f-%.1f)", slices.Min(pk)/1e9, slices.Max(pk)/1e9)
		if r.PeakW > 0 { // a pass ran faster than the probes
			how = fmt.Sprintf("the pass at W=%d, which ran faster than the probes before the decode runs and after the passes (%.1f-%.1f)", r.PeakW, slices.Min(pk)/1e9, slices.Max(pk)/1e9)
		}
		fmt.Fprintf(w, "compute ceiling: %.1f GMAC/s of %s multiply-adds (%d threads), %s; %.1fM multiply-adds per token\n",
			lim.Peak/1e9, lim.Kind(), r.Threads, how, lim.MACs/1e6)
	}
	med := r.Median
	fmt.Fprintf(w, "decode: %.1f tokens/s median of %d runs of %d tokens (min %.1f, max %.1f); %.0f%% of the bandwidth roofline (each run against the reads just before and after it: %.0f-%.0f%%, median %.0f%%)\n",
		med, *reps, *n, r.Decode[0], r.Decode[len(r.Decode)-1], 100*med/r.Roofline, 100*r.DecodeShares[0], 100*r.DecodeShares[len(r.DecodeShares)-1],
		100*r.DecodeShares[len(r.DecodeShares)/2])
	pts := r.Curve
	fmt.Fprintln(w, "T_verify(W), one pass over W tokens after 128 cached:")
	fmt.Fprintf(w, "  %5s %12s %10s %14s %10s %10s %9s\n", "W", "median", "spread", "vs W=1", "tokens/s", "GMAC/s", "of peak")
	base := pts[0].Median
	ratio8 := 0.0
	for _, p := range pts {
		rate := lim.Rate(p.W, p.Median)
		ofPeak := "-" // no ceiling measured on a device with memory of its own
		if lim.Peak > 0 {
			ofPeak = fmt.Sprintf("%.0f%%", 100*rate/lim.Peak)
		}
		fmt.Fprintf(w, "  %5d %12s %10s %13.2fx %10.0f %10.1f %9s\n", p.W, p.Median.Round(time.Microsecond), p.Spread.Round(time.Microsecond),
			float64(p.Median)/float64(base), float64(p.W)/p.Median.Seconds(), rate/1e9, ofPeak)
		if p.W == 8 && pts[0].W == 1 {
			ratio8 = float64(p.Median) / float64(base)
		}
	}
	if ratio8 > 0 {
		fmt.Fprintf(w, "T_verify(8)/T_verify(1): %.2fx\n", ratio8)
	}
	printDepths(w, r, *reps, *n)
	return nil
}

// printDepths writes the runs at each --ctx depth: decode tokens/s
// against the roofline that reads the KV cache beside the weights at
// the bandwidth above, and the passes there.
func printDepths(w io.Writer, r *profiles.BenchReport, reps, n int) {
	if len(r.Depths) == 0 {
		return
	}
	fmt.Fprintf(w, "at depth: decode runs of %d tokens (median of %d) and passes after the context's cached positions; the roofline reads %.1f MiB of weights + the KV cache a step attends over at %.1f GB/s:\n",
		n, reps, float64(r.WeightBytes)/(1<<20), r.Bandwidth/1e9)
	fmt.Fprintf(w, "  %7s %14s %16s %12s %15s %9s %15s\n", "context", "decode tok/s", "(min-max)", "KV MiB/tok", "roofline tok/s", "share", "prefill tok/s")
	for _, d := range r.Depths {
		fmt.Fprintf(w, "  %7d %14.1f %16s %12.1f %15.0f %8.0f%% %15.1f\n", d.Context, d.Median,
			fmt.Sprintf("(%.1f-%.1f)", d.Decode[0], d.Decode[len(d.Decode)-1]), d.KVRead/(1<<20), d.Roofline, 100*d.Share, d.Prefill)
	}
	for _, d := range r.Depths {
		if len(d.Passes) == 0 {
			continue
		}
		fmt.Fprintf(w, "  passes after %d:", d.Context)
		for _, p := range d.Passes {
			fmt.Fprintf(w, " W=%d %s (±%s)", p.W, p.Median.Round(time.Microsecond), p.Spread.Round(time.Microsecond))
		}
		fmt.Fprintf(w, "; T_verify(W)/T_verify(%d) at the largest W %.2fx\n", d.Passes[0].W, float64(d.Passes[len(d.Passes)-1].Median)/float64(d.Passes[0].Median))
	}
}

// tokenBytes says what a decode step streams at least: the weights, and
// the KV cache at the runs' mean context.
func tokenBytes(r *profiles.BenchReport) string {
	return fmt.Sprintf("%.1f MiB of weights + %.1f MiB of KV cache a token, at the runs' mean context of %.0f positions",
		float64(r.WeightBytes)/(1<<20), r.KVRead/(1<<20), r.Context)
}

// benchProgress adds to each of a bench's stage lines what is left of
// the whole bench: the rest of the stage at its own pace, and the stages
// after it at the pace per weight (profiles.BenchStages) of the bench so
// far. A default bench at two depths runs minutes, and each stage's own
// estimate says nothing of the stages after it.
func benchProgress(p profiles.Progress, stages []profiles.BenchStage, start time.Time) profiles.Progress {
	stage, stageStart, last := "", start, start
	total := 0.0
	for _, s := range stages {
		total += s.Weight
	}
	return func(e profiles.Event) {
		now := time.Now()
		if e.Stage != stage {
			stage, stageStart = e.Stage, last // the stage began when the one before it last reported
		}
		last = now
		if f := profiles.BenchDone(stages, e); f > 0 && f < 1 && e.Done > 0 {
			after := 0.0 // the weight of the stages after this one
			for i := len(stages) - 1; i >= 0 && stages[i].Name != e.Stage; i-- {
				after += stages[i].Weight
			}
			left := trainsize.ETA(now.Sub(stageStart), float64(e.Done), float64(e.Total)) +
				time.Duration(float64(now.Sub(start))/(f*total)*after)
			e.Detail += "; bench: about " + trainsize.Minutes(left) + " left in all"
		}
		p(e)
	}
}

// keepBench stores a measurement at depth in the database at db.
func keepBench(ctx context.Context, db string, r *profiles.BenchReport) error {
	b, err := openBench(ctx, db)
	if err != nil {
		return err
	}
	defer b.Close()
	return b.SaveBenchReport(ctx, r)
}
