package profiles

import (
	"encoding/json"
	"time"

	"arborist/profiles/costmodel"
	"arborist/profiles/measure"
)

// The JSON shapes of the core's results, as the verbs' --json prints them
// and docs/JSON.md documents them: each result marshals itself, so a face
// prints what the core returns. Durations are integer nanoseconds
// (*_ns), rates per second, shares in [0, 1]; fields that do not apply
// are left out.

// MarshalJSON writes the totals with their derived figures: tokens a
// second, tokens a step (aal) and the share of drafted tokens accepted.
func (t Totals) MarshalJSON() ([]byte, error) {
	type totals Totals // its fields, without this method
	return json.Marshal(struct {
		totals
		TPS        float64 `json:"tokens_per_s"`
		AAL        float64 `json:"aal"`
		Acceptance float64 `json:"acceptance"`
	}{totals(t), t.TPS(), t.AAL(), t.Acceptance()})
}

// MarshalJSON writes a run as `run --json` prints it (and tune's
// validation of its best plan): the plan, the figures, the baseline with
// the measured speedup and the identity check where it ran against plain
// decoding, the prediction, the stored run, and the error it ended with.
func (r *RunResult) MarshalJSON() ([]byte, error) {
	doc := struct {
		Plan        Plan         `json:"plan"`
		Label       string       `json:"label"`
		Threads     int          `json:"threads"`
		Totals      Totals       `json:"totals"`
		Baseline    *Totals      `json:"baseline,omitempty"`
		Speedup     float64      `json:"measured_speedup,omitempty"`
		Rounds      []float64    `json:"round_speedups,omitempty"`
		Identical   *bool        `json:"identical_to_baseline,omitempty"`
		Predicted   float64      `json:"predicted_speedup,omitempty"`
		PredictedOn string       `json:"predicted_on,omitempty"`
		RunID       int64        `json:"run_id,omitempty"`
		Status      string       `json:"status,omitempty"`
		Hidden      *hiddenStats `json:"hidden,omitempty"`
		Error       string       `json:"error,omitempty"`
	}{Plan: r.Plan, Label: r.Label, Threads: r.Threads, Totals: r.Totals, Baseline: r.Base, Speedup: r.Speedup, Rounds: r.Rounds,
		Predicted: r.Predicted, PredictedOn: r.PredictedOn, RunID: r.RunID, Status: r.Status, Hidden: r.Hidden}
	if r.Base != nil {
		doc.Identical = &r.Identical
	}
	if r.Err != nil {
		doc.Error = r.Err.Error()
	}
	return json.Marshal(doc)
}

// MarshalJSON writes a validation as `tune --validate --top N --json`
// prints it: plain decoding's figures and each plan's, ranked as
// predicted, with its measured speedup and where its prediction's error
// came from.
func (v *Validation) MarshalJSON() ([]byte, error) {
	type plan struct {
		Rank      int         `json:"rank"`
		Plan      Plan        `json:"plan"`
		Label     string      `json:"label"`
		Predicted float64     `json:"predicted_speedup"`
		Measured  float64     `json:"measured_speedup"`
		Rounds    []float64   `json:"round_speedups"`
		Totals    Totals      `json:"totals"`
		Identical bool        `json:"identical_to_baseline"`
		RunID     int64       `json:"run_id,omitempty"`
		Best      bool        `json:"measured_best"`
		Split     *ErrorSplit `json:"split,omitempty"`
	}
	doc := struct {
		Baseline  Totals `json:"baseline"`
		BaseRunID int64  `json:"baseline_run_id,omitempty"`
		Plans     []plan `json:"plans"`
		Error     string `json:"error,omitempty"`
	}{Baseline: v.Base, BaseRunID: v.BaseRunID}
	for i, p := range v.Plans {
		pj := plan{Rank: i + 1, Plan: p.Plan, Label: p.Label, Predicted: p.Predicted, Measured: p.Measured,
			Rounds: p.Rounds, Totals: p.Totals, Identical: p.Identical, RunID: p.RunID, Best: p.Best}
		if p.Split.StepMeasured > 0 {
			pj.Split = &p.Split
		}
		doc.Plans = append(doc.Plans, pj)
	}
	if v.Err != nil {
		doc.Error = v.Err.Error()
	}
	return json.Marshal(doc)
}

// MarshalJSON writes a tune as `tune --json` prints it: the stored plan,
// what the acceptance rests on, the TuneOptions.Show best plans of the
// ranking, the export's path, the validation, and what the re-check
// before the search measured.
func (t *TuneResult) MarshalJSON() ([]byte, error) {
	type prediction struct {
		Rank     int           `json:"rank"`
		Plan     any           `json:"plan"`
		Name     string        `json:"name"`
		Speedup  float64       `json:"predicted_speedup"`
		Low      float64       `json:"predicted_low"`  // the interval around it
		High     float64       `json:"predicted_high"` // (calibration's error, curve's spread)
		Bounded  bool          `json:"bounded,omitempty"`
		AAL      float64       `json:"aal"`
		Nodes    int           `json:"nodes"`
		Draft    time.Duration `json:"draft_ns"`
		Verify   time.Duration `json:"verify_ns"`
		Step     time.Duration `json:"step_ns"`
		PerDepth []int         `json:"draft_passes"`
		Backend  string        `json:"device,omitempty"`        // with --place: the target's device
		Draft2   string        `json:"draft_device,omitempty"`  // with --place: the drafter's, when not the target's
		Threads2 int           `json:"draft_threads,omitempty"` // a plan drafting while the target verifies: the drafter's threads
		// the contexts its verification passes were priced at
		Context costmodel.ContextRange `json:"context"`
	}
	doc := struct {
		PlanID     int64        `json:"plan_id"`
		AcceptOn   string       `json:"acceptance"`
		Plans      []prediction `json:"plans"`
		Scored     int          `json:"scored"`
		Beyond     int          `json:"left_out_wider_than_profile,omitempty"`
		Widest     int          `json:"profiled_widest,omitempty"`
		Config     string       `json:"config,omitempty"`
		Validation any          `json:"validation,omitempty"`
		Recheck    *recheckJSON `json:"recheck,omitempty"`
		// the concurrency the tune was for, and every level's ranking
		Concurrency int         `json:"concurrency"`
		Loads       []loadLevel `json:"loads,omitempty"`
	}{Concurrency: t.Concurrency, Loads: loadsDoc(t.Loads, t.show), PlanID: t.PlanID, AcceptOn: t.Inputs.Describe(), Scored: len(t.Ranked), Beyond: t.Beyond, Widest: t.Widest, Recheck: recheckDoc(t.Inputs.Recheck)}
	show := len(t.Ranked)
	if t.show > 0 {
		show = min(t.show, show)
	}
	for i, pr := range t.Ranked[:show] {
		doc.Plans = append(doc.Plans, prediction{Rank: i + 1, Plan: pr.Plan, Name: pr.Plan.String(), Speedup: pr.Speedup, Low: pr.Low, High: pr.High, Bounded: pr.Bounded, AAL: pr.AAL, Nodes: pr.Nodes,
			Draft: pr.Draft, Verify: pr.Verify, Step: pr.Step, PerDepth: pr.PerDepth, Backend: pr.Backend, Draft2: pr.DraftBackend, Threads2: pr.DraftThreads, Context: pr.Context})
	}
	if t.Export != nil {
		doc.Config = t.Export.Path
	}
	switch {
	case t.Validation != nil:
		doc.Validation = t.Validation
	case t.Run != nil:
		doc.Validation = t.Run
	}
	return json.Marshal(doc)
}

// loadLevel is one concurrency's ranking in tune's JSON (times in
// nanoseconds).
type loadLevel struct {
	Concurrency int        `json:"concurrency"`
	Ranked      []loadJSON `json:"ranked"`
	Left        int        `json:"left_out_wider_than_profile,omitempty"`
	Err         string     `json:"not_priced,omitempty"`
}

type loadJSON struct {
	Rank         int                    `json:"rank"`
	Name         string                 `json:"name"`
	Plan         any                    `json:"plan"`
	Policy       string                 `json:"policy"`
	Budget       float64                `json:"draft_nodes_per_request"`
	Rows         int                    `json:"rows_per_pass"`
	Tokens       float64                `json:"tokens_per_request_per_pass"`
	Pass         time.Duration          `json:"pass_ns"`
	TokensPerSec float64                `json:"tokens_per_s"`
	TPOT         time.Duration          `json:"tpot_ns"`
	TTFT         time.Duration          `json:"ttft_ns"`
	Speedup      float64                `json:"speedup_over_plain_batching"`
	Low          float64                `json:"speedup_low"`
	High         float64                `json:"speedup_high"`
	Context      costmodel.ContextRange `json:"context"`
}

// loadsDoc writes each level's first show entries (0: all).
func loadsDoc(levels []costmodel.LoadLevel, show int) []loadLevel {
	var out []loadLevel
	for _, lv := range levels {
		d := loadLevel{Concurrency: lv.Concurrency, Left: lv.Left, Err: lv.Err}
		n := len(lv.Ranked)
		if show > 0 {
			n = min(n, show)
		}
		for i, lp := range lv.Ranked[:n] {
			d.Ranked = append(d.Ranked, loadJSON{Rank: i + 1, Name: lp.Plan.String(), Plan: lp.Plan, Policy: lp.Policy, Budget: lp.Budget, Rows: lp.Rows, Tokens: lp.Tokens,
				Pass: lp.Pass, TokensPerSec: lp.TokensPerSec, TPOT: lp.TPOT, TTFT: lp.TTFT, Speedup: lp.Speedup, Low: lp.Low, High: lp.High, Context: lp.Context})
		}
		out = append(out, d)
	}
	return out
}

// recheckJSON is tune's T_verify re-check in its JSON (times in
// nanoseconds, bandwidth in bytes per second).
type recheckJSON struct {
	W               int           `json:"w"`
	Stored1         time.Duration `json:"stored_verify1_ns"`
	Now1            time.Duration `json:"now_verify1_ns"`
	Mid             int           `json:"mid_w,omitempty"`
	StoredMid       time.Duration `json:"stored_verify_mid_ns,omitempty"`
	NowMid          time.Duration `json:"now_verify_mid_ns,omitempty"`
	StoredW         time.Duration `json:"stored_verify_w_ns"`
	NowW            time.Duration `json:"now_verify_w_ns"`
	Plain           time.Duration `json:"plain_token_ns,omitempty"`
	Rescaled        bool          `json:"rescaled"`
	DraftPasses     int           `json:"draft_passes,omitempty"`
	StoredDraft     time.Duration `json:"stored_draft_ns,omitempty"`
	NowDraft        time.Duration `json:"now_draft_ns,omitempty"`
	DraftRescaled   bool          `json:"draft_rescaled,omitempty"`
	BandwidthStored float64       `json:"bandwidth_stored,omitempty"`
	BandwidthNow    float64       `json:"bandwidth_now,omitempty"`
	Warning         string        `json:"warning,omitempty"`
	// WindowMoments: how many moments of the calibration's window the
	// anchors' ratios to plain decoding's token were pooled with (0: none)
	WindowMoments int `json:"window_moments,omitempty"`
	// Anchors: every width timed (the three above among them)
	Anchors []anchorJSON `json:"anchors,omitempty"`
	// Context: the same rounds after the longest context the prices
	// rest on (absent: none re-timed)
	Context *contextRecheckJSON `json:"context,omitempty"`
}

// contextRecheckJSON is the re-check after a long context.
type contextRecheckJSON struct {
	Context    int           `json:"context"`
	Anchors    []anchorJSON  `json:"anchors"`
	Plain      time.Duration `json:"plain_ns"`
	Rescaled   bool          `json:"rescaled,omitempty"`
	NowDraft   time.Duration `json:"now_draft_ns,omitempty"`
	DraftScale float64       `json:"draft_scale,omitempty"`
	Skipped    string        `json:"skipped,omitempty"`
}

// anchorJSON is one width the re-check timed.
type anchorJSON struct {
	W      int           `json:"w"`
	Stored time.Duration `json:"stored_ns"`
	Now    time.Duration `json:"now_ns"`
}

// recheckDoc is a re-check in its JSON (nil for none): W = 1, a middle
// anchor (W = 4, named only where it is below the widest) and the widest,
// then every anchor.
func recheckDoc(rc *measure.Recheck) *recheckJSON {
	if rc == nil {
		return nil
	}
	one, mid, wide := rc.At(1), rc.At(4), rc.Widest()
	if mid.W == wide.W {
		mid = measure.Anchor{}
	}
	doc := &recheckJSON{W: wide.W, Stored1: one.Stored, Now1: one.Now, Mid: mid.W, StoredMid: mid.Stored, NowMid: mid.Now,
		StoredW: wide.Stored, NowW: wide.Now, Plain: rc.Plain, Rescaled: rc.Rescaled,
		DraftPasses: rc.DraftPasses, StoredDraft: rc.StoredDraft, NowDraft: rc.NowDraft, DraftRescaled: rc.DraftRescaled,
		BandwidthStored: rc.BandwidthStored, BandwidthNow: rc.BandwidthNow, Warning: rc.BandwidthWarning, WindowMoments: rc.WindowMoments}
	for _, a := range rc.Anchors {
		doc.Anchors = append(doc.Anchors, anchorJSON{W: a.W, Stored: a.Stored, Now: a.Now})
	}
	if c := rc.Context; c != nil {
		doc.Context = &contextRecheckJSON{Context: c.Context, Plain: c.Plain, Rescaled: c.Rescaled, NowDraft: c.Drafted, DraftScale: c.DraftScale, Skipped: c.Skipped}
		for _, a := range c.Anchors {
			doc.Context.Anchors = append(doc.Context.Anchors, anchorJSON{W: a.W, Stored: a.Stored, Now: a.Now})
		}
	}
	return doc
}

// MarshalJSON writes a profile as `profile --json` prints it: the
// machine, each latency curve with the model it is of, the target's
// limits, and a GPU target's own memory.
func (r *ProfileReport) MarshalJSON() ([]byte, error) {
	type point struct {
		W      int   `json:"w"`
		Median int64 `json:"median_ns"`
		Spread int64 `json:"spread_ns"`
		Reps   int   `json:"reps"`
	}
	type curve struct {
		Kind    string    `json:"kind"`
		Backend string    `json:"backend"`
		Threads int       `json:"threads"`
		Cached  bool      `json:"cached"`
		Points  []point   `json:"points"`
		Created time.Time `json:"created"`
		Context int       `json:"context"`
		Seqs    int       `json:"seqs"`
		Model   string    `json:"model,omitempty"`
	}
	doc := func(p *measure.Profile, model string) *curve {
		if p == nil {
			return nil
		}
		c := &curve{Kind: p.Curve.Key.Kind, Backend: p.Curve.Key.Backend, Threads: p.Curve.Key.Threads, Cached: p.Cached, Created: p.Curve.Created, Context: p.Curve.Key.Context, Seqs: max(p.Curve.Key.Seqs, 1), Model: model}
		for _, pt := range p.Curve.Points {
			c.Points = append(c.Points, point{W: pt.W, Median: int64(pt.Median), Spread: int64(pt.Spread), Reps: pt.Reps})
		}
		return c
	}
	hw, ps := r.Hardware, r.Pair
	var family []*curve
	for _, p := range r.Family {
		family = append(family, doc(p, ps.Target))
	}
	return json.Marshal(struct {
		Hardware any      `json:"hardware"`
		Target   *curve   `json:"verify"`
		Overhead *curve   `json:"overhead"`
		Draft    *curve   `json:"draft,omitempty"`
		After    *curve   `json:"draft_after_target,omitempty"`
		Steps    *curve   `json:"drafting_in_engine,omitempty"`
		Family   []*curve `json:"verify_family,omitempty"`
		Left     []string `json:"left_out,omitempty"`
		Limits   any      `json:"limits"`
		Memory   any      `json:"device_memory,omitempty"`
	}{
		Memory:   r.Memory,
		Family:   family,
		Left:     r.Left,
		Hardware: map[string]any{"fingerprint": hw.Fingerprint, "cpu": hw.CPU, "cores": hw.Cores, "threads": hw.Threads, "simd": hw.SIMD, "ram_bytes": hw.RAM, "bandwidth_bytes_per_s": hw.Bandwidth, "gpus": hw.GPUs},
		Target:   doc(r.Target, ps.Target), Overhead: doc(r.Overhead, ps.Target), Draft: doc(r.Draft, ps.Draft), After: doc(r.DraftAfter, ps.Draft), Steps: doc(r.DraftSteps, ps.DraftHidden),
		Limits: map[string]any{"roofline_ns": int64(r.Limits.Roofline()), "peak_macs_per_s": r.Limits.Peak, "peak_kind": r.Limits.Kind(), "macs_per_token": r.Limits.MACs,
			"weight_bytes_per_token": r.Limits.WeightBytes},
	})
}
