package profiles

import (
	"slices"
	"time"

	"arborist/engine/spec"
	"arborist/engine/synth"
	"arborist/kernels"
	"arborist/profiles/costmodel"
	"arborist/profiles/store"
	"arborist/profiles/trainsize"
)

// Catalog is what the faces offer to choose from and start with, as the
// core's registries and defaults have it: the CLI's flags and their
// defaults, and the GUI's choices, are built from it, so a strategy, a
// plan field or a backend added to its registry is offered by both.
type Catalog struct {
	// Strategies are the registered strategies, in their listing order;
	// DefaultStrategy the one the faces start with; PlainStrategy plain
	// decoding, the 1.00x baseline.
	Strategies      []string
	DefaultStrategy string
	PlainStrategy   string
	// PlanFields are the plan fields the strategies read, each once:
	// both faces build their plan editors from them.
	PlanFields []PlanField
	// WhatIf are the strategies the speedup model screen's "your plan"
	// offers (Exploration.Price reads them), and WhatIfStart the one it
	// starts with.
	WhatIf      []string
	WhatIfStart string
	// Backends are the registered backends by name (Backends says which
	// can run here); DefaultBackend the one a pair runs on when none is
	// named, and DefaultThreads its worker count on this machine.
	Backends       []string
	DefaultBackend string
	DefaultThreads int
	// DraftSources are the draft source kinds, the first the default.
	DraftSources []DraftSourceKind
	// DefaultDB is the database used when none is named: arborist.db in
	// the user's configuration folder.
	DefaultDB string
	// DrafterSettings are a hidden-state drafter's default training
	// settings (at the default size).
	DrafterSettings DrafterSettings
	// TrainSizes are the sizes both trainers offer, smallest first
	// (trainsize.Predictor, trainsize.Drafter), and DefaultTrainSize the
	// one they run at unless asked for more.
	TrainSizes       []string
	DefaultTrainSize string
	// Concurrency are the concurrencies plans are ranked at (Inputs.Loads)
	// unless others are asked for.
	Concurrency []int
	// SynthShapes are the model shapes Synth knows by name.
	SynthShapes []string
	// Rounds are the passes over the prompt suite a validation makes by
	// default (and a run against plain decoding, within RoundBudget).
	Rounds      int
	RoundBudget time.Duration
}

// Choices is the catalog of this build on this machine.
func Choices() Catalog {
	whatIf, start := spec.WhatIfStrategies()
	return Catalog{
		Strategies: spec.Strategies(), DefaultStrategy: spec.DefaultStrategy(), PlainStrategy: spec.PlainStrategy(),
		PlanFields: spec.PlanFields(), WhatIf: whatIf, WhatIfStart: start,
		Backends: kernels.Names(), DefaultBackend: kernels.DefaultBackend, DefaultThreads: kernels.DefaultThreads(),
		DraftSources: draftSources(), DefaultDB: store.DefaultPath(), DrafterSettings: trainsize.DefaultDrafterSettings(),
		TrainSizes: trainsize.Names(), DefaultTrainSize: trainsize.Default, SynthShapes: synth.ShapeNames(),
		Concurrency: slices.Clone(costmodel.DefaultConcurrency), Rounds: defaultRounds, RoundBudget: roundBudget,
	}
}
