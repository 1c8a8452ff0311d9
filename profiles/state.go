package profiles

import (
	"context"
	"errors"
	"time"

	"arborist/kernels"
	"arborist/profiles/costmodel"
	"arborist/profiles/measure"
)

// What the GUI shows of a pair, read from what the core already gives:
// everything the database holds of a pair (PairState, for the GUI to show
// again after a restart or when the pair is chosen again), and the plan a
// stored run ran (RunPlan).

// PairState is what the database holds of a pair on this machine, read
// without measuring anything: what the GUI shows again when it starts
// with the pair it had, or when the pair is chosen again.
type PairState struct {
	// Steps are how far the pair has come, as Bench.Steps reads them (the
	// guide's ticks).
	Steps Steps
	// Inputs are the stored curves and the newest calibration (as Inputs
	// reads them with nothing measured).
	Inputs *Inputs
	// Verify and Draft are the stored latency curves of the target and of
	// a draft model on this machine and backend, as Profile shows them
	// (nil: none stored); Limits are the target's read roofline (the
	// compute ceiling, which Profile measures, is left 0).
	Verify, Draft *Profile
	Limits        Limits
	// PlanID and Plan are the target's newest stored plan (the tuned or
	// the chosen one: what Export renders); PlanID 0 when there is none.
	PlanID int64
	Plan   Prediction
	// Ranked is a tune's ranking scored again on the stored curves and
	// calibration (the tune's own, re-checked figures are not stored);
	// nil without a stored plan, a profile or a calibration.
	Ranked []Prediction
	// Runs are the stored runs of the pair (of its target with its draft
	// source, and plain decoding of its target), newest first; LastSteps
	// the newest one's steps.
	Runs      []Run
	LastSteps []StoredStep
	// Depth is the target's newest speed at depth stored on this machine
	// for the pair's backend and KV cache type (SaveBenchReport), and
	// DepthAt when it was measured; nil when none is.
	Depth   *BenchReport
	DepthAt time.Time
}

// PairState reads what the database holds of ps; nothing is measured.
func (b *Bench) PairState(ctx context.Context, ps PairSpec) (*PairState, error) {
	st, err := b.db(ctx)
	if err != nil {
		return nil, err
	}
	in, err := b.Inputs(ctx, ps, InputsOptions{}, nil)
	if err != nil {
		return nil, err
	}
	s := &PairState{Inputs: in}
	// the steps as Bench.Steps reads them, from these inputs (Steps would
	// open the pair once more)
	s.Steps.Calibrated = in.CalID > 0
	if s.PlanID, s.Plan, err = b.latestPlan(ctx, in); err != nil {
		return nil, err
	}
	s.Steps.PlanID = s.PlanID
	curves, _, err := st.CurveCount(ctx, in.Hardware.ID, in.TargetID)
	if err != nil {
		return nil, err
	}
	s.Steps.Profiled = in.Profiled || curves > 0
	if s.Steps.Runs, err = st.RunCount(ctx, ps.Target, ps.SourceName()); err != nil {
		return nil, err
	}
	if s.Steps.Exports, err = st.ExportCount(ctx, in.TargetID, in.Source); err != nil {
		return nil, err
	}

	pair, err := b.openPair(ps, false)
	if err != nil {
		return nil, err
	}
	defer pair.Close()
	read := func(kind string, draft bool) (*Profile, error) {
		m := pair.Target
		if draft {
			m = pair.DraftModel
		}
		p, err := measure.ProfileModel(ctx, st, in.Hardware, m, pair.Backend, measure.ProfileOptions{Kind: kind, Widths: []int{1}, StoredOnly: true})
		if errors.Is(err, measure.ErrNotProfiled) {
			return nil, nil
		}
		return p, err
	}
	if s.Verify, err = read("verify", false); err != nil {
		return nil, err
	}
	if pair.DraftModel != nil {
		if s.Draft, err = read("draft", true); err != nil {
			return nil, err
		}
	}
	s.Limits = Limits{Bandwidth: in.Hardware.Bandwidth, WeightBytes: float64(pair.Target.WeightBytes()), MACs: float64(pair.Target.MatMACs())}
	if _, own := pair.Backend.(kernels.MemoryMeter); own {
		s.Limits.Bandwidth = 0 // the device's own memory, when measured
		if m, ok, err := st.DeviceMemoryOf(ctx, in.Hardware.ID, pair.Backend.Name()); err != nil {
			return nil, err
		} else if ok {
			s.Limits.Bandwidth, s.Limits.Memory = m.Copy, &m
		}
	}

	if s.Depth, s.DepthAt, err = storedBench(ctx, st, in.Hardware.ID, in.TargetID, pair.Backend.Name(), ps.KV); err != nil {
		return nil, err
	}

	if s.PlanID > 0 && in.Profiled && in.Acc != nil {
		s.Ranked = costmodel.Search(in.Acc, in.Costs, costmodel.SearchSpace{})
	}
	runs, err := st.Runs(ctx, 0)
	if err != nil {
		return nil, err
	}
	source := ps.SourceName()
	for _, r := range runs {
		if r.InPair(ps.Target, source) {
			s.Runs = append(s.Runs, r)
		}
	}
	if len(s.Runs) > 0 {
		if s.LastSteps, err = st.RunSteps(ctx, s.Runs[0].ID); err != nil {
			return nil, err
		}
	}
	return s, nil
}
