// Package workbench is Arborist's workflow core: every workflow the two
// faces offer (the GUI in app/, the headless verbs in app/cli) exists here
// once: open a pair, profile, calibrate, train a depth predictor, tune,
// run a prompt suite (with baseline and greedy identity check), export a
// plan, replay a config, and the model facts the faces show. Each workflow
// takes a context.Context and reports progress through callbacks; the faces
// only collect inputs and present results.
//
// Why a package of its own under profiles rather than profiles itself:
// profiles holds the building blocks (latency curves, the speedup model,
// calibration, the store's records), which the workflows combine with the
// database and a backend chosen by name. Keeping the combinations here
// leaves the data flow one-way: app, app/cli -> profiles/workbench ->
// profiles -> engine -> kernels, and the faces never import kernels/...,
// engine/gguf, engine/model or engine/tokenizer (app's TestImports
// enforces it).
//
// Where a newcomer adds things:
//   - a strategy: one file engine/spec/strategy_NAME.go (drafting, checks,
//     cost model, search candidates); flags, config.yaml, the GUI's choices
//     and tune find it by name.
//   - a backend: one entry in profiles/backends.go; --backend, PairSpec.Backend
//     and the core open it by name.
//   - a workflow: a method of Bench here, then a verb in app/cli and a
//     button or screen in app.
package workbench

import (
	"context"
	"fmt"
	"sync"

	"arborist/profiles"
	"arborist/profiles/measure"
	"arborist/profiles/pairs"
	"arborist/profiles/store"
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

// Store is the database the workflows read and write.
func (b *Bench) Store(ctx context.Context) (*store.Store, error) { return b.db(ctx) }

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
func (p Progress) curves() func(kind string, done, total int, pt measure.Point) {
	if p == nil {
		return nil
	}
	return func(kind string, done, total int, pt measure.Point) {
		p.send(kind+" curve", done, total, fmt.Sprintf("W=%d: %v", pt.W, pt.Median))
	}
}

// PairSpec names a target, a draft source and the backend and threads.
type PairSpec = pairs.Spec

// openPair opens the pair, looking hidden-state drafter ids up in this
// database.
func (b *Bench) openPair(spec PairSpec, concurrent bool) (*pairs.Pair, error) {
	spec.DB = b.path
	return pairs.Open(spec, zeroSample, concurrent)
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

// ReadPrompts reads a prompt suite: one prompt per line.
func ReadPrompts(path string) ([]string, error) { return profiles.ReadPrompts(path) }
