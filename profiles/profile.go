package profiles

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"arborist/engine/hidden"
	"arborist/engine/spec"
	"arborist/engine/tree"
	"arborist/kernels"
	"arborist/profiles/costmodel"
	"arborist/profiles/hardware"
	"arborist/profiles/latency"
	"arborist/profiles/measure"
	"arborist/profiles/pairs"
	"arborist/profiles/predictor"
	"arborist/profiles/store"
)

// ProfileOptions bound a profile.
type ProfileOptions struct {
	MaxW  int  // widest verification timed (default 64)
	Fresh bool // measure again even when matching curves are stored
	// Contexts are further contexts (cached tokens) to time T_verify(W)
	// at (--ctx), beside the short one (measure.ShortContext) and those
	// the pair's latest calibration reached
	// (measure.CalibrationContexts); each past the target's trained
	// positions or the machine's memory is refused before anything is
	// measured.
	Contexts []int
	// Seqs are the pass sizes, in sequences, to time at the short
	// context (--seqs; nil: 1, 2, 4 and 8), each within MaxW rows in all;
	// 1 is the target's own curve.
	Seqs []int
}

// defaultSeqs are the pass sizes a profile times by default: what a
// server's passes hold at the concurrencies tune prices by default.
func defaultSeqs() []int { return []int{1, 2, 4, 8} }

// ProfileReport is a pair's latency curves on this machine.
type ProfileReport struct {
	Pair     PairSpec // the pair profiled
	Hardware store.Hardware
	Backend  string
	Threads  int
	Target   *measure.Profile // T_verify(W)
	Draft    *measure.Profile // the draft model's curve (nil for other sources)
	// DraftAfter is the draft model's extra time for its k-th pass after a
	// target pass (W=k; nil for other sources)
	DraftAfter *measure.Profile
	// DraftSteps is a hidden-state drafter's drafting measured in the
	// engine (measure.DraftStepCosts: W=1 a further level's pass, W=2 the
	// first pass's extra; nil for other sources)
	DraftSteps *measure.Profile
	Overhead   *measure.Profile // bookkeeping per step at measure.OverheadWidths
	// StepCost is the per-step bookkeeping the speedup model prices, from
	// the overhead curve.
	StepCost time.Duration
	Limits   hardware.Limits
	Memory   *store.DeviceMemory // the target device's own memory (a GPU's), nil on the CPU
	// Family are the target's verification curves beyond Target: at
	// longer contexts (one sequence a pass), then passes of several
	// sequences at the short context, as measured or reused.
	Family []*measure.Profile
	// Left says what a default context left out and why (one past the
	// machine's memory), "" when nothing was.
	Left []string
}

// Machine describes this machine: CPU, cores, SIMD, memory and the NVIDIA
// GPUs the driver reports (it runs nvidia-smi where there is one).
func Machine(ctx context.Context) store.Hardware {
	hw := hardware.DetectHardware()
	hw.GPUs = hardware.GPUSummary(ctx)
	return hw
}

// deviceMemory is the stored memory of be's device on this machine, or,
// fresh or never stored, measured and stored; nil for a device whose
// memory is the host's.
func deviceMemory(ctx context.Context, st *store.Store, hardwareID int64, be kernels.Backend, fresh bool) (*store.DeviceMemory, error) {
	if _, ok := be.(kernels.MemoryMeter); !ok {
		return nil, nil
	}
	if !fresh {
		if m, ok, err := st.DeviceMemoryOf(ctx, hardwareID, be.Name()); err != nil {
			return nil, err
		} else if ok {
			return &m, nil
		}
	}
	m, err := hardware.DeviceMemory(be)
	if err != nil {
		return nil, err
	}
	return m, st.PutDeviceMemory(ctx, hardwareID, *m)
}

// Profile measures (or reuses) the target's verification curve, the
// per-step bookkeeping and the draft model's curve, and the machine's
// limits for the target.
func (b *Bench) Profile(ctx context.Context, ps PairSpec, opt ProfileOptions, progress Progress) (*ProfileReport, error) {
	st, err := b.db(ctx)
	if err != nil {
		return nil, err
	}
	if opt.MaxW <= 0 {
		opt.MaxW = 64
	}
	if opt.MaxW > tree.MaxNodes {
		return nil, fmt.Errorf("--max-w %d: at most %d, the widest pass a plan verifies", opt.MaxW, tree.MaxNodes)
	}
	pair, err := b.openPair(ps, false)
	if err != nil {
		return nil, err
	}
	defer pair.Close()
	r := &ProfileReport{Pair: ps, Backend: pair.Backend.Name(), Threads: pair.Backend.Threads()}
	family, err := b.familyPlan(ctx, st, pair, ps, opt, r)
	if err != nil {
		return nil, err
	}
	progress.send("hardware", 0, 1, "measuring memory bandwidth")
	if r.Hardware, err = hardware.KnownHardware(ctx, st, ps.Threads, opt.Fresh); err != nil {
		return nil, err
	}
	progress.send("hardware", 1, 1, "")
	popt := curveOptions(progress, opt.Fresh)
	if r.Target, err = measure.ProfileModel(ctx, st, r.Hardware, pair.Target, pair.Backend, popt("verify", measure.DefaultWidths(opt.MaxW))); err != nil {
		return nil, err
	}
	if r.Memory, err = deviceMemory(ctx, st, r.Hardware.ID, pair.Backend, opt.Fresh); err != nil {
		return nil, err
	}
	if r.Limits, err = hardware.DeviceLimits(ctx, pair.Target, r.Threads, r.Hardware.Bandwidth, r.Memory); err != nil {
		return nil, err
	}
	r.Limits.Bound(r.Target.Curve.Points) // a stored curve may have run faster than the probe now
	if r.Overhead, err = measure.ProfileModel(ctx, st, r.Hardware, pair.Target, pair.Backend, popt("overhead", measure.OverheadWidths)); err != nil {
		return nil, err
	}
	r.StepCost = measure.StepOverhead(r.Overhead.Curve.Points)
	if err := profileFamily(ctx, st, pair, r, family, popt, progress); err != nil {
		return nil, err
	}
	if pair.DraftModel != nil {
		if r.Draft, err = measure.ProfileModel(ctx, st, r.Hardware, pair.DraftModel, pair.Backend, popt("draft", measure.DefaultWidths(min(opt.MaxW, 16)))); err != nil {
			return nil, err
		}
		// and what its passes right after the target's cost beyond that
		// curve (measure.DraftAfterTarget), which tune prices steps with
		ao := popt("draft-after", measure.DraftAfterPasses)
		ao.After = pair.Target
		if r.DraftAfter, err = measure.ProfileModel(ctx, st, r.Hardware, pair.DraftModel, pair.Backend, ao); err != nil {
			return nil, err
		}
	}
	if pair.Hidden != nil {
		o := measure.DraftStepOptions(pair, ps)
		ref := popt("drafting probe", nil)
		o.Fresh, o.Curve.Progress = ref.Fresh, ref.Curve.Progress
		if r.DraftSteps, err = measure.ProfileModel(ctx, st, r.Hardware, pair.Target, pair.Backend, o); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Calibration is a stored acceptance measurement of a pair.
type Calibration struct {
	ID      int64
	Acc     *costmodel.Acceptance
	Prompts int
}

// Calibrate runs the pair greedily over the prompts with the probe tree,
// stores the acceptance tables and returns them.
// smp is the sampling the pair will run at (zero: greedy), which the
// calibration decodes at.
func (b *Bench) Calibrate(ctx context.Context, ps PairSpec, prompts []string, suite string, tokens int, smp SampleParams, progress Progress) (*Calibration, error) {
	if err := smp.Validate(); err != nil {
		return nil, err
	}
	if ps.Sources() == 0 {
		return nil, fmt.Errorf("calibration needs a draft source")
	}
	if tokens < 1 || len(prompts) == 0 {
		return nil, fmt.Errorf("calibration needs prompts and a positive token count")
	}
	pair, err := b.openPair(ps, false)
	if err != nil {
		return nil, err
	}
	defer pair.Close()
	eng := &spec.Engine{Target: pair.Target, Source: pair.Source}
	ids, err := encodeWithRoom(pair, prompts, tokens)
	if err != nil {
		return nil, err
	}
	acc, err := measure.Calibrate(ctx, eng, ids, tokens, smp, func(done, total int) {
		progress.send("calibrating", done, total, "prompts")
	})
	if err != nil {
		return nil, err
	}
	st, err := b.db(ctx)
	if err != nil {
		return nil, err
	}
	tid, err := targetID(ctx, st, pair)
	if err != nil {
		return nil, err
	}
	id, err := st.SaveCalibration(ctx, tid, ps.SourceName(), suite, acc)
	if err != nil {
		return nil, err
	}
	return &Calibration{ID: id, Acc: acc, Prompts: len(prompts)}, nil
}

func targetID(ctx context.Context, st *store.Store, pair *pairs.Pair) (int64, error) {
	md, err := pairs.DescribeModel(pair.Target)
	if err != nil {
		return 0, err
	}
	return st.PutModel(ctx, &md)
}

// Inputs are what the speedup model reasons with for a pair: the stored
// (or measured) latency curves and the pair's newest calibration, with the
// facts an export records.
type Inputs struct {
	Hardware store.Hardware
	Costs    costmodel.Costs
	Profiled bool                  // Costs come from this machine's stored curves
	Acc      *costmodel.Acceptance // nil: no calibration (and none assumed)
	CalID    int64                 // 0: Acc is assumed
	Assumed  bool                  // Acc is an assumed uniform acceptance
	TargetID int64
	Source   string // the draft source, as calibrations and plans name it
	Threads  int    // the target's backend threads
	// Recheck is what the quick re-measurement of T_verify found (nil:
	// not re-checked); Costs.Verify is already rescaled when it said so.
	Recheck   *measure.Recheck
	Backend   string
	CtxLen    int
	Precision string
	// Family are the target's stored verification curves at every
	// context and pass size (measure.VerifyFamily), Costs priced on them
	// (costmodel.AtContexts).
	Family []*store.Curve
	// base is Costs before they were priced at the calibration's
	// contexts, and fam the one-sequence curves over context they were
	// priced on (re-checked): what CostsAt prices other contexts with.
	base costmodel.Costs
	fam  []costmodel.ContextCurve
}

// CostsAt is Costs priced at the contexts of other steps than the
// calibration's (a load test's requests: a prompt's length and each
// token after it), as Costs are at the calibration's; Costs where the
// inputs hold no curves over context to price them with.
func (in *Inputs) CostsAt(contexts []int) costmodel.Costs {
	if !in.Profiled || len(in.fam) == 0 || len(contexts) == 0 {
		return in.Costs
	}
	steps := &costmodel.Acceptance{Depths: make([]costmodel.DepthSample, len(contexts))}
	for i, n := range contexts {
		steps.Depths[i].Context = n
	}
	return costmodel.AtContexts(in.base, measure.ShortContext, in.fam, steps)
}

// Calibrated says whether the acceptance is a stored calibration's (not
// assumed, not missing).
func (in *Inputs) Calibrated() bool {
	return in != nil && in.Acc != nil && !in.Assumed && in.CalID > 0
}

// Describe says what the acceptance rests on: "measured on calibration 3,
// 2026-11-30" or "assumed values".
func (in *Inputs) Describe() string {
	switch {
	case in.Acc == nil || in.Assumed:
		return "assumed values"
	}
	s := fmt.Sprintf("measured on calibration %d", in.CalID)
	if !in.Acc.Created.IsZero() {
		s += ", " + in.Acc.Created.Local().Format("2006-01-02")
	}
	if smp := in.Acc.Sample; !smp.Greedy() {
		s += ", " + describeSampling(smp)
	}
	switch n := in.Acc.Probes(); {
	case n > 0:
		s += fmt.Sprintf(" (EGT plans replayed on %d of its steps)", n)
	case len(in.Acc.Depths) > 0:
		s += " (EGT plans priced on its tables: calibrate again to replay them on its steps)"
	}
	return s
}

// sampling is the sampling the acceptance was measured at: a calibration's
// (zero, greedy, for assumed values). Runs, validations and exports of
// the plans tuned on it sample so.
func (in *Inputs) sampling() SampleParams {
	if in == nil || in.Acc == nil || in.Assumed {
		return SampleParams{TopP: 1, Seed: 1}
	}
	smp := in.Acc.Sample
	if smp.TopP == 0 {
		smp.TopP = 1
	}
	if smp.Seed == 0 {
		smp.Seed = 1
	}
	return smp
}

// describeSampling names a sampling rule: "greedy", or "temperature 0.8,
// top-p 0.9" and what else is set.
func describeSampling(p SampleParams) string {
	if p.Greedy() {
		return "greedy"
	}
	s := fmt.Sprintf("temperature %g", p.Temp)
	if p.TopK > 0 {
		s += fmt.Sprintf(", top-k %d", p.TopK)
	}
	if p.TopP > 0 && p.TopP < 1 {
		s += fmt.Sprintf(", top-p %g", p.TopP)
	}
	if p.MinP > 0 {
		s += fmt.Sprintf(", min-p %g", p.MinP)
	}
	return s
}

// sameSampling says whether a and b sample alike (seeds aside).
func sameSampling(a, b SampleParams) bool {
	norm := func(p SampleParams) SampleParams {
		if p.Greedy() {
			return SampleParams{}
		}
		if p.TopP == 0 {
			p.TopP = 1
		}
		p.Seed = 0
		return p
	}
	return norm(a) == norm(b)
}

// InputsOptions choose where the inputs come from.
type InputsOptions struct {
	// Alpha, when positive, assumes this top-candidate acceptance (decay
	// Decay, default 0.4) instead of the stored calibration.
	Alpha, Decay float64
	// Measure profiles missing curves; without it they are only read from
	// the database (Profiled false when missing).
	Measure bool
	// Recheck re-measures T_verify at W = 1, 4 and 8 and a draft model's
	// first passes after a target pass now, rescales stale stored curves
	// (measure.RecheckCosts), and warns when the memory bandwidth moved
	// since the machine was profiled.
	Recheck bool
}

// Inputs loads the speedup model's inputs for a pair.
func (b *Bench) Inputs(ctx context.Context, ps PairSpec, opt InputsOptions, progress Progress) (*Inputs, error) {
	st, err := b.db(ctx)
	if err != nil {
		return nil, err
	}
	pair, err := b.openPair(ps, false)
	if err != nil {
		return nil, err
	}
	defer pair.Close()
	in := &Inputs{Threads: pair.Backend.Threads(), Backend: pair.Backend.Name(), CtxLen: pair.Target.CtxLen, Source: ps.SourceName()}
	if tc := pair.Target.File.TypeCounts(); len(tc) > 0 {
		in.Precision = tc[0].Type.String()
	}
	md, err := pairs.DescribeModel(pair.Target)
	if err != nil {
		return nil, err
	}
	if in.TargetID, err = st.PutModel(ctx, &md); err != nil {
		return nil, err
	}
	if opt.Measure {
		in.Hardware, err = hardware.KnownHardware(ctx, st, ps.Threads, false)
	} else { // what is stored of this machine; nothing is measured
		in.Hardware = hardware.DetectHardware()
		_, err = st.PutHardware(ctx, &in.Hardware)
	}
	if err != nil {
		return nil, err
	}
	in.Costs, _, err = measure.PairCosts(ctx, st, in.Hardware, pair, ps, !opt.Measure, progress.curves())
	switch {
	case err == nil:
		in.Profiled = true
	case errors.Is(err, measure.ErrNotProfiled):
		in.Costs = costmodel.Costs{}
	default:
		return nil, err
	}
	var stored *costmodel.Acceptance // the pair's latest calibration
	if ps.Sources() > 0 {
		var acc costmodel.Acceptance
		id, err := st.LatestCalibration(ctx, in.TargetID, ps.SourceName(), &acc)
		if err != nil {
			return nil, err
		}
		if id > 0 {
			stored, in.CalID = &acc, id
			// the depth predictors trained on it, priced beside the rest
			err := st.PredictorStats(ctx, id, func(pid int64, b []byte) error {
				var ps predictor.Stats
				if json.Unmarshal(b, &ps) != nil {
					return nil // an older predictor's stats: not priced
				}
				if l, ok := ps.Learned(pid); ok {
					acc.Learned = append(acc.Learned, l)
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
		}
	}
	acc := stored
	if opt.Alpha > 0 {
		decay := opt.Decay
		if decay <= 0 {
			decay = 0.4
		}
		acc = costmodel.Uniform(opt.Alpha, decay, 8, 4)
	}
	if opt.Measure && in.Profiled && stored != nil {
		if err := b.measureFamily(ctx, st, pair, ps, in, progress); err != nil {
			return nil, err
		}
	}
	// the curves over context and pass size, read whether or not the
	// model's own curves are complete (the latency chart draws them), and
	// before the re-check, which re-times the pass sizes' curves and the
	// longest context the prices rest on
	if in.Family, err = measure.VerifyFamily(ctx, st, in.Hardware, pair.Target, pair.Backend); err != nil {
		return nil, err
	}
	fam := measure.ContextCurves(in.Family)
	if in.Profiled {
		in.Costs.Passes = measure.PassCurves(in.Family)
		in.Costs.PassFamily = measure.PassFamily(in.Family)
	}
	if opt.Recheck && in.Profiled {
		var window *costmodel.RecheckWindow
		if stored != nil {
			window = stored.Window
		}
		// three stages, each a second or two on a small model; the
		// long context's prefill takes longer on a large one
		progress.send("re-check", 0, 3, "the short context's passes")
		costs, rc, err := measure.RecheckCosts(ctx, pair.Target, pair.Drafting(), in.Costs, pair.Backend.Threads(), in.Hardware.Bandwidth, window)
		if err != nil {
			return nil, fmt.Errorf("re-checking the stored curves: %w", err)
		}
		progress.send("re-check", 1, 3, "")
		if r := costmodel.AtContexts(costs, measure.ShortContext, fam, acc).Context; r.Steps > 0 && r.High > measure.ShortContext {
			progress.send("re-check", 1, 3, fmt.Sprintf("the passes after %d tokens", r.High))
			f, crc, err := measure.RecheckContext(ctx, pair.Target, pair.Drafting(), fam, r.High, &rc)
			if err != nil {
				return nil, fmt.Errorf("re-checking the curves over context: %w", err)
			}
			fam, rc.Context = f, &crc
			costs.Long = crc.Long()
		}
		progress.send("re-check", 2, 3, "passes of several sequences, and before the short context")
		if costs.Passes, costs.PassFamily, rc.Passes, err = measure.RecheckPasses(ctx, pair.Target, costs.Passes, costs.PassFamily); err != nil {
			return nil, fmt.Errorf("re-checking the curves of passes of several sequences: %w", err)
		}
		if fam, rc.Below, err = measure.RecheckBelow(ctx, pair.Target, fam); err != nil {
			return nil, fmt.Errorf("re-checking the curves before the short context: %w", err)
		}
		progress.send("re-check", 3, 3, "")
		in.Costs, in.Recheck = costs, &rc
	}
	in.Acc = acc
	if opt.Alpha > 0 {
		in.Assumed, in.CalID = true, 0
	}
	if in.Profiled {
		// every pass priced at the context the calibration's steps ran
		// at, on the curves measured over context (an assumed acceptance
		// has no steps: the short context's curve prices it)
		in.base, in.fam = in.Costs, fam
		in.Costs = costmodel.AtContexts(in.Costs, measure.ShortContext, fam, in.Acc)
	}
	return in, nil
}

// measureFamily measures the curves of the target's family that a
// profile run now would (familyPlan: the contexts the pair's latest
// calibration reached, and the pass sizes' curves there) and the store
// lacks, as wide as the stored curve reaches, so that a tune after
// calibrate prices each step at its own context without another
// profile: the README's order (profile, calibrate, tune) had priced the
// bench pair's steps of 5-85 tokens at 128, where profile run again
// after calibrate measures 32. Only the pass sizes already profiled at
// the short context are measured at others (which sizes to time is the
// profile's --seqs); stored curves are reused as profile reuses them.
func (b *Bench) measureFamily(ctx context.Context, st *store.Store, pair *pairs.Pair, ps PairSpec, in *Inputs, progress Progress) error {
	if len(in.Costs.Verify) == 0 {
		return nil
	}
	maxW := in.Costs.Verify[len(in.Costs.Verify)-1].W
	r := &ProfileReport{Pair: ps, Hardware: in.Hardware, Backend: in.Backend, Threads: in.Threads,
		Target: &measure.Profile{Curve: &store.Curve{Points: in.Costs.Verify}}}
	family, err := b.familyPlan(ctx, st, pair, ps, ProfileOptions{MaxW: maxW}, r)
	if err != nil {
		return err
	}
	have, err := measure.VerifyFamily(ctx, st, in.Hardware, pair.Target, pair.Backend)
	if err != nil {
		return err
	}
	sizes := map[int]bool{1: true}
	for _, c := range have {
		if c.Key.Context == measure.ShortContext {
			sizes[max(c.Key.Seqs, 1)] = true
		}
	}
	family = slices.DeleteFunc(family, func(f familyCurve) bool { return !sizes[f.seqs] })
	return profileFamily(ctx, st, pair, r, family, curveOptions(progress, false), progress)
}

// curveOptions gives a curve's options by kind and widths, each
// measurement reporting its points to progress (fresh: measured again
// even where a stored curve matches).
func curveOptions(progress Progress, fresh bool) func(kind string, widths []int) measure.ProfileOptions {
	cp := progress.curves()
	return func(kind string, widths []int) measure.ProfileOptions {
		o := measure.ProfileOptions{Kind: kind, Fresh: fresh, Widths: widths}
		if cp != nil {
			o.Curve.Progress = func(done, total int, p latency.Point) { cp(kind, done, total, p) }
		}
		return o
	}
}

// Predict scores a plan with the inputs (plain decoding is 1x).
func (in *Inputs) Predict(p spec.Plan) (costmodel.Prediction, error) {
	if in.Acc == nil || !in.Profiled {
		return costmodel.Prediction{Plan: p}, fmt.Errorf("no prediction: %s", in.missing())
	}
	return costmodel.Predict(p, in.Acc, in.Costs)
}

func (in *Inputs) missing() string {
	switch {
	case !in.Profiled && in.Acc == nil:
		return "the pair is neither profiled nor calibrated"
	case !in.Profiled:
		return "the pair is not profiled on this machine"
	}
	return "the pair is not calibrated"
}

// TuneOptions bound a tune.
type TuneOptions struct {
	Alpha float64 // assume this acceptance instead of the stored calibration
	Space costmodel.SearchSpace
	// NoRecheck uses the stored T_verify curve as it is, without the
	// quick re-measurement (InputsOptions.Recheck) tune does by default.
	NoRecheck bool
	// Place searches where each model runs too: the target on every
	// available backend and a draft source that can move (not n-gram
	// lookup) on each, every placement profiled (or read from the store)
	// and its plans ranked with the rest; a placed plan's speedup is over
	// plain decoding on the pair's own target backend.
	Place bool
	// placements, when set (a test's), are the placements Place searches
	// instead of every available one (availablePlacements); the first is
	// the baseline's.
	placements []placement
	// Export, when set, is the file the best plan's config.yaml is
	// written to (as Write writes it: never the database, a model, or
	// one of Inputs, such as the prompt suite Validate reads).
	Export string
	Inputs []string
	// Validate, when set, measures the ranking after the search, at the
	// sampling its acceptance was measured at, on Validate's prompts,
	// tokens and rounds: with ValidateTop, the ValidateTop best plans
	// that do different work, against plain decoding and each other
	// (Validate; its Plans and Sample are the tune's); without, the best
	// plan against plain decoding (Run with a baseline and its
	// prediction). A ranking placed across devices is not validated
	// (ErrPlacedValidation).
	Validate    *ValidateOptions
	ValidateTop int
	// Show is how many of the ranked plans, best first, the result's
	// report lists (its JSON; 0: all).
	Show int
	// Concurrency are the concurrencies plans are ranked at besides one
	// request (costmodel.RankLoads; nil: costmodel.DefaultConcurrency);
	// given, the tune is for the largest of them (TuneResult.Concurrency).
	Concurrency []int
}

// loadPlans is how many of a tune's best plans doing different work are
// priced at each concurrency, under each policy.
const loadPlans = 20

// placement is where a pair's models run: the target's backend and the
// drafter's ("" = the target's).
type placement struct{ Backend, DraftBackend string }

func (p placement) String() string {
	return costmodel.Prediction{Backend: p.Backend, DraftBackend: p.DraftBackend}.Placed()
}

// availablePlacements lists where ps's models can run among the available backends,
// ps's own placement first.
func availablePlacements(ps PairSpec) []placement {
	var names []string
	for _, b := range kernels.Statuses() {
		if b.Err == "" {
			names = append(names, b.Name)
		}
	}
	return placements(ps, names)
}

// placements lists where ps's models can run on the backends names.
func placements(ps PairSpec, names []string) []placement {
	own := placement{ps.Backend, ps.DraftBackend}
	if own.Backend == "" {
		own.Backend = kernels.DefaultBackend
	}
	if own.DraftBackend == own.Backend {
		own.DraftBackend = ""
	}
	out := []placement{own}
	movable := ps.Sources() == 1 && ps.NGram == 0
	for _, t := range names {
		for _, d := range append([]string{""}, names...) {
			if d == t || (d != "" && !movable) {
				continue
			}
			if pl := (placement{t, d}); pl != own {
				out = append(out, pl)
			}
		}
	}
	return out
}

// TuneResult is the ranked plans; the best is stored as PlanID.
type TuneResult struct {
	Inputs *Inputs
	Ranked []costmodel.Prediction
	PlanID int64
	// Beyond counts the candidates left out because they verify more
	// tokens a pass than the profile measured (Widest, the widest pass):
	// a profile with a larger --max-w prices them.
	Beyond, Widest int
	// Export is the best plan's config.yaml as TuneOptions.Export was
	// written (nil without it).
	Export *Export
	// Validation (with ValidateTop) or Run (without) is what the
	// validation measured, so far as it got; ValidateErr is why it
	// failed (Tune returns it too), nil where it passed or did not run.
	Validation  *Validation
	Run         *RunResult
	ValidateErr error
	// Loads rank plain batching and the best plans, fixed and under the
	// goodput policy, at each concurrency (TuneOptions.Concurrency), by
	// aggregate tokens/s. Concurrency is the one the tune was for: the
	// largest asked for (1 when none was), which an export records; Load
	// is the stored plan at it, under the best policy for it.
	Loads       []costmodel.LoadLevel
	Concurrency int
	Load        *costmodel.LoadPrediction

	show int // TuneOptions.Show
}

// Best is the top-ranked plan.
func (t *TuneResult) Best() costmodel.Prediction { return t.Ranked[0] }

// Tune ranks every plan of the search space with the latency-aware speedup
// model (profiling missing curves first) and stores the best.
func (b *Bench) Tune(ctx context.Context, ps PairSpec, opt TuneOptions, progress Progress) (*TuneResult, error) {
	st, err := b.db(ctx)
	if err != nil {
		return nil, err
	}
	if ps.Sources() == 0 {
		return nil, fmt.Errorf("tuning needs a draft source")
	}
	places := []placement{{}}
	switch {
	case opt.Place && opt.placements != nil:
		places = opt.placements
	case opt.Place:
		places = availablePlacements(ps)
	}
	res := &TuneResult{show: opt.Show}
	var base time.Duration // T_verify(1) of ps's own placement, the first
	for i, pl := range places {
		p := ps
		if opt.Place {
			p.Backend, p.DraftBackend = pl.Backend, pl.DraftBackend
		}
		in, err := b.Inputs(ctx, p, InputsOptions{Alpha: opt.Alpha, Measure: true, Recheck: !opt.NoRecheck}, progress)
		if err != nil {
			if opt.Place {
				return nil, fmt.Errorf("placement %s: %w", pl, err)
			}
			return nil, err
		}
		if in.Acc == nil {
			return nil, fmt.Errorf("no calibration of %s with %s in %s: %w, or assume an acceptance rate (--alpha)", ps.Target, ps.SourceName(), b.path, ErrNotCalibrated)
		}
		own := in.Costs.PlainToken()
		if i == 0 {
			res.Inputs, base = in, own
		}
		found := costmodel.SearchAll(in.Acc, in.Costs, opt.Space)
		res.Beyond += found.Beyond
		if i == 0 {
			res.Widest = found.Widest
		}
		for _, pr := range found.Ranked {
			if opt.Place && !pr.Plan.NeedsSource() && pl.DraftBackend != "" {
				continue // plain decoding has no drafter to place
			}
			// a re-check that disagreed with the stored curve: the
			// interval holds the price the stored curve gave too
			in.CarryDisagreement(&pr)
			if opt.Place {
				pr.Backend, pr.DraftBackend = pl.Backend, pl.DraftBackend
				// tokens per second (AAL / step) set against plain
				// decoding on ps's own target backend
				if own > 0 {
					f := float64(base) / float64(own)
					pr.Speedup, pr.Low, pr.High = pr.Speedup*f, pr.Low*f, pr.High*f
				}
			}
			res.Ranked = append(res.Ranked, pr)
		}
	}
	if opt.Place {
		sort.SliceStable(res.Ranked, func(i, j int) bool { return res.Ranked[i].Speedup > res.Ranked[j].Speedup })
	}
	in := res.Inputs
	if len(res.Ranked) == 0 {
		return nil, fmt.Errorf("no plan could be scored")
	}
	res.rankLoads(opt, places[0])
	if opt.Concurrency != nil {
		res.Ranked[0].Concurrency = res.Concurrency
	}
	best := res.Ranked[0]
	hid, err := st.PutHardware(ctx, &in.Hardware)
	if err != nil {
		return nil, err
	}
	if res.PlanID, err = st.SavePlan(ctx, hid, in.TargetID, in.Source, best.Plan.Strategy, best, best.Speedup); err != nil {
		return nil, err
	}
	if opt.Export != "" {
		ex, err := b.tuneExport(ctx, ps, res)
		if err == nil {
			err = b.Write(ctx, res.PlanID, ex.YAML, opt.Export, opt.Inputs...)
		}
		if err != nil {
			return res, err
		}
		ex.Path, res.Export = opt.Export, ex
	}
	if v := opt.Validate; v != nil {
		res.ValidateErr = b.validateTuned(ctx, ps, res, *v, opt.ValidateTop)
		return res, res.ValidateErr
	}
	return res, nil
}

// validateTuned measures a tune's ranking (TuneOptions.Validate).
func (b *Bench) validateTuned(ctx context.Context, ps PairSpec, t *TuneResult, v ValidateOptions, top int) error {
	v.Sample = t.Inputs.sampling()
	if top > 0 {
		plans, err := ValidationPlans(t.Ranked, top) // plans doing the same work are measured once
		if err != nil {
			return err
		}
		v.Plans = plans
		t.Validation, err = b.Validate(ctx, ps, v)
		return err
	}
	// the tuned plan goes to the run as it is, with its prediction
	best := t.Best()
	var err error
	t.Run, err = b.Run(ctx, ps, RunOptions{Plan: best.Plan, Sample: v.Sample, MaxTokens: v.MaxTokens, Prompts: v.Prompts, Baseline: true,
		Rounds: v.Rounds, NoStore: v.NoStore, Predicted: best.Speedup})
	return err
}

// latestPlan is the newest stored plan of the pair (id 0: none).
func (b *Bench) latestPlan(ctx context.Context, in *Inputs) (int64, costmodel.Prediction, error) {
	st, err := b.db(ctx)
	if err != nil {
		return 0, costmodel.Prediction{}, err
	}
	var best costmodel.Prediction
	id, err := st.LatestPlan(ctx, in.TargetID, in.Source, &best)
	return id, best, err
}

// trainDrafter distils a hidden-state drafter from a target over a prompt
// suite (or resumes one), storing and checkpointing it in this database;
// events report each phase and epoch.
func (b *Bench) TrainDrafter(ctx context.Context, ts TrainSpec, events func(TrainEvent)) (int64, *hidden.Drafter, error) {
	st, err := b.db(ctx)
	if err != nil {
		return 0, nil, err
	}
	return trainDrafter(ctx, st, ts, events)
}

// Choose stores a plan the user picked (from a tune's ranking or the GUI's
// speedup chart) as the pair's newest plan, so that Export, in the GUI and
// `arborist export`, renders it. The plan is stored in its canonical form;
// picking the plan the pair's newest already is re-uses that one.
func (b *Bench) Choose(ctx context.Context, ps PairSpec, pred costmodel.Prediction) (int64, error) {
	st, err := b.db(ctx)
	if err != nil {
		return 0, err
	}
	in, err := b.Inputs(ctx, ps, InputsOptions{}, nil)
	if err != nil {
		return 0, err
	}
	pred.Plan = pred.Plan.Canonical()
	if id, last, err := b.latestPlan(ctx, in); err == nil && id > 0 && last.Plan.Canonical().Key() == pred.Plan.Key() &&
		last.Backend == pred.Backend && last.DraftBackend == pred.DraftBackend && last.DraftThreads == pred.DraftThreads {
		return id, nil
	}
	hid, err := st.PutHardware(ctx, &in.Hardware)
	if err != nil {
		return 0, err
	}
	return st.SavePlan(ctx, hid, in.TargetID, in.Source, pred.Plan.Strategy, pred, pred.Speedup)
}
