package drafter

import (
	"context"
	"fmt"

	"arborist/engine/model"
	"arborist/engine/sample"
)

// Model drafts with a transformer: a separate draft model, or the target
// itself cut to its first Layers blocks (layer-skip self-drafting). Its KV
// cache holds the committed tokens, then the draft tokens of the current
// step, each found again by (parent slot, token), so repeated and pruned
// requests reuse work and the accepted path survives Commit.
type Model struct {
	M      *model.Model
	Layers int // 0 = all blocks
	name   string
	params sample.Params // what dist transforms logits by (SetSample)
	dist   func(logits, dst []float32)

	limit     int          // the most positions its cache may hold
	cache     *model.Cache // sized by the run (Reserve), not by the file's context length
	committed []int
	inCache   int               // committed tokens whose K/V are cached
	kept      int               // of them, those the last Begin kept from the sequence before
	slots     map[[2]int]int    // (parent slot, token) -> slot of a draft token
	par       map[int]int       // draft slot -> parent slot
	tok       map[int]int       // draft slot -> its token
	out       map[int][]float32 // slot -> distribution after it
	res       model.Result
}

// NewModel makes a model drafter with capacity for ctx positions. It
// proposes from the plain softmax until it is told a run's sampling
// (SetSample; the engine does at the start of every generation).
func NewModel(m *model.Model, layers, ctx int, name string) *Model {
	d := &Model{M: m, Layers: layers, name: name, limit: ctx}
	d.SetSample(sample.Params{})
	return d
}

// SetSample makes the drafter propose from its distribution after p's
// transforms (Sampled); it takes effect from the next Begin.
func (d *Model) SetSample(p sample.Params) { d.params, d.dist = p, Dist(p) }

// Fork makes another drafter of the same model, blocks, capacity and
// sampling, with a cache and a sequence of its own (Forker).
func (d *Model) Fork() (Source, error) {
	f := NewModel(d.M, d.Layers, d.limit, d.name)
	f.SetSample(d.params)
	return f, nil
}

// Free releases the drafter's cache; a later Reserve or Begin makes
// another.
func (d *Model) Free() {
	if d.cache != nil {
		d.cache.Free()
		d.cache = nil
	}
	d.inCache = 0
}

// defaultRoom is what Begin reserves beyond the committed tokens when the
// caller reserved nothing: a short generation and its drafts.
const defaultRoom = 2048

// Reserve sizes the drafter's cache for a run of n positions (the prompt,
// the tokens to generate and a tree), at most the capacity it was made
// with: a draft model declaring millions of positions costs only what the
// run needs. A larger reservation replaces a smaller cache; Begin follows.
func (d *Model) Reserve(n int) error {
	n = min(n, d.limit)
	if d.cache != nil && d.cache.Cap() >= n {
		return nil
	}
	if err := d.M.CheckCache(n); err != nil {
		return err
	}
	if d.cache != nil {
		d.cache.Free()
	}
	d.cache = d.M.NewCache(n)
	d.inCache = 0
	return nil
}

// Name describes the source.
func (d *Model) Name() string { return d.name }

// Vocab is the drafter's vocabulary size.
func (d *Model) Vocab() int { return d.M.Vocab }

// Begin resets to a new committed sequence. The cached slots of the
// longest prefix it shares with the sequence before are kept (a slot's
// keys and values depend on nothing but the tokens up to it), so
// generations after one long prompt compute it once.
func (d *Model) Begin(ctx context.Context, committed []int) error {
	b, err := d.begin(committed)
	if err != nil || len(b.Tokens) == 0 {
		return err
	}
	return d.read(ctx, b)
}

// read runs b, the pass begin left, alone: the committed tokens but the
// root then cached.
func (d *Model) read(ctx context.Context, b model.Batch) error {
	if err := d.M.Forward(ctx, d.cache, b, &d.res); err != nil {
		return fmt.Errorf("drafter %s: %w", d.name, err)
	}
	d.inCache = len(d.committed) - 1
	return nil
}

// begin is Begin up to its pass: the cache kept and sized, the sequence
// set, and the batch of the committed tokens that still need their pass
// (none: every one but the root is cached). The committed tokens but the
// root are cached at Begin, with the target's prefill, rather than in the
// first Expand: a prompt is prefill, not a step's drafting (after a
// prompt of 1,830 tokens on the bench pair the first step's drafting took
// 92 ms, a fifth of a 64-token generation's decode time, and every step
// of a long-prompt validation measured that much above its price); the
// root's pass stays the first Expand's, whose distribution it gives.
func (d *Model) begin(committed []int) (model.Batch, error) {
	if len(committed) == 0 {
		return model.Batch{}, fmt.Errorf("drafter: empty sequence")
	}
	if d.cache == nil || d.cache.Cap() <= len(committed) {
		if err := d.Reserve(len(committed) + defaultRoom); err != nil {
			return model.Batch{}, err
		}
	}
	keep := 0 // the root's slot is computed again: its distribution is the step's first
	for keep < d.inCache && keep < len(committed)-1 && d.committed[keep] == committed[keep] {
		keep++
	}
	d.committed = append(d.committed[:0], committed...)
	d.cache.Truncate(keep)
	d.inCache, d.kept = keep, keep
	d.resetStep()
	n := len(committed) - 1
	if keep >= n {
		return model.Batch{}, nil
	}
	return model.Batch{Tokens: committed[keep:n], Want: []int{n - keep - 1}, Layers: d.Layers}, nil
}

// BeginAll begins each drafter ds[i] on seqs[i] as Begin does, their
// prompts' passes run as passes of several sequences (pass, of the
// drafters' one model; every drafter runs the same blocks), at most
// model.MaxRows rows a pass: a server whose pass finished several
// requests' prompts reads them into their draft models in one pass, where
// one Begin after another held every running request's next step (seven
// prompts of the bench pair: 6.6-8.1 ms). A row's result does not depend
// on the pass it is in, so each drafter ends as its own Begin leaves it.
// On an error the drafters not yet begun are left to their own Begin.
func BeginAll(ctx context.Context, pass *model.Pass, ds []*Model, seqs [][]int) error {
	if len(ds) != len(seqs) {
		return fmt.Errorf("drafter: %d drafters for %d sequences", len(ds), len(seqs))
	}
	var batch []model.Seq
	var who []*Model
	rows := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := pass.Forward(ctx, batch); err != nil {
			for _, d := range who {
				d.inCache = d.cache.Len() // as the failed pass left the cache: Begin takes it from there
			}
			return fmt.Errorf("drafter %s: %w", who[0].name, err)
		}
		for _, d := range who {
			d.inCache = len(d.committed) - 1
		}
		batch, who, rows = batch[:0], who[:0], 0
		return nil
	}
	for i, d := range ds {
		if d.M != ds[0].M || d.Layers != ds[0].Layers {
			return fmt.Errorf("drafter: BeginAll over drafters of different models or blocks (%s, %s)", ds[0].name, d.name)
		}
		b, err := d.begin(seqs[i])
		if err != nil {
			return err
		}
		if len(b.Tokens) == 0 {
			continue
		}
		if rows+len(b.Tokens) > model.MaxRows {
			if err := flush(); err != nil {
				return err
			}
		}
		if len(b.Tokens) > model.MaxRows { // a prompt longer than a pass: alone, as Begin runs it
			if err := d.read(ctx, b); err != nil {
				return err
			}
			continue
		}
		batch = append(batch, model.Seq{Cache: d.cache, Batch: b, Result: &d.res})
		who = append(who, d)
		rows += len(b.Tokens)
	}
	return flush()
}

func (d *Model) resetStep() {
	d.slots = map[[2]int]int{}
	d.par = map[int]int{}
	d.tok = map[int]int{}
	d.out = map[int][]float32{}
}

// rootSlot is the cache slot of the root (the last committed token).
func (d *Model) rootSlot() int { return len(d.committed) - 1 }

// Expand computes the distributions after each path in one forward pass:
// committed tokens not yet cached come first (causal), then every path token
// not yet cached, each attending to the committed prefix and its ancestors.
func (d *Model) Expand(ctx context.Context, paths [][]int, dst [][]float32) error {
	base := d.cache.Len()
	nc := len(d.committed)
	var toks, pos []int
	for i := d.inCache; i < nc; i++ {
		toks = append(toks, d.committed[i])
		pos = append(pos, i)
	}
	pending := len(toks)
	need := make([]int, len(paths)) // slot whose output is wanted
	newSlots := map[[2]int]int{}
	newPar := map[int]int{}
	newTok := map[int]int{}
	for pi, p := range paths {
		slot := d.rootSlot()
		for depth, tok := range p {
			key := [2]int{slot, tok}
			s, ok := d.slots[key]
			if !ok {
				s, ok = newSlots[key]
			}
			if !ok {
				s = base + len(toks)
				newSlots[key], newPar[s], newTok[s] = s, slot, tok
				toks = append(toks, tok)
				pos = append(pos, nc+depth)
			}
			slot = s
		}
		need[pi] = slot
	}
	if len(toks) > 0 {
		if base+len(toks) > d.cache.Cap() {
			return fmt.Errorf("drafter %s: context full (%d of %d slots)", d.name, base+len(toks), d.cache.Cap())
		}
		total := base + len(toks)
		mask := make([]bool, len(toks)*total)
		var want []int
		for r := range toks {
			row := mask[r*total : (r+1)*total]
			if r < pending {
				for j := 0; j <= base+r; j++ {
					row[j] = true
				}
				if r == pending-1 {
					want = append(want, r) // the root
				}
				continue
			}
			want = append(want, r)
			for j := 0; j < nc; j++ {
				row[j] = true
			}
			for s := base + r; s >= nc; {
				row[s] = true
				p, ok := newPar[s]
				if !ok {
					p = d.par[s]
				}
				s = p
			}
		}
		if err := d.M.Forward(ctx, d.cache, model.Batch{Tokens: toks, Pos: pos, Mask: mask, Want: want, Layers: d.Layers}, &d.res); err != nil {
			return fmt.Errorf("drafter %s: %w", d.name, err)
		}
		d.inCache = nc
		for k, s := range newSlots {
			d.slots[k] = s
		}
		for s, p := range newPar {
			d.par[s], d.tok[s] = p, newTok[s]
		}
		v := d.M.Vocab
		for i, r := range want {
			q := make([]float32, v)
			d.dist(d.res.Logits[i*v:(i+1)*v], q)
			d.out[base+r] = q
		}
	}
	for i, s := range need {
		q, ok := d.out[s]
		if !ok {
			return fmt.Errorf("drafter %s: no output for slot %d", d.name, s)
		}
		copy(dst[i], q)
	}
	return nil
}

// Commit keeps the committed prefix plus the cached slots of the accepted
// path. When the bonus token was drafted too (ahead-of-time drafting guessed
// right), its slot and every draft slot below it are kept as well, so the
// next step starts from work already done; all other draft slots are dropped.
func (d *Model) Commit(accepted []int, bonus int) error {
	nc := len(d.committed)
	keep := make([]int, 0, nc+len(accepted)+1)
	for i := 0; i < d.inCache; i++ {
		keep = append(keep, i)
	}
	newCached := d.inCache
	if d.inCache == nc {
		slot, ok := d.rootSlot(), true
		for _, tok := range accepted {
			s, found := d.slots[[2]int{slot, tok}]
			if !found {
				ok = false
				break
			}
			keep = append(keep, s)
			slot = s
		}
		newCached = len(keep)
		if bs, found := d.slots[[2]int{slot, bonus}]; ok && found {
			keep = append(keep, bs)
			newCached++
			// descendants of the bonus slot, parents before children
			below := map[int]bool{bs: true}
			var desc []int
			for s := bs + 1; s < d.cache.Len(); s++ {
				if p, ok := d.par[s]; ok && below[p] {
					below[s] = true
					desc = append(desc, s)
				}
			}
			keep = append(keep, desc...)
		}
	}
	newIdx := make(map[int]int, len(keep))
	for i, s := range keep {
		newIdx[s] = i
	}
	if err := d.cache.Compact(keep); err != nil {
		return fmt.Errorf("drafter %s: %w", d.name, err)
	}
	slots, par, out, tok := map[[2]int]int{}, map[int]int{}, map[int][]float32{}, map[int]int{}
	for _, s := range keep[newCached:] {
		ns, np := newIdx[s], newIdx[d.par[s]]
		slots[[2]int{np, d.tok[s]}] = ns
		par[ns], tok[ns] = np, d.tok[s]
	}
	for _, s := range keep[max(0, newCached-1):] {
		if q, ok := d.out[s]; ok {
			out[newIdx[s]] = q
		}
	}
	d.inCache = newCached
	d.committed = append(append(d.committed, accepted...), bonus)
	d.slots, d.par, d.out, d.tok = slots, par, out, tok
	return nil
}

// Model returns the transformer the source drafts with.
func (d *Model) Model() *model.Model { return d.M }
