package store

import (
	"encoding/json"
	"slices"
	"time"

	"arborist/engine/sample"
	"arborist/engine/spec"
	"arborist/engine/tree"
)

// A stored run as the faces read it: the plan it ran, and the shape its
// JSON has in `runs --json` (docs/JSON.md).

// MarshalJSON writes the run as `runs --json` lists it: its record, with
// the plan it ran and that plan's name where they can be read.
func (r Run) MarshalJSON() ([]byte, error) {
	row := struct {
		ID         int64     `json:"id"`
		Status     string    `json:"status"`
		Strategy   string    `json:"strategy"`
		Plan       any       `json:"plan,omitempty"` // the plan as it ran (runs stored before carry none)
		PlanName   string    `json:"plan_name,omitempty"`
		Drafter    string    `json:"drafter"`
		Target     string    `json:"target"`
		Hardware   string    `json:"hardware"`
		Settings   any       `json:"settings"`
		Prompts    []string  `json:"prompts"`
		Tokens     int       `json:"tokens"`
		Steps      int       `json:"steps"`
		DecodeNS   int64     `json:"decode_ns"`
		TPS        float64   `json:"tokens_per_s"`
		AAL        float64   `json:"aal"`
		Acceptance float64   `json:"acceptance"`
		Measured   float64   `json:"measured_speedup"`
		Predicted  float64   `json:"predicted_speedup"`
		Created    time.Time `json:"created"`
		Load       *loadJSON `json:"load,omitempty"` // a load test's figures at one concurrency
	}{ID: r.ID, Status: r.Status, Strategy: r.Strategy, Drafter: r.Drafter, Target: r.Target, Hardware: r.Hardware, Settings: r.Settings,
		Prompts: r.Prompts, Tokens: r.Tokens, Steps: r.Steps, DecodeNS: int64(r.Decode), TPS: r.TokensPerSecond, AAL: r.AAL, Acceptance: r.Acceptance,
		Measured: r.MeasuredSpeedup, Predicted: r.PredictedSpeedup, Created: r.Created}
	if l := r.Load; l != nil {
		ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
		row.Load = &loadJSON{Server: l.Server, Concurrency: l.Concurrency, TTFTMS: ms(l.TTFT), TTFTP90MS: ms(l.TTFTP90), TPOTMS: ms(l.TPOT), TPOTP90MS: ms(l.TPOTP90),
			TPSP10: l.TPSP10, TPSP90: l.TPSP90, Rounds: l.Rounds, Requests: l.Requests}
	}
	if p, ok := r.RanPlan(); ok {
		row.Plan, row.PlanName = p, p.String()
	}
	return json.Marshal(row)
}

// RanPlan is the plan the run ran, as stored with it; for a run stored
// before the database kept plans, as read back from its engine settings
// (settingsPlan). False where neither can be read.
func (r Run) RanPlan() (spec.Plan, bool) {
	var p spec.Plan
	if r.Plan == "" || json.Unmarshal([]byte(r.Plan), &p) != nil {
		return settingsPlan(&r)
	}
	return p, true
}

// RanSampling is the sampling the run decoded at and its token budget a
// prompt, read back from the engine settings stored with it; false where
// the settings hold no sampling (a load test's, a llama.cpp run's).
func (r Run) RanSampling() (smp sample.Params, maxTokens int, ok bool) {
	raw, err := json.Marshal(r.Settings)
	if err != nil {
		return smp, 0, false
	}
	var cfg struct {
		Sample    *sample.Params
		MaxTokens int
	}
	if json.Unmarshal(raw, &cfg) != nil || cfg.Sample == nil {
		return smp, cfg.MaxTokens, false
	}
	return *cfg.Sample, cfg.MaxTokens, true
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
func settingsPlan(r *Run) (p spec.Plan, ok bool) {
	raw, err := json.Marshal(r.Settings)
	if err != nil {
		return spec.Plan{Strategy: r.Strategy}, false
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil {
		return spec.Plan{Strategy: r.Strategy}, false
	}
	if _, embedded := keys["strategy"]; embedded {
		if err := json.Unmarshal(raw, &p); err != nil || p.Strategy == "" {
			return spec.Plan{Strategy: r.Strategy}, false
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
		return spec.Plan{Strategy: r.Strategy}, false
	}
	p = spec.Plan{Strategy: c.Strategy, Gamma: c.Gamma, EGT: c.Widths, Branch: c.Branch, WMax: c.WMax, Pad: c.Pad, AOT: c.AOT,
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

// loadJSON is a load run's figures as `runs --json` lists them, times in
// milliseconds.
type loadJSON struct {
	Server      string  `json:"server"`
	Concurrency int     `json:"concurrency"`
	TTFTMS      float64 `json:"ttft_ms"`
	TTFTP90MS   float64 `json:"ttft_p90_ms"`
	TPOTMS      float64 `json:"tpot_ms"`
	TPOTP90MS   float64 `json:"tpot_p90_ms"`
	TPSP10      float64 `json:"tokens_per_s_p10"`
	TPSP90      float64 `json:"tokens_per_s_p90"`
	Rounds      int     `json:"rounds"`
	Requests    int     `json:"requests"`
}
