package profiles

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"arborist/profiles/config"
	"arborist/profiles/llamacheck"
	"arborist/profiles/llamacpp"
	"arborist/profiles/outfile"
)

// llamaDraftLengths are the draft lengths a tune for llama.cpp measures
// beside the exported one: llama.cpp's verification costs nearly a token
// per drafted token on a CPU, so short drafts are where it can pay.
var llamaDraftLengths = []int{1, 2, 3, 4, 6, 8}

// llamaSettings is what a tune measures: the exported setting, and each
// draft length of llamaDraftLengths with --draft-p-min 0 (every token
// drafted) and with the plan's threshold where it has one.
func llamaSettings(a config.LlamaCppArgs) []llamacheck.Setting {
	out := []llamacheck.Setting{{DraftMax: a.Depth, DraftPMin: a.PMin, Exported: true}}
	pmins := []float64{0}
	if a.PMin > 0 {
		pmins = append(pmins, a.PMin)
	}
	for _, pm := range pmins {
		for _, n := range llamaDraftLengths {
			if n == a.Depth && pm == a.PMin {
				continue
			}
			out = append(out, llamacheck.Setting{DraftMax: n, DraftPMin: pm})
		}
	}
	return out
}

// TuneLlamaCpp searches llama.cpp's own knobs for the pair: it measures
// llama.cpp's plain decoding and each setting of llamaSettings (the
// exported one included) on the prompts, interleaved over rounds (plain
// decoding and every setting on a prompt before the next prompt, the
// order rotated every round), reads llama.cpp's own timing lines, and
// picks the setting with the best median speedup, or none where no setting
// is faster than plain decoding. The result's Config is c with that
// setting in runtimes.llama_cpp, so its export writes it; the plain side
// and the best setting are stored as runs of the runtime (unless
// NoStore), and with opt.Out written there. c itself is not changed.
func (b *Bench) TuneLlamaCpp(ctx context.Context, c *config.Config, opt llamacheck.Options) (*llamacheck.TuneResult, error) {
	if opt.Out != "" { // refused before the minutes of measuring, not after
		if err := outfile.Check(opt.Out, b.tunedInputs(c, opt.Inputs)...); err != nil {
			return nil, err
		}
	}
	if err := opt.Complete("tune", c); err != nil {
		return nil, err
	}
	base := *c
	base.Measured = nil // the plan's own mapping, not an earlier tune's
	a := base.LlamaCpp()
	if a.Draft == nil {
		return nil, fmt.Errorf("llama.cpp cannot speculate with this plan (%s with a %s draft source): nothing to tune; llama.cpp speculates with a draft model", c.Speculation.Strategy, c.Models.Draft.Kind)
	}
	plainProg, specProg, err := llamacpp.Programs(opt.LlamaCpp)
	if err != nil {
		return nil, err
	}
	plainArgs, _ := llamacpp.Args(a, opt.MaxTokens)
	settings := llamaSettings(a)
	// a setting's arguments are the plan's with that setting measured,
	// as the exported line will carry it
	specArgs := func(s llamacheck.Setting) []string {
		with := base
		with.Measured = &config.Runtimes{LlamaCpp: &config.LlamaCppTuned{Speculate: true, DraftMax: s.DraftMax, DraftPMin: s.DraftPMin}}
		_, args := llamacpp.Args(with.LlamaCpp(), opt.MaxTokens)
		return args
	}
	version, err := llamacpp.Version(ctx, plainProg, opt.CallLimit)
	if err != nil {
		return nil, err
	}
	res := &llamacheck.TuneResult{Version: version}
	if c.Predicted != nil {
		res.Predicted = c.Predicted.Speedup
	}
	var plainTot llamacpp.Timed
	timed := make([]llamacpp.Timed, len(settings)) // each setting's decoding over every round
	for r := 0; r < opt.Rounds; r++ {
		var plain llamacpp.Timed
		spec := make([]llamacpp.Timed, len(settings))
		for pi, p := range opt.Prompts {
			// plain decoding, then every setting, the start rotated by
			// round and prompt so no setting always follows another
			k := len(settings) + 1
			for j := 0; j < k; j++ {
				i := (j + r + pi) % k
				prog, args, acc := plainProg, plainArgs, &plain
				if i > 0 {
					prog, args, acc = specProg, specArgs(settings[i-1]), &spec[i-1]
				}
				t, err := llamacpp.Run(ctx, prog, slices.Concat(args, []string{"-p", p}), i > 0, opt.MaxTokens, opt.CallLimitFor(p))
				if err != nil {
					return nil, err
				}
				acc.Add(t)
			}
		}
		for i := range settings {
			s := &settings[i]
			x := (float64(spec[i].Tokens) / spec[i].Seconds) / (float64(plain.Tokens) / plain.Seconds)
			if err := plausibleSpeedup(x); err != nil {
				return nil, fmt.Errorf("round %d, --draft-max %d: %w", r+1, s.DraftMax, err)
			}
			s.Speedups = append(s.Speedups, x)
			timed[i].Add(spec[i])
		}
		plainTot.Add(plain)
		if opt.OnRound != nil {
			best := slices.MaxFunc(settings, func(x, y llamacheck.Setting) int { return cmp.Compare(x.Speedups[r], y.Speedups[r]) })
			opt.OnRound(r, llamacheck.Round{Plain: float64(plain.Tokens) / plain.Seconds, Speedup: best.Speedups[r]})
		}
	}
	for i := range settings {
		s := &settings[i]
		s.Speedup, s.Low, s.High = medianRange(s.Speedups)
		if timed[i].Drafted > 0 {
			s.Acceptance = float64(timed[i].Accepted) / float64(timed[i].Drafted)
		}
		if s.Exported {
			res.Exported = s
		}
	}
	res.Settings = settings
	// the fastest setting: the best where it beats plain decoding; where
	// it does not, what the no-speculation note cites
	fi := 0
	for i := range settings {
		if settings[i].Speedup > settings[fi].Speedup {
			fi = i
		}
	}
	f := &settings[fi]
	tuned := &config.LlamaCppTuned{Version: res.Version, Speedup: f.Speedup, Low: f.Low, High: f.High}
	if f.Speedup > 1 {
		res.Best = f
		tuned.Speculate, tuned.DraftMax, tuned.DraftPMin = true, f.DraftMax, f.DraftPMin
	}
	out := base
	out.Measured = &config.Runtimes{LlamaCpp: tuned}
	res.Config = &out
	if opt.Out != "" {
		if err := b.writeTuned(res, opt.Out, opt.Inputs...); err != nil {
			return nil, err
		}
	}
	if opt.NoStore {
		return res, nil
	}
	// the plain side, and the best setting where one beat it, as runs of
	// the runtime (Compare shows them beside Arborist's)
	chk := &llamacheck.Result{Runtime: "llama.cpp", Version: res.Version, Predicted: res.Predicted, Plain: llamacpp.Command(plainProg, plainArgs)}
	var best *llamacpp.Timed
	if bs := res.Best; bs != nil {
		chk.Speedup, best = bs.Speedup, &timed[fi]
		chk.Speculative = llamacpp.Command(specProg, specArgs(*bs))
	}
	if err := b.storeSides(ctx, res.Config, opt, chk, plainTot, best); err != nil {
		return res, err
	}
	res.PlainRun, res.BestRun = chk.PlainRun, chk.SpecRun
	return res, nil
}

// medianRange is xs' median (the mean of the middle two for an even
// count) and range.
func medianRange(xs []float64) (med, lo, hi float64) {
	s := slices.Clone(xs)
	slices.Sort(s)
	med = s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return med, s[0], s[len(s)-1]
}

// writeTuned writes the tuned config (r.Config: the plan with the
// llama.cpp setting measured best) to path, never onto one of inputs (the
// config it was tuned from, the prompt suite), the database or a model it
// names.
func (b *Bench) writeTuned(r *llamacheck.TuneResult, path string, inputs ...string) error {
	data, err := r.Config.Marshal()
	if err != nil {
		return err
	}
	if _, err := config.Parse(path, data); err != nil {
		return err
	}
	return outfile.WriteFile(path, data, b.tunedInputs(r.Config, inputs)...)
}

// tunedInputs are the files a tuned config is never written onto: the
// inputs given, the database and the models the config names.
func (b *Bench) tunedInputs(c *config.Config, inputs []string) []string {
	return append(slices.Clone(inputs), b.path, c.Models.Target.Path, c.Models.Draft.Path)
}
