package hidden

import (
	"context"
	"fmt"
	"math"
	"time"

	"arborist/engine/drafter"
	"arborist/engine/model"
	"arborist/engine/sample"
	"arborist/kernels"
	"arborist/kernels/quant"
)

// Source drafts from a hidden-state drafter (a drafter.HiddenSource). The
// engine hands it the target's hidden state of every committed position.
// At a step whose root sits at position P, the layer reads the true states
// H_0..H_{P-1} (fed once into its own KV cache) and predicts h_P, then its own
// chain h_{P+1}, h_{P+2}, ... one layer pass per depth. The chain does not
// depend on the drafted tokens, so a node at depth k gets the distribution
// softmax(head(norm(h_{P+k})) + E(its token)) and every node of a depth
// shares one layer pass.
//
// After a rejection at depth m+1 (bonus token b) the next step re-samples:
// its subtree starts from the cached logits at b's position plus E(b) and
// goes down the cached chain, with no layer pass (ResampleDepth levels at
// most). The true states of both steps are fed at the next regular step.
type Source struct {
	D     *Drafter
	layer *model.Model
	cache *model.Cache
	dist  func(logits, dst []float32)
	info  *tokenInfo
	name  string
	f32   bool          // the layer's matrices are float32 (Options.F32)
	smp   sample.Params // what dist transforms logits by (SetSample)
	// ResampleDepth bounds a re-sampled subtree's depth (0: never re-sample).
	ResampleDepth int
	// ResampleMin: re-sample only when the bonus token's most likely child
	// is at least this likely under the drafter; otherwise draft afresh.
	ResampleMin float64

	committed []int
	hist      []float32 // the target's hidden states received, position-major
	fed       int       // cache slots holding true states (positions 0..fed-1)
	// was holds the sequence before's hidden states and keep how many of
	// its cached slots (the first) a new sequence may still reuse: a slot
	// depends on nothing but its state and position, so each is kept while
	// the new sequence's state there is the same (ObserveHidden)
	was  []float32
	keep int

	chain  [][]float32 // this step's base logits per depth
	chainH [][]float32 // this step's hidden chain per depth
	prev   [][]float32 // the previous regular step's base logits (for re-sampling)
	open   bool        // no Expand yet this step
	resOff int         // re-sampling: depth in prev of the root's children (-1: regular step)
	resMax int         // re-sampling: depth limit of this step
	res    model.Result
	logits []float32
	q      []float32 // scratch for the re-sampling decision
	stats  Stats
}

// Stats counts the source's work.
type Stats struct {
	Steps, Resampled int           // steps drafted; steps drafted by re-sampling
	LayerRows        int           // rows the drafter layer computed (true states fed + chain)
	ChainPasses      int           // layer passes over drafted states
	OnDemand         int           // token-info rows computed outside the hot table
	Draft, Resample  time.Duration // time in Expand: all steps, re-sampled steps
}

// DefaultResampleDepth bounds a re-sampled subtree's depth when Options
// leaves it 0.
const DefaultResampleDepth = 4

// Options tunes a Source.
type Options struct {
	ResampleDepth int     // default DefaultResampleDepth
	ResampleMin   float64 // default 0.2
	HotBytes      int64   // memory for precomputed token-info rows; default 256 MiB
	Name          string
	NoResample    bool // turn re-sampling off
	// Device, when set, runs the drafter layer (with a copy of the
	// target's final norm and head) there instead of on the target's
	// device, so it can draft while the target verifies (two devices).
	Device kernels.Device
	// F32 serves the layer's matrices in float32, exactly as trained.
	// By default they are quantised to Q8_0 (where a matrix's rows split
	// into its blocks of 32): a pass then reads a quarter of the bytes and
	// runs on the int8 kernels, about a third of the float32 pass's time
	// on the bench target, and the verification keeps the output the
	// target's whatever the drafter proposes.
	F32 bool
}

// NewSource makes a draft source from d for target (which must be the model
// it was trained for: the shapes are checked here, the fingerprint by the
// caller). It proposes from the plain softmax until it is told a run's
// sampling (SetSample; the engine does at the start of every generation).
func NewSource(d *Drafter, target *model.Model, o Options) (*Source, error) {
	if err := d.Fits(&target.Config); err != nil {
		return nil, err
	}
	if o.ResampleDepth == 0 {
		o.ResampleDepth = DefaultResampleDepth
	}
	if o.NoResample {
		o.ResampleDepth = 0
	}
	if o.ResampleMin == 0 {
		o.ResampleMin = 0.2
	}
	if o.HotBytes == 0 {
		o.HotBytes = 256 << 20
	}
	if o.Name == "" {
		o.Name = "hidden"
	}
	wt := quant.Q8_0
	if o.F32 {
		wt = quant.F32
	}
	layer, err := layerModel(d, target, o.Device, wt)
	if err != nil {
		return nil, err
	}
	info, err := newTokenInfo(d, target, o.HotBytes)
	if err != nil {
		return nil, err
	}
	return &Source{D: d, layer: layer, cache: layer.NewCache(target.CtxLen + 64), dist: drafter.Dist(sample.Params{}),
		info: info, name: o.Name, f32: o.F32, ResampleDepth: o.ResampleDepth, ResampleMin: o.ResampleMin, resOff: -1}, nil
}

// Fork makes another source of the same drafter, sharing its layer's
// weights and the precomputed token-info rows, with a cache, a sequence
// and scratch of its own (drafter.Forker).
func (s *Source) Fork() (drafter.Source, error) {
	if s.cache == nil {
		return nil, fmt.Errorf("hidden: fork of a freed source")
	}
	return &Source{D: s.D, layer: s.layer, cache: s.layer.NewCache(s.cache.Cap()), dist: drafter.Dist(s.smp), smp: s.smp,
		info: s.info.fork(), name: s.name, f32: s.f32, ResampleDepth: s.ResampleDepth, ResampleMin: s.ResampleMin, resOff: -1}, nil
}

// SetSample makes the source propose from its distribution after p's
// transforms (drafter.Sampled); it takes effect from the next Begin.
func (s *Source) SetSample(p sample.Params) { s.smp, s.dist = p, drafter.Dist(p) }

// Free releases the source's cache; it must not be used afterwards.
func (s *Source) Free() {
	if s.cache != nil {
		s.cache.Free()
		s.cache = nil
	}
}

// layerModel wraps the drafter layer as a one-block model that shares the
// target's final norm and output head, so decoding runs on the target's
// kernels; on another device (dev not nil) it gets its own copy of them.
// Its matrices are stored as wt where their rows split into wt's blocks,
// as float32 otherwise.
func layerModel(d *Drafter, target *model.Model, dev kernels.Device, wt quant.Type) (*model.Model, error) {
	be := target.Backend
	outNorm, output := target.OutNorm, target.Output
	if dev != nil && dev != be {
		var err error
		if outNorm, output, err = target.HeadOn(dev); err != nil {
			return nil, fmt.Errorf("hidden: the target's head on %s: %w", dev.Name(), err)
		}
		be = dev
	}
	lay := d.Layout()
	var err error
	mat := func(i int) kernels.Matrix {
		if err != nil {
			return nil
		}
		b := lay[i]
		var m kernels.Matrix
		if wt != quant.F32 && b.Cols%wt.BlockSize() == 0 {
			var rb int
			if rb, err = quant.RowBytes(wt, b.Cols); err != nil {
				return nil
			}
			q := make([]byte, rb*b.Rows)
			if err = quant.Quantize(wt, d.Block(i), q); err != nil {
				return nil
			}
			m, err = be.NewMatrix(wt, q, b.Rows, b.Cols)
			return m
		}
		m, err = be.NewMatrix(quant.F32, f32Bytes(d.Block(i)), b.Rows, b.Cols)
		return m
	}
	vec := func(i int) kernels.Tensor {
		if err != nil {
			return nil
		}
		var v kernels.Tensor
		v, err = be.NewVector(d.Block(i))
		return v
	}
	l := model.Layer{
		AttnNorm: vec(bAttnNorm), FFNNorm: vec(bFFNNorm),
		Q: mat(bQ), K: mat(bK), V: mat(bV), O: mat(bO),
		Gate: mat(bGate), Up: mat(bUp), Down: mat(bDown),
	}
	if err != nil {
		return nil, fmt.Errorf("hidden: %w", err)
	}
	return &model.Model{Config: d.config(target.CtxLen + 64), Tok: target.Tok, Backend: be,
		Blocks: []model.Layer{l}, OutNorm: outNorm, Output: output}, nil
}

// Name describes the source.
func (s *Source) Name() string { return s.name }

// Vocab is the vocabulary size.
func (s *Source) Vocab() int { return s.D.Vocab }

// Stats reports the work done since the source was made.
func (s *Source) Stats() Stats {
	st := s.stats
	st.OnDemand = s.info.onDemand
	return st
}

// Begin starts a new sequence. The layer's cached slots of the sequence
// before are kept while the new one's hidden states agree with its
// (ObserveHidden checks them), so generations after one long prompt feed
// it through the layer once.
func (s *Source) Begin(_ context.Context, committed []int) error {
	if len(committed) == 0 {
		return fmt.Errorf("hidden: empty sequence")
	}
	s.committed = append(s.committed[:0], committed...)
	s.was, s.hist = s.hist, s.was[:0]
	s.keep, s.fed = s.fed, 0
	s.cache.Truncate(s.keep) // the last step's drafted slots go
	s.chain, s.chainH, s.prev = nil, nil, nil
	s.resOff = -1
	s.open = true
	return nil
}

// ObserveHidden receives the target's hidden states of the next rows
// committed positions (rows x Dim values).
func (s *Source) ObserveHidden(hidden []float32, rows int) error {
	if len(hidden) != rows*s.D.Dim {
		return fmt.Errorf("hidden: %d values for %d rows of %d", len(hidden), rows, s.D.Dim)
	}
	s.hist = append(s.hist, hidden...)
	dim := s.D.Dim
	for n := min(s.keep, s.known()); s.fed < n; s.fed++ {
		if !sameBits(s.hist[s.fed*dim:(s.fed+1)*dim], s.was[s.fed*dim:(s.fed+1)*dim]) {
			s.keep = s.fed // computed again from here on
			break
		}
	}
	return nil
}

// sameBits reports whether a and b hold the same float32 values, bit for bit.
func sameBits(a, b []float32) bool {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// known is how many positions' hidden states have been received.
func (s *Source) known() int { return len(s.hist) / s.D.Dim }

// root is the position of the step's root (the last committed token).
func (s *Source) root() int { return len(s.committed) - 1 }

// Expand writes the distribution after each path.
func (s *Source) Expand(ctx context.Context, paths [][]int, dst [][]float32) error {
	t0 := time.Now()
	if s.open {
		s.open = false
		s.stats.Steps++
		if s.resOff >= 0 && !s.resampleWorth() {
			s.resOff = -1
		}
		if s.resOff >= 0 {
			s.stats.Resampled++
		}
	}
	for i, p := range paths {
		base, err := s.base(ctx, len(p))
		if err != nil {
			return err
		}
		if base == nil {
			clear(dst[i])
			continue
		}
		tok := s.committed[s.root()]
		if len(p) > 0 {
			tok = p[len(p)-1]
		}
		s.mix(base, tok, dst[i])
	}
	el := time.Since(t0)
	s.stats.Draft += el
	if s.resOff >= 0 {
		s.stats.Resample += el
	}
	return nil
}

// Resampling says whether the step being drafted re-samples the last
// step's chain (valid from the step's first Expand until Commit).
func (s *Source) Resampling() bool { return !s.open && s.resOff >= 0 }

// mix writes softmax-like dist(base + E(tok)) into dst.
func (s *Source) mix(base []float32, tok int, dst []float32) {
	if cap(s.logits) < len(base) {
		s.logits = make([]float32, len(base))
	}
	l := s.logits[:len(base)]
	e := s.info.row(tok)
	for i := range l {
		l[i] = base[i] + e[i]
	}
	s.dist(l, dst)
}

// resampleWorth decides, at the first Expand of a step that could
// re-sample, whether the bonus token's best child is likely enough.
func (s *Source) resampleWorth() bool {
	base := s.prev[s.resOff]
	if cap(s.q) < len(base) {
		s.q = make([]float32, len(base))
	}
	q := s.q[:len(base)]
	s.mix(base, s.committed[s.root()], q)
	return float64(q[sample.Argmax(q)]) >= s.ResampleMin
}

// base returns the base logits for the children of a depth-k node: from
// the cached chain when re-sampling (nil past its limit), else from this
// step's chain, extended by one layer pass per missing depth. nil means no
// proposal (no hidden state known yet, or no room left).
func (s *Source) base(ctx context.Context, k int) ([]float32, error) {
	if s.resOff >= 0 {
		if k >= s.resMax || s.resOff+k >= len(s.prev) {
			return nil, nil
		}
		return s.prev[s.resOff+k], nil
	}
	if known := s.known(); known != s.root() || known == 0 {
		return nil, nil // the engine has not handed over every state before the root
	}
	for len(s.chain) <= k {
		if err := s.extend(ctx); err != nil {
			return nil, err
		}
		if len(s.chain) <= k {
			return nil, nil
		}
	}
	return s.chain[k], nil
}

// extend computes the next depth of the chain: at depth 0 it feeds the true
// states not yet in the cache (re-feeding the last one when all are in);
// later depths feed the previous drafted state.
func (s *Source) extend(ctx context.Context) error {
	dim := s.D.Dim
	b := model.Batch{Hidden: true}
	if len(s.chain) == 0 {
		s.cache.Truncate(s.fed) // drop last step's drafted slots
		s.keep = 0              // and the last sequence's: the chain takes the slots past fed
		known := s.known()
		from := s.fed
		if from == known {
			from--
			s.cache.Truncate(from)
		}
		b.Embeds = s.hist[from*dim : known*dim]
		b.Pos = positions(from, known)
		b.Want = []int{known - from - 1}
		s.fed = known
	} else {
		pos := s.root() + len(s.chain) - 1
		if s.cache.Len() >= s.cache.Cap() {
			return nil // no room: the chain stops here
		}
		b.Embeds = s.chainH[len(s.chainH)-1]
		b.Pos = []int{pos}
		s.stats.ChainPasses++
	}
	if err := s.layer.Forward(ctx, s.cache, b, &s.res); err != nil {
		return fmt.Errorf("hidden: %w", err)
	}
	s.stats.LayerRows += len(b.Embeds) / dim
	s.chain = append(s.chain, append([]float32(nil), s.res.Logits...))
	s.chainH = append(s.chainH, append([]float32(nil), s.res.Hidden...))
	return nil
}

func positions(from, to int) []int {
	p := make([]int, to-from)
	for i := range p {
		p[i] = from + i
	}
	return p
}

// Commit appends the accepted tokens and the bonus. After a regular step
// that drafted deeper than it accepted, the next step re-samples from the
// cached chain at the bonus token's position.
func (s *Source) Commit(accepted []int, bonus int) error {
	m := len(accepted)
	next := -1
	// the bonus token sits at depth m+1; its children need the chain there
	if s.resOff < 0 && s.ResampleDepth > 0 && m+1 < len(s.chain) {
		next = m + 1
		s.prev = s.chain
	}
	s.committed = append(append(s.committed, accepted...), bonus)
	s.resOff = next
	if next >= 0 {
		s.resMax = min(s.ResampleDepth, len(s.prev)-next)
	}
	s.chain, s.chainH = nil, nil
	s.open = true
	return nil
}

// tokenInfo gives E(t) = W2 · W1 · emb(t) over the vocabulary: precomputed
// for the hot tokens, computed on demand for the rest.
type tokenInfo struct {
	d        *Drafter
	target   *model.Model
	hot      map[int][]float32
	scratch  []float32
	emb, u   []float32
	onDemand int
	tm       kernels.TrainMath // the host's products (trainMath)
}

func newTokenInfo(d *Drafter, target *model.Model, budget int64) (*tokenInfo, error) {
	tm, err := trainMath()
	if err != nil {
		return nil, err
	}
	ti := &tokenInfo{d: d, target: target, hot: map[int][]float32{}, scratch: make([]float32, d.Vocab),
		emb: make([]float32, d.Dim), u: make([]float32, d.D), tm: tm}
	rows := int(budget / int64(4*d.Vocab))
	hot := d.Hot
	if rows >= d.Vocab {
		// the whole vocabulary fits the budget (a small one): no token is
		// ever computed on demand, in the middle of a step
		hot = make([]int, d.Vocab)
		for t := range hot {
			hot[t] = t
		}
	}
	for i, t := range hot {
		if i >= rows {
			break
		}
		r := make([]float32, d.Vocab)
		if err := ti.compute(t, r); err != nil {
			return nil, err
		}
		ti.hot[t] = r
	}
	return ti, nil
}

// fork is the same token-info with scratch of its own: the hot rows are
// only read once made, so instances share them.
func (ti *tokenInfo) fork() *tokenInfo {
	return &tokenInfo{d: ti.d, target: ti.target, hot: ti.hot, scratch: make([]float32, len(ti.scratch)),
		emb: make([]float32, len(ti.emb)), u: make([]float32, len(ti.u)), tm: ti.tm}
}

func (ti *tokenInfo) compute(tok int, dst []float32) error {
	if err := ti.target.Embed(tok, ti.emb); err != nil {
		return err
	}
	d := ti.d
	// u = W1 · emb, then W2 · u: one row each, on the host's blocked
	// product (a row on its own always gets the same bits; scalar loops
	// took a quarter of a millisecond per token on the bench target)
	ti.tm.Gemm(kernels.PrecisionF32, ti.u, ti.emb, d.Block(bW1), 1, d.D, d.Dim, false, true, false)
	ti.tm.Gemm(kernels.PrecisionF32, dst[:d.Vocab], ti.u, d.Block(bW2), 1, d.Vocab, d.D, false, true, false)
	return nil
}

// row returns E(tok); the slice is valid until the next call.
func (ti *tokenInfo) row(tok int) []float32 {
	if r, ok := ti.hot[tok]; ok {
		return r
	}
	ti.onDemand++
	if err := ti.compute(tok, ti.scratch); err != nil {
		clear(ti.scratch) // an id outside the vocabulary: no token-info
	}
	return ti.scratch
}

// Hot reports how many token-info rows are precomputed.
func (s *Source) Hot() int { return len(s.info.hot) }
