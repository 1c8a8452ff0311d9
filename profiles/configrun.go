package profiles

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"arborist/engine/sample"
	"arborist/engine/spec"
)

// A run of a config.yaml with what the face was given beside it: the
// config holds the pair, the plan and the sampling, so a setting that
// would change them is refused, never dropped silently; the settings it
// leaves to the run (the threads, the hidden drafter's re-sampling, the
// KV cache type, reading the files into memory) are taken from the face,
// and those that replace the config's own say so in a note.

// Overrides are what a run of a config.yaml was given beside it: the
// settings the user set, by their names (run's flag names: "threads",
// "strategy", "gamma", ...), with the pair holding their values.
type Overrides struct {
	Set  []string
	Pair PairSpec
	// AllowChanged replays a config whose model files' SHA-256 differ
	// from the ones it recorded; NoStore caches no file hashes in the
	// database (the run stores nothing).
	AllowChanged, NoStore bool
}

// ConfigRun is a run of a config.yaml: the pair and the run's plan,
// sampling, prediction and context, with notes for each override and for
// each way this machine or run differs from the one the plan was tuned
// for. Refused names the settings given that the config holds: the run is
// refused (nothing was read), and the config is where to change them.
type ConfigRun struct {
	Refused []string
	Pair    PairSpec
	Options RunOptions
	Notes   []string
}

// configHolds says whether config.yaml holds the setting name: the
// models and their devices, the plan and the sampling.
func configHolds(name string) bool {
	switch name {
	case "target", "draft", "draft-ngram", "draft-layers", "draft-hidden", "device", "backend", "draft-device",
		"strategy":
		return true
	}
	for _, f := range sample.Fields() {
		if f.Flag == name {
			return true
		}
	}
	for _, f := range spec.PlanFields() {
		if f.Flag == name {
			return true
		}
	}
	return false
}

// ConfigRun reads the config.yaml at path (checking its models' hashes)
// for a run with the overrides.
func (b *Bench) ConfigRun(ctx context.Context, path string, o Overrides) (*ConfigRun, error) {
	out := &ConfigRun{}
	for _, name := range o.Set {
		if configHolds(name) {
			out.Refused = append(out.Refused, name)
		}
	}
	if len(out.Refused) > 0 {
		return out, nil
	}
	hashDB := b.path // where model hashes are cached; none for a run that stores nothing
	if o.NoStore {
		hashDB = ""
	}
	r, err := loadReplay(ctx, path, hashDB, o.AllowChanged)
	if err != nil {
		return nil, err
	}
	ps, flags := r.pairWith(o.Pair), o.Pair
	for _, ov := range []struct {
		name, value string
		set         func()
	}{
		{"threads", strconv.Itoa(flags.Threads), func() { ps.Threads = flags.Threads }},
		{"draft-threads", strconv.Itoa(flags.DraftThreads), func() { ps.DraftThreads = flags.DraftThreads }},
		{"resample-depth", strconv.Itoa(flags.ResampleDepth), nil},
		{"no-resample", strconv.FormatBool(flags.NoResample), nil},
	} {
		if slices.Contains(o.Set, ov.name) {
			out.Notes = append(out.Notes, fmt.Sprintf("--%s %s overrides %s", ov.name, ov.value, path))
			if ov.set != nil {
				ov.set()
			}
		}
	}
	if slices.Contains(o.Set, "kv") { // the KV cache type given beside a config that names one
		if r.Pair.KV != "" && r.Pair.KV != flags.KV {
			out.Notes = append(out.Notes, fmt.Sprintf("--kv %s overrides %s (its kv_cache: %s)", flags.KV, path, r.Pair.KV))
		}
		ps.KV = flags.KV
	}
	out.Notes = append(out.Notes, r.Notes...)
	out.Pair = ps
	out.Options = RunOptions{Plan: r.Plan, Sample: r.Sample, Predicted: r.Predicted, PredictedOn: r.PredictedOn, Context: r.Context}
	return out, nil
}
