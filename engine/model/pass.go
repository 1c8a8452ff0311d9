package model

import (
	"context"
	"fmt"
)

// Seq is one sequence of a pass of several (Pass.Forward): its own cache,
// its batch (token ids or embeddings, positions, a mask over its own cache
// and rows, the rows it wants) and where its outputs go.
type Seq struct {
	Cache  *Cache
	Batch  Batch
	Result *Result
}

// Pass runs passes of several sequences, each with its own cache, as one:
// their rows are concatenated so that every weight product runs once over
// all of them (a pass of 8 rows costs far less than 8 passes of one),
// while RoPE rotates each row by its own position and each sequence's keys
// and values are stored, and its attention computed, on its own cache with
// its own past and mask. A row's result is what it would be in a pass of
// its sequence alone, to the bit: the backend computes each row of a
// product, a norm or a rotation the same whatever else the pass holds (the
// device suites check it), and attention only ever sees its own sequence.
//
// A Pass owns the scratch of its passes (the activations of its largest
// pass, on the device), so the caches it runs keep none of their own: a
// server holding many sequences pays for one pass's activations, not one
// per sequence. A Pass is used from one goroutine at a time; Free releases
// its scratch.
type Pass struct {
	m    *Model
	s    scratch
	rows []seqRows
	// fault, for tests only, makes every sequence's attention read the
	// first sequence's queries: the mistake the identity tests must catch.
	fault bool
}

// NewPass makes the scratch owner of passes of several sequences on m.
func (m *Model) NewPass() *Pass { return &Pass{m: m} }

// Forward runs every sequence's batch in one pass, appending each one's
// keys and values to its own cache and filling its Result as Forward
// would have for it alone. The sequences' caches must be distinct caches
// of this model, and every batch must run the same blocks (Batch.Layers);
// their rows together are at most MaxRows (a caller splits long prompts
// into chunks, as a server does to keep one request's prefill from
// stalling the others). Every batch is checked before anything runs: an
// error names the sequence and leaves every cache as it was.
func (p *Pass) Forward(ctx context.Context, seqs []Seq) error {
	m := p.m
	if len(seqs) == 0 {
		return fmt.Errorf("model: a pass of no sequences")
	}
	p.rows = p.rows[:0]
	total, layers := 0, seqs[0].Batch.Layers
	for i := range seqs {
		sq := &seqs[i]
		c := sq.Cache
		switch {
		case c == nil || sq.Result == nil:
			return fmt.Errorf("model: sequence %d of the pass has no cache or no result", i)
		case c.cfg != &m.Config:
			return fmt.Errorf("model: sequence %d of the pass has a cache of another model", i)
		case sq.Batch.Layers != layers:
			return fmt.Errorf("model: sequence %d of the pass runs %d blocks, sequence 0 %d: a pass runs the same blocks for every row", i, sq.Batch.Layers, layers)
		}
		for j := range i {
			if seqs[j].Cache == c {
				return fmt.Errorf("model: sequences %d and %d of the pass share a cache", j, i)
			}
		}
		n, err := m.checkBatch(c, &sq.Batch)
		if err != nil {
			return fmt.Errorf("sequence %d of the pass: %w", i, err)
		}
		total += n
		p.rows = append(p.rows, seqRows{c: c, b: sq.Batch, res: sq.Result, n: n, rows: wantRows(&sq.Batch, n)})
	}
	if limit := m.rowLimit(); total > limit {
		return fmt.Errorf("model: a pass of %d rows is more than the %d one pass takes; run long prompts in chunks", total, limit)
	}
	for i := range p.rows {
		if err := p.rows[i].c.alloc(); err != nil {
			return fmt.Errorf("sequence %d of the pass: %w", i, err)
		}
	}
	err := m.pass(ctx, &p.s, p.rows, m.layersFor(layers), p.fault)
	clear(p.rows) // drop the references to the batches and results
	return err
}

// Free releases the pass's scratch; the Pass may be used again after.
func (p *Pass) Free() { p.s.free() }
