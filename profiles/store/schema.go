package store

// migrations[v] takes the schema from version v to v+1. Append only: a
// released migration never changes.
//
// Version 1:
//
//	hardware        fingerprint, cpu, cores, threads, simd, ram, gpus, bandwidth
//	models          path, sha256 (of the first and last MiB and the size), arch, shape, quant, vocab hash, synthetic
//	latency_curves  hardware x model x backend x threads x kind (verify | draft) -> points
//	latency_points  W, median, spread, reps
//	calibrations    target x drafter x prompt suite -> acceptance tables (JSON)
//	predictors      depth predictors: weights blob, training stats (JSON)
//	drafters        trained hidden-state drafters: target fingerprint, weights blob, settings, loss history
//	plans           strategy + parameters (JSON), predicted speedup
//	runs            plan settings, prompts, totals; run_steps: the per-step trace
//	exports         config.yaml text of a plan
//	holders         processes that have the database open (to name a lock's holder)
//
// Version 3 (hardening):
//
//	runs.pid, runs.host  the process that runs it, so a run left "running" by a
//	                     process that is gone is recovered as "interrupted"
//	drafter_chunks       drafter weights in 64 MiB pieces (drafters.size >= 0),
//	                     past SQLite's 1e9-byte limit on one blob
//	file_hashes          SHA-256 of model files, cached by path, size and mtime
//
// Version 5 (GPUs):
//
//	device_memory  hardware x backend -> a device's own memory: copy rate,
//	               host-device transfer rates, datasheet rate, multiprocessors
//
// Version 6 (file identity):
//
//	file_hashes.stamp  the file's inode and status-change time beside its size
//	                   and mtime (stampOf), so a same-size rewrite with its
//	                   mtime restored is hashed again
//
// Version 7 (the plan a run ran):
//
//	runs.plan  the plan as the run ran it (JSON of the engine's plan: the tuned
//	           plan field for field), "" for runs stored before
//
// Version 8 (drafting ahead):
//
//	run_steps.wait_ns    the time the target waited, after verifying, for the
//	                     drafting that ran beside it (part of overhead_ns)
//	run_steps.ahead      end positions of the step's draft whose continuation
//	                     was drafted during its verification (AOT's head: 1;
//	                     tail drafting: up to its budget); 0 for none and for
//	                     steps stored before
//	run_steps.ahead_hit  1 when the verdict ended at one of them with the
//	                     guessed bonus token, so the next step found that
//	                     drafting done
//
// Version 11 (load tests):
//
//	runs.load_server  what a load test drove (arborist-plan, arborist-adaptive,
//	                  arborist-plain, llama-server, llama-server-plain); ''
//	                  for a run that decoded its prompts one at a time
//	runs.concurrency  the clients driving it at once
//	runs.ttft_ns, ttft_p90_ns, tpot_ns, tpot_p90_ns
//	                  time to first token and time per output token, the
//	                  median and 90th percentile over its requests
//	runs.tps_p10, tps_p90
//	                  the rounds' spread of aggregate tokens/s around the
//	                  median (runs.tokens_per_s)
//	runs.rounds, runs.requests
//	                  the rounds and the requests they completed
//
// Version 12 (curves over context and concurrency):
//
//	latency_curves.seqs  the sequences each timed pass held (1: one
//	                     sequence, every curve stored before); W is then
//	                     the pass's rows, all of them
//	latency_curves_key   indexes the context and the sequences too: a
//	                     model's verification curve is stored at several
//	                     contexts and pass sizes, each found by its own
//	                     (curves stored before keep the context they were
//	                     measured at, the short one)
//
// Version 15 (speed at depth):
//
//	bench_reports  hardware x model x backend x KV cache type -> the newest
//	               bench report with its depths (JSON) and its threads, so
//	               a measurement at depth outlives the window that made it
var migrations = []string{`
CREATE TABLE hardware (
	id INTEGER PRIMARY KEY,
	fingerprint TEXT NOT NULL UNIQUE,
	cpu TEXT NOT NULL,
	cores INTEGER NOT NULL,
	threads INTEGER NOT NULL,
	simd TEXT NOT NULL,
	ram_bytes INTEGER NOT NULL,
	gpus TEXT NOT NULL DEFAULT '',
	bandwidth REAL NOT NULL DEFAULT 0,
	os TEXT NOT NULL,
	created TEXT NOT NULL
);
CREATE TABLE models (
	id INTEGER PRIMARY KEY,
	fingerprint TEXT NOT NULL UNIQUE,
	path TEXT NOT NULL,
	arch TEXT NOT NULL,
	shape TEXT NOT NULL,
	quant TEXT NOT NULL,
	params INTEGER NOT NULL,
	weight_bytes INTEGER NOT NULL,
	vocab_hash TEXT NOT NULL,
	synthetic INTEGER NOT NULL DEFAULT 0,
	created TEXT NOT NULL
);
CREATE TABLE latency_curves (
	id INTEGER PRIMARY KEY,
	hardware_id INTEGER NOT NULL REFERENCES hardware(id) ON DELETE CASCADE,
	model_id INTEGER NOT NULL REFERENCES models(id) ON DELETE CASCADE,
	backend TEXT NOT NULL,
	threads INTEGER NOT NULL,
	kind TEXT NOT NULL,
	context INTEGER NOT NULL,
	created TEXT NOT NULL
);
CREATE INDEX latency_curves_key ON latency_curves(hardware_id, model_id, backend, threads, kind);
CREATE TABLE latency_points (
	curve_id INTEGER NOT NULL REFERENCES latency_curves(id) ON DELETE CASCADE,
	w INTEGER NOT NULL,
	median_ns INTEGER NOT NULL,
	spread_ns INTEGER NOT NULL,
	reps INTEGER NOT NULL,
	PRIMARY KEY (curve_id, w)
);
CREATE TABLE calibrations (
	id INTEGER PRIMARY KEY,
	target_id INTEGER NOT NULL REFERENCES models(id) ON DELETE CASCADE,
	drafter TEXT NOT NULL,
	suite TEXT NOT NULL,
	stats TEXT NOT NULL,
	created TEXT NOT NULL
);
CREATE TABLE predictors (
	id INTEGER PRIMARY KEY,
	calibration_id INTEGER REFERENCES calibrations(id) ON DELETE SET NULL,
	weights BLOB NOT NULL,
	stats TEXT NOT NULL,
	created TEXT NOT NULL
);
CREATE TABLE drafters (
	id INTEGER PRIMARY KEY,
	target_fingerprint TEXT NOT NULL,
	weights BLOB NOT NULL,
	settings TEXT NOT NULL,
	losses TEXT NOT NULL,
	created TEXT NOT NULL
);
CREATE TABLE plans (
	id INTEGER PRIMARY KEY,
	hardware_id INTEGER REFERENCES hardware(id) ON DELETE SET NULL,
	target_id INTEGER REFERENCES models(id) ON DELETE SET NULL,
	strategy TEXT NOT NULL,
	params TEXT NOT NULL,
	predicted_speedup REAL NOT NULL DEFAULT 0,
	created TEXT NOT NULL
);
CREATE TABLE runs (
	id INTEGER PRIMARY KEY,
	plan_id INTEGER REFERENCES plans(id) ON DELETE SET NULL,
	hardware_fingerprint TEXT NOT NULL DEFAULT '',
	target TEXT NOT NULL,
	drafter TEXT NOT NULL DEFAULT '',
	strategy TEXT NOT NULL,
	settings TEXT NOT NULL,
	prompts TEXT NOT NULL,
	status TEXT NOT NULL DEFAULT 'running',
	tokens INTEGER NOT NULL DEFAULT 0,
	steps INTEGER NOT NULL DEFAULT 0,
	decode_ns INTEGER NOT NULL DEFAULT 0,
	tokens_per_s REAL NOT NULL DEFAULT 0,
	aal REAL NOT NULL DEFAULT 0,
	acceptance REAL NOT NULL DEFAULT 0,
	predicted_speedup REAL NOT NULL DEFAULT 0,
	measured_speedup REAL NOT NULL DEFAULT 0,
	created TEXT NOT NULL
);
CREATE TABLE run_steps (
	run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
	idx INTEGER NOT NULL,
	prompt INTEGER NOT NULL,
	drafted INTEGER NOT NULL,
	width INTEGER NOT NULL,
	depth INTEGER NOT NULL,
	accepted INTEGER NOT NULL,
	emitted INTEGER NOT NULL,
	bonus INTEGER NOT NULL,
	draft_ns INTEGER NOT NULL,
	verify_ns INTEGER NOT NULL,
	overhead_ns INTEGER NOT NULL,
	overlap_ns INTEGER NOT NULL,
	PRIMARY KEY (run_id, idx)
);
CREATE TABLE exports (
	id INTEGER PRIMARY KEY,
	plan_id INTEGER REFERENCES plans(id) ON DELETE SET NULL,
	yaml TEXT NOT NULL,
	created TEXT NOT NULL
);
CREATE TABLE holders (
	id INTEGER PRIMARY KEY,
	pid INTEGER NOT NULL,
	host TEXT NOT NULL,
	command TEXT NOT NULL,
	since TEXT NOT NULL
);
`, `
-- v2: hidden-state drafters are checkpointed while they train
ALTER TABLE drafters ADD COLUMN status TEXT NOT NULL DEFAULT 'done';
ALTER TABLE drafters ADD COLUMN target_path TEXT NOT NULL DEFAULT '';
ALTER TABLE drafters ADD COLUMN updated TEXT NOT NULL DEFAULT '';
`, `
-- v3: self-distilled training data of hidden-state drafters, kept so a
-- retrain on the same target, prompts and data settings skips generation
CREATE TABLE drafter_data (
	key TEXT PRIMARY KEY,
	target_fingerprint TEXT NOT NULL,
	data BLOB NOT NULL,
	created TEXT NOT NULL
);
`,
	`
-- v4: run recovery, drafters in chunks, cached file hashes
ALTER TABLE runs ADD COLUMN pid INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN host TEXT NOT NULL DEFAULT '';
ALTER TABLE drafters ADD COLUMN size INTEGER NOT NULL DEFAULT -1;
CREATE TABLE drafter_chunks (
	drafter_id INTEGER NOT NULL REFERENCES drafters(id) ON DELETE CASCADE,
	idx INTEGER NOT NULL,
	data BLOB NOT NULL,
	PRIMARY KEY (drafter_id, idx)
);
CREATE TABLE file_hashes (
	path TEXT NOT NULL PRIMARY KEY,
	size INTEGER NOT NULL,
	mtime_ns INTEGER NOT NULL,
	sha256 TEXT NOT NULL,
	created TEXT NOT NULL
);
`,
	`
-- v5: the memory of devices with their own (GPUs), per machine and backend
CREATE TABLE device_memory (
	hardware_id INTEGER NOT NULL REFERENCES hardware(id) ON DELETE CASCADE,
	backend TEXT NOT NULL,
	description TEXT NOT NULL,
	multiprocessors INTEGER NOT NULL,
	copy_bps REAL NOT NULL,
	h2d_bps REAL NOT NULL,
	d2h_bps REAL NOT NULL,
	peak_bps REAL NOT NULL,
	created TEXT NOT NULL,
	PRIMARY KEY (hardware_id, backend)
);
`,
	`
-- v6: a cached file hash also names the file's inode and status-change time
ALTER TABLE file_hashes ADD COLUMN stamp TEXT NOT NULL DEFAULT '';
`,
	`
-- v7: the plan a run ran, beside the engine configuration it became
ALTER TABLE runs ADD COLUMN plan TEXT NOT NULL DEFAULT '';
`,
	`
-- v8: a tuned plan belongs to its pair, the draft source named as
-- calibrations name it ('' for plans stored before: any source)
ALTER TABLE plans ADD COLUMN drafter TEXT NOT NULL DEFAULT '';
`,
	`
-- v9: what each step drafted ahead and whether it hit, and the wait for it
ALTER TABLE run_steps ADD COLUMN wait_ns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE run_steps ADD COLUMN ahead INTEGER NOT NULL DEFAULT 0;
ALTER TABLE run_steps ADD COLUMN ahead_hit INTEGER NOT NULL DEFAULT 0;
`,
	`
-- v10: the read bandwidth probe reads four streams a thread, up to a fifth
-- faster than the one stream it read before; a rate the old probe stored
-- is forgotten (0: not measured), so the next verb that needs it measures
-- it again, and a tune's re-check compares like with like instead of
-- warning that the memory sped up
UPDATE hardware SET bandwidth = 0;
`,
	`
-- v11: a load test's figures at one concurrency, stored as a run
ALTER TABLE runs ADD COLUMN load_server TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN concurrency INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN ttft_ns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN ttft_p90_ns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN tpot_ns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN tpot_p90_ns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN tps_p10 REAL NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN tps_p90 REAL NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN rounds INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN requests INTEGER NOT NULL DEFAULT 0;
`,
	`
-- v12: latency curves at several contexts and of passes of several
-- sequences, each curve found by its own context and sequences; every
-- curve stored before was timed on one sequence at the short context it
-- records (a context never recorded is read as that short one, 128)
ALTER TABLE latency_curves ADD COLUMN seqs INTEGER NOT NULL DEFAULT 1;
UPDATE latency_curves SET context = 128 WHERE context < 1;
DROP INDEX latency_curves_key;
CREATE INDEX latency_curves_key ON latency_curves(hardware_id, model_id, backend, threads, kind, context, seqs);
`,
	`
-- v13: the spread of a run's figures over its rounds against plain
-- decoding: the measured speedup's and the plan's tokens/s's lowest and
-- highest round (0: one round, or none measured)
ALTER TABLE runs ADD COLUMN measured_low REAL NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN measured_high REAL NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN tps_low REAL NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN tps_high REAL NOT NULL DEFAULT 0;
`,
	`
-- v14: a run's prediction priced on assumed acceptance (a plan tuned
-- before any calibration, on the sliders' values): 1
ALTER TABLE runs ADD COLUMN predicted_assumed INTEGER NOT NULL DEFAULT 0;
`,
	`
-- v15: a model's newest speed at depth on a machine (bench's report with
-- its depths, JSON), per backend and KV cache type, with the threads it ran
CREATE TABLE bench_reports (
	hardware_id INTEGER NOT NULL REFERENCES hardware(id) ON DELETE CASCADE,
	model_id INTEGER NOT NULL REFERENCES models(id) ON DELETE CASCADE,
	backend TEXT NOT NULL,
	kv TEXT NOT NULL,
	threads INTEGER NOT NULL,
	report TEXT NOT NULL,
	created TEXT NOT NULL,
	PRIMARY KEY (hardware_id, model_id, backend, kv)
);
`,
}
