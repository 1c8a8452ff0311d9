package profiles

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"arborist/engine/sample"
	"arborist/engine/spec"
	"arborist/profiles/hardware"
	"arborist/profiles/measure"
	"arborist/profiles/outfile"
	"arborist/profiles/pairs"
	"arborist/profiles/predictor"
	"arborist/profiles/store"
)

// RunOptions describe a prompt-suite run.
type RunOptions struct {
	Plan      spec.Plan
	Sample    sample.Params
	MaxTokens int
	Prompts   []string
	Baseline  bool // also run plain decoding: measured speedup, greedy identity check
	// Rounds, with Baseline, is how many times the plan and plain decoding
	// each decode the suite, interleaved; the measured speedup is the
	// median of the rounds' ratios. 0: Catalog.Rounds, fewer when a round
	// takes longer than Catalog.RoundBudget/Rounds (a long round averages
	// the machine's moves itself). The first round is the stored, live
	// one; the others are timed alone.
	Rounds  int
	NoStore bool // do not store the run
	// Predicted is the plan's predicted speedup; 0 asks the core to
	// predict it from the pair's stored curves and calibration.
	// PredictedOn says what a given prediction rests on.
	Predicted   float64
	PredictedOn string
	// PredictedAssumed says the given prediction was priced on assumed
	// acceptance (a plan tuned before any calibration): the run is stored
	// so, and Compare marks its prediction.
	PredictedAssumed bool
	// Context caps the tokens a prompt and its generation may hold (0:
	// the model's context): config.yaml's max_seq_len.
	Context int
	// Trace, when set, is the file the per-step trace is written to as
	// JSON lines: created once decoding starts (a run refused before that
	// leaves it as it was), in place when the run ends (what was traced,
	// even of a failed run), and refused when it names an input: the
	// database, a model, or one of Inputs (the prompt suite, the config
	// the run replays).
	Trace  string
	Inputs []string
	// Live callbacks, called on the decoding goroutine.
	OnPrompt func(i int, text string)                     // before prompt i
	OnToken  func(prompt int, piece string, drafted bool) // each emitted token's text
	OnStep   func(prompt int, s spec.Step)                // each completed step
	OnDone   func(prompt int)                             // after prompt i
	// OnRound, with Baseline, is called before each round of the
	// measured speedup after the first (round counts from 1).
	OnRound func(round, rounds int)
}

// roundBudget is the time the rounds of a measured speedup may take in all
// when RunOptions.Rounds is left to the default: a suite whose plan and
// plain decoding take a third of it or more runs fewer rounds.
const roundBudget = 30 * time.Second

// Totals sum a suite's results.
type Totals struct {
	Tokens   int           `json:"tokens"`
	Steps    int           `json:"steps"`
	Drafted  int           `json:"drafted"`
	Accepted int           `json:"accepted"`
	Decode   time.Duration `json:"decode_ns"`
	Prefill  time.Duration `json:"prefill_ns"`
	Draft    time.Duration `json:"draft_ns"`
	Verify   time.Duration `json:"verify_ns"`
	Overhead time.Duration `json:"overhead_ns"`
	Overlap  time.Duration `json:"overlap_ns"`
	// Wait is the part of Overhead spent waiting for the drafting beside
	// verification; Ahead the steps that drafted ahead (AOT's head, duo,
	// tail drafting) and AheadHits those whose verdict met what they
	// prepared.
	Wait      time.Duration `json:"wait_ns,omitempty"`
	Ahead     int           `json:"ahead_steps,omitempty"`
	AheadHits int           `json:"ahead_hits,omitempty"`
}

// TPS is decode throughput in tokens per second.
func (t *Totals) TPS() float64 {
	if t.Decode <= 0 {
		return 0
	}
	return float64(t.Tokens) / t.Decode.Seconds()
}

// AAL is the average tokens per target pass.
func (t *Totals) AAL() float64 {
	if t.Steps == 0 {
		return 0
	}
	return float64(t.Tokens) / float64(t.Steps)
}

// Acceptance is the share of drafted tokens accepted.
func (t *Totals) Acceptance() float64 {
	if t.Drafted == 0 {
		return 0
	}
	return float64(t.Accepted) / float64(t.Drafted)
}

// add adds a decoding's figures to t.
func (t *Totals) add(r *spec.Result) {
	var o Totals
	o.Tokens, o.Steps, o.Decode, o.Prefill = len(r.Tokens), len(r.Steps), r.Decode, r.Prefill
	o.Draft, o.Verify, o.Overhead, o.Overlap = r.Totals()
	for _, s := range r.Steps {
		o.Drafted += s.Drafted
		o.Accepted += s.Accepted
		o.Wait += s.Wait
		if s.Ahead > 0 {
			o.Ahead++
		}
		if s.AheadHit {
			o.AheadHits++
		}
	}
	t.merge(o)
}

// merge adds another sum's figures to t.
func (t *Totals) merge(o Totals) {
	t.Tokens += o.Tokens
	t.Steps += o.Steps
	t.Drafted += o.Drafted
	t.Accepted += o.Accepted
	t.Decode += o.Decode
	t.Prefill += o.Prefill
	t.Draft += o.Draft
	t.Verify += o.Verify
	t.Overhead += o.Overhead
	t.Overlap += o.Overlap
	t.Wait += o.Wait
	t.Ahead += o.Ahead
	t.AheadHits += o.AheadHits
}

// hiddenStats are a hidden-state drafter's figures over a run.
type hiddenStats struct {
	Steps, Resampled int
	ResampleShare    float64 // of decode time
	LayerRows        int
	ChainPasses      int
	Hot, OnDemand    int
}

// RunResult is a finished (or stopped) run.
type RunResult struct {
	Plan    Plan   // the plan as the run was asked for
	Label   string // e.g. "chain with draft:d.gguf"
	Threads int
	Totals  Totals
	Tokens  [][]int // per prompt
	Base    *Totals // the baseline, with Baseline
	// Speedup is measured over the baseline: the median of Rounds, each
	// round's tokens a second of the plan over plain decoding's (the
	// first round is Totals against Base)
	Speedup float64
	Rounds  []float64
	// RoundTPS are each round's tokens a second, of the plan and of plain
	// decoding, in Rounds' order: the figures beside a speedup are their
	// medians (MedianTPS), the same rounds', not the first round's.
	RoundTPS [][2]float64
	// SelfBaseline: the plan is plain decoding, so Base is the run itself
	// and Speedup is 1 by definition.
	SelfBaseline bool
	Identical    bool // greedy output token-for-token the baseline's
	Greedy       bool
	Predicted    float64
	PredictedOn  string // what the prediction rests on
	RunID        int64
	Status       string
	Hidden       *hiddenStats
	// Err is the error Run returned with this result (nil: none): a run
	// stopped or failed part way still has its figures.
	Err error
}

// Run decodes the prompt suite with the plan, stores the run and its steps
// (unless NoStore), and with Baseline runs plain decoding on the same
// prompts: the measured speedup is stored, and a greedy run whose output
// differs from plain decoding is an error (speculation must be lossless).
func (b *Bench) Run(ctx context.Context, ps PairSpec, opt RunOptions) (res *RunResult, err error) {
	defer func() {
		if res != nil {
			res.Err = err
		}
	}()
	plan := opt.Plan.Trim()
	if opt.Trace != "" { // refused before anything runs
		if err := outfile.Check(opt.Trace, b.inputs(ps, opt.Inputs)...); err != nil {
			return nil, fmt.Errorf("--trace: %w", err)
		}
	}
	cfg, err := runConfig(plan, opt.Sample, opt.MaxTokens)
	if err == nil && opt.Context > 0 {
		cfg.Ctx = opt.Context
	}
	if err != nil {
		return nil, err
	}
	if len(opt.Prompts) == 0 {
		return nil, fmt.Errorf("no prompts to run")
	}
	if opt.Rounds < 0 || opt.Rounds > 100 {
		return nil, fmt.Errorf("%d rounds against plain decoding: 1 to 100 (0 for the default)", opt.Rounds)
	}
	if plan.NeedsSource() && ps.Sources() == 0 {
		return nil, fmt.Errorf("strategy %s needs a draft source", plan.Strategy)
	}
	res = &RunResult{Plan: opt.Plan, Predicted: opt.Predicted, PredictedOn: opt.PredictedOn, Greedy: opt.Sample.Greedy()}
	pair, err := b.openPair(ps, plan.Concurrent())
	if err != nil {
		return nil, err
	}
	defer pair.Close()
	res.Threads = pair.Backend.Threads()
	if res.Predicted <= 0 && plan.NeedsSource() {
		// the prediction rests on what is stored; nothing is measured
		// here, and without a database there is no prediction
		if in, err := b.Inputs(ctx, ps, InputsOptions{}, nil); err == nil {
			if pr, err := in.Predict(plan); err == nil {
				res.Predicted, res.PredictedOn = pr.Speedup, in.Describe()
				if tuned := in.sampling(); in.Acc != nil && !in.Assumed && !sameSampling(tuned, opt.Sample) {
					res.PredictedOn += fmt.Sprintf("; acceptance measured %s, this run samples %s: the prediction does not hold for it (calibrate at this sampling)",
						describeSampling(tuned), describeSampling(opt.Sample))
				}
			} else {
				res.PredictedOn = err.Error()
			}
		}
	}
	eng, err := b.planEngine(ctx, ps, pair, plan, &cfg)
	if err != nil {
		return nil, err
	}
	res.Label = plan.Strategy
	if eng.Source != nil {
		res.Label += " with " + eng.Source.Name()
	}
	ids, err := encodeWithRoom(pair, opt.Prompts, cfg.MaxTokens) // refused before anything runs, not cut short at the context
	if err != nil {
		return nil, err
	}
	if opt.Trace != "" {
		tw, finish, terr := b.trace(ps, opt)
		if terr != nil {
			return nil, terr
		}
		defer func() {
			// the named result: a failing trace write fails the run (an err
			// declared in this block shadowed it, and the run exited 0)
			if ferr := finish(); ferr != nil && err == nil {
				err = ferr
			}
		}()
		on := opt.OnStep
		enc := json.NewEncoder(tw)
		opt.OnStep = func(pi int, s spec.Step) {
			enc.Encode(struct {
				Prompt int `json:"prompt"`
				spec.Step
			}{pi, s})
			if on != nil {
				on(pi, s)
			}
		}
	}
	var rec *recorder
	if !opt.NoStore {
		st, err := b.db(ctx)
		if err != nil {
			return nil, fmt.Errorf("%w (use --no-store to run without storing)", err)
		}
		rec = &recorder{st: st, run: &store.Run{Hardware: hardware.DetectHardware().Fingerprint, Target: ps.Target, Drafter: ps.SourceName(),
			Strategy: plan.Strategy, Plan: planJSON(plan), Settings: cfg, Prompts: opt.Prompts, PredictedSpeedup: res.Predicted,
			PredictedAssumed: opt.PredictedAssumed && opt.Predicted > 0 && res.Predicted == opt.Predicted}}
		if _, err := st.CreateRun(ctx, rec.run); err != nil {
			return nil, err
		}
	}
	tot, toks, err := suite(ctx, eng, pair, ids, opt, cfg, rec)
	res.Totals, res.Tokens = tot, toks
	if rec != nil {
		status := "done"
		if err != nil {
			status = "failed"
			if ctx.Err() != nil {
				status = "stopped"
			}
		}
		if ferr := rec.finish(context.WithoutCancel(ctx), status, &tot); ferr != nil && err == nil {
			err = ferr
		}
		res.RunID, res.Status = rec.run.ID, status
	}
	if hs := pair.Hidden; hs != nil && eng.Source != nil {
		st := hs.Stats()
		res.Hidden = &hiddenStats{Steps: st.Steps, Resampled: st.Resampled, ResampleShare: st.Resample.Seconds() / max(1e-9, tot.Decode.Seconds()),
			LayerRows: st.LayerRows, ChainPasses: st.ChainPasses, Hot: hs.Hot(), OnDemand: st.OnDemand}
	}
	if err != nil {
		return res, err
	}
	if !opt.Baseline {
		return res, nil
	}
	if !plan.NeedsSource() {
		// plain decoding is its own baseline: 1.00x by definition, so a
		// validated or replayed ar plan reports it without a second pass
		self := tot
		res.Base, res.Speedup, res.Identical, res.SelfBaseline = &self, 1, true, true
		if rec != nil {
			rec.run.MeasuredSpeedup = 1
			if err := rec.st.FinishRun(context.WithoutCancel(ctx), rec.run); err != nil {
				return res, err
			}
		}
		return res, nil
	}
	base := cfg
	base.Plan, base.Depth = spec.PlainPlan(), nil
	bopt := RunOptions{} // no live callbacks for the baseline
	baseEng := &spec.Engine{Target: pair.Target}
	started := time.Now()
	btot, btoks, err := suite(ctx, baseEng, pair, ids, bopt, base, nil)
	if err != nil {
		return res, err
	}
	res.Base = &btot
	res.Identical = sameTokens(btoks, toks)
	if btot.TPS() > 0 {
		res.Rounds = append(res.Rounds, tot.TPS()/btot.TPS())
		res.RoundTPS = append(res.RoundTPS, [2]float64{tot.TPS(), btot.TPS()})
	}
	// the plan's first pass ran before the baseline's; the next rounds
	// alternate the order (B A, A B, ...), so a machine speeding up or
	// slowing down over the rounds touches both alike
	rounds := opt.Rounds
	if rounds <= 0 {
		rounds = min(defaultRounds, max(1, int(roundBudget/max(time.Nanosecond, time.Since(started)+tot.Decode+tot.Prefill))))
	}
	for r := 2; r <= rounds; r++ {
		if opt.OnRound != nil {
			opt.OnRound(r, rounds)
		}
		var pt, bt Totals
		var ptoks, btoks2 [][]int
		if r%2 == 0 {
			if bt, btoks2, err = suite(ctx, baseEng, pair, ids, bopt, base, nil); err == nil {
				pt, ptoks, err = suite(ctx, eng, pair, ids, bopt, cfg, nil)
			}
		} else if pt, ptoks, err = suite(ctx, eng, pair, ids, bopt, cfg, nil); err == nil {
			bt, btoks2, err = suite(ctx, baseEng, pair, ids, bopt, base, nil)
		}
		if err != nil {
			break
		}
		// every round checks the identity again
		res.Identical = res.Identical && sameTokens(btoks2, ptoks) && sameTokens(btoks2, toks)
		if bt.TPS() > 0 {
			res.Rounds = append(res.Rounds, pt.TPS()/bt.TPS())
			res.RoundTPS = append(res.RoundTPS, [2]float64{pt.TPS(), bt.TPS()})
		}
	}
	if len(res.Rounds) > 0 {
		res.Speedup, _, _ = medianRange(res.Rounds)
	}
	if err != nil && ctx.Err() == nil {
		return res, err
	}
	// a run stopped during the later rounds keeps the rounds it finished
	if rec != nil {
		rec.run.MeasuredSpeedup = res.Speedup
		if len(res.Rounds) > 1 { // the spread of the rounds, stored with the run
			_, rec.run.MeasuredLow, rec.run.MeasuredHigh = medianRange(res.Rounds)
			tps := make([]float64, len(res.RoundTPS))
			for i, r := range res.RoundTPS {
				tps[i] = r[0]
			}
			_, rec.run.TPSLow, rec.run.TPSHigh = medianRange(tps)
		}
		if ferr := rec.st.FinishRun(context.WithoutCancel(ctx), rec.run); ferr != nil {
			return res, ferr
		}
	}
	if res.Greedy && !res.Identical {
		return res, fmt.Errorf("greedy output differs from ar: speculative decoding was not lossless")
	}
	return res, err
}

// sameTokens says whether two suites' outputs are token for token alike.
func sameTokens(a, b [][]int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !slices.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// planEngine is the engine a (trimmed) plan decodes with on an open pair,
// completing cfg with the plan's trained depth predictor where it names
// one: Run and the Server decode through it.
func (b *Bench) planEngine(ctx context.Context, ps PairSpec, pair *pairs.Pair, plan spec.Plan, cfg *spec.Config) (*spec.Engine, error) {
	if plan.LearnedDepth() {
		pol, err := b.predictorPolicy(ctx, ps, pair, plan)
		if err != nil {
			return nil, err
		}
		cfg.Depth = pol
	}
	eng := &spec.Engine{Target: pair.Target, Source: pair.Source, Concurrent: pair.Concurrent}
	if !plan.NeedsSource() {
		eng.Source = nil
	}
	return eng, nil
}

// runConfig is the engine configuration a suite runs a (trimmed) plan with.
func runConfig(plan spec.Plan, smp sample.Params, maxTokens int) (spec.Config, error) {
	cfg, err := plan.Config()
	if err != nil {
		return cfg, err
	}
	cfg.Sample, cfg.MaxTokens, cfg.StopAtEOS = smp, maxTokens, true
	return cfg, cfg.Validate()
}

// suite decodes every prompt with one engine and configuration.
func suite(ctx context.Context, eng *spec.Engine, pair *pairs.Pair, ids [][]int, opt RunOptions, cfg spec.Config, rec *recorder) (Totals, [][]int, error) {
	var tot Totals
	var toks [][]int
	for pi, p := range ids {
		if opt.OnPrompt != nil {
			opt.OnPrompt(pi, opt.Prompts[pi])
		}
		c := cfg
		if opt.OnToken != nil {
			c.OnToken = func(id int, drafted bool) { opt.OnToken(pi, pair.Target.Tok.Piece(id), drafted) }
		}
		if opt.OnStep != nil || rec != nil {
			c.OnStep = func(s spec.Step) {
				if rec != nil {
					rec.add(ctx, pi, s)
				}
				if opt.OnStep != nil {
					opt.OnStep(pi, s)
				}
			}
		}
		res, err := eng.Run(ctx, p, c)
		if rec != nil {
			if ferr := rec.flush(ctx); ferr != nil && err == nil {
				err = ferr
			}
		}
		if opt.OnDone != nil {
			opt.OnDone(pi)
		}
		if err != nil {
			return tot, toks, err
		}
		tot.add(res)
		toks = append(toks, res.Tokens)
	}
	return tot, toks, nil
}

// recorder stores a run's steps as they come, in batches: a crash loses at
// most the batch in flight, and a failed write fails the run.
type recorder struct {
	st    *store.Store
	run   *store.Run
	buf   []store.Step
	index int
	err   error
}

func (r *recorder) add(ctx context.Context, prompt int, s spec.Step) {
	r.buf = append(r.buf, measure.StepRecord(r.index, prompt, s))
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

func (r *recorder) finish(ctx context.Context, status string, t *Totals) error {
	r.flush(ctx)
	r.run.Status = status
	if status != "done" { // a stopped or failed run's totals come from its stored steps
		return errors.Join(r.st.FinishFromSteps(ctx, r.run.ID, status), r.err)
	}
	r.run.Tokens, r.run.Steps, r.run.Decode, r.run.TokensPerSecond = t.Tokens, t.Steps, t.Decode, t.TPS()
	r.run.AAL, r.run.Acceptance = t.AAL(), t.Acceptance()
	if err := r.st.FinishRun(ctx, r.run); err != nil {
		return err
	}
	return r.err
}

// predictorPolicy loads the plan's depth predictor (the pair's newest when
// the plan names none), refusing one trained for another target, drafter
// or shape: what was trained is what runs.
func (b *Bench) predictorPolicy(ctx context.Context, ps PairSpec, pair *pairs.Pair, plan spec.Plan) (*predictor.Policy, error) {
	st, err := b.db(ctx)
	if err != nil {
		return nil, err
	}
	tid, err := targetID(ctx, st, pair)
	if err != nil {
		return nil, err
	}
	id := plan.PredictorID
	var blob []byte
	if id == 0 {
		if id, blob, err = st.LatestPredictor(ctx, tid, ps.SourceName()); err != nil {
			return nil, err
		}
		if id == 0 {
			return nil, fmt.Errorf("no depth predictor for %s with %s in %s: run 'arborist train predictor' first", ps.Target, ps.SourceName(), b.path)
		}
	} else if blob, err = st.Predictor(ctx, id, tid, ps.SourceName()); err != nil {
		return nil, err
	} else if blob == nil {
		return nil, fmt.Errorf("no depth predictor %d for %s with %s in %s", id, ps.Target, ps.SourceName(), b.path)
	}
	pred, err := predictor.Unmarshal(blob)
	if err != nil {
		return nil, fmt.Errorf("depth predictor %d: %w", id, err)
	}
	if pred.Dim > 0 && pred.Dim != pair.Target.Dim {
		return nil, fmt.Errorf("depth predictor %d reads states of width %d, the target's are %d", id, pred.Dim, pair.Target.Dim)
	}
	shape := func(q spec.Plan) string {
		q.DepthPolicy, q.DepthMin, q.PredictorID = "", 0, 0
		return q.Canonical().Key()
	}
	if shape(plan) != shape(pred.Plan) {
		trained := pred.Plan
		trained.DepthPolicy = "predictor"
		return nil, fmt.Errorf("depth predictor %d decides the depth of %s, not %s: run that plan, or train a predictor for this one ('arborist train predictor --strategy egt ...')", id, trained, plan)
	}
	return &predictor.Policy{P: pred, Embed: pair.Target.Embed}, nil
}

// inputs are the files a workflow on ps reads: the database (with its side
// files: outfile checks them), the models and a hidden-state drafter file,
// and extra (a prompt suite, a config).
func (b *Bench) inputs(ps PairSpec, extra []string) []string {
	return append([]string{b.path, ps.Target, ps.Draft, ps.DraftHidden}, extra...)
}

// trace starts opt.Trace: a writer whose first failure fails the run, and
// finish, which puts the file in place.
func (b *Bench) trace(ps PairSpec, opt RunOptions) (io.Writer, func() error, error) {
	f, err := outfile.Create(opt.Trace, b.inputs(ps, opt.Inputs)...)
	if err != nil {
		return nil, nil, fmt.Errorf("--trace: %w", err)
	}
	tw := &outfile.ErrWriter{W: f}
	return tw, func() error {
		if tw.Err != nil {
			f.Abort()
			return fmt.Errorf("--trace %s: %w", opt.Trace, tw.Err)
		}
		if err := f.Commit(); err != nil {
			return fmt.Errorf("--trace %s: %w", opt.Trace, err)
		}
		return nil
	}, nil
}

// planJSON is the plan as a run record keeps it.
func planJSON(p Plan) string {
	b, err := json.Marshal(p)
	if err != nil {
		return ""
	}
	return string(b)
}

// MedianTPS are the median tokens a second of the plan and of plain
// decoding over the rounds against plain decoding (0, 0 without any).
func (r *RunResult) MedianTPS() (plan, plain float64) {
	if len(r.RoundTPS) == 0 {
		return 0, 0
	}
	var p, b []float64
	for _, t := range r.RoundTPS {
		p, b = append(p, t[0]), append(b, t[1])
	}
	plan, _, _ = medianRange(p)
	plain, _, _ = medianRange(b)
	return plan, plain
}
