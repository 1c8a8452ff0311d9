package profiles

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	"arborist/engine/tree"
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
	if s.PlanID, s.Plan, err = b.LatestPlan(ctx, in); err != nil {
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

// settingsPlan is the plan a stored run ran, read back from the engine
// settings stored with it, for runs stored before the database kept
// plans. Settings written since spec.Config embeds its plan hold the plan
// itself (its fields under their YAML names: "strategy", "egt_widths"...);
// older ones held a copy of it under the engine's own names, which is
// read field by field: the strategy and every shape field they hold (a
// tree's shape, stored as a parent list, as widths where it is one of
// widths; a depth policy by its kind, a depth predictor's id unknown, 0).
// ok is false where the settings cannot be read.
func settingsPlan(r *Run) (p Plan, ok bool) {
	raw, err := json.Marshal(r.Settings)
	if err != nil {
		return Plan{Strategy: r.Strategy}, false
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil {
		return Plan{Strategy: r.Strategy}, false
	}
	if _, embedded := keys["strategy"]; embedded {
		if err := json.Unmarshal(raw, &p); err != nil || p.Strategy == "" {
			return Plan{Strategy: r.Strategy}, false
		}
		return p.Trim(), true
	}
	var c struct {
		Strategy       string
		Gamma          int
		Static         struct{ Parents []int }
		SampleChildren bool
		Widths         []int // an EGT's widths
		Branch, WMax   int
		Pad, AOT       bool
		MaxSeqs, Tail  int
		Depth          map[string]any
	}
	if err := json.Unmarshal(raw, &c); err != nil || c.Strategy == "" {
		return Plan{Strategy: r.Strategy}, false
	}
	p = Plan{Strategy: c.Strategy, Gamma: c.Gamma, EGT: c.Widths, Branch: c.Branch, WMax: c.WMax, Pad: c.Pad, AOT: c.AOT,
		SampleChildren: c.SampleChildren, MaxSeqs: c.MaxSeqs, Tail: c.Tail}
	if parents := c.Static.Parents; len(parents) > 0 {
		if ws := widthsOf(parents); ws != nil && p.Reads("widths") {
			p.Widths = ws
		} else {
			p.Parents = parents
		}
	}
	switch {
	case c.Depth == nil:
	case c.Depth["Min"] != nil && c.Depth["Max"] != nil:
		p.DepthPolicy = "threshold"
		p.DepthMin, _ = c.Depth["Min"].(float64)
	default:
		p.DepthPolicy = "predictor"
	}
	return p.Trim(), true
}

// widthsOf is the widths per depth a parent list is the tree of (nil when
// it is no tree of widths).
func widthsOf(parents []int) []int {
	depth := make([]int, len(parents))
	var level []int // nodes per depth
	for i, p := range parents {
		if p >= 0 {
			depth[i] = depth[p] + 1
		}
		if depth[i] == len(level) {
			level = append(level, 0)
		}
		level[depth[i]]++
	}
	var ws []int
	prev := 1
	for _, n := range level {
		if n%prev != 0 {
			return nil
		}
		ws = append(ws, n/prev)
		prev = n
	}
	s, err := tree.FromWidths(ws)
	if err != nil || !slices.Equal(s.Parents, parents) {
		return nil
	}
	return ws
}
