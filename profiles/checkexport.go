package profiles

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"arborist/profiles/config"
	"arborist/profiles/hardware"
	"arborist/profiles/llamacheck"
	"arborist/profiles/llamacpp"
	"arborist/profiles/store"
)

// plausibleSpeedup refuses a speedup over plain decoding that no
// speculation gives (beyond 1000x either way): figures that cannot all
// have been measured, never stored or written into a config.
func plausibleSpeedup(x float64) error {
	if !(x >= 1e-3 && x <= 1e3) {
		return fmt.Errorf("llama.cpp's timing lines give a speedup of %.3gx over its plain decoding: not a plausible measurement, nothing was stored", x)
	}
	return nil
}

// CheckExport runs llama.cpp's plain decoding and the exported speculative
// settings (config.LlamaCpp: the flags of the exported line) on the
// prompts, interleaved over rounds, reads llama.cpp's own timing lines,
// and returns the measured speedup in llama.cpp (the median round's, with
// the range), beside Arborist's prediction for its own engine. Both are
// stored as runs of the runtime (unless NoStore), so Compare shows them.
func (b *Bench) CheckExport(ctx context.Context, c *config.Config, opt llamacheck.Options) (*llamacheck.Result, error) {
	if err := opt.Complete("check", c); err != nil {
		return nil, err
	}
	a := c.LlamaCpp()
	if tl := c.Measured; a.Draft == nil && tl != nil && tl.LlamaCpp != nil && !tl.LlamaCpp.Speculate {
		return nil, fmt.Errorf("the exported llama.cpp setting is plain decoding (no draft length measured faster in llama.cpp: runtimes.llama_cpp): nothing to check")
	}
	if a.Draft == nil {
		return nil, fmt.Errorf("the exported llama.cpp settings do not speculate (the plan is %s with a %s draft source): nothing to check; llama.cpp speculates with a draft model", c.Speculation.Strategy, c.Models.Draft.Kind)
	}
	plainProg, specProg, err := llamacpp.Programs(opt.LlamaCpp)
	if err != nil {
		return nil, err
	}
	plainArgs, specArgs := llamacpp.Args(a, opt.MaxTokens)
	res := &llamacheck.Result{Runtime: "llama.cpp", Plain: llamacpp.Command(plainProg, plainArgs), Speculative: llamacpp.Command(specProg, specArgs)}
	res.PlainLine, res.SpeculativeLine = config.ShellLine(res.Plain...), config.ShellLine(res.Speculative...)
	if c.Predicted != nil {
		res.Predicted = c.Predicted.Speedup
	}
	if res.Version, err = llamacpp.Version(ctx, plainProg, opt.CallLimit); err != nil {
		return nil, err
	}
	var plainTot, specTot llamacpp.Timed
	for r := 0; r < opt.Rounds; r++ {
		var pr, sr llamacpp.Timed
		for _, p := range opt.Prompts {
			runs := []bool{false, true}
			if r%2 == 1 {
				runs = []bool{true, false}
			}
			for _, spec := range runs {
				prog, args, acc := plainProg, plainArgs, &pr
				if spec {
					prog, args, acc = specProg, specArgs, &sr
				}
				t, err := llamacpp.Run(ctx, prog, slices.Concat(args, []string{"-p", p}), spec, opt.MaxTokens, opt.CallLimitFor(p))
				if err != nil {
					return nil, err
				}
				acc.Add(t)
			}
		}
		round := llamacheck.Round{Plain: float64(pr.Tokens) / pr.Seconds, Spec: float64(sr.Tokens) / sr.Seconds, Drafted: sr.Drafted, Accepted: sr.Accepted}
		round.Speedup = round.Spec / round.Plain
		if err := plausibleSpeedup(round.Speedup); err != nil {
			return nil, fmt.Errorf("round %d: %w", r+1, err)
		}
		res.Rounds = append(res.Rounds, round)
		if opt.OnRound != nil {
			opt.OnRound(r, round)
		}
		plainTot.Add(pr)
		specTot.Add(sr)
	}
	speedups := make([]float64, len(res.Rounds))
	for i, r := range res.Rounds {
		speedups[i] = r.Speedup
	}
	res.Speedup, res.Min, res.Max = medianRange(speedups)
	if specTot.Drafted > 0 {
		res.Acceptance = float64(specTot.Accepted) / float64(specTot.Drafted)
	}
	if opt.NoStore {
		return res, nil
	}
	return res, b.storeCheck(ctx, c, opt, res, plainTot, specTot)
}

// storeCheck stores a check's two sides as runs of the runtime: its plain
// decoding, and the exported settings with the measured speedup.
func (b *Bench) storeCheck(ctx context.Context, c *config.Config, opt llamacheck.Options, res *llamacheck.Result, plain, spec llamacpp.Timed) error {
	return b.storeSides(ctx, c, opt, res, plain, &spec)
}

// storeSides stores the plain side as a run of the runtime, and the
// speculative one where spec is not nil.
func (b *Bench) storeSides(ctx context.Context, c *config.Config, opt llamacheck.Options, res *llamacheck.Result, plain llamacpp.Timed, spec *llamacpp.Timed) error {
	st, err := b.db(ctx)
	if err != nil {
		return fmt.Errorf("%w (use --no-store to check without storing)", err)
	}
	hw := hardware.DetectHardware().Fingerprint
	a := c.LlamaCpp()
	version := res.Version
	if version == "" {
		version = "unknown"
	}
	type side struct {
		id       *int64
		strategy string
		drafter  string
		command  []string
		t        llamacpp.Timed
	}
	sides := []side{{&res.PlainRun, "llama.cpp plain", "", res.Plain, plain}}
	if spec != nil {
		sides = append(sides, side{&res.SpecRun, fmt.Sprintf("llama.cpp draft-max=%d p-min=%g", a.Depth, a.PMin), "draft:" + filepath.Base(c.Models.Draft.Path), res.Speculative, *spec})
	}
	for _, side := range sides {
		run := &store.Run{Hardware: hw, Target: c.Models.Target.Path, Drafter: side.drafter, Strategy: side.strategy, Prompts: opt.Prompts,
			Settings: map[string]any{"runtime": "llama.cpp", "version": version, "command": side.command, "rounds": opt.Rounds, "max_tokens": opt.MaxTokens}}
		if side.drafter != "" {
			run.PredictedSpeedup = res.Predicted
		}
		if _, err := st.CreateRun(ctx, run); err != nil {
			return err
		}
		run.Status, run.Tokens, run.Decode = "done", side.t.Tokens, time.Duration(side.t.Seconds*float64(time.Second))
		run.TokensPerSecond = float64(side.t.Tokens) / side.t.Seconds
		run.MeasuredSpeedup = 1
		if side.drafter != "" {
			run.MeasuredSpeedup = res.Speedup
			if side.t.Drafted > 0 {
				run.Acceptance = float64(side.t.Accepted) / float64(side.t.Drafted)
			}
		}
		if err := st.FinishRun(context.WithoutCancel(ctx), run); err != nil {
			return err
		}
		*side.id = run.ID
	}
	return nil
}
