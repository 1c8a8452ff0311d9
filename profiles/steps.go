package profiles

import "context"

// Steps is how far a pair has come through the workflow (profile,
// calibrate, tune, run, export), as its database records it; the GUI's
// first-run guide shows it.
type Steps struct {
	Profiled   bool  // a latency curve of the target on this machine is stored
	Calibrated bool  // a calibration of the pair is stored
	PlanID     int64 // the newest tuned plan of the pair (0: none)
	Runs       int   // stored runs of the pair (its plain decoding included)
	Exports    int   // exports of the pair's plans
}

// Steps reads the pair's progress; nothing is measured.
func (b *Bench) Steps(ctx context.Context, ps PairSpec) (Steps, error) {
	var s Steps
	st, err := b.db(ctx)
	if err != nil {
		return s, err
	}
	in, err := b.Inputs(ctx, ps, InputsOptions{}, nil)
	if err != nil {
		return s, err
	}
	s.Calibrated = in.CalID > 0
	if s.PlanID, _, err = b.latestPlan(ctx, in); err != nil {
		return s, err
	}
	// any stored curve of the target on this machine: a profile up to a
	// smaller W than the speedup model reads (Tune measures the rest)
	curves, _, err := st.CurveCount(ctx, in.Hardware.ID, in.TargetID)
	if err != nil {
		return s, err
	}
	s.Profiled = in.Profiled || curves > 0
	if s.Runs, err = st.RunCount(ctx, ps.Target, ps.SourceName()); err != nil {
		return s, err
	}
	s.Exports, err = st.ExportCount(ctx, in.TargetID, in.Source)
	return s, err
}
