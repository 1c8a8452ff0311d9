package profiles

import (
	"fmt"
	"strings"

	"arborist/engine/hidden"
	"arborist/engine/sample"
	"arborist/engine/spec"
	"arborist/profiles/config"
	"arborist/profiles/costmodel"
	"arborist/profiles/hardware"
	"arborist/profiles/latency"
	"arborist/profiles/measure"
	"arborist/profiles/store"
)

// The plain values the workflows take and return, as the faces name them:
// the faces import this package and nothing else of Arborist's, so the
// types of its parts are re-exported here. Each is its part's own type.
type (
	// Plan is a speculation plan: a strategy and its shape (engine/spec).
	Plan = spec.Plan
	// Step is one speculative step as the engine reports it.
	Step = spec.Step
	// SampleParams are the sampling settings (temperature 0: greedy).
	SampleParams = sample.Params

	// Prediction is the speedup model's figures for one plan; Costs the
	// curves it prices on; Acceptance a calibration's measurements.
	Prediction = costmodel.Prediction
	Costs      = costmodel.Costs
	Acceptance = costmodel.Acceptance

	// Profile is a measured (or stored) latency curve with its record;
	// Anchor one width a re-check timed.
	Profile = measure.Profile
	Anchor  = measure.Anchor

	// Limits are a model's limits on this machine: the read roofline and
	// the compute ceiling.
	Limits = hardware.Limits

	// The stored records: runs with their steps, curve points, hardware
	// and trained drafters.
	Run        = store.Run
	StoredStep = store.Step
	Point      = latency.Point
	Hardware   = store.Hardware
	Drafter    = store.Drafter

	// DrafterSettings are a hidden-state drafter's training settings;
	// Epoch one epoch's losses.
	DrafterSettings = hidden.Settings
	Epoch           = hidden.Epoch

	// Config is an exported plan, as config.yaml holds it.
	Config = config.Config
)

// DefaultDB is the database file used when none is named: arborist.db in
// the user's configuration folder.
func DefaultDB() string { return store.DefaultPath() }

// PlanField is a plan field as the faces offer it (a flag, an editor):
// name, label, kind, default, help. FieldError names a field whose value
// could not be read.
type (
	PlanField  = spec.PlanField
	FieldKind  = spec.FieldKind
	FieldError = spec.FieldError
)

// The kinds of plan fields.
const (
	IntField     = spec.IntField
	IntListField = spec.IntListField
	BoolField    = spec.BoolField
	FloatField   = spec.FloatField
	TextField    = spec.TextField
)

// PlanFields lists the plan fields the registered strategies offer, each
// once: both faces build their plan editors from it.
func PlanFields() []PlanField { return spec.PlanFields() }

// ParsePlan builds, trims and validates a plan of the named strategy from
// its fields' values (by name, as Plan.Get writes them): the one reading
// of a plan both faces use.
func ParsePlan(strategy string, values map[string]string) (Plan, error) {
	return spec.ParsePlan(strategy, values)
}

// Strategies names the registered strategies, in their listing order.
func Strategies() []string { return spec.Strategies() }

// DefaultStrategy is the strategy the faces start with.
func DefaultStrategy() string { return spec.DefaultStrategy() }

// PlainStrategy is plain decoding's strategy: the 1.00x baseline.
func PlainStrategy() string { return spec.PlainStrategy() }

// IsPlain says whether the named strategy is plain decoding (a stored
// run's Strategy, say).
func IsPlain(strategy string) bool { return spec.IsPlain(strategy) }

// WhatIfStrategies are the strategies the speedup model screen's "your
// plan" offers (Exploration.Price reads them), and the one it starts with.
func WhatIfStrategies() (names []string, start string) { return spec.WhatIfStrategies() }

// ParseInts reads a comma-separated list of integers ("3,2,1"), as plan
// fields such as tree widths are written. An empty element ("1,,2", a
// trailing comma) is refused, not skipped: the list meant is unknown.
func ParseInts(s string) ([]int, error) {
	if strings.TrimSpace(s) != "" {
		for i, f := range strings.Split(s, ",") {
			if strings.TrimSpace(f) == "" {
				return nil, fmt.Errorf("%q: element %d of the list is empty", spec.Excerpt(s), i+1)
			}
		}
	}
	return spec.ParseInts(s)
}

// DefaultDrafterSettings are the hidden-state drafter's default training
// settings.
func DefaultDrafterSettings() DrafterSettings { return hidden.DefaultSettings() }

// CheckThreads refuses a thread count (named by what, for the message)
// beyond a few times this machine's logical cores.
func CheckThreads(what string, n int) error { return hardware.CheckThreads(what, n) }
