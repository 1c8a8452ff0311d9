package model

import (
	"context"
	"fmt"
	"math"

	"arborist/kernels"
)

// Cache is a KV cache for one sequence, plus the scratch buffers of the
// forward pass (so decoding allocates nothing once they have grown).
//
// Slots hold keys and values after RoPE, so they keep their positions when
// compacted; each slot's position is remembered too, because a
// sliding-window layer decides visibility by position, not by slot.
type Cache struct {
	cfg  *Config
	k, v [][]float32 // per layer: Cap() * KVDim values
	pos  []int32     // per slot: the position its key was rotated to
	n    int         // slots in use
	cap  int
	s    scratch
}

// NewCache makes an empty cache for up to ctx positions.
func (m *Model) NewCache(ctx int) *Cache {
	c := &Cache{cfg: &m.Config, cap: ctx, pos: make([]int32, ctx)}
	c.k = make([][]float32, m.Layers)
	c.v = make([][]float32, m.Layers)
	for l := range c.k {
		c.k[l] = make([]float32, ctx*m.KVDim())
		c.v[l] = make([]float32, ctx*m.KVDim())
	}
	return c
}

// Len is the number of slots in use.
func (c *Cache) Len() int { return c.n }

// Cap is the number of slots available.
func (c *Cache) Cap() int { return c.cap }

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
	inPlace := true
	for i, s := range keep {
		if s < 0 || s >= c.n {
			return fmt.Errorf("model: compact: slot %d out of range [0, %d)", s, c.n)
		}
		if s < i || (i > 0 && s <= keep[i-1]) {
			inPlace = false
		}
	}
	d := c.cfg.KVDim()
	for l := range c.k {
		for _, buf := range [][]float32{c.k[l], c.v[l]} {
			src := buf
			if !inPlace {
				src = append([]float32(nil), buf[:c.n*d]...)
			}
			for i, s := range keep {
				if s != i || !inPlace {
					copy(buf[i*d:(i+1)*d], src[s*d:(s+1)*d])
				}
			}
		}
	}
	if !inPlace {
		old := append([]int32(nil), c.pos[:c.n]...)
		for i, s := range keep {
			c.pos[i] = old[s]
		}
	} else {
		for i, s := range keep {
			c.pos[i] = c.pos[s]
		}
	}
	c.n = len(keep)
	return nil
}

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
	// Want lists the rows whose logits (and hidden states) are returned; nil
	// means every row.
	Want []int
	// Layers, when positive, runs only the first Layers blocks before the
	// final norm and output head: the layer-skip self-drafter.
	Layers int
}

// Result holds a forward pass's outputs for the wanted rows, in Want order.
type Result struct {
	Logits []float32 // len(Want) * Vocab
	Hidden []float32 // len(Want) * Dim: the last block's output, before the final norm
}

type scratch struct {
	x, xn, q, k, v, att, o, g, u []float32
	wantX                        []float32
	cos, sin                     []float32 // RoPE rotation per row and pair
	cosL, sinL                   []float32 // the same for sliding layers with their own base (gemma3)
	pos                          []int
	swa                          []bool // the sliding-window layers' mask
}

func (s *scratch) grow(c *Config, n, ffn int) {
	g := func(b []float32, size int) []float32 {
		if cap(b) < size {
			return make([]float32, size)
		}
		return b[:size]
	}
	s.x = g(s.x, n*c.Dim)
	s.xn = g(s.xn, n*c.Dim)
	s.q = g(s.q, n*c.QDim())
	s.k = g(s.k, n*c.KVDim())
	s.v = g(s.v, n*c.KVDim())
	s.att = g(s.att, n*c.QDim())
	s.o = g(s.o, n*c.Dim)
	s.g = g(s.g, n*ffn)
	s.u = g(s.u, n*ffn)
}

// Forward runs a batch through the model, appending its keys and values to
// the cache, and fills res with the wanted rows' logits and hidden states.
func (m *Model) Forward(ctx context.Context, c *Cache, b Batch, res *Result) error {
	n := len(b.Tokens)
	if b.Embeds != nil {
		if n != 0 || len(b.Embeds)%m.Dim != 0 {
			return fmt.Errorf("model: a batch takes tokens or whole rows of %d embedding values, not both (%d tokens, %d values)", m.Dim, n, len(b.Embeds))
		}
		n = len(b.Embeds) / m.Dim
	}
	if n == 0 {
		return fmt.Errorf("model: empty batch")
	}
	past := c.n
	if past+n > c.cap {
		return fmt.Errorf("model: context full: %d cached + %d new tokens exceed the cache's %d slots", past, n, c.cap)
	}
	if b.Pos != nil && len(b.Pos) != n {
		return fmt.Errorf("model: %d positions for %d tokens", len(b.Pos), n)
	}
	if b.Mask != nil && len(b.Mask) != n*(past+n) {
		return fmt.Errorf("model: mask has %d entries, want %d x %d", len(b.Mask), n, past+n)
	}
	want := b.Want
	for _, r := range want {
		if r < 0 || r >= n {
			return fmt.Errorf("model: wanted row %d outside batch of %d", r, n)
		}
	}
	layers := m.Blocks
	if b.Layers > 0 && b.Layers < len(layers) {
		layers = layers[:b.Layers]
	}
	cfg := &m.Config
	s := &c.s
	s.grow(cfg, n, cfg.FFN)
	dim := cfg.Dim
	if b.Embeds != nil {
		copy(s.x[:n*dim], b.Embeds)
	}
	for i, t := range b.Tokens {
		if err := m.Embed(t, s.x[i*dim:(i+1)*dim]); err != nil {
			return err
		}
	}
	if cfg.EmbedScale != 0 && b.Embeds == nil {
		for i := range s.x[:n*dim] {
			s.x[i] *= cfg.EmbedScale
		}
	}
	pos := b.Pos
	if pos == nil {
		if cap(s.pos) < n {
			s.pos = make([]int, n)
		}
		pos = s.pos[:n]
		for i := range pos {
			pos[i] = past + i
		}
	}
	for i, p := range pos {
		c.pos[past+i] = int32(p)
	}
	be := m.Backend
	kvd, qd := cfg.KVDim(), cfg.QDim()
	half := cfg.RopeDim / 2
	s.cos, s.sin = ropeTable(s.cos, s.sin, cfg.ropeFor(false, c.cap), cfg.RopeDim, pos)
	local := cfg.Window > 0 && cfg.RopeBaseLocal != 0
	if local {
		s.cosL, s.sinL = ropeTable(s.cosL, s.sinL, cfg.ropeFor(true, c.cap), cfg.RopeDim, pos)
	}
	// the sliding layers' mask: nil while every visible slot is inside
	// every row's window, which is all that short contexts ever need
	var swaMask []bool
	if cfg.Window > 0 {
		swaMask = c.windowMask(b.Mask, pos, past, n)
	}
	scale := cfg.AttnScale
	if scale == 0 {
		scale = float32(1 / math.Sqrt(float64(cfg.HeadDim)))
	}
	for li := range layers {
		if err := ctx.Err(); err != nil {
			return err
		}
		l := &layers[li]
		sliding := cfg.Window > 0 && cfg.SlidingLayer(li)
		// attention block: x += O · attn(rope(Q·norm(x)), rope(K·norm(x)), V·norm(x))
		rmsNorm(s.xn, s.x, l.AttnNorm, n, dim, cfg.Eps)
		be.MatMul(s.q, l.Q, s.xn, n)
		be.MatMul(s.k, l.K, s.xn, n)
		be.MatMul(s.v, l.V, s.xn, n)
		if l.QB != nil {
			addBias(s.q, l.QB, n)
			addBias(s.k, l.KB, n)
			addBias(s.v, l.VB, n)
		}
		if l.QNorm != nil {
			rmsNorm(s.q, s.q, l.QNorm, n*cfg.Heads, cfg.HeadDim, cfg.Eps)
			rmsNorm(s.k, s.k, l.KNorm, n*cfg.KVHeads, cfg.HeadDim, cfg.Eps)
		}
		rc, rs := s.cos, s.sin
		if sliding && local {
			rc, rs = s.cosL, s.sinL
		}
		for i := 0; i < n; i++ {
			cos, sin := rc[i*half:(i+1)*half], rs[i*half:(i+1)*half]
			rope(s.q[i*qd:(i+1)*qd], cfg.Heads, cfg, cos, sin)
			rope(s.k[i*kvd:(i+1)*kvd], cfg.KVHeads, cfg, cos, sin)
		}
		copy(c.k[li][past*kvd:(past+n)*kvd], s.k[:n*kvd])
		copy(c.v[li][past*kvd:(past+n)*kvd], s.v[:n*kvd])
		mask := b.Mask
		if sliding && swaMask != nil {
			mask = swaMask
		}
		if a, ok := be.(kernels.Attention); ok && cfg.AttnSoftcap == 0 {
			a.Attention(s.att, s.q, c.k[li], c.v[li], past, n, mask, cfg.Heads, cfg.KVHeads, cfg.HeadDim, scale)
		} else {
			m.attention(s.att, s.q, c.k[li], c.v[li], past, n, mask, scale, cfg.AttnSoftcap)
		}
		be.MatMul(s.o, l.O, s.att, n)
		if l.PostAttn != nil {
			rmsNorm(s.o, s.o, l.PostAttn, n, dim, cfg.Eps)
		}
		for i := range s.x[:n*dim] {
			s.x[i] += s.o[i]
		}
		// feed-forward block: x += Down · (silu(Gate·norm(x)) * Up·norm(x))
		rmsNorm(s.xn, s.x, l.FFNNorm, n, dim, cfg.Eps)
		be.MatMul(s.g, l.Gate, s.xn, n)
		be.MatMul(s.u, l.Up, s.xn, n)
		if cfg.GELU {
			geluMul(s.g[:n*cfg.FFN], s.u[:n*cfg.FFN])
		} else if sm, ok := be.(kernels.SiLUMul); ok {
			sm.SiLUMul(s.g[:n*cfg.FFN], s.u[:n*cfg.FFN])
		} else {
			for i := range s.g[:n*cfg.FFN] {
				g := s.g[i]
				s.g[i] = g / (1 + float32(math.Exp(float64(-g)))) * s.u[i]
			}
		}
		be.MatMul(s.o, l.Down, s.g, n)
		if l.PostFFN != nil {
			rmsNorm(s.o, s.o, l.PostFFN, n, dim, cfg.Eps)
		}
		for i := range s.x[:n*dim] {
			s.x[i] += s.o[i]
		}
	}
	c.n = past + n

	// gather wanted rows, then final norm and output head
	rows := len(want)
	if want == nil {
		rows = n
	}
	if cap(s.wantX) < rows*dim {
		s.wantX = make([]float32, rows*dim)
	}
	wx := s.wantX[:rows*dim]
	for j := 0; j < rows; j++ {
		r := j
		if want != nil {
			r = want[j]
		}
		copy(wx[j*dim:(j+1)*dim], s.x[r*dim:(r+1)*dim])
	}
	res.Hidden = append(res.Hidden[:0], wx...)
	rmsNorm(wx, wx, m.OutNorm, rows, dim, cfg.Eps)
	if cap(res.Logits) < rows*m.Vocab {
		res.Logits = make([]float32, rows*m.Vocab)
	}
	res.Logits = res.Logits[:rows*m.Vocab]
	be.MatMul(res.Logits, m.Output, wx, rows)
	if cap := cfg.FinalSoftcap; cap != 0 {
		for i, v := range res.Logits {
			res.Logits[i] = cap * float32(math.Tanh(float64(v/cap)))
		}
	}
	return nil
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

// geluMul: g[i] = gelu(g[i]) * u[i], GELU in its tanh form (gemma's
// gelu_pytorch_tanh), computed in float64 as the reference's exact path is.
func geluMul(g, u []float32) {
	const c = 0.7978845608028654 // sqrt(2/pi)
	for i, x := range g {
		v := float64(x)
		g[i] = float32(0.5*v*(1+math.Tanh(c*v*(1+0.044715*v*v)))) * u[i]
	}
}

// rmsNorm: out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w, for n rows of dim.
// The mean of squares accumulates in float64, as ggml does.
func rmsNorm(out, x, w []float32, n, dim int, eps float32) {
	for r := 0; r < n; r++ {
		xr := x[r*dim : (r+1)*dim]
		var sum float64
		for _, v := range xr {
			sum += float64(v * v)
		}
		mean := float32(sum / float64(dim))
		scale := 1 / float32(math.Sqrt(float64(mean+eps)))
		or := out[r*dim : (r+1)*dim]
		for i, v := range xr {
			or[i] = v * scale * w[i]
		}
	}
}

func addBias(x, b []float32, n int) {
	d := len(b)
	for r := 0; r < n; r++ {
		row := x[r*d : (r+1)*d]
		for i := range row {
			row[i] += b[i]
		}
	}
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

// ropeTable fills the cos and sin buffers (grown as needed) for every
// position, RopeDim/2 pairs per row.
func ropeTable(cos, sin []float32, r ropeSpec, ropeDim int, pos []int) ([]float32, []float32) {
	half := ropeDim / 2
	n := len(pos)
	if cap(cos) < n*half {
		cos, sin = make([]float32, n*half), make([]float32, n*half)
	}
	cos, sin = cos[:n*half], sin[:n*half]
	for i, p := range pos {
		ropeAngles(cos[i*half:(i+1)*half], sin[i*half:(i+1)*half], r, ropeDim, p)
	}
	return cos, sin
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

// rope rotates the first RopeDim dims of each of heads heads in x by the
// precomputed angles: pairs (2i, 2i+1), or (i, i+RopeDim/2) in NeoX order.
func rope(x []float32, heads int, c *Config, cos, sin []float32) {
	hd, half := c.HeadDim, c.RopeDim/2
	for h := 0; h < heads; h++ {
		v := x[h*hd : (h+1)*hd]
		for i := 0; i < half; i++ {
			a, b := 2*i, 2*i+1
			if c.RopeNeox {
				a, b = i, i+half
			}
			x0, x1 := v[a], v[b]
			v[a] = x0*cos[i] - x1*sin[i]
			v[b] = x0*sin[i] + x1*cos[i]
		}
	}
}

// attention is the plain Go fallback for backends without
// kernels.Attention, and the path of soft-capped models (gemma2). It
// computes, for each batch row and query head, softmax(q·K*scale) over the
// slots the mask allows, times V; softcap > 0 first maps each score s to
// softcap*tanh(s/softcap). Rows and heads run in parallel.
func (m *Model) attention(out, q, kc, vc []float32, past, n int, mask []bool, scale, softcap float32) {
	cfg := &m.Config
	hd, kvd := cfg.HeadDim, cfg.KVDim()
	group := cfg.Heads / cfg.KVHeads
	total := past + n
	qd := cfg.Heads * hd
	kernels.ParallelFor(m.Backend, n*cfg.Heads, func(lo, hi int) {
		scores := make([]float32, total)
		for task := lo; task < hi; task++ {
			i, h := task/cfg.Heads, task%cfg.Heads
			kh := h / group
			qv := q[i*qd+h*hd : i*qd+(h+1)*hd]
			limit := past + i + 1 // causal
			var row []bool
			if mask != nil {
				row = mask[i*total : (i+1)*total]
				limit = total
			}
			maxS := float32(math.Inf(-1))
			for j := 0; j < limit; j++ {
				if row != nil && !row[j] {
					scores[j] = float32(math.Inf(-1))
					continue
				}
				kv := kc[j*kvd+kh*hd : j*kvd+(kh+1)*hd]
				var d float32
				for t := range qv {
					d += qv[t] * kv[t]
				}
				d *= scale
				if softcap != 0 {
					d = softcap * float32(math.Tanh(float64(d/softcap)))
				}
				scores[j] = d
				maxS = max(maxS, d)
			}
			o := out[i*qd+h*hd : i*qd+(h+1)*hd]
			for t := range o {
				o[t] = 0
			}
			if math.IsInf(float64(maxS), -1) {
				continue // a row that attends to nothing outputs zeros
			}
			var sum float64
			for j := 0; j < limit; j++ {
				if row != nil && !row[j] {
					continue
				}
				e := float32(math.Exp(float64(scores[j] - maxS)))
				scores[j] = e
				sum += float64(e)
			}
			inv := float32(1 / sum)
			for j := 0; j < limit; j++ {
				if row != nil && !row[j] {
					continue
				}
				p := scores[j] * inv
				vv := vc[j*kvd+kh*hd : j*kvd+(kh+1)*hd]
				for t := range o {
					o[t] += p * vv[t]
				}
			}
		}
	})
}
