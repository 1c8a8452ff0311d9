package profiles

import (
	"fmt"
	"strings"

	"arborist/engine/hidden"
	"arborist/engine/sample"
	"arborist/engine/spec"
	"arborist/profiles/costmodel"
	"arborist/profiles/hardware"
	"arborist/profiles/measure"
	"arborist/profiles/store"
)

// The plain values the faces name (in a field, a signature, a literal)
// from parts they do not import (the engine, the store, the measurement,
// the speedup model): the types they name are re-exported here, each its
// part's own type. A value package's types (config, jobs, serving, ...)
// the faces name from that package.
// A value the faces only read (a stored drafter's record, the machine's
// hardware) is returned as its part's type, unnamed here.
type (
	// Plan is a speculation plan: a strategy and its shape (engine/spec).
	Plan = spec.Plan
	// Step is one speculative step as the engine reports it.
	Step = spec.Step
	// SampleParams are the sampling settings (temperature 0: greedy).
	SampleParams = sample.Params

	// Prediction is the speedup model's figures for one plan;
	// Acceptance a calibration's measurements.
	Prediction = costmodel.Prediction
	Acceptance = costmodel.Acceptance

	// Profile is a measured (or stored) latency curve with its record.
	Profile = measure.Profile

	// Limits are a model's limits on this machine: the read roofline and
	// the compute ceiling.
	Limits = hardware.Limits

	// The stored records: runs with their steps.
	Run        = store.Run
	StoredStep = store.Step

	// DrafterSettings are a hidden-state drafter's training settings.
	DrafterSettings = hidden.Settings
)

// PlanField is a plan field as the faces offer it (a flag, an editor):
// name, label, kind, default, help. FieldError names a field whose value
// could not be read.
type (
	PlanField  = spec.PlanField
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

// ParsePlan builds, trims and validates a plan of the named strategy from
// its fields' values (by name, as Plan.Get writes them): the one reading
// of a plan both faces use.
func ParsePlan(strategy string, values map[string]string) (Plan, error) {
	return spec.ParsePlan(strategy, values)
}

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

// FormatInts writes an integer list as ParseInts reads it ("1,2,4").
func FormatInts(xs []int) string { return spec.Ints(xs) }

// CheckThreads refuses a thread count (named by what, for the message)
// beyond a few times this machine's logical cores.
func CheckThreads(what string, n int) error { return hardware.CheckThreads(what, n) }
