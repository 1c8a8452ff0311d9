package measure

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"arborist/engine/model"
	"arborist/engine/sample"
	"arborist/engine/spec"
	"arborist/engine/tree"
	"arborist/kernels"
	"arborist/profiles/costmodel"
	"arborist/profiles/latency"
	"arborist/profiles/pairs"
	"arborist/profiles/store"
)

// OverheadWidths are the widths the per-step bookkeeping is timed at.
var OverheadWidths = []int{1, 8, 32}

// Calibrate runs the pair over the prompts with a wide static probe
// tree and counts, per depth and sibling rank, how often the target chose
// the drafter's candidate, and acceptance against drafter probability; it
// also records each step's best path probability by depth and accepted
// length (Acceptance.Depths), on which depth policies are priced, and reads
// the re-check's shape before the first prompt and after each
// (Acceptance.Window), for the tunes that follow to pool.
//
// smp is the sampling to calibrate at (zero: greedy): the acceptance of a
// pair at temperature 0.8 is not its greedy one, and runs that sample are
// priced on a calibration that sampled alike.
func Calibrate(ctx context.Context, eng *spec.Engine, prompts [][]int, tokens int, smp sample.Params, progress func(done, total int)) (*costmodel.Acceptance, error) {
	shape, err := tree.FromWidths(costmodel.CalibrationWidths)
	if err != nil {
		return nil, err
	}
	depth := len(costmodel.CalibrationWidths)
	table := func() [][]int {
		t := make([][]int, depth)
		for d, w := range costmodel.CalibrationWidths {
			t[d] = make([]int, w)
		}
		return t
	}
	hits, offered := table(), table()
	// the same counts for regular and re-sampled steps apart (Acceptance.Regular)
	kindHits, kindOffered := [2][][]int{table(), table()}, [2][][]int{table(), table()}
	resampled := 0
	acc := &costmodel.Acceptance{QBins: make([]float64, 10), QCounts: make([]int, 10), Created: time.Now().UTC(), Sample: smp, MaxTokens: tokens}
	qHits := make([]int, 10)
	// the re-check's shape, read between prompts: a window as long as the
	// calibration (RecheckWindow); a target too short for it goes without
	window, err := NewWindowSampler(ctx, eng.Target, pairs.DraftingOf(eng), 8)
	if err != nil {
		window = nil
	}
	sample := func() error {
		if window == nil {
			return nil
		}
		if err := window.Sample(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			window = nil
		}
		return nil
	}
	if err := sample(); err != nil {
		return nil, err
	}
	for i, p := range prompts {
		cfg := spec.Config{Plan: spec.StaticTreePlan(shape), MaxTokens: tokens, StopAtEOS: true, Sample: smp}
		cfg.Sample.Seed += uint64(i) // each prompt its own draws, the whole calibration reproducible
		at := len(p)                 // the step's context: the prompt and what was decoded
		cfg.OnStep = func(s spec.Step) {
			defer func() { at += s.Emitted }()
			acc.Steps++
			kind := 0
			if s.Resampled {
				kind = 1
				resampled++
			}
			for lvl, k := range s.Offered {
				if lvl >= depth {
					break
				}
				for r := 0; r < k && r < len(offered[lvl]); r++ {
					offered[lvl][r]++
					kindOffered[kind][lvl][r]++
				}
				if r := s.Ranks[lvl]; r >= 0 && r < len(hits[lvl]) {
					hits[lvl][r]++
					kindHits[kind][lvl][r]++
				}
			}
			if len(acc.Depths) < costmodel.MaxDepthSamples {
				best := s.Best[:min(len(s.Best), depth)]
				ds := costmodel.DepthSample{Best: append([]float64(nil), best...), Accepted: s.Accepted,
					Top: append([]float64(nil), s.First...), P21: s.P21, Resampled: s.Resampled, Context: at}
				if len(acc.Depths) < costmodel.MaxProbeSamples {
					ds.RecordProbe(s.Tree, s.Path)
				}
				acc.Depths = append(acc.Depths, ds)
			}
			for _, t := range s.Tried {
				b := min(9, int(t.Q*10))
				acc.QCounts[b]++
				if t.Accepted {
					qHits[b]++
				}
			}
		}
		res, err := eng.Run(ctx, p, cfg)
		if err != nil {
			return nil, fmt.Errorf("profiles: calibrate prompt %d: %w", i+1, err)
		}
		acc.Tokens += len(res.Tokens)
		if err := sample(); err != nil {
			return nil, err
		}
		if progress != nil {
			progress(i+1, len(prompts))
		}
	}
	rates := func(hits, offered [][]int) [][]float64 {
		var out [][]float64
		for d := range hits {
			row := make([]float64, len(hits[d]))
			for r := range row {
				if offered[d][r] > 0 {
					row[r] = float64(hits[d][r]) / float64(offered[d][r])
				}
			}
			out = append(out, row)
		}
		return out
	}
	acc.Rank, acc.Counts = rates(hits, offered), offered
	acc.Window = window.Window()
	if resampled > 0 {
		acc.Regular, acc.RegularCounts = rates(kindHits[0], kindOffered[0]), kindOffered[0]
		acc.Resampled, acc.ResampledCounts = rates(kindHits[1], kindOffered[1]), kindOffered[1]
	}
	for b := range qHits {
		if acc.QCounts[b] > 0 {
			acc.QBins[b] = float64(qHits[b]) / float64(acc.QCounts[b])
		}
	}
	return acc, nil
}

// ProfileOptions control ProfileModel.
type ProfileOptions struct {
	Widths []int  // default DefaultWidths(64)
	Fresh  bool   // measure even when a stored curve matches
	Kind   string // "verify" (default), "draft" (a drafter's curve) or "overhead" (bookkeeping)
	// StoredOnly returns ErrNotProfiled instead of measuring a missing curve.
	StoredOnly bool
	Curve      CurveOptions
	// After is the target whose pass precedes the drafter's, for Kind
	// "draft-after" (DraftAfterTarget; Widths are the passes 1..k).
	After *model.Model
	// Beside is the other model of a concurrent pair, on a backend of its
	// own, running passes back to back while this one's are timed: the
	// drafter for Kind "verify-beside" (VerifyBeside), the target for
	// "draft-beside" (DraftBeside).
	Beside *model.Model
	// Engine runs the pair for a Kind starting "draft-steps"
	// (DraftStepCosts: a source without a model file of its own).
	Engine *spec.Engine
	// Seqs, above 1, times passes of that many sequences (SeqsCurve; Kind
	// "verify"), Widths being each pass's rows in all.
	Seqs int
}

// ErrNotProfiled: no stored curve matches and measuring was not allowed.
var ErrNotProfiled = errors.New("not profiled on this machine yet")

// Profile is a model's latency curve on this machine, from the store or
// just measured.
type Profile struct {
	Hardware store.Hardware
	Model    store.Model
	Curve    *store.Curve
	Cached   bool
}

// ProfileModel returns m's latency curve on this hardware and backend,
// measuring and storing it unless a stored one matches (same hardware,
// model, backend, threads, kind, context and sequences, and every width
// asked for) and Fresh is not set.
func ProfileModel(ctx context.Context, st *store.Store, hw store.Hardware, m *model.Model, be kernels.Backend, opt ProfileOptions) (*Profile, error) {
	if opt.Kind == "" {
		opt.Kind = "verify"
	}
	if opt.Widths == nil {
		opt.Widths = DefaultWidths(64)
	}
	key, md, err := curveKey(ctx, st, &hw, m, be, opt.Kind)
	if err != nil {
		return nil, err
	}
	opt.Curve.defaults()
	key.Context, key.Seqs = opt.Curve.Context, max(opt.Seqs, 1)
	p := &Profile{Hardware: hw, Model: md}
	if !opt.Fresh {
		c, err := st.FindCurve(ctx, key)
		if err != nil {
			return nil, err
		}
		if c != nil && coversWidths(c, opt.Widths) {
			p.Curve, p.Cached = c, true
			return p, nil
		}
	}
	if opt.StoredOnly {
		return nil, ErrNotProfiled
	}
	curve := VerifyCurve
	switch {
	case strings.HasPrefix(opt.Kind, "draft-steps"):
		if opt.Engine == nil {
			return nil, fmt.Errorf("profiles: a %s curve needs the pair's engine (ProfileOptions.Engine)", opt.Kind)
		}
		curve = func(ctx context.Context, _ *model.Model, _ []int, o CurveOptions) ([]latency.Point, error) {
			return DraftStepCosts(ctx, opt.Engine, o)
		}
	}
	if opt.Seqs > 1 {
		if opt.Kind != "verify" {
			return nil, fmt.Errorf("profiles: passes of %d sequences are timed for the verification curve, not %s", opt.Seqs, opt.Kind)
		}
		curve = func(ctx context.Context, m *model.Model, widths []int, o CurveOptions) ([]latency.Point, error) {
			return SeqsCurve(ctx, m, opt.Seqs, widths, o)
		}
	}
	switch opt.Kind {
	case "overhead":
		curve = OverheadCurve
	case "verify-beside", "draft-beside":
		if opt.Beside == nil {
			return nil, fmt.Errorf("profiles: a %s curve needs the other model (ProfileOptions.Beside)", opt.Kind)
		}
		timeBeside := VerifyBeside
		if opt.Kind == "draft-beside" {
			timeBeside = DraftBeside
		}
		curve = func(ctx context.Context, m *model.Model, widths []int, o CurveOptions) ([]latency.Point, error) {
			pts, _, err := timeBeside(ctx, m, opt.Beside, widths, o)
			return pts, err
		}
	case "draft-after":
		if opt.After == nil {
			return nil, fmt.Errorf("profiles: a draft-after curve needs the target (ProfileOptions.After)")
		}
		curve = func(ctx context.Context, m *model.Model, widths []int, o CurveOptions) ([]latency.Point, error) {
			return DraftAfterTarget(ctx, opt.After, m, slices.Max(widths), o)
		}
	}
	pts, err := curve(ctx, m, opt.Widths, opt.Curve)
	if err != nil {
		return nil, err
	}
	c := &store.Curve{Key: key, Created: time.Now(), Points: append([]latency.Point(nil), pts...)}
	if err := st.SaveCurve(ctx, c); err != nil {
		return nil, err
	}
	p.Curve = c
	return p, nil
}

func coversWidths(c *store.Curve, ws []int) bool {
	have := map[int]bool{}
	for _, p := range c.Points {
		have[p.W] = true
	}
	for _, w := range ws {
		if !have[w] {
			return false
		}
	}
	return true
}

// ProbeStep is one step of the probe tree as a depth predictor learns
// from it: the step with its probe (costmodel.DepthSample), the prompt it
// came from, the target's hidden state before it, the last committed token
// and the drafter's root distribution.
type ProbeStep struct {
	Prompt        int
	Sample        costmodel.DepthSample
	Hidden        []float32
	Last          int
	Top1, Entropy float64
}

// ProbeSteps runs the pair with the calibration's probe tree over the
// prompts at smp, as Calibrate does, and records every step with its probe
// and what a depth predictor reads: its data.
func ProbeSteps(ctx context.Context, eng *spec.Engine, prompts [][]int, tokens int, smp sample.Params, progress func(done, total int)) ([]ProbeStep, error) {
	shape, err := tree.FromWidths(costmodel.CalibrationWidths)
	if err != nil {
		return nil, err
	}
	var out []ProbeStep
	for i, p := range prompts {
		cfg := spec.Config{Plan: spec.StaticTreePlan(shape), MaxTokens: tokens, StopAtEOS: true, Sample: smp, RecordHidden: true}
		cfg.Sample.Seed += uint64(i)
		cfg.OnStep = func(s spec.Step) {
			ds := costmodel.DepthSample{Best: append([]float64(nil), s.Best...), Accepted: s.Accepted, Top: append([]float64(nil), s.First...), P21: s.P21, Resampled: s.Resampled}
			ds.RecordProbe(s.Tree, s.Path)
			out = append(out, ProbeStep{Prompt: i, Sample: ds, Hidden: s.Hidden, Last: s.Last, Top1: s.RootTop1, Entropy: s.RootEntropy})
		}
		if _, err := eng.Run(ctx, p, cfg); err != nil {
			return nil, fmt.Errorf("profiles: depth predictor data, prompt %d: %w", i+1, err)
		}
		if progress != nil {
			progress(i+1, len(prompts))
		}
	}
	return out, nil
}

// PairCosts returns the latency curves the speedup model needs for an open
// pair (from the store, or measured and stored when missing) and the
// target's model id. A layer-skip drafter costs its share of the target's
// layers; an n-gram drafter costs nothing.
//
// With storedOnly, missing curves are not measured: the error is
// ErrNotProfiled.
func PairCosts(ctx context.Context, st *store.Store, hw store.Hardware, pair *pairs.Pair, spec pairs.Spec, storedOnly bool, progress func(kind string, done, total int, p latency.Point)) (costmodel.Costs, int64, error) {
	var c costmodel.Costs
	target, draft := spec.Backend, spec.DraftBackend
	if target == "" {
		target = kernels.DefaultBackend
	}
	c.OneDevice = draft == "" || draft == target
	opt := ProfileOptions{Widths: DefaultWidths(64), StoredOnly: storedOnly}
	if progress != nil {
		opt.Curve.Progress = func(done, total int, p latency.Point) { progress("verify", done, total, p) }
	}
	tp, err := ProfileModel(ctx, st, hw, pair.Target, pair.Backend, opt)
	if err != nil {
		return c, 0, err
	}
	c.Verify = tp.Curve.Points
	switch {
	case pair.DraftModel != nil:
		dopt := ProfileOptions{Widths: DefaultWidths(16), Kind: "draft", StoredOnly: storedOnly}
		if progress != nil {
			dopt.Curve.Progress = func(done, total int, p latency.Point) { progress("draft", done, total, p) }
		}
		dp, err := ProfileModel(ctx, st, hw, pair.DraftModel, pair.Backend, dopt)
		if err != nil {
			return c, 0, err
		}
		c.Draft = dp.Curve.Points
		// the drafter's passes right after the target's cost more than its
		// back-to-back curve (DraftAfterTarget); a profile stored before
		// this curve existed prices them without it
		aopt := ProfileOptions{Widths: DraftAfterPasses, Kind: "draft-after", StoredOnly: storedOnly, After: pair.Target}
		switch ap, err := ProfileModel(ctx, st, hw, pair.DraftModel, pair.Backend, aopt); {
		case errors.Is(err, ErrNotProfiled):
		case err != nil:
			return c, 0, err
		default:
			c.DraftAfter = ap.Curve.Points
		}
	case spec.Layers > 0:
		for _, pt := range tp.Curve.Points {
			pt.Median = pt.Median * time.Duration(spec.Layers) / time.Duration(pair.Target.Layers)
			c.Draft = append(c.Draft, pt)
		}
	case pair.Hidden != nil:
		// it rebuilds its chain from the target's states every step, so
		// nothing drafted ahead survives into the next
		c.Forgets = true
		// measured in the engine (DraftStepCosts), keyed by the source
		hopt := DraftStepOptions(pair, spec)
		hopt.StoredOnly = storedOnly
		if progress != nil {
			hopt.Curve.Progress = func(done, total int, p latency.Point) { progress("drafting probe", done, total, p) }
		}
		hp, err := ProfileModel(ctx, st, hw, pair.Target, pair.Backend, hopt)
		if err == nil {
			c.Draft, c.DraftAfter, c.ResampleLevel = draftStepCurves(hp.Curve.Points, tp.Curve.Points)
			c.DraftPerChild = true
			c.Resample = spec.Resampling()
			break
		}
		if !errors.Is(err, ErrNotProfiled) {
			return c, 0, err
		}
		// not measured (a stored-only read): one block and the output head
		// over a single row per depth, a fixed share of T_verify(1)
		cfg := &pair.Target.Config
		n, qd, kvd := float64(cfg.Dim), float64(cfg.Heads*cfg.HeadDim), float64(cfg.KVDim())
		block := 2*qd*n + 2*kvd*n + 3*n*float64(cfg.FFN)
		head := float64(cfg.Vocab) * n
		share := (block + head) / (float64(cfg.Layers)*block + head)
		one := tp.Curve.Points[0].Median
		for _, pt := range tp.Curve.Points {
			pt.Median = time.Duration(float64(one) * share)
			c.Draft = append(c.Draft, pt)
		}
	}
	oopt := ProfileOptions{Widths: OverheadWidths, Kind: "overhead", StoredOnly: storedOnly}
	op, err := ProfileModel(ctx, st, hw, pair.Target, pair.Backend, oopt)
	if err != nil {
		return c, 0, err
	}
	c.Overhead = StepOverhead(op.Curve.Points)
	if pair.DraftModel != nil {
		sp := progress
		if sp != nil {
			sp = func(kind string, done, total int, p latency.Point) { progress("split "+kind, done, total, p) }
		}
		c.Splits, err = splitCosts(ctx, st, hw, spec, pair.Backend.Threads(), !c.OneDevice, storedOnly, sp)
		switch {
		case errors.Is(err, ErrNotProfiled):
			c.Splits = nil // concurrent plans are priced on the full-thread curves
		case err != nil:
			return c, 0, err
		}
	}
	return c, tp.Model.ID, nil
}

// splitWidths are the widths concurrent plans verify (duo's gamma + 1,
// an AOT tree's w-max + 1) and their drafter passes.
var splitWidths = []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 16, 20, 24, 33}

// splitCosts measures (or reads) the curves of the pair opened as a
// concurrent one, each model on its share of the threads, as duo and AOT
// plans run them: one entry for each of SplitChoices on one device (total
// threads in all), one for a drafter on a device of its own (elsewhere);
// nil when the machine has one thread.
func splitCosts(ctx context.Context, st *store.Store, hw store.Hardware, spec pairs.Spec, total int, elsewhere, storedOnly bool, progress func(kind string, done, total int, p latency.Point)) ([]costmodel.SplitCosts, error) {
	choices := costmodel.SplitChoices(total, spec.DraftThreads)
	if elsewhere {
		choices = []int{spec.DraftThreads} // the other device's own threads
	}
	var out []costmodel.SplitCosts
	for _, d := range choices {
		s := spec
		s.DraftThreads = d
		sc, err := splitCurves(ctx, st, hw, s, storedOnly, progress)
		if err != nil {
			return nil, err
		}
		if sc != nil {
			out = append(out, *sc)
		}
	}
	return out, nil
}

// splitCurves measures (or reads) one split's curves; nil when the pair
// cannot draft concurrently.
func splitCurves(ctx context.Context, st *store.Store, hw store.Hardware, spec pairs.Spec, storedOnly bool, progress func(kind string, done, total int, p latency.Point)) (*costmodel.SplitCosts, error) {
	cp, err := pairs.Open(spec, true)
	if err != nil {
		return nil, err
	}
	defer cp.Close()
	if !cp.Concurrent || cp.DraftModel == nil || cp.Backend == cp.DraftModel.Backend {
		return nil, nil
	}
	opt := ProfileOptions{Widths: splitWidths, StoredOnly: storedOnly}
	dopt := ProfileOptions{Widths: DefaultWidths(16), Kind: "draft", StoredOnly: storedOnly}
	if progress != nil {
		opt.Curve.Progress = func(done, total int, p latency.Point) { progress("verify", done, total, p) }
		dopt.Curve.Progress = func(done, total int, p latency.Point) { progress("draft", done, total, p) }
	}
	tp, err := ProfileModel(ctx, st, hw, cp.Target, cp.Backend, opt)
	if err != nil {
		return nil, err
	}
	dp, err := ProfileModel(ctx, st, hw, cp.DraftModel, cp.DraftModel.Backend, dopt)
	if err != nil {
		return nil, err
	}
	sc := &costmodel.SplitCosts{TargetThreads: cp.Backend.Threads(), DraftThreads: cp.DraftModel.Backend.Threads(), Verify: tp.Curve.Points, Draft: dp.Curve.Points}
	// each with the other running beside it, as a concurrent plan runs
	// them: a profile stored before these curves existed prices
	// concurrent plans without what the two take from each other
	for _, b := range []struct {
		kind, what string
		m, other   *model.Model
		be         kernels.Backend
		widths     []int
		into       *[]latency.Point
	}{
		{"verify-beside", "verify beside the drafter", cp.Target, cp.DraftModel, cp.Backend, besideWidths, &sc.Beside},
		{"draft-beside", "draft beside the target", cp.DraftModel, cp.Target, cp.DraftModel.Backend, draftBesideWidths, &sc.DraftBeside},
	} {
		bopt := ProfileOptions{Widths: b.widths, Kind: b.kind, StoredOnly: storedOnly, Beside: b.other}
		if progress != nil {
			bopt.Curve.Progress = func(done, total int, p latency.Point) { progress(b.what, done, total, p) }
		}
		switch bp, err := ProfileModel(ctx, st, hw, b.m, b.be, bopt); {
		case errors.Is(err, ErrNotProfiled):
		case err != nil:
			return nil, err
		default:
			*b.into = bp.Curve.Points
		}
	}
	return sc, nil
}

// besideWidths are the widths of the verify-beside curve: those concurrent
// plans verify, fewer than the split curve's (the two differ by a factor
// that changes slowly with W); draftBesideWidths the drafter's passes
// beside the target (a tail drafts its ends in one pass).
var (
	besideWidths      = []int{1, 2, 3, 4, 5, 6, 8, 10, 13, 16, 24, 33}
	draftBesideWidths = []int{1, 2, 3, 4, 6, 8, 12, 16}
)

// StepOverhead is the per-step bookkeeping the speedup model prices, read
// from the overhead curve pts at W = 8.
func StepOverhead(pts []latency.Point) time.Duration { return costmodel.Interp(pts, 8) }

// StepRecord is the stored form of step s, the index-th of its run, made
// while decoding prompt number prompt.
func StepRecord(index, prompt int, s spec.Step) store.Step {
	return store.Step{Index: index, Prompt: prompt, Drafted: s.Drafted, Width: s.Width, Depth: s.Depth, Accepted: s.Accepted,
		Emitted: s.Emitted, Bonus: s.Bonus, Draft: s.Draft, Verify: s.Verify, Overhead: s.Overhead, Overlap: s.Overlap,
		Wait: s.Wait, Ahead: s.Ahead, AheadHit: s.AheadHit}
}

// VerifyFamily returns m's stored verification curves on this hardware
// and backend at every context and pass size (store.CurveFamily; nil
// when none is stored): what prices passes at a request's context and
// passes of several sequences.
func VerifyFamily(ctx context.Context, st *store.Store, hw store.Hardware, m *model.Model, be kernels.Backend) ([]*store.Curve, error) {
	key, _, err := curveKey(ctx, st, &hw, m, be, "verify")
	if err != nil {
		return nil, err
	}
	return st.CurveFamily(ctx, key)
}

// curveKey is the key of m's curves of kind on this hardware and
// backend (context and sequences left to the caller), the hardware and
// model stored if they were not, and the model as stored.
func curveKey(ctx context.Context, st *store.Store, hw *store.Hardware, m *model.Model, be kernels.Backend, kind string) (store.CurveKey, store.Model, error) {
	hid, err := st.PutHardware(ctx, hw)
	if err != nil {
		return store.CurveKey{}, store.Model{}, err
	}
	md, err := pairs.DescribeModel(m)
	if err != nil {
		return store.CurveKey{}, md, err
	}
	mid, err := st.PutModel(ctx, &md)
	if err != nil {
		return store.CurveKey{}, md, err
	}
	return store.CurveKey{HardwareID: hid, ModelID: mid, Backend: be.Name(), Threads: be.Threads(), Kind: kind}, md, nil
}

// ContextCurves are family's one-sequence curves, by context, as the
// cost model prices them (costmodel.AtContexts).
func ContextCurves(family []*store.Curve) []costmodel.ContextCurve {
	var out []costmodel.ContextCurve
	for _, c := range family {
		if max(c.Key.Seqs, 1) == 1 {
			out = append(out, costmodel.ContextCurve{Context: c.Key.Context, Verify: c.Points})
		}
	}
	return out
}

// PassCurves are family's curves at the short context by pass size, as
// the cost model prices a concurrency (costmodel.PredictLoad).
func PassCurves(family []*store.Curve) []costmodel.PassCurve {
	var out []costmodel.PassCurve
	for _, c := range family {
		if c.Key.Context == ShortContext && len(c.Points) > 0 {
			out = append(out, costmodel.PassCurve{Seqs: max(c.Key.Seqs, 1), Verify: c.Points})
		}
	}
	return out
}

// PassFamily are family's curves of passes of several sequences at every
// context measured, each with its context, whose ratios to the short
// context's price a concurrency's passes before it (costmodel.AtContexts).
func PassFamily(family []*store.Curve) []costmodel.PassCurve {
	var out []costmodel.PassCurve
	for _, c := range family {
		if c.Key.Seqs > 1 && len(c.Points) > 0 {
			out = append(out, costmodel.PassCurve{Seqs: c.Key.Seqs, Context: c.Key.Context, Verify: c.Points})
		}
	}
	return out
}

// contextGrid are the contexts curves are measured at beyond the short
// one: doublings, so a family covers any context with few curves.
var contextGrid = []int{256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072}

// lowGrid are the contexts below the short one a profile measures when a
// calibration's steps run there: a pass after 32 cached tokens costs less
// than after 128, and pricing every step at the short context or longer
// errs slow by that much (on a 2-core AVX2 machine the bench target's
// pass of one row 0.83-0.92x at 16-32 tokens, a pass of eight
// sequences' one row each 0.7-0.8x).
var lowGrid = []int{16, 32, 64}

// CalibrationContexts are the contexts a profile measures so that acc's
// steps are priced at their own (costmodel.AtContexts): the grid's
// context at or above the longest a step reached, and the one at or
// above the median when it is another (for those past the short
// context), each at most most (the longest a
// pass may start from; a step past it is then left out); and where the
// median step ran before the short context, the low grid's context at or
// below it (the shortest, 16, below that), so the steps between it and
// the short context are priced between the two. Sorted; nil when acc
// recorded no contexts.
func CalibrationContexts(acc *costmodel.Acceptance, most int) []int {
	if acc == nil {
		return nil
	}
	var ns []int
	for _, d := range acc.Depths {
		if d.Context > 0 {
			ns = append(ns, d.Context)
		}
	}
	if len(ns) == 0 {
		return nil
	}
	slices.Sort(ns)
	up := func(n int) int {
		for _, g := range contextGrid {
			if g >= n {
				return min(g, most)
			}
		}
		return most
	}
	var out []int
	if med := ns[len(ns)/2]; med < ShortContext {
		low := lowGrid[0]
		for _, g := range lowGrid {
			if g <= med {
				low = g
			}
		}
		if low <= most {
			out = append(out, low)
		}
	}
	for _, n := range []int{ns[len(ns)/2], ns[len(ns)-1]} {
		if n <= ShortContext {
			continue // the short context's curve prices it
		}
		if g := up(n); g > ShortContext && !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	return out
}
