package profiles

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"arborist/profiles/hardware"
	"arborist/profiles/latency"
	"arborist/profiles/pairs"
	"arborist/profiles/store"
)

// ErrNotCalibrated marks a workflow that needs the pair's stored
// calibration where the database has none; ErrNotTuned, one that needs a
// tuned plan (errors.Is).
var (
	ErrNotCalibrated = errors.New("calibrate first")
	ErrNotTuned      = errors.New("tune first")
)

// Bench is the core over one database. The database is opened when a
// workflow first needs it, so a run that stores nothing works without one
// and a broken pair is reported before a database problem.
type Bench struct {
	path string
	mu   sync.Mutex
	st   *store.Store
}

// Open returns the core over the database at path (created if needed, on
// first use).
func Open(ctx context.Context, path string) (*Bench, error) {
	if path == "" {
		return nil, fmt.Errorf("workbench: no database path")
	}
	return &Bench{path: path}, nil
}

// db opens the database on first use.
func (b *Bench) db(ctx context.Context) (*store.Store, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.st == nil {
		st, err := store.Open(ctx, b.path)
		if err != nil {
			return nil, err
		}
		b.st = st
	}
	return b.st, nil
}

// Path is the database file.
func (b *Bench) Path() string { return b.path }

// Close releases the database.
func (b *Bench) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.st == nil {
		return nil
	}
	err := b.st.Close()
	b.st = nil
	return err
}

// Event is a workflow's progress: a stage, how far it is (Done of Total)
// and a short detail, e.g. {"verify curve", 3, 15, "W=8: 1.2ms"}.
type Event struct {
	Stage       string
	Done, Total int
	Detail      string
}

// Progress receives events; nil ignores them.
type Progress func(Event)

func (p Progress) send(stage string, done, total int, detail string) {
	if p != nil {
		p(Event{Stage: stage, Done: done, Total: total, Detail: detail})
	}
}

// curves adapts Progress to the curve measurements' callback.
func (p Progress) curves() func(kind string, done, total int, pt latency.Point) {
	if p == nil {
		return nil
	}
	// a curve starts when the event before its first round was heard
	// (the previous curve's last round, or the adapter's making): the
	// rounds' pace since then prices what is left of it
	start, last := time.Now(), time.Now()
	return func(kind string, done, total int, pt latency.Point) {
		if done <= 1 {
			start = last
		}
		last = time.Now()
		p.send(kind+" curve", done, total, roundDetail(pt, start, done, total))
	}
}

// PairSpec names a target, a draft source and the backend and threads.
type PairSpec = pairs.Spec

// openPair opens the pair, looking hidden-state drafter ids up in this
// database. Its draft source is told each generation's sampling by the
// engine (drafter.SetSample), so a run, a server, a calibration and a
// validation of one pair at one sampling draft alike.
func (b *Bench) openPair(spec PairSpec, concurrent bool) (*pairs.Pair, error) {
	spec.DB = b.path
	return pairs.Open(spec, concurrent)
}

// encodeWithRoom encodes texts and refuses, before anything runs, a prompt
// whose tokens and the n to generate after it do not fit the target's
// context (a billion tokens a prompt ran until every context was full).
func encodeWithRoom(pair *pairs.Pair, texts []string, n int) ([][]int, error) {
	ids := encode(pair, texts)
	for i, p := range ids {
		if err := hardware.CheckRoom(len(p), n, pair.Target.CtxLen); err != nil {
			return nil, fmt.Errorf("prompt %d: %w", i+1, err)
		}
	}
	return ids, nil
}

// encode reads a prompt suite file (or takes the given texts) and encodes
// it for the pair's target.
func encode(pair *pairs.Pair, texts []string) [][]int {
	ids := make([][]int, len(texts))
	for i, t := range texts {
		ids[i] = pair.Target.Tok.Encode(t, true, false)
	}
	return ids
}
