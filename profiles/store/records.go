package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"arborist/engine/spec"
	"arborist/profiles/latency"
)

func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }

// Hardware is a machine's fingerprint and inventory.
type Hardware struct {
	ID          int64
	Fingerprint string
	CPU         string
	Cores       int // physical, as far as the OS tells
	Threads     int // logical
	SIMD        string
	RAM         uint64
	GPUs        string
	Bandwidth   float64 // bytes/s, measured
	OS          string
}

// PutHardware inserts or refreshes a machine by fingerprint and returns its
// id; a measured bandwidth, a GPU inventory and a SIMD description (which
// names the kernels in the build's words) refresh the stored ones, and h
// gets the stored bandwidth and GPUs where it had none.
func (s *Store) PutHardware(ctx context.Context, h *Hardware) (int64, error) {
	_, err := s.db.ExecContext(ctx, `INSERT INTO hardware(fingerprint, cpu, cores, threads, simd, ram_bytes, gpus, bandwidth, os, created)
		VALUES (?,?,?,?,?,?,?,?,?,?)
		ON CONFLICT(fingerprint) DO UPDATE SET bandwidth = CASE WHEN excluded.bandwidth > 0 THEN excluded.bandwidth ELSE bandwidth END,
			gpus = CASE WHEN excluded.gpus <> '' THEN excluded.gpus ELSE gpus END,
			simd = CASE WHEN excluded.simd <> '' THEN excluded.simd ELSE simd END`,
		h.Fingerprint, h.CPU, h.Cores, h.Threads, h.SIMD, h.RAM, h.GPUs, h.Bandwidth, h.OS, now())
	if err != nil {
		return 0, s.wrap("save hardware", err)
	}
	// what was measured or detected before fills what this record lacks
	err = s.db.QueryRowContext(ctx, "SELECT id, bandwidth, gpus FROM hardware WHERE fingerprint = ?", h.Fingerprint).Scan(&h.ID, &h.Bandwidth, &h.GPUs)
	return h.ID, s.wrap0("save hardware", err)
}

func (s *Store) wrap0(op string, err error) error {
	if err == nil {
		return nil
	}
	return s.wrap(op, err)
}

// Model describes a GGUF model.
type Model struct {
	ID          int64
	Fingerprint string
	Path        string
	Arch        string
	Shape       string
	Quant       string
	Params      uint64
	WeightBytes uint64
	VocabHash   string
	Synthetic   bool
}

// PutModel inserts or finds a model by fingerprint and returns its id.
func (s *Store) PutModel(ctx context.Context, m *Model) (int64, error) {
	_, err := s.db.ExecContext(ctx, `INSERT INTO models(fingerprint, path, arch, shape, quant, params, weight_bytes, vocab_hash, synthetic, created)
		VALUES (?,?,?,?,?,?,?,?,?,?) ON CONFLICT(fingerprint) DO UPDATE SET path = excluded.path`,
		m.Fingerprint, m.Path, m.Arch, m.Shape, m.Quant, m.Params, m.WeightBytes, m.VocabHash, m.Synthetic, now())
	if err != nil {
		return 0, s.wrap("save model", err)
	}
	err = s.db.QueryRowContext(ctx, "SELECT id FROM models WHERE fingerprint = ?", m.Fingerprint).Scan(&m.ID)
	return m.ID, s.wrap0("save model", err)
}

// CurveKey identifies a latency curve: same hardware, model, backend,
// threads, kind, context and sequences means the same measurement.
type CurveKey struct {
	HardwareID, ModelID int64
	Backend             string
	Threads             int
	Kind                string // "verify" or "draft"
	// Context is the cached tokens each sequence of a timed pass attends
	// to; Seqs the sequences each pass holds (0 is read as 1), its W then
	// the pass's rows in all. A model's verification curve is stored at
	// several contexts (what a pass costs grows with the cache it reads)
	// and pass sizes (a server's passes hold many sequences).
	Context, Seqs int
}

// seqs is the key's sequences, 0 read as 1.
func (k CurveKey) seqs() int { return max(k.Seqs, 1) }

// Curve is a stored latency curve.
type Curve struct {
	ID      int64
	Key     CurveKey
	Created time.Time
	Points  []latency.Point
}

// SaveCurve stores a curve and its points in one transaction.
func (s *Store) SaveCurve(ctx context.Context, c *Curve) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.wrap("save curve", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `INSERT INTO latency_curves(hardware_id, model_id, backend, threads, kind, context, seqs, created) VALUES (?,?,?,?,?,?,?,?)`,
		c.Key.HardwareID, c.Key.ModelID, c.Key.Backend, c.Key.Threads, c.Key.Kind, c.Key.Context, c.Key.seqs(), now())
	if err != nil {
		return s.wrap("save curve", err)
	}
	c.ID, _ = res.LastInsertId()
	// points left by a curve deleted without foreign keys (by hand, in the
	// sqlite3 shell, where they are off by default) carry the id SQLite
	// hands out again, and every later save failed on them
	if _, err := tx.ExecContext(ctx, `DELETE FROM latency_points WHERE curve_id = ?`, c.ID); err != nil {
		return s.wrap("save curve", err)
	}
	for _, p := range c.Points {
		if _, err := tx.ExecContext(ctx, `INSERT INTO latency_points(curve_id, w, median_ns, spread_ns, reps) VALUES (?,?,?,?,?)`,
			c.ID, p.W, int64(p.Median), int64(p.Spread), p.Reps); err != nil {
			return s.wrap("save curve", err)
		}
	}
	return s.wrap0("save curve", tx.Commit())
}

// FindCurve returns the newest curve for key (its context and sequences
// included), or nil when there is none.
func (s *Store) FindCurve(ctx context.Context, key CurveKey) (*Curve, error) {
	c := &Curve{Key: key}
	c.Key.Seqs = key.seqs()
	var created string
	err := s.db.QueryRowContext(ctx, `SELECT id, created FROM latency_curves
		WHERE hardware_id = ? AND model_id = ? AND backend = ? AND threads = ? AND kind = ? AND context = ? AND seqs = ? ORDER BY id DESC LIMIT 1`,
		key.HardwareID, key.ModelID, key.Backend, key.Threads, key.Kind, key.Context, key.seqs()).Scan(&c.ID, &created)
	if err == sql.ErrNoRows {
		return nil, nil
	}
	if err != nil {
		return nil, s.wrap("find curve", err)
	}
	c.Created, _ = time.Parse(time.RFC3339Nano, created)
	if c.Points, err = s.curvePoints(ctx, c.ID); err != nil {
		return nil, s.wrap("find curve", err)
	}
	return c, nil
}

// CurveFamily returns the newest curve of every context and pass size
// stored for key's hardware, model, backend, threads and kind (key's own
// context and sequences are not read), ordered by sequences, then
// context: a verification curve's family over context, and its passes of
// several sequences.
func (s *Store) CurveFamily(ctx context.Context, key CurveKey) ([]*Curve, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, context, seqs, created FROM latency_curves
		WHERE hardware_id = ? AND model_id = ? AND backend = ? AND threads = ? AND kind = ? ORDER BY id DESC`,
		key.HardwareID, key.ModelID, key.Backend, key.Threads, key.Kind)
	if err != nil {
		return nil, s.wrap("find curves", err)
	}
	type size struct{ context, seqs int }
	seen := map[size]bool{}
	var out []*Curve
	for rows.Next() {
		c := &Curve{Key: key}
		var created string
		if err := rows.Scan(&c.ID, &c.Key.Context, &c.Key.Seqs, &created); err != nil {
			rows.Close()
			return nil, s.wrap("find curves", err)
		}
		if k := (size{c.Key.Context, c.Key.Seqs}); !seen[k] {
			seen[k] = true
			c.Created, _ = time.Parse(time.RFC3339Nano, created)
			out = append(out, c)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, s.wrap("find curves", err)
	}
	for _, c := range out {
		if c.Points, err = s.curvePoints(ctx, c.ID); err != nil {
			return nil, s.wrap("find curves", err)
		}
	}
	slices.SortFunc(out, func(a, b *Curve) int {
		if a.Key.Seqs != b.Key.Seqs {
			return a.Key.Seqs - b.Key.Seqs
		}
		return a.Key.Context - b.Key.Context
	})
	return out, nil
}

// curvePoints reads a stored curve's points, by width.
func (s *Store) curvePoints(ctx context.Context, id int64) ([]latency.Point, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT w, median_ns, spread_ns, reps FROM latency_points WHERE curve_id = ? ORDER BY w", id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var pts []latency.Point
	for rows.Next() {
		var p latency.Point
		var med, spr int64
		if err := rows.Scan(&p.W, &med, &spr, &p.Reps); err != nil {
			return nil, err
		}
		p.Median, p.Spread = time.Duration(med), time.Duration(spr)
		pts = append(pts, p)
	}
	return pts, rows.Err()
}

// Run is a stored speculative decoding session.
type Run struct {
	ID              int64
	Hardware        string
	Target, Drafter string
	Strategy        string
	// Plan is the plan as the run ran it, JSON (the engine's plan type;
	// "" for runs stored before the database kept it).
	Plan             string
	Settings         any // JSON-encoded
	Prompts          []string
	Status           string // running, done, failed, stopped, interrupted
	Tokens, Steps    int
	Decode           time.Duration
	TokensPerSecond  float64
	AAL, Acceptance  float64
	PredictedSpeedup float64
	// PredictedAssumed says the prediction was priced on assumed
	// acceptance (a plan tuned before any calibration).
	PredictedAssumed bool
	MeasuredSpeedup  float64
	// MeasuredLow and MeasuredHigh are the measured speedup's lowest and
	// highest round against plain decoding, TPSLow and TPSHigh the plan's
	// tokens/s's (0: a single round, or none measured; runs stored before
	// the database kept them).
	MeasuredLow, MeasuredHigh float64
	TPSLow, TPSHigh           float64
	// Load is a load test's figures at one concurrency (its aggregate
	// tokens/s, the rounds' median, is TokensPerSecond); nil for a run
	// that decoded its prompts one at a time.
	Load    *Load
	Created time.Time
}

// Load is what a load test measured driving one server with Concurrency
// clients at once over Rounds rounds.
type Load struct {
	Server      string // what was driven: arborist-plan, arborist-adaptive, arborist-plain, llama-server, llama-server-plain
	Concurrency int
	// TTFT is the time to first token and TPOT the time per output token
	// after it, the median and 90th percentile over the requests.
	TTFT, TTFTP90 time.Duration
	TPOT, TPOTP90 time.Duration
	// TPSP10 and TPSP90 are the rounds' spread of aggregate tokens/s.
	TPSP10, TPSP90 float64
	Rounds         int
	Requests       int
}

// loadColumns are a Load's columns of runs, the empty load for nil.
func loadColumns(l *Load) []any {
	if l == nil {
		l = &Load{}
	}
	return []any{l.Server, l.Concurrency, int64(l.TTFT), int64(l.TTFTP90), int64(l.TPOT), int64(l.TPOTP90), l.TPSP10, l.TPSP90, l.Rounds, l.Requests}
}

// Plain says whether the run is plain decoding: the baseline of every pair
// of its target, 1.00x by definition.
func (r Run) Plain() bool { return spec.IsPlain(r.Strategy) }

// InPair says whether the run belongs to the pair of target and draft
// source (as the run names it, pairs.Spec.SourceName): decoded with that
// source, or plain decoding of that target, every pair's baseline. The
// Compare screen's pair filter and the pair's state both ask it.
func (r Run) InPair(target, source string) bool {
	return r.Target == target && (r.Drafter == source || r.Plain())
}

// Speedup is the run's speedup over plain decoding as the faces show it:
// the measured one, and 1 for a finished run of plain decoding (its own
// baseline, whatever was stored); 0 where none was measured.
func (r Run) Speedup() float64 {
	if r.Plain() && r.Status == "done" {
		return 1
	}
	return r.MeasuredSpeedup
}

// Step is one stored step of a run.
type Step struct {
	Index, Prompt                    int
	Drafted, Width, Depth            int
	Accepted, Emitted, Bonus         int
	Draft, Verify, Overhead, Overlap time.Duration
	// Wait is the part of Overhead the target spent waiting for the
	// drafting beside it; Ahead the end positions that drafting prepared
	// and AheadHit whether the verdict met one (engine Step's fields).
	Wait     time.Duration
	Ahead    int
	AheadHit bool
}

// CreateRun stores a new run in state "running" and returns its id.
func (s *Store) CreateRun(ctx context.Context, r *Run) (int64, error) {
	settings, err := json.Marshal(r.Settings)
	if err != nil {
		return 0, fmt.Errorf("store: run settings: %w", err)
	}
	prompts, _ := json.Marshal(r.Prompts)
	host, _ := os.Hostname()
	args := append([]any{r.Hardware, r.Target, r.Drafter, r.Strategy, r.Plan, string(settings), string(prompts), r.PredictedSpeedup, r.PredictedAssumed, now(),
		os.Getpid(), host}, loadColumns(r.Load)...)
	res, err := s.db.ExecContext(ctx, `INSERT INTO runs(hardware_fingerprint, target, drafter, strategy, plan, settings, prompts, status, predicted_speedup, predicted_assumed, created, pid, host,
		load_server, concurrency, ttft_ns, ttft_p90_ns, tpot_ns, tpot_p90_ns, tps_p10, tps_p90, rounds, requests)
		VALUES (?,?,?,?,?,?,?, 'running', ?, ?, ?, ?, ?, ?,?,?,?,?,?,?,?,?,?)`, args...)
	if err != nil {
		return 0, s.wrap("create run", err)
	}
	r.ID, _ = res.LastInsertId()
	return r.ID, nil
}

// AppendSteps commits a batch of steps in one transaction: a crash loses at
// most the batch in flight.
func (s *Store) AppendSteps(ctx context.Context, runID int64, steps []Step) error {
	if len(steps) == 0 {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.wrap("save steps", err)
	}
	defer tx.Rollback()
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO run_steps(run_id, idx, prompt, drafted, width, depth, accepted, emitted, bonus, draft_ns, verify_ns, overhead_ns, overlap_ns,
		wait_ns, ahead, ahead_hit)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`)
	if err != nil {
		return s.wrap("save steps", err)
	}
	defer stmt.Close()
	for _, st := range steps {
		if _, err := stmt.ExecContext(ctx, runID, st.Index, st.Prompt, st.Drafted, st.Width, st.Depth, st.Accepted, st.Emitted, st.Bonus,
			int64(st.Draft), int64(st.Verify), int64(st.Overhead), int64(st.Overlap), int64(st.Wait), st.Ahead, st.AheadHit); err != nil {
			return s.wrap("save steps", err)
		}
	}
	return s.wrap0("save steps", tx.Commit())
}

// FinishRun records a run's totals and final status.
func (s *Store) FinishRun(ctx context.Context, r *Run) error {
	_, err := s.db.ExecContext(ctx, `UPDATE runs SET status = ?, tokens = ?, steps = ?, decode_ns = ?, tokens_per_s = ?, aal = ?, acceptance = ?,
		predicted_speedup = ?, measured_speedup = ?, measured_low = ?, measured_high = ?, tps_low = ?, tps_high = ? WHERE id = ?`,
		r.Status, r.Tokens, r.Steps, int64(r.Decode), r.TokensPerSecond, r.AAL, r.Acceptance, r.PredictedSpeedup, r.MeasuredSpeedup,
		r.MeasuredLow, r.MeasuredHigh, r.TPSLow, r.TPSHigh, r.ID)
	if err == nil && r.Load != nil { // a load test's figures, known once it finished
		_, err = s.db.ExecContext(ctx, `UPDATE runs SET load_server = ?, concurrency = ?, ttft_ns = ?, ttft_p90_ns = ?, tpot_ns = ?, tpot_p90_ns = ?,
			tps_p10 = ?, tps_p90 = ?, rounds = ?, requests = ? WHERE id = ?`, append(loadColumns(r.Load), r.ID)...)
	}
	return s.wrap0("finish run", err)
}

const runColumns = `id, hardware_fingerprint, target, drafter, strategy, plan, settings, prompts, status, tokens, steps, decode_ns, tokens_per_s, aal, acceptance,
	predicted_speedup, measured_speedup, created,
	load_server, concurrency, ttft_ns, ttft_p90_ns, tpot_ns, tpot_p90_ns, tps_p10, tps_p90, rounds, requests,
	measured_low, measured_high, tps_low, tps_high, predicted_assumed`

// scanRun reads one row of runColumns.
func scanRun(row interface{ Scan(...any) error }) (Run, error) {
	var r Run
	var settings, prompts, created string
	var dec int64
	var l Load
	var ttft, ttft90, tpot, tpot90 int64
	if err := row.Scan(&r.ID, &r.Hardware, &r.Target, &r.Drafter, &r.Strategy, &r.Plan, &settings, &prompts, &r.Status, &r.Tokens, &r.Steps, &dec,
		&r.TokensPerSecond, &r.AAL, &r.Acceptance, &r.PredictedSpeedup, &r.MeasuredSpeedup, &created,
		&l.Server, &l.Concurrency, &ttft, &ttft90, &tpot, &tpot90, &l.TPSP10, &l.TPSP90, &l.Rounds, &l.Requests,
		&r.MeasuredLow, &r.MeasuredHigh, &r.TPSLow, &r.TPSHigh, &r.PredictedAssumed); err != nil {
		return r, err
	}
	if l.Server != "" {
		l.TTFT, l.TTFTP90, l.TPOT, l.TPOTP90 = time.Duration(ttft), time.Duration(ttft90), time.Duration(tpot), time.Duration(tpot90)
		r.Load = &l
	}
	r.Decode = time.Duration(dec)
	var m map[string]any
	if json.Unmarshal([]byte(settings), &m) == nil {
		r.Settings = m
	}
	json.Unmarshal([]byte(prompts), &r.Prompts)
	r.Created, _ = time.Parse(time.RFC3339Nano, created)
	return r, nil
}

// Runs lists stored runs, newest first (limit <= 0: all).
func (s *Store) Runs(ctx context.Context, limit int) ([]Run, error) {
	q := "SELECT " + runColumns + " FROM runs ORDER BY id DESC"
	if limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", limit)
	}
	rows, err := s.db.QueryContext(ctx, q)
	if err != nil {
		return nil, s.wrap("list runs", err)
	}
	defer rows.Close()
	var out []Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, s.wrap("list runs", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("list runs", err)
	}
	rows.Close()
	for i := range out {
		if err := s.deadView(ctx, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// deadView shows a run still marked running whose process is gone as the
// next writing open will record it: interrupted, with its totals from its
// stored steps (a reading verb writes nothing, so it cannot recover it).
func (s *Store) deadView(ctx context.Context, r *Run) error {
	if r.Status != "running" {
		return nil
	}
	var pid int
	var host string
	if err := s.db.QueryRowContext(ctx, "SELECT pid, host FROM runs WHERE id = ?", r.ID).Scan(&pid, &host); err != nil {
		return s.wrap("read run", err)
	}
	if !processGone(host, pid) {
		return nil
	}
	var steps, tokens, accepted, drafted, decode int64
	err := s.db.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(emitted), 0), coalesce(sum(accepted), 0), coalesce(sum(drafted), 0),
		coalesce(sum(draft_ns + verify_ns + overhead_ns), 0) FROM run_steps WHERE run_id = ?`, r.ID).Scan(&steps, &tokens, &accepted, &drafted, &decode)
	if err != nil {
		return s.wrap("read run", err)
	}
	r.Status, r.Tokens, r.Steps, r.Decode = StatusInterrupted, int(tokens), int(steps), time.Duration(decode)
	r.TokensPerSecond, r.AAL, r.Acceptance = 0, 0, 0
	if decode > 0 {
		r.TokensPerSecond = float64(tokens) * 1e9 / float64(decode)
	}
	if steps > 0 {
		r.AAL = float64(tokens) / float64(steps)
	}
	if drafted > 0 {
		r.Acceptance = float64(accepted) / float64(drafted)
	}
	return nil
}

// RunSteps returns a run's stored steps in order.
func (s *Store) RunSteps(ctx context.Context, runID int64) ([]Step, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT idx, prompt, drafted, width, depth, accepted, emitted, bonus, draft_ns, verify_ns, overhead_ns, overlap_ns,
		wait_ns, ahead, ahead_hit FROM run_steps WHERE run_id = ? ORDER BY idx`, runID)
	if err != nil {
		return nil, s.wrap("read steps", err)
	}
	defer rows.Close()
	var out []Step
	for rows.Next() {
		var st Step
		var d, v, o, ov, w int64
		if err := rows.Scan(&st.Index, &st.Prompt, &st.Drafted, &st.Width, &st.Depth, &st.Accepted, &st.Emitted, &st.Bonus, &d, &v, &o, &ov,
			&w, &st.Ahead, &st.AheadHit); err != nil {
			return nil, s.wrap("read steps", err)
		}
		st.Draft, st.Verify, st.Overhead, st.Overlap = time.Duration(d), time.Duration(v), time.Duration(o), time.Duration(ov)
		st.Wait = time.Duration(w)
		out = append(out, st)
	}
	return out, s.wrap0("read steps", rows.Err())
}

// SaveCalibration stores a pair's acceptance statistics (any JSON value).
func (s *Store) SaveCalibration(ctx context.Context, targetID int64, drafter, suite string, stats any) (int64, error) {
	b, err := json.Marshal(stats)
	if err != nil {
		return 0, fmt.Errorf("store: calibration: %w", err)
	}
	res, err := s.db.ExecContext(ctx, "INSERT INTO calibrations(target_id, drafter, suite, stats, created) VALUES (?,?,?,?,?)",
		targetID, drafter, suite, string(b), now())
	if err != nil {
		return 0, s.wrap("save calibration", err)
	}
	id, _ := res.LastInsertId()
	return id, nil
}

// LatestCalibration decodes the newest calibration of target with drafter
// into stats and returns its id, or 0 when there is none.
func (s *Store) LatestCalibration(ctx context.Context, targetID int64, drafter string, stats any) (int64, error) {
	var id int64
	var b string
	err := s.db.QueryRowContext(ctx, "SELECT id, stats FROM calibrations WHERE target_id = ? AND drafter = ? ORDER BY id DESC LIMIT 1",
		targetID, drafter).Scan(&id, &b)
	if err == sql.ErrNoRows {
		return 0, nil
	}
	if err != nil {
		return 0, s.wrap("read calibration", err)
	}
	if err := json.Unmarshal([]byte(b), stats); err != nil {
		return 0, fmt.Errorf("store: calibration %d: %w", id, err)
	}
	return id, nil
}

// SavePlan stores a plan (params as JSON) tuned for target with drafter
// (the draft source as calibrations name it), with its predicted speedup.
func (s *Store) SavePlan(ctx context.Context, hardwareID, targetID int64, drafter, strategy string, params any, predicted float64) (int64, error) {
	b, err := json.Marshal(params)
	if err != nil {
		return 0, fmt.Errorf("store: plan: %w", err)
	}
	res, err := s.db.ExecContext(ctx, "INSERT INTO plans(hardware_id, target_id, drafter, strategy, params, predicted_speedup, created) VALUES (?,?,?,?,?,?,?)",
		hardwareID, targetID, drafter, strategy, string(b), predicted, now())
	if err != nil {
		return 0, s.wrap("save plan", err)
	}
	id, _ := res.LastInsertId()
	return id, nil
}

// SaveExport stores an exported config.yaml.
func (s *Store) SaveExport(ctx context.Context, planID int64, yaml string) error {
	var pid any
	if planID > 0 {
		pid = planID
	}
	_, err := s.db.ExecContext(ctx, "INSERT INTO exports(plan_id, yaml, created) VALUES (?,?,?)", pid, yaml, now())
	return s.wrap0("save export", err)
}

// SavePredictor stores a trained depth predictor for a calibration.
func (s *Store) SavePredictor(ctx context.Context, calibrationID int64, weights []byte, stats any) (int64, error) {
	b, err := json.Marshal(stats)
	if err != nil {
		return 0, fmt.Errorf("store: predictor stats: %w", err)
	}
	res, err := s.db.ExecContext(ctx, "INSERT INTO predictors(calibration_id, weights, stats, created) VALUES (?,?,?,?)", calibrationID, weights, string(b), now())
	if err != nil {
		return 0, s.wrap("save predictor", err)
	}
	id, _ := res.LastInsertId()
	return id, nil
}

// LatestPredictor returns the weights of the newest predictor trained for
// target with drafter, and its id (0 when there is none).
func (s *Store) LatestPredictor(ctx context.Context, targetID int64, drafter string) (int64, []byte, error) {
	var id int64
	var w []byte
	err := s.db.QueryRowContext(ctx, `SELECT p.id, p.weights FROM predictors p JOIN calibrations c ON p.calibration_id = c.id
		WHERE c.target_id = ? AND c.drafter = ? ORDER BY p.id DESC LIMIT 1`, targetID, drafter).Scan(&id, &w)
	if err == sql.ErrNoRows {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, s.wrap("read predictor", err)
	}
	return id, w, nil
}

// Predictor returns the weights of depth predictor id when it was trained
// for target with drafter (nil when there is no such predictor).
func (s *Store) Predictor(ctx context.Context, id, targetID int64, drafter string) ([]byte, error) {
	var w []byte
	err := s.db.QueryRowContext(ctx, `SELECT p.weights FROM predictors p JOIN calibrations c ON p.calibration_id = c.id
		WHERE p.id = ? AND c.target_id = ? AND c.drafter = ?`, id, targetID, drafter).Scan(&w)
	if err == sql.ErrNoRows {
		return nil, nil
	}
	if err != nil {
		return nil, s.wrap("read predictor", err)
	}
	return w, nil
}

// PredictorStats decodes into stats (called once for each, with its id)
// the training stats of the depth predictors trained on calibration
// calibrationID, oldest first.
func (s *Store) PredictorStats(ctx context.Context, calibrationID int64, stats func(id int64, b []byte) error) error {
	rows, err := s.db.QueryContext(ctx, "SELECT id, stats FROM predictors WHERE calibration_id = ? ORDER BY id", calibrationID)
	if err != nil {
		return s.wrap("read predictors", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var b string
		if err := rows.Scan(&id, &b); err != nil {
			return s.wrap("read predictors", err)
		}
		if err := stats(id, []byte(b)); err != nil {
			return err
		}
	}
	return s.wrap0("read predictors", rows.Err())
}

// LatestPlan decodes the newest plan stored for target with drafter into
// params and returns its id (0 when there is none). Plans stored before
// plans named their drafter count for every drafter.
func (s *Store) LatestPlan(ctx context.Context, targetID int64, drafter string, params any) (int64, error) {
	var id int64
	var b string
	err := s.db.QueryRowContext(ctx, "SELECT id, params FROM plans WHERE target_id = ? AND drafter IN (?, '') ORDER BY id DESC LIMIT 1", targetID, drafter).Scan(&id, &b)
	if err == sql.ErrNoRows {
		return 0, nil
	}
	if err != nil {
		return 0, s.wrap("read plan", err)
	}
	if err := json.Unmarshal([]byte(b), params); err != nil {
		return 0, fmt.Errorf("store: plan %d: %w", id, err)
	}
	return id, nil
}

// Run returns one stored run.
func (s *Store) Run(ctx context.Context, id int64) (*Run, error) {
	r, err := scanRun(s.db.QueryRowContext(ctx, "SELECT "+runColumns+" FROM runs WHERE id = ?", id))
	if err == sql.ErrNoRows {
		return nil, fmt.Errorf("store: no run %d in %s", id, s.Path)
	}
	if err != nil {
		return nil, s.wrap("read run", err)
	}
	return &r, s.deadView(ctx, &r)
}

// Drafter is a stored hidden-state drafter (its weights are read apart).
type Drafter struct {
	ID                int64
	TargetFingerprint string
	TargetPath        string
	Status            string // "training" (a resumable checkpoint) or "done"
	Settings, Losses  string // JSON
	Bytes             int64  // size of the weights
	Created, Updated  string
}

// HeldOut is the held-out loss of the drafter's last epoch (false before
// its first), read from Losses.
func (d Drafter) HeldOut() (float64, bool) {
	var losses []struct{ HeldOut float64 } // the epochs' records (hidden.Epoch), as stored
	if json.Unmarshal([]byte(d.Losses), &losses) != nil || len(losses) == 0 {
		return 0, false
	}
	return losses[len(losses)-1].HeldOut, true
}

// drafterChunk is the size of one stored piece of a drafter's weights:
// SQLite refuses a blob over 1e9 bytes (a checkpoint of a 7B target's
// drafter, weights plus Adam moments, is several GB), so weights are stored
// in pieces of this size in drafter_chunks.
const drafterChunk = 64 << 20

// writeChunks replaces drafter id's weights by the pieces of weights.
func (s *Store) writeChunks(ctx context.Context, tx *sql.Tx, id int64, weights []byte) error {
	chunk := s.chunk
	if chunk <= 0 {
		chunk = drafterChunk
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM drafter_chunks WHERE drafter_id = ?", id); err != nil {
		return err
	}
	for i, off := 0, 0; off < len(weights); i, off = i+1, off+chunk {
		end := min(off+chunk, len(weights))
		if _, err := tx.ExecContext(ctx, "INSERT INTO drafter_chunks(drafter_id, idx, data) VALUES (?,?,?)", id, i, weights[off:end]); err != nil {
			return err
		}
	}
	_, err := tx.ExecContext(ctx, "UPDATE drafters SET size = ?, weights = x'' WHERE id = ?", len(weights), id)
	return err
}

// SaveDrafter stores a drafter's weights (a GGUF image) and returns its id.
// Weights of any size are stored, in pieces (see drafterChunk), in one
// transaction.
func (s *Store) SaveDrafter(ctx context.Context, d *Drafter, weights []byte) (int64, error) {
	t := now()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, s.wrap("save drafter", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `INSERT INTO drafters(target_fingerprint, target_path, status, weights, settings, losses, created, updated)
		VALUES (?,?,?,x'',?,?,?,?)`, d.TargetFingerprint, d.TargetPath, d.Status, d.Settings, d.Losses, t, t)
	if err != nil {
		return 0, s.wrap("save drafter", err)
	}
	id, _ := res.LastInsertId()
	if err := s.writeChunks(ctx, tx, id, weights); err != nil {
		return 0, s.wrap("save drafter", err)
	}
	return id, s.wrap0("save drafter", tx.Commit())
}

// UpdateDrafter replaces a drafter's weights, status and loss history (a
// training checkpoint, or the finished drafter), all in one transaction:
// a crash keeps the previous checkpoint whole.
func (s *Store) UpdateDrafter(ctx context.Context, id int64, status, losses string, weights []byte) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.wrap("update drafter", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, "UPDATE drafters SET status = ?, losses = ?, updated = ? WHERE id = ?", status, losses, now(), id)
	if err != nil {
		return s.wrap("update drafter", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("store: no drafter %d", id)
	}
	if err := s.writeChunks(ctx, tx, id, weights); err != nil {
		return s.wrap("update drafter", err)
	}
	return s.wrap0("update drafter", tx.Commit())
}

// DrafterData returns the training data stored under key, or nil.
func (s *Store) DrafterData(ctx context.Context, key string) ([]byte, error) {
	var b []byte
	err := s.db.QueryRowContext(ctx, "SELECT data FROM drafter_data WHERE key = ?", key).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, s.wrap("load drafter data", err)
	}
	return b, nil
}

// SaveDrafterData stores a drafter's training data under key (replacing
// what was there).
func (s *Store) SaveDrafterData(ctx context.Context, key, fingerprint string, data []byte) error {
	if _, err := s.db.ExecContext(ctx, "INSERT OR REPLACE INTO drafter_data(key, target_fingerprint, data, created) VALUES (?,?,?,?)", key, fingerprint, data, now()); err != nil {
		return s.wrap("save drafter data", err)
	}
	return nil
}

const drafterCols = "id, target_fingerprint, target_path, status, settings, losses, CASE WHEN size >= 0 THEN size ELSE length(weights) END, created, updated"

func scanDrafter(row interface{ Scan(...any) error }, d *Drafter) error {
	return row.Scan(&d.ID, &d.TargetFingerprint, &d.TargetPath, &d.Status, &d.Settings, &d.Losses, &d.Bytes, &d.Created, &d.Updated)
}

// DrafterInfo returns a stored drafter's row without its weights, so a
// caller can check it (target, status, size) before reading them.
func (s *Store) DrafterInfo(ctx context.Context, id int64) (Drafter, error) {
	var d Drafter
	if err := scanDrafter(s.db.QueryRowContext(ctx, "SELECT "+drafterCols+" FROM drafters WHERE id = ?", id), &d); err != nil {
		if err == sql.ErrNoRows {
			return d, fmt.Errorf("store: no drafter %d (see `arborist drafters list`)", id)
		}
		return d, s.wrap("read drafter", err)
	}
	return d, nil
}

// LoadDrafter returns a stored drafter and its weights. check, when given,
// sees the row before any weights are read (a drafter for another target
// is refused without reading gigabytes).
func (s *Store) LoadDrafter(ctx context.Context, id int64, check ...func(Drafter) error) (Drafter, []byte, error) {
	d, err := s.DrafterInfo(ctx, id)
	if err != nil {
		return d, nil, err
	}
	for _, c := range check {
		if err := c(d); err != nil {
			return d, nil, err
		}
	}
	var size int64
	if err := s.db.QueryRowContext(ctx, "SELECT size FROM drafters WHERE id = ?", id).Scan(&size); err != nil {
		return d, nil, s.wrap("read drafter weights", err)
	}
	if size < 0 { // stored before schema version 3: one blob
		var w []byte
		if err := s.db.QueryRowContext(ctx, "SELECT weights FROM drafters WHERE id = ?", id).Scan(&w); err != nil {
			return d, nil, s.wrap("read drafter weights", err)
		}
		return d, w, nil
	}
	if int64(int(size)) != size {
		return d, nil, fmt.Errorf("store: drafter %d has %d bytes of weights, more than this machine can address", id, size)
	}
	w := make([]byte, 0, size)
	rows, err := s.db.QueryContext(ctx, "SELECT data FROM drafter_chunks WHERE drafter_id = ? ORDER BY idx", id)
	if err != nil {
		return d, nil, s.wrap("read drafter weights", err)
	}
	defer rows.Close()
	for rows.Next() {
		var piece sql.RawBytes
		if err := rows.Scan(&piece); err != nil {
			return d, nil, s.wrap("read drafter weights", err)
		}
		if int64(len(w)+len(piece)) > size {
			return d, nil, fmt.Errorf("store: drafter %d: stored pieces exceed its recorded size %d; the database is damaged", id, size)
		}
		w = append(w, piece...)
	}
	if err := rows.Err(); err != nil {
		return d, nil, s.wrap("read drafter weights", err)
	}
	if int64(len(w)) != size {
		return d, nil, fmt.Errorf("store: drafter %d: %d of its %d bytes of weights are stored; the database is damaged", id, len(w), size)
	}
	return d, w, nil
}

// Drafters lists the stored drafters, newest first.
func (s *Store) Drafters(ctx context.Context) ([]Drafter, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT "+drafterCols+" FROM drafters ORDER BY id DESC")
	if err != nil {
		return nil, s.wrap("list drafters", err)
	}
	defer rows.Close()
	var out []Drafter
	for rows.Next() {
		var d Drafter
		if err := scanDrafter(rows, &d); err != nil {
			return nil, s.wrap("list drafters", err)
		}
		out = append(out, d)
	}
	return out, s.wrap0("list drafters", rows.Err())
}

// DeleteDrafter removes a stored drafter.
func (s *Store) DeleteDrafter(ctx context.Context, id int64) error {
	res, err := s.db.ExecContext(ctx, "DELETE FROM drafters WHERE id = ?", id)
	if err != nil {
		return s.wrap("delete drafter", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("store: no drafter %d", id)
	}
	return nil
}

// DeviceMemory is a device's own memory on one machine, as its backend
// measured it (kernels.MemoryRates), in bytes per second.
type DeviceMemory struct {
	Backend                                string
	Description                            string
	Multiprocessors                        int
	Copy, HostToDevice, DeviceToHost, Peak float64
}

// PutDeviceMemory stores (replacing) the memory of backend's device on the
// machine hardwareID.
func (s *Store) PutDeviceMemory(ctx context.Context, hardwareID int64, m DeviceMemory) error {
	_, err := s.db.ExecContext(ctx, `INSERT OR REPLACE INTO device_memory(hardware_id, backend, description, multiprocessors, copy_bps, h2d_bps, d2h_bps, peak_bps, created)
		VALUES (?,?,?,?,?,?,?,?,?)`, hardwareID, m.Backend, m.Description, m.Multiprocessors, m.Copy, m.HostToDevice, m.DeviceToHost, m.Peak, now())
	return s.wrap0("save device memory", err)
}

// DeviceMemoryOf returns the stored memory of backend's device on the
// machine hardwareID, or ok false.
func (s *Store) DeviceMemoryOf(ctx context.Context, hardwareID int64, backend string) (m DeviceMemory, ok bool, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT backend, description, multiprocessors, copy_bps, h2d_bps, d2h_bps, peak_bps FROM device_memory
		WHERE hardware_id = ? AND backend = ?`, hardwareID, backend).Scan(&m.Backend, &m.Description, &m.Multiprocessors, &m.Copy, &m.HostToDevice, &m.DeviceToHost, &m.Peak)
	if errors.Is(err, sql.ErrNoRows) {
		return m, false, nil
	}
	return m, err == nil, s.wrap0("read device memory", err)
}

// BenchKey identifies a stored bench report: a model on a machine, on a
// backend with a KV cache type (as the profiles layer names it: "f32" or
// "f16", the backend's default spelled out).
type BenchKey struct {
	HardwareID, ModelID int64
	Backend, KV         string
}

// BenchReport is a stored bench report: its JSON as the profiles layer
// wrote it, the threads it ran on and when it was stored.
type BenchReport struct {
	Key     BenchKey
	Threads int
	Report  string
	Created time.Time
}

// maxBenchReport bounds a stored report's JSON: a report of a few depths
// and widths takes a few KiB.
const maxBenchReport = 1 << 20

// PutBenchReport stores (replacing) the newest bench report of its key.
func (s *Store) PutBenchReport(ctx context.Context, r BenchReport) error {
	if len(r.Report) > maxBenchReport {
		return fmt.Errorf("store: a bench report of %d bytes is past the %d a report takes", len(r.Report), maxBenchReport)
	}
	k := r.Key
	_, err := s.db.ExecContext(ctx, `INSERT OR REPLACE INTO bench_reports(hardware_id, model_id, backend, kv, threads, report, created)
		VALUES (?,?,?,?,?,?,?)`, k.HardwareID, k.ModelID, k.Backend, k.KV, r.Threads, r.Report, now())
	return s.wrap0("save bench report", err)
}

// BenchReportOf returns the stored bench report of k, or ok false.
func (s *Store) BenchReportOf(ctx context.Context, k BenchKey) (r BenchReport, ok bool, err error) {
	var created string
	err = s.db.QueryRowContext(ctx, `SELECT threads, report, created FROM bench_reports
		WHERE hardware_id = ? AND model_id = ? AND backend = ? AND kv = ?`, k.HardwareID, k.ModelID, k.Backend, k.KV).Scan(&r.Threads, &r.Report, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return r, false, nil
	}
	if err != nil {
		return r, false, s.wrap0("read bench report", err)
	}
	r.Key = k
	r.Created, _ = time.Parse(time.RFC3339Nano, created)
	return r, true, nil
}
