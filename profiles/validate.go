package profiles

import (
	"context"
	"fmt"
	"time"

	"arborist/engine/sample"
	"arborist/engine/spec"
	"arborist/profiles/costmodel"
	"arborist/profiles/hardware"
	"arborist/profiles/pairs"
	"arborist/profiles/store"
)

// defaultRounds is how many passes over the prompt suite a validation
// makes unless told otherwise: each plan's measured speedup is the median
// of its rounds. One pass is too few on a machine whose speed moves: the
// screenshot tour's single pass (32 tokens) measured chain gamma 2 at
// 1.61x and the same work under another name (an EGT of one branch) at
// 2.44x, one after the other.
const defaultRounds = 3

// ValidateOptions describe a validation of predicted plans.
type ValidateOptions struct {
	Plans     []costmodel.Prediction // the plans to measure, with their predictions (e.g. a tune's top N)
	Sample    sample.Params          // greedy by default
	MaxTokens int
	Prompts   []string
	Rounds    int  // passes over the prompt suite (default: Catalog.Rounds)
	NoStore   bool // do not store the runs
	// OnRun is called before each decode: round, prompt, and the plan's
	// index in Plans (-1: plain decoding).
	OnRun func(round, prompt, plan int)
}

// validated is one plan's measured outcome.
type validated struct {
	Plan      spec.Plan
	Label     string
	Predicted float64 // the model's speedup
	// DraftThreads is the drafter's share of the threads a concurrent
	// plan ran with (0: the default split, or a sequential plan)
	DraftThreads int
	Measured     float64 // median over rounds of this plan's tokens/s over plain decoding's in the same round
	Rounds       []float64
	Totals       Totals
	Identical    bool // greedy output token-for-token plain decoding's
	RunID        int64
	Best         bool // the measured best of the plans
	// Split is what the prediction rested on against what the runs
	// measured (ErrorSplit).
	Split ErrorSplit
}

// ErrorSplit splits a plan's prediction error into the three things the
// speedup model multiplies, speedup = AAL * T_plain / step: tokens a
// step, a step's time (drafting, verification and bookkeeping: the runs'
// decode time a step), and plain decoding's time a token (as priced,
// predicted speedup x step / AAL; as run, plain decoding's decode time a
// step in the same validation). On a machine whose speed moves, the last
// one shows how much of an error is the machine moving between the
// re-check and the runs rather than the plan being mispriced.
type ErrorSplit struct {
	AALPredicted  float64       `json:"aal_predicted"`
	AALMeasured   float64       `json:"aal_measured"`
	StepPredicted time.Duration `json:"step_predicted_ns"`
	StepMeasured  time.Duration `json:"step_measured_ns"`
	BasePredicted time.Duration `json:"baseline_token_predicted_ns"`
	BaseMeasured  time.Duration `json:"baseline_token_measured_ns"`
}

// errorSplit fills a split from a plan's prediction and the totals of its
// runs and of plain decoding's; zero where a side has no steps.
func errorSplit(pr costmodel.Prediction, plan, base Totals) ErrorSplit {
	var e ErrorSplit
	if pr.AAL <= 0 || pr.Step <= 0 || plan.Steps == 0 || base.Steps == 0 {
		return e
	}
	e.AALPredicted, e.StepPredicted = pr.AAL, pr.Step
	e.BasePredicted = time.Duration(pr.Speedup * float64(pr.Step) / pr.AAL)
	e.AALMeasured = float64(plan.Tokens) / float64(plan.Steps)
	e.StepMeasured = plan.Decode / time.Duration(plan.Steps)
	e.BaseMeasured = base.Decode / time.Duration(base.Steps)
	return e
}

// Validation is the outcome of Validate: plain decoding and each plan.
type Validation struct {
	Base      Totals
	BaseRunID int64
	Plans     []validated // in the order given (predicted rank)
	Best      int         // index of the measured best in Plans
	// Err is the error Validate returned with this outcome (nil: none).
	Err error
}

// Validate measures predicted plans against each other and plain decoding
// on one prompt suite, interleaved: for each prompt, plain decoding and then
// every plan in turn (A, B, C, A, B, C, ...), so a machine that slows down
// or speeds up during the run (other load, frequency scaling) touches every
// plan alike. Each plan's measured speedup is the median over rounds of its
// throughput over plain decoding's in the same round; the plan measured
// fastest is marked. Every plan and plain decoding is stored as a run (the
// plans with their predicted and measured speedups) unless NoStore; a
// greedy plan whose output differs from plain decoding is an error.
func (b *Bench) Validate(ctx context.Context, ps PairSpec, opt ValidateOptions) (v *Validation, err error) {
	defer func() {
		if v != nil {
			v.Err = err
		}
	}()
	if len(opt.Plans) == 0 {
		return nil, fmt.Errorf("no plans to validate")
	}
	if len(opt.Prompts) == 0 {
		return nil, fmt.Errorf("no prompts to run")
	}
	if opt.Rounds <= 0 {
		opt.Rounds = defaultRounds
	}
	if opt.Rounds > 100 || len(opt.Plans) > 100 {
		return nil, fmt.Errorf("validation of %d plans over %d rounds: at most 100 of each", len(opt.Plans), opt.Rounds)
	}
	type runner struct {
		plan  spec.Plan
		cfg   spec.Config
		eng   *spec.Engine
		pair  *pairs.Pair
		rec   *recorder
		tot   Totals
		round Totals
		toks  [][]int
	}
	var st *store.Store
	if !opt.NoStore {
		var err error
		if st, err = b.db(ctx); err != nil {
			return nil, fmt.Errorf("%w (use --no-store to run without storing)", err)
		}
	}
	// one pair for sequential drafting and, when a plan drafts while the
	// target verifies, one for concurrent drafting on each split of the
	// threads the plans were priced on; every run begins afresh
	type pairKey struct {
		conc         bool
		draftThreads int
	}
	opened := map[pairKey]*pairs.Pair{}
	defer func() {
		for _, p := range opened {
			p.Close()
		}
	}()
	pairFor := func(conc bool, draftThreads int) (*pairs.Pair, error) {
		k := pairKey{conc, draftThreads}
		if p := opened[k]; p != nil {
			return p, nil
		}
		s := ps
		if conc && draftThreads > 0 {
			s.DraftThreads = draftThreads
		}
		p, err := b.openPair(s, conc)
		if err != nil {
			return nil, err
		}
		opened[k] = p
		return p, nil
	}
	out := &Validation{Plans: make([]validated, len(opt.Plans))}
	runners := make([]*runner, len(opt.Plans)+1) // runners[0]: plain decoding
	for i := range runners {
		plan, predicted, draftThreads := spec.PlainPlan(), 1.0, 0
		if i > 0 {
			plan, predicted, draftThreads = opt.Plans[i-1].Plan.Trim(), opt.Plans[i-1].Speedup, opt.Plans[i-1].DraftThreads
		}
		cfg, err := runConfig(plan, opt.Sample, opt.MaxTokens)
		if err != nil {
			return nil, fmt.Errorf("plan %s: %w", plan, err)
		}
		if plan.NeedsSource() && ps.Sources() == 0 {
			return nil, fmt.Errorf("strategy %s needs a draft source", plan.Strategy)
		}
		pair, err := pairFor(plan.Concurrent(), draftThreads)
		if err != nil {
			return nil, err
		}
		if plan.LearnedDepth() {
			pol, err := b.predictorPolicy(ctx, ps, pair, plan)
			if err != nil {
				return nil, err
			}
			cfg.Depth = pol
		}
		r := &runner{plan: plan, cfg: cfg, pair: pair, eng: &spec.Engine{Target: pair.Target, Source: pair.Source, Concurrent: pair.Concurrent}}
		label := plan.String()
		if !plan.NeedsSource() {
			r.eng.Source = nil
		} else if pair.Source != nil {
			label += " with " + pair.Source.Name()
		}
		if i > 0 {
			if th := opt.Plans[i-1].Threads(); th != "" && plan.Concurrent() {
				label += ", " + th
			}
			out.Plans[i-1] = validated{Plan: plan, Label: label, Predicted: predicted, DraftThreads: draftThreads}
		}
		runners[i] = r
	}
	ids := encode(runners[0].pair, opt.Prompts)
	for pi, p := range ids { // refused before anything runs
		if err := hardware.CheckRoom(len(p), opt.MaxTokens, runners[0].pair.Target.CtxLen); err != nil {
			return nil, fmt.Errorf("prompt %d: %w", pi+1, err)
		}
	}
	if st != nil {
		var prompts []string
		for range opt.Rounds {
			prompts = append(prompts, opt.Prompts...)
		}
		for i, r := range runners {
			run := &store.Run{Hardware: hardware.DetectHardware().Fingerprint, Target: ps.Target, Drafter: ps.SourceName(),
				Strategy: r.cfg.Strategy, Plan: planJSON(r.plan), Settings: r.cfg, Prompts: prompts, PredictedSpeedup: 1}
			if i > 0 {
				run.PredictedSpeedup = out.Plans[i-1].Predicted
			} else {
				run.Drafter = ""
			}
			if _, err := st.CreateRun(ctx, run); err != nil {
				return nil, err
			}
			r.rec = &recorder{st: st, run: run}
		}
	}
	finish := func(status string) error {
		var first error
		for i, r := range runners {
			if r.rec == nil {
				continue
			}
			if i > 0 {
				r.rec.run.MeasuredSpeedup = out.Plans[i-1].Measured
			}
			if err := r.rec.finish(context.WithoutCancel(ctx), status, &r.tot); err != nil && first == nil {
				first = err
			}
		}
		return first
	}
	for round := 0; round < opt.Rounds; round++ {
		for _, r := range runners {
			r.round = Totals{}
		}
		for pi, p := range ids {
			for i, r := range runners {
				if opt.OnRun != nil {
					opt.OnRun(round, pi, i-1)
				}
				c := r.cfg
				if r.rec != nil {
					rec, prompt := r.rec, round*len(ids)+pi
					c.OnStep = func(s spec.Step) { rec.add(ctx, prompt, s) }
				}
				res, err := r.eng.Run(ctx, p, c)
				if r.rec != nil {
					if ferr := r.rec.flush(ctx); ferr != nil && err == nil {
						err = ferr
					}
				}
				if err != nil {
					status := "failed"
					if ctx.Err() != nil {
						status = "stopped"
					}
					finish(status)
					return nil, err
				}
				r.tot.add(res)
				r.round.add(res)
				if round == 0 {
					r.toks = append(r.toks, res.Tokens)
				}
			}
		}
		for i, r := range runners[1:] {
			if base := runners[0].round.TPS(); base > 0 {
				out.Plans[i].Rounds = append(out.Plans[i].Rounds, r.round.TPS()/base)
			}
		}
	}
	out.Base = runners[0].tot
	best := 0
	for i, r := range runners[1:] {
		v := &out.Plans[i]
		v.Totals, v.Measured = r.tot, costmodel.Median(v.Rounds)
		v.Split = errorSplit(opt.Plans[i], r.tot, runners[0].tot)
		v.Identical = sameTokens(r.toks, runners[0].toks)
		if v.Measured > out.Plans[best].Measured {
			best = i
		}
	}
	out.Best = best
	out.Plans[best].Best = true
	if err := finish("done"); err != nil {
		return out, err
	}
	for i, r := range runners {
		if r.rec == nil {
			continue
		}
		if i == 0 {
			out.BaseRunID = r.rec.run.ID
		} else {
			out.Plans[i-1].RunID = r.rec.run.ID
		}
	}
	if opt.Sample.Greedy() {
		for _, v := range out.Plans {
			if !v.Identical {
				return out, fmt.Errorf("greedy output of %s differs from ar: speculative decoding was not lossless", v.Label)
			}
		}
	}
	return out, nil
}
