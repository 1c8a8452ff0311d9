// Package profiles is Arborist's workflow core: every workflow the faces
// offer (the GUI in app/, the headless verbs in app/cli, the server in
// app/serve) is written here once, and the faces only call it and show its
// results: open a pair, profile this machine, calibrate a pair, train a
// depth predictor or a hidden-state drafter, tune (search, export and
// validate plans), run a prompt suite, run a config.yaml with overrides,
// export a plan, serve a config (decode the requests a face hands over),
// check an export in llama.cpp, and the stored runs, drafters and model
// facts. Each workflow takes a context.Context and reports progress
// through callbacks; Bench holds the database they share.
//
// This package holds workflows and the value types they take and return,
// nothing else: the faces import it, its value packages (a concept of
// plain values and their pure rules, such as jobs/) and nothing else of
// Arborist's but assets and the latency leaf (TestLayers keeps it so), so
// the types of its other parts that a face names are re-exported here,
// and what the faces choose from is one value (Catalog). How results read
// (numbers, chart families, notes) is the faces' (app/present); a
// result's JSON shape is its own (reports.go).
// The parts live in sub-packages named for their job:
//
//	store/      the SQLite database: every SQL statement
//	hardware/   CPU, GPUs, bandwidth, compute peak, a model's limits
//	pairs/      opening a target and its draft source on backends
//	measure/    latency curves, calibration, the re-check
//	costmodel/  the latency-aware speedup model and the plan search
//	predictor/  Yggdrasil's depth predictor
//	config/     the config.yaml format (a value package)
//	llamacpp/   running llama.cpp's programs for the checks of an export
//	llamacheck/ what a check or tune in llama.cpp runs and finds (a value
//	            package)
//	outfile/    writing output files safely
//	jobs/       the registry of an app's long jobs (a value package)
//	trainsize/  the sizes of the trainings and what they cost (a value
//	            package)
//	serving/    what a face hands the server and its first bounds (a
//	            value package)
//	loadtest/   a load test's options and results (a value package), its
//	            clients and the servers it starts
//
// Data flows one way: app, app/cli, app/serve -> profiles -> engine ->
// kernels. docs/ARCHITECTURE.md says where a new model family, strategy,
// backend or screen goes.
package profiles
