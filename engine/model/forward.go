package model

import (
	"context"
	"fmt"
	"math"

	"arborist/engine/sample"
	"arborist/kernels"
	"arborist/kernels/quant"
)

// Cache is one sequence's KV cache on the model's device, plus the host
// bookkeeping the model code needs (each slot's position, the used count)
// and the pass's scratch tensors (so decoding allocates nothing once they
// have grown).
//
// Slots hold keys and values after RoPE, so they keep their positions when
// compacted; each slot's position is remembered too, because a
// sliding-window layer decides visibility by position, not by slot.
type Cache struct {
	cfg *Config
	dev kernels.Device
	typ quant.Type // the KV cache's element type (F32, F16)
	kv  kernels.KV // Layers x cap x KVDim keys and values; allocated by the first pass
	pos []int32    // per slot: the position its key was rotated to
	n   int        // slots in use
	cap int
	s   scratch
	// budget, when the cache was admitted by one (CacheBudget.NewCache),
	// gets budgetBytes back when the cache is freed
	budget      *CacheBudget
	budgetBytes uint64
}

// NewCache makes an empty cache for up to ctx positions, of the model's
// KVType. Its device memory is allocated by the first Forward (which
// reports a failure), so making a cache cannot fail.
func (m *Model) NewCache(ctx int) *Cache {
	return &Cache{cfg: &m.Config, dev: m.Backend, typ: m.KVType, cap: ctx, pos: make([]int32, ctx)}
}

// alloc allocates the device KV cache on first use.
func (c *Cache) alloc() error {
	if c.kv != nil {
		return nil
	}
	kv, err := c.dev.NewKV(c.cfg.Layers, c.cap, c.cfg.KVDim(), c.typ)
	if err != nil {
		return fmt.Errorf("model: %w", err)
	}
	c.kv = kv
	return nil
}

// Len is the number of slots in use.
func (c *Cache) Len() int { return c.n }

// Cap is the number of slots available.
func (c *Cache) Cap() int { return c.cap }

// Type is the KV cache's element type (quant.F32 or quant.F16).
func (c *Cache) Type() quant.Type { return c.typ }

// Truncate drops every slot from n on.
func (c *Cache) Truncate(n int) {
	if n < c.n && n >= 0 {
		c.n = n
	}
}

// Fill marks the first n slots as used without computing them (their keys
// and values are whatever the buffers hold): for measuring bookkeeping
// costs on a cache of a given length.
func (c *Cache) Fill(n int) error {
	if n < 0 || n > c.cap {
		return fmt.Errorf("model: fill %d slots of a cache of %d", n, c.cap)
	}
	for i := range c.pos[:n] {
		c.pos[i] = int32(i)
	}
	c.n = n
	return nil
}

// Compact keeps only the listed slots, in the listed order, as slots
// 0..len(keep)-1. It is how a rejected draft branch leaves the cache.
func (c *Cache) Compact(keep []int) error {
	for _, s := range keep {
		if s < 0 || s >= c.n {
			return fmt.Errorf("model: compact: slot %d out of range [0, %d)", s, c.n)
		}
	}
	if c.kv != nil {
		if err := c.dev.Compact(c.kv, keep, c.n); err != nil {
			return fmt.Errorf("model: %w", err)
		}
	}
	// positions move as the slots do; keep may reorder, so read a copy
	old := c.s.posTmp[:0]
	old = append(old, c.pos[:c.n]...)
	c.s.posTmp = old
	for i, s := range keep {
		c.pos[i] = old[s]
	}
	c.n = len(keep)
	return nil
}

// CopyPrefix makes a new cache of the same model, capacity and type holding
// this cache's first n slots: a shared prompt prefix for a second sequence.
func (c *Cache) CopyPrefix(n int) (*Cache, error) { return c.CopyPrefixCap(n, c.cap) }

// CopyPrefixCap is CopyPrefix into a cache of capacity slots (at least n):
// a prompt prefilled once into a cache of just its size is copied into
// each generation's cache of that generation's own size.
func (c *Cache) CopyPrefixCap(n, capacity int) (*Cache, error) {
	if n < 0 || n > c.n {
		return nil, fmt.Errorf("model: copy %d slots of a cache holding %d", n, c.n)
	}
	if capacity < n {
		return nil, fmt.Errorf("model: copy %d slots into a cache of %d", n, capacity)
	}
	d := &Cache{cfg: c.cfg, dev: c.dev, typ: c.typ, cap: capacity, pos: make([]int32, capacity)}
	if err := d.Load(c, n); err != nil {
		return nil, err
	}
	return d, nil
}

// Load makes the cache hold src's first n slots (another cache of the
// same model and type), whatever it held: a prompt prefilled once,
// copied into a cache a budget admitted.
func (c *Cache) Load(src *Cache, n int) error {
	switch {
	case src.cfg != c.cfg || src.dev != c.dev || src.typ != c.typ:
		return fmt.Errorf("model: load a cache of another model, device or type")
	case n < 0 || n > src.n || n > c.cap:
		return fmt.Errorf("model: load %d slots of a cache holding %d into one of %d", n, src.n, c.cap)
	}
	if n > 0 {
		if err := c.alloc(); err != nil {
			return err
		}
		if err := c.dev.CopyKV(c.kv, src.kv, n); err != nil {
			return fmt.Errorf("model: %w", err)
		}
	}
	copy(c.pos, src.pos[:n])
	c.n = n
	return nil
}

// Free releases the cache's device memory (a large host cache's mapping
// is unmapped at once, a small one left to the garbage collector), or,
// for a cache a budget admitted, gives its bytes back to the budget,
// which keeps the memory for the next cache that fits in it; the cache
// must not be used afterwards.
func (c *Cache) Free() {
	c.s.free()
	if b := c.budget; b != nil {
		c.budget = nil
		if c.kv != nil {
			b.keep(c) // its memory kept for the next cache that fits
			c.kv = nil
			return
		}
		b.release(c.budgetBytes)
		return
	}
	if c.kv != nil {
		c.kv.Free()
		c.kv = nil
	}
}

// Output says what Forward returns for the wanted rows.
type Output int

const (
	// OutLogits returns Result.Logits (the default).
	OutLogits Output = iota
	// OutArgmax returns only Result.Argmax, each wanted row's most likely
	// token, so a device backend ships ints home instead of vocabulary
	// rows.
	OutArgmax
	// OutProbs returns Result.Probs: each wanted row's distribution after
	// Batch.Sample's transforms (temperature, top-k, top-p, min-p), the
	// rows sampled verification reads. The transforms run on the host
	// after the logits come home (the Device contract has no sort for
	// top-k and top-p yet), so for now this saves the caller the work, not
	// the transfer.
	OutProbs
)

// Batch is one forward pass's input.
type Batch struct {
	// Tokens are appended to the cache as slots Len()..Len()+len(Tokens)-1.
	Tokens []int
	// Embeds, when not nil, replaces the token embeddings: rows of Dim
	// values fed straight to the first block (the hidden-state drafter feeds
	// the target's hidden states this way). Tokens must then be nil.
	Embeds []float32
	// Pos are the RoPE positions of the tokens; nil means Len()+i.
	Pos []int
	// Mask, when not nil, says which slots each row attends to: row i may
	// attend to slot j (cached slots 0..past-1, then the batch's own rows
	// past..past+n-1) when Mask[i*(past+n)+j]. nil means causal: every
	// cached slot and the batch rows up to and including i.
	Mask []bool
	// Want lists the rows whose outputs are returned; nil means every row.
	Want []int
	// Layers, when positive, runs only the first Layers blocks before the
	// final norm and output head: the layer-skip self-drafter.
	Layers int
	// Output chooses logits (the default), their argmax, or
	// probabilities after Sample's transforms.
	Output Output
	// Sample is the sampling rule whose distribution OutProbs returns.
	Sample sample.Params
	// Hidden asks for Result.Hidden, the wanted rows' last hidden states
	// (left empty otherwise, so a device backend does not copy them home).
	Hidden bool
}

// Result holds a forward pass's outputs for the wanted rows, in Want order.
type Result struct {
	Logits []float32 // len(Want) * Vocab, with OutLogits
	Argmax []int     // len(Want), with OutArgmax
	Probs  []float32 // len(Want) * Vocab, with OutProbs
	Hidden []float32 // len(Want) * Dim when Batch.Hidden: the last block's output, before the final norm
}

// scratch holds the pass's activations on the device, sized for rows batch
// rows (and outRows wanted rows), and the host tables it uploads.
type scratch struct {
	rows, outRows int
	x             kernels.Tensor // [rows x Dim] the residual stream
	xn            kernels.Tensor // [rows x Dim] its normalised copy
	q             kernels.Tensor // [rows x Heads*HeadDim] queries
	k, v          kernels.Tensor // [rows x KVHeads*HeadDim] the batch's keys and values
	att           kernels.Tensor // [rows x Heads*HeadDim] attention output
	o             kernels.Tensor // [rows x Dim] a block's output projection
	g, u          kernels.Tensor // [rows x FFN] gate and up projections
	wx            kernels.Tensor // [outRows x Dim] the wanted rows' hidden states
	logits        kernels.Tensor // [outRows x Vocab]

	cos, sin   []float32              // host: RoPE rotation per row and pair, [rows x RopeDim/2]
	cosL, sinL []float32              // the same for sliding layers with their own base (gemma3)
	pos        []int                  // host: default positions
	swa        []bool                 // host: the sliding-window layers' mask
	posTmp     []int32                // host: Compact's copy of the positions
	want       []int                  // host: a pass of several sequences' wanted rows
	attn       []kernels.SeqAttention // a layer's attention, a part each sequence (kernels.AttentionAll)

	// one is the sequence of a single-sequence pass (Forward): a field,
	// so a decode step describes itself without allocating
	one [1]seqRows

	// outs and mats hold the products that share an input (Q, K, V;
	// gate, up) for kernels.MatMulAll: fields, so a decode step builds
	// its slices without allocating
	outs [3]kernels.Tensor
	mats [3]kernels.Matrix
}

// grow makes room for n batch rows and out wanted rows.
func (s *scratch) grow(dev kernels.Device, c *Config, vocab, n, out int) error {
	var err error
	alloc := func(t *kernels.Tensor, size int) {
		if err != nil {
			return
		}
		freeTensor(*t)
		*t, err = dev.NewTensor(size)
	}
	if n > s.rows {
		for _, b := range []struct {
			t     *kernels.Tensor
			width int
		}{{&s.x, c.Dim}, {&s.xn, c.Dim}, {&s.q, c.QDim()}, {&s.k, c.KVDim()}, {&s.v, c.KVDim()},
			{&s.att, c.QDim()}, {&s.o, c.Dim}, {&s.g, c.FFN}, {&s.u, c.FFN}} {
			alloc(b.t, n*b.width)
		}
		if err != nil {
			s.rows = 0
			return fmt.Errorf("model: %w", err)
		}
		s.rows = n
	}
	if out > s.outRows {
		alloc(&s.wx, out*c.Dim)
		alloc(&s.logits, out*vocab)
		if err != nil {
			s.outRows = 0
			return fmt.Errorf("model: %w", err)
		}
		s.outRows = out
	}
	return nil
}

// free releases the scratch tensors.
func (s *scratch) free() {
	for _, t := range []kernels.Tensor{s.x, s.xn, s.q, s.k, s.v, s.att, s.o, s.g, s.u, s.wx, s.logits} {
		freeTensor(t)
	}
	*s = scratch{}
}

// freeTensor frees a tensor of a backend whose tensors hold memory of their
// own (a device's); host tensors are left to the garbage collector.
func freeTensor(t kernels.Tensor) {
	if f, ok := t.(interface{ Free() }); ok && t != nil {
		f.Free()
	}
}

// Forward runs a batch through the model, appending its keys and values to
// the cache, and fills res with the wanted rows' logits (or argmax) and,
// when asked, hidden states. Everything between the token ids and those
// rows stays on the device: the host sends ids, positions, the RoPE tables
// and masks.
func (m *Model) Forward(ctx context.Context, c *Cache, b Batch, res *Result) error {
	n, err := m.checkBatch(c, &b)
	if err != nil {
		return err
	}
	if limit := m.rowLimit(); n > limit && b.Mask == nil {
		return m.forwardChunks(ctx, c, b, n, limit, res)
	}
	if err := c.alloc(); err != nil {
		return err
	}
	s := &c.s
	s.one[0] = seqRows{c: c, b: b, res: res, n: n, rows: wantRows(&b, n)}
	err = m.pass(ctx, s, s.one[:], m.layersFor(b.Layers), false)
	s.one[0] = seqRows{}
	return err
}

// checkBatch checks a batch against the cache it extends and returns its
// row count.
func (m *Model) checkBatch(c *Cache, b *Batch) (int, error) {
	n := len(b.Tokens)
	if b.Embeds != nil {
		if n != 0 || len(b.Embeds)%m.Dim != 0 {
			return 0, fmt.Errorf("model: a batch takes tokens or whole rows of %d embedding values, not both (%d tokens, %d values)", m.Dim, n, len(b.Embeds))
		}
		n = len(b.Embeds) / m.Dim
	}
	if n == 0 {
		return 0, fmt.Errorf("model: empty batch")
	}
	past := c.n
	if past+n > c.cap {
		return 0, fmt.Errorf("model: context full: %d cached + %d new tokens exceed the cache's %d slots", past, n, c.cap)
	}
	if b.Pos != nil && len(b.Pos) != n {
		return 0, fmt.Errorf("model: %d positions for %d tokens", len(b.Pos), n)
	}
	if b.Mask != nil && len(b.Mask) != n*(past+n) {
		return 0, fmt.Errorf("model: mask has %d entries, want %d x %d", len(b.Mask), n, past+n)
	}
	for _, r := range b.Want {
		if r < 0 || r >= n {
			return 0, fmt.Errorf("model: wanted row %d outside batch of %d", r, n)
		}
	}
	for _, t := range b.Tokens {
		if t < 0 || t >= m.Vocab {
			return 0, fmt.Errorf("model: token id %d out of range [0, %d)", t, m.Vocab)
		}
	}
	if b.Embeds == nil && m.embdM == nil {
		return 0, fmt.Errorf("model: this model has no token embeddings; feed it Embeds")
	}
	return n, nil
}

// wantRows is how many rows of an n-row batch return outputs.
func wantRows(b *Batch, n int) int {
	if b.Want == nil {
		return n
	}
	return len(b.Want)
}

// layersFor is the blocks a pass runs: the first k when k > 0 (layer-skip).
func (m *Model) layersFor(k int) []Layer {
	if k > 0 && k < len(m.Blocks) {
		return m.Blocks[:k]
	}
	return m.Blocks
}

// seqRows is one sequence's share of a pass: its rows [off, off+n) of the
// pass's activations and its wanted rows [out, out+rows) of the pass's
// outputs, with the views of the shared tensors its attention reads and
// writes.
type seqRows struct {
	c         *Cache
	b         Batch
	res       *Result
	n, off    int
	rows, out int
	past      int
	pos       []int  // the rows' RoPE positions
	swa       []bool // the sliding layers' mask, nil when the plain one serves

	q, k, v, att kernels.Tensor
}

// pass runs the checked sequences seqs through layers on scratch s: the
// weight products once over all their rows, RoPE with each row's own
// position, the keys and values stored and attention computed per
// sequence on its own cache, and each sequence's outputs into its Result.
// One sequence works on the scratch tensors themselves, exactly as a pass
// of a single sequence always has; several on views of them (one set per
// sequence, made before the layers). fault, for tests only, runs every
// sequence's attention on the first sequence's query rows.
func (m *Model) pass(ctx context.Context, s *scratch, seqs []seqRows, layers []Layer, fault bool) error {
	cfg := &m.Config
	dev := m.Backend
	single := len(seqs) == 1
	n, rows := 0, 0
	for i := range seqs {
		sq := &seqs[i]
		sq.off, sq.out, sq.past = n, rows, sq.c.n
		n, rows = n+sq.n, rows+sq.rows
	}
	if err := s.grow(dev, cfg, m.Vocab, n, rows); err != nil {
		return err
	}
	dim, kvd, qd, ffn := cfg.Dim, cfg.KVDim(), cfg.QDim(), cfg.FFN
	// part is a sequence's rows of a tensor of width w: the tensor itself
	// in a pass of one
	part := func(t kernels.Tensor, off, cnt, w int) kernels.Tensor {
		if single {
			return t
		}
		return dev.View(t, off*w, cnt*w)
	}
	half := cfg.RopeDim / 2
	local := cfg.Window > 0 && cfg.RopeBaseLocal != 0
	s.cos, s.sin = growFloats(s.cos, n*half), growFloats(s.sin, n*half)
	if local {
		s.cosL, s.sinL = growFloats(s.cosL, n*half), growFloats(s.sinL, n*half)
	}
	if cap(s.pos) < n {
		s.pos = make([]int, n)
	}
	for i := range seqs {
		sq := &seqs[i]
		c, b := sq.c, &sq.b
		// x [n x dim]: the embeddings, or the rows fed in
		x := part(s.x, sq.off, sq.n, dim)
		if b.Embeds != nil {
			dev.Upload(x, b.Embeds)
		} else if err := dev.Embed(x, m.embdM, b.Tokens); err != nil {
			return fmt.Errorf("model: %w", err)
		}
		if cfg.EmbedScale != 0 && b.Embeds == nil {
			dev.Scale(x, sq.n*dim, cfg.EmbedScale)
		}
		pos := b.Pos
		if pos == nil {
			pos = s.pos[sq.off : sq.off+sq.n]
			for i := range pos {
				pos[i] = sq.past + i
			}
		}
		sq.pos = pos
		for i, p := range pos {
			c.pos[sq.past+i] = int32(p)
		}
		// cos, sin [n x RopeDim/2] (host, uploaded by RoPE), each row
		// rotated as its own cache says (phi3 picks its factors by the
		// cache's length)
		lo, hi := sq.off*half, (sq.off+sq.n)*half
		ropeRows(s.cos[lo:hi], s.sin[lo:hi], cfg.ropeFor(false, c.cap), cfg.RopeDim, pos)
		if local {
			ropeRows(s.cosL[lo:hi], s.sinL[lo:hi], cfg.ropeFor(true, c.cap), cfg.RopeDim, pos)
		}
		// the sliding layers' mask [n x past+n] (host): nil while every
		// visible slot is inside every row's window, which is all that
		// short contexts ever need
		sq.swa = nil
		if cfg.Window > 0 {
			sq.swa = c.windowMask(b.Mask, pos, sq.past, sq.n)
		}
		qOff := sq.off
		if fault {
			qOff = 0
		}
		sq.q, sq.att = part(s.q, qOff, sq.n, qd), part(s.att, sq.off, sq.n, qd)
		sq.k, sq.v = part(s.k, sq.off, sq.n, kvd), part(s.v, sq.off, sq.n, kvd)
	}
	scale := cfg.AttnScale
	if scale == 0 {
		scale = float32(1 / math.Sqrt(float64(cfg.HeadDim)))
	}
	qShape := kernels.RoPEShape{Heads: cfg.Heads, HeadDim: cfg.HeadDim, RopeDim: cfg.RopeDim, Neox: cfg.RopeNeox}
	kShape := qShape
	kShape.Heads = cfg.KVHeads
	attn := kernels.AttnShape{Heads: cfg.Heads, KVHeads: cfg.KVHeads, HeadDim: cfg.HeadDim, Scale: scale, Softcap: cfg.AttnSoftcap}
	for li := range layers {
		if err := ctx.Err(); err != nil {
			return err
		}
		l := &layers[li]
		sliding := cfg.Window > 0 && cfg.SlidingLayer(li)
		// attention block: x += O · attn(rope(Q·norm(x)), rope(K·norm(x)), V·norm(x))
		dev.RMSNorm(s.xn, s.x, l.AttnNorm, n, dim, cfg.Eps) // xn [n x dim]
		// q [n x qd], k and v [n x kvd], in one dispatch
		s.outs[0], s.outs[1], s.outs[2] = s.q, s.k, s.v
		s.mats[0], s.mats[1], s.mats[2] = l.Q, l.K, l.V
		kernels.MatMulAll(dev, s.outs[:3], s.mats[:3], s.xn, n)
		if l.QB != nil {
			dev.AddRow(s.q, l.QB, n, qd)
			dev.AddRow(s.k, l.KB, n, kvd)
			dev.AddRow(s.v, l.VB, n, kvd)
		}
		if l.QNorm != nil { // per head: q [n*Heads x HeadDim], k [n*KVHeads x HeadDim]
			dev.RMSNorm(s.q, s.q, l.QNorm, n*cfg.Heads, cfg.HeadDim, cfg.Eps)
			dev.RMSNorm(s.k, s.k, l.KNorm, n*cfg.KVHeads, cfg.HeadDim, cfg.Eps)
		}
		rc, rs := s.cos, s.sin
		if sliding && local {
			rc, rs = s.cosL, s.sinL
		}
		dev.RoPE(s.q, n, qShape, rc, rs)
		dev.RoPE(s.k, n, kShape, rc, rs)
		// every sequence's keys and values stored (cache slots
		// past..past+n-1 of layer li), then their attention in one
		// dispatch: att [n x qd] each
		s.attn = s.attn[:0]
		for i := range seqs {
			sq := &seqs[i]
			dev.StoreKV(sq.c.kv, li, sq.past, sq.k, sq.v, sq.n)
			mask := sq.b.Mask
			if sliding && sq.swa != nil {
				mask = sq.swa
			}
			s.attn = append(s.attn, kernels.SeqAttention{Out: sq.att, Q: sq.q, KV: sq.c.kv, Past: sq.past, N: sq.n, Mask: mask})
		}
		kernels.AttentionAll(dev, li, s.attn, attn)
		clear(s.attn)                   // holds no cache past the call
		dev.MatMulT(s.o, l.O, s.att, n) // o [n x dim]
		if l.PostAttn != nil {
			dev.RMSNorm(s.o, s.o, l.PostAttn, n, dim, cfg.Eps)
		}
		dev.Add(s.x, s.o, n*dim)
		// feed-forward block: x += Down · (act(Gate·norm(x)) * Up·norm(x))
		dev.RMSNorm(s.xn, s.x, l.FFNNorm, n, dim, cfg.Eps)
		// g and u [n x ffn], in one dispatch
		s.outs[0], s.outs[1] = s.g, s.u
		s.mats[0], s.mats[1] = l.Gate, l.Up
		kernels.MatMulAll(dev, s.outs[:2], s.mats[:2], s.xn, n)
		dev.GLU(s.g, s.u, n*ffn, cfg.GELU)
		dev.MatMulT(s.o, l.Down, s.g, n) // o [n x dim]
		if l.PostFFN != nil {
			dev.RMSNorm(s.o, s.o, l.PostFFN, n, dim, cfg.Eps)
		}
		dev.Add(s.x, s.o, n*dim)
	}
	for i := range seqs {
		sq := &seqs[i]
		sq.c.n = sq.past + sq.n
	}

	// the wanted rows, wx [rows x dim]; then the final norm and output head
	wx := s.x
	if want := s.gatherRows(seqs, n); want != nil {
		dev.Gather(s.wx, s.x, want, dim)
		wx = s.wx
	}
	for i := range seqs {
		sq := &seqs[i]
		res := sq.res
		res.Hidden = res.Hidden[:0]
		if sq.b.Hidden {
			if cap(res.Hidden) < sq.rows*dim {
				res.Hidden = make([]float32, sq.rows*dim)
			}
			res.Hidden = res.Hidden[:sq.rows*dim]
			dev.Download(res.Hidden, part(wx, sq.out, sq.rows, dim))
		}
	}
	dev.RMSNorm(wx, wx, m.OutNorm, rows, dim, cfg.Eps)
	dev.MatMulT(s.logits, m.Output, wx, rows) // logits [rows x vocab]
	if cap := cfg.FinalSoftcap; cap != 0 {
		dev.Softcap(s.logits, rows*m.Vocab, cap)
	}
	for i := range seqs {
		sq := &seqs[i]
		m.outputs(&sq.b, sq.res, part(s.logits, sq.out, sq.rows, m.Vocab), sq.rows)
	}
	for i := range seqs {
		seqs[i].q, seqs[i].k, seqs[i].v, seqs[i].att = nil, nil, nil, nil
	}
	return nil
}

// gatherRows lists the pass's wanted rows in order (each sequence's, in
// its Want order) for Gather, or returns nil when they are every row in
// order and the pass's activations serve as they are.
func (s *scratch) gatherRows(seqs []seqRows, n int) []int {
	if len(seqs) == 1 {
		return seqs[0].b.Want
	}
	s.want = s.want[:0]
	all := true
	for i := range seqs {
		sq := &seqs[i]
		if sq.b.Want == nil {
			for r := range sq.n {
				s.want = append(s.want, sq.off+r)
			}
			continue
		}
		for _, r := range sq.b.Want {
			all = all && sq.off+r == len(s.want)
			s.want = append(s.want, sq.off+r)
		}
	}
	if all && len(s.want) == n {
		return nil
	}
	return s.want
}

// outputs fills res from logits, the batch's rows of output logits on the
// device: their argmax, or the logits downloaded (and their probabilities
// after the sampling transforms).
func (m *Model) outputs(b *Batch, res *Result, logits kernels.Tensor, rows int) {
	dev := m.Backend
	if b.Output == OutArgmax {
		if cap(res.Argmax) < rows {
			res.Argmax = make([]int, rows)
		}
		res.Argmax = res.Argmax[:rows]
		res.Logits = res.Logits[:0]
		dev.Argmax(res.Argmax, logits, rows, m.Vocab)
		return
	}
	if cap(res.Logits) < rows*m.Vocab {
		res.Logits = make([]float32, rows*m.Vocab)
	}
	res.Logits = res.Logits[:rows*m.Vocab]
	res.Argmax = res.Argmax[:0]
	dev.Download(res.Logits, logits)
	res.Probs = res.Probs[:0]
	if b.Output == OutProbs {
		if cap(res.Probs) < rows*m.Vocab {
			res.Probs = make([]float32, rows*m.Vocab)
		}
		res.Probs = res.Probs[:rows*m.Vocab]
		smp := sample.New(b.Sample)
		for r := 0; r < rows; r++ {
			smp.Probs(res.Logits[r*m.Vocab:(r+1)*m.Vocab], res.Probs[r*m.Vocab:(r+1)*m.Vocab])
		}
	}
}

// growFloats returns v with length n, reallocated only when too short.
func growFloats(v []float32, n int) []float32 {
	if cap(v) < n {
		return make([]float32, n)
	}
	return v[:n]
}

// windowMask returns the mask of the sliding-window layers: the batch's
// mask (or the causal one) with every slot whose position is Window or more
// before the row's own position switched off, as llama.cpp masks them. It
// returns nil when no visible slot is that far back, so the plain mask
// serves. Positions come from the cache, so compacted slots keep theirs.
func (c *Cache) windowMask(base []bool, pos []int, past, n int) []bool {
	w := int32(c.cfg.Window)
	total := past + n
	lo := int32(math.MaxInt32)
	for _, p := range c.pos[:total] {
		lo = min(lo, p)
	}
	hi := int32(math.MinInt32)
	for _, p := range pos {
		hi = max(hi, int32(p))
	}
	if hi-lo < w {
		return nil
	}
	if cap(c.s.swa) < n*total {
		c.s.swa = make([]bool, n*total)
	}
	m := c.s.swa[:n*total]
	for i := 0; i < n; i++ {
		row := m[i*total : (i+1)*total]
		p := int32(pos[i])
		for j := range row {
			visible := j <= past+i
			if base != nil {
				visible = base[i*total+j]
			}
			row[j] = visible && p-c.pos[j] < w
		}
	}
	return m
}

// ropeSpec is one RoPE variant: frequency base, linear position scale,
// per-pair frequency divisors (nil = none) and a factor on cos and sin.
type ropeSpec struct {
	base, scale, mscale float32
	factors             []float32
}

// ropeFor picks the rotation of global (or, when local, sliding) layers for
// a cache of cacheLen slots: phi3's long factors apply when the cache is
// longer than the original context, as llama.cpp picks them by context size.
func (c *Config) ropeFor(local bool, cacheLen int) ropeSpec {
	r := ropeSpec{base: c.RopeBase, scale: c.RopeScale, mscale: c.RopeAttnFactor, factors: c.RopeFreqs}
	if r.scale == 0 {
		r.scale = 1
	}
	if r.mscale == 0 {
		r.mscale = 1
	}
	if c.RopeLong != nil {
		r.factors = c.RopeShort
		if cacheLen > c.RopeOrigCtx {
			r.factors = c.RopeLong
		}
	}
	if local && c.RopeBaseLocal != 0 {
		r.base, r.scale, r.factors = c.RopeBaseLocal, 1, nil
	}
	return r
}

// ropeRows fills cos and sin (RopeDim/2 pairs per row) for every position.
func ropeRows(cos, sin []float32, r ropeSpec, ropeDim int, pos []int) {
	half := ropeDim / 2
	for i, p := range pos {
		ropeAngles(cos[i*half:(i+1)*half], sin[i*half:(i+1)*half], r, ropeDim, p)
	}
}

// ropeAngles fills the cosines and sines of the angles pos/scale *
// base^(-2i/RopeDim) / factor_i, i < RopeDim/2. The angle is built by
// repeated multiplication in float32, as ggml does, so positions match it
// bit for bit; a frequency factor divides the angle before the scale, as in
// ggml's rope cache.
func ropeAngles(cos, sin []float32, r ropeSpec, ropeDim, pos int) {
	thetaScale := float32(math.Pow(float64(r.base), -2.0/float64(ropeDim)))
	freqScale := 1 / r.scale
	theta := float32(pos)
	for i := range cos {
		t := theta
		if r.factors != nil {
			t /= r.factors[i]
		}
		t *= freqScale
		cos[i], sin[i] = float32(math.Cos(float64(t)))*r.mscale, float32(math.Sin(float64(t)))*r.mscale
		theta *= thetaScale
	}
}

func (m *Model) rowLimit() int {
	if m.maxRows > 0 {
		return m.maxRows
	}
	return MaxRows
}

// forwardChunks runs a causal batch of n > limit rows as passes of at most
// limit rows (MaxRows says why that changes nothing) and gathers the
// wanted rows' outputs into res in Want order. A pass without a wanted row
// asks for its last row and drops it.
func (m *Model) forwardChunks(ctx context.Context, c *Cache, b Batch, n, limit int, res *Result) error {
	want := b.Want
	if want == nil {
		want = make([]int, n)
		for i := range want {
			want[i] = i
		}
	}
	rows, dim, vocab := len(want), m.Dim, m.Vocab
	logits := b.Output != OutArgmax
	res.Hidden, res.Argmax, res.Logits, res.Probs = res.Hidden[:0], res.Argmax[:0], res.Logits[:0], res.Probs[:0]
	grow := func(v []float32, size int) []float32 {
		if cap(v) < size {
			return make([]float32, size)
		}
		return v[:size]
	}
	if b.Hidden {
		res.Hidden = grow(res.Hidden, rows*dim)
	}
	if logits {
		res.Logits = grow(res.Logits, rows*vocab)
	} else if cap(res.Argmax) < rows {
		res.Argmax = make([]int, rows)
	} else {
		res.Argmax = res.Argmax[:rows]
	}
	if b.Output == OutProbs {
		res.Probs = grow(res.Probs, rows*vocab)
	}
	var part Result
	for a := 0; a < n; a += limit {
		if err := ctx.Err(); err != nil {
			return err
		}
		e := min(a+limit, n)
		sub := b
		sub.Tokens, sub.Embeds, sub.Pos, sub.Want = nil, nil, nil, nil
		if b.Embeds != nil {
			sub.Embeds = b.Embeds[a*dim : e*dim]
		} else {
			sub.Tokens = b.Tokens[a:e]
		}
		if b.Pos != nil {
			sub.Pos = b.Pos[a:e]
		}
		var at []int // the wanted rows' places in res
		for k, r := range want {
			if r >= a && r < e {
				sub.Want, at = append(sub.Want, r-a), append(at, k)
			}
		}
		if sub.Want == nil {
			sub.Want = []int{e - a - 1}
		}
		if err := m.Forward(ctx, c, sub, &part); err != nil {
			return err
		}
		for i, k := range at {
			if b.Hidden {
				copy(res.Hidden[k*dim:(k+1)*dim], part.Hidden[i*dim:(i+1)*dim])
			}
			if logits {
				copy(res.Logits[k*vocab:(k+1)*vocab], part.Logits[i*vocab:(i+1)*vocab])
			} else {
				res.Argmax[k] = part.Argmax[i]
			}
			if b.Output == OutProbs {
				copy(res.Probs[k*vocab:(k+1)*vocab], part.Probs[i*vocab:(i+1)*vocab])
			}
		}
	}
	return nil
}
