// Package profiles is Arborist's workflow core: every workflow the two
// faces offer (the GUI in app/, the headless verbs in app/cli) is written
// here once, and both faces only call it and show its results: open a
// pair, profile this machine, calibrate a pair, train a depth predictor or
// a hidden-state drafter, tune (search and validate plans), run a prompt
// suite, replay a config.yaml, export a plan, and the stored runs,
// drafters and model facts. Each workflow takes a context.Context and
// reports progress through callbacks; Bench holds the database they share.
//
// The faces import this package and nothing else of Arborist's (app's
// TestImports keeps it so): the plain value types they show are re-exported
// here. The parts live in sub-packages named for their job:
//
//	store/      the SQLite database: every SQL statement
//	hardware/   CPU, GPUs, bandwidth, compute peak, a model's limits
//	pairs/      opening a target and its draft source on backends
//	measure/    latency curves, calibration, the re-check
//	costmodel/  the latency-aware speedup model and the plan search
//	predictor/  Yggdrasil's depth predictor
//	config/     the config.yaml format
//	outfile/    writing output files safely
//
// Data flows one way: app, app/cli -> profiles -> engine -> kernels.
// docs/ARCHITECTURE.md says where a new model family, strategy, backend
// or screen goes.
package profiles
