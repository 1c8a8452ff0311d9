package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"time"

	"arborist/engine/generate"
	"arborist/engine/model"
	"arborist/kernels/cpu"
	"arborist/profiles"
)

func runBench(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "bench", "--model M [--threads N] [--reps R] [--widths 1,2,4,...]")
	path := fs.String("model", "", "GGUF model `file`")
	threads := fs.Int("threads", cpu.DefaultThreads(), "CPU threads")
	reps := fs.Int("reps", 5, "repetitions of the decode run (the median is reported)")
	widthsFlag := fs.String("widths", "1,2,4,8,16,32,64", "verification widths W to time")
	n := fs.Int("n", 128, "tokens per decode run")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *path == "" {
		return fail(fs, usagef("--model is required"))
	}
	widths, err := parseInts(*widthsFlag)
	if err != nil || len(widths) == 0 {
		return fail(fs, usagef("--widths: want a list such as 1,2,4,8"))
	}
	if *threads <= 0 || *reps <= 0 || *n <= 1 {
		return fail(fs, usagef("--threads, --reps must be positive and -n above 1"))
	}
	if err := profiles.CheckThreads("--threads", *threads); err != nil { // issue 17
		return fail(fs, usagef("%v", err))
	}
	be := cpu.New(*threads)
	defer be.Close()
	m, err := model.Load(*path, be)
	if err != nil {
		return err
	}
	defer m.Close()
	w := env.Stdout
	fmt.Fprintf(w, "model %s: %d params, %.1f MiB of weights; %d threads, kernels %s\n", *path, m.File.Params(), float64(m.WeightBytes())/(1<<20), *threads, cpu.Kernels())

	bw, err := profiles.Bandwidth(ctx, *threads, 256<<20)
	if err != nil {
		return err
	}
	lim, err := profiles.ModelLimits(ctx, m, *threads, bw)
	if err != nil {
		return err
	}
	roof := 1 / lim.Roofline().Seconds() // tokens/s
	fmt.Fprintf(w, "memory read bandwidth: %.1f GB/s (%d threads); decode roofline %.0f tokens/s (weight bytes per token / bandwidth)\n", bw/1e9, *threads, roof)
	fmt.Fprintf(w, "compute ceiling: %.1f GMAC/s of %s multiply-adds (%d threads, no memory traffic); %.1fM multiply-adds per token\n", lim.Peak/1e9, lim.Kind(), *threads, lim.MACs/1e6)

	prompt := m.Tok.Encode("Once upon a time", true, false)
	var tps []float64
	for r := 0; r < *reps; r++ {
		_, st, err := generate.Run(ctx, m, prompt, generate.Options{MaxTokens: *n})
		if err != nil {
			return err
		}
		tps = append(tps, st.DecodeTPS())
	}
	sort.Float64s(tps)
	med := tps[len(tps)/2]
	fmt.Fprintf(w, "decode: %.1f tokens/s median of %d runs of %d tokens (min %.1f, max %.1f); %.0f%% of the bandwidth roofline\n",
		med, *reps, *n, tps[0], tps[len(tps)-1], 100*med/roof)

	pts, err := profiles.VerifyCurve(ctx, m, widths, profiles.CurveOptions{})
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "T_verify(W), one pass over W tokens after 128 cached:")
	fmt.Fprintf(w, "  %5s %12s %10s %14s %10s %10s %9s\n", "W", "median", "spread", "vs W=1", "tokens/s", "GMAC/s", "of peak")
	base := pts[0].Median
	ratio8 := 0.0
	for _, p := range pts {
		rate := lim.Rate(p.W, p.Median)
		fmt.Fprintf(w, "  %5d %12s %10s %13.2fx %10.0f %10.1f %8.0f%%\n", p.W, p.Median.Round(time.Microsecond), p.Spread.Round(time.Microsecond),
			float64(p.Median)/float64(base), float64(p.W)/p.Median.Seconds(), rate/1e9, 100*rate/lim.Peak)
		if p.W == 8 && pts[0].W == 1 {
			ratio8 = float64(p.Median) / float64(base)
		}
	}
	if ref, ok := referenceFigures(filepath.Base(*path)); ok {
		fmt.Fprintf(w, "reference engine (../shared/models/README.md: a mature C/C++ engine, 2 threads, on the developers' machine class): decode %.0f-%.0f tokens/s; this run %.2f-%.2fx of it",
			ref.decodeLo, ref.decodeHi, med/ref.decodeHi, med/ref.decodeLo)
		if ref.ratioHi > 0 && ratio8 > 0 {
			fmt.Fprintf(w, "; T_verify(8)/T_verify(1) %.1f-%.1fx, this run %.2fx", ref.ratioLo, ref.ratioHi, ratio8)
		}
		fmt.Fprintln(w)
	}
	return nil
}

// reference holds a mature engine's figures for one of the shared models.
type reference struct{ decodeLo, decodeHi, ratioLo, ratioHi float64 }

// referenceFigures returns the figures ../shared/models/README.md gives for
// a shared model, by file name.
func referenceFigures(name string) (reference, bool) {
	switch name {
	case "target-60m-q8_0.gguf":
		return reference{143, 240, 2.0, 3.2}, true
	case "stories260K.gguf":
		return reference{4650, 4650, 0, 0}, true
	}
	return reference{}, false
}
