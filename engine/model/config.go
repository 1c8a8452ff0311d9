// Package model runs decoder-only transformers of the Llama lineage (llama,
// mistral, qwen2, qwen3, phi3, gemma, gemma2, gemma3) from GGUF files on a
// kernels.Backend.
//
// The forward pass takes a batch of tokens with explicit positions and an
// explicit attention mask over the KV cache and the batch itself, so plain
// decoding (one token), prefill (a causal block) and speculative tree
// verification (a tree-shaped mask) are the same call. The cache supports
// append, truncation and compaction to a chosen list of slots, which is how
// rejected draft branches are dropped; it remembers each slot's position, so
// sliding-window layers stay correct after compaction.
//
// A Pass runs several sequences, each with its own cache, in one forward
// pass (the weight products once over all their rows, attention per
// sequence on its own cache), each row's result what it is alone; a
// CacheBudget admits the sequences' caches within a byte bound.
//
// The families differ in a handful of switches, all read into Config when a
// file is opened (never decided per token): q/k norms, embedding scale,
// GELU instead of SiLU, post-attention and post-FFN norms, logit
// soft-capping, sliding-window layers and the RoPE variant.
//
// Each family is one file, family_<name>.go, holding a family value: its
// GGUF architecture names, the switches it fixes, a hook that reads its
// own metadata after the generic hyperparameters, and its tensor layout
// (fused Q, K and V). The families table in family.go lists them, and
// SupportedArchs comes from it. A new family goes in a new
// family_<name>.go file plus one line in that table; ReadConfig, Load and
// the forward pass need no edit unless it brings a switch of its own.
package model

import (
	"fmt"
	"math"
	"strings"

	"arborist/engine/gguf"
	"arborist/kernels/quant"
)

// Config is a model's hyperparameters, read from GGUF metadata.
type Config struct {
	Arch      string  // llama, qwen2, qwen3, phi3, gemma, gemma2 or gemma3
	Dim       int     // embedding width n
	Layers    int     // transformer blocks
	Heads     int     // query heads
	KVHeads   int     // key/value heads (grouped-query attention)
	HeadDim   int     // width of one head: attention.key_length, else Dim / Heads
	FFN       int     // gated FFN hidden width
	Vocab     int     // output logits
	CtxLen    int     // trained context length
	RopeDim   int     // leading dims of each head that are rotated
	RopeBase  float32 // frequency base
	RopeScale float32 // linear position scale (positions are divided by it)
	RopeNeox  bool    // rotate (i, i+d/2) pairs instead of (2i, 2i+1)
	Eps       float32 // RMSNorm epsilon
	QKVBias   bool    // qwen2: biases on Q, K, V

	// RopeFreqs, when set, holds one factor per rotated pair that divides
	// that pair's rotation frequency: Llama 3.1+ rope scaling, which the
	// converter stores only as the rope_freqs.weight tensor.
	RopeFreqs []float32
	// RopeLong and RopeShort are phi3's longrope factors (same role as
	// RopeFreqs): the long ones are used when a cache is longer than
	// RopeOrigCtx, as llama.cpp does. RopeAttnFactor (0 = 1) scales the
	// rotation's cosines and sines.
	RopeLong, RopeShort []float32
	RopeOrigCtx         int
	RopeAttnFactor      float32
	// RopeBaseLocal is the frequency base of sliding-window layers when it
	// differs from RopeBase (gemma3); those layers use no position scaling.
	RopeBaseLocal float32

	QKNorm       bool    // qwen3, gemma3: RMS norm over each head of Q and K before RoPE
	EmbedScale   float32 // gemma: embeddings are multiplied by it (0 = not scaled)
	GELU         bool    // gemma: gelu(tanh) gate instead of silu
	PostNorms    bool    // gemma2, gemma3: norms on the attention and FFN outputs
	AttnScale    float32 // attention scores' scale (1/sqrt(HeadDim) unless the family says)
	AttnSoftcap  float32 // gemma2: scores become cap*tanh(score/cap) (0 = off)
	FinalSoftcap float32 // gemma2: logits become cap*tanh(logit/cap) (0 = off)
	// Window, when positive, is the sliding attention window: a query at
	// position p sees only keys at positions > p - Window, on the layers
	// SlidingLayer names.
	Window int
	// SWAPattern says which layers slide: 0 every layer, k > 0 every layer
	// but each k-th (gemma2: 2, so layers 0, 2, 4...; gemma3: 6).
	SWAPattern int
}

// KVDim is the width of one cached key (or value) row.
func (c *Config) KVDim() int { return c.KVHeads * c.HeadDim }

// QDim is the width of the concatenated query heads.
func (c *Config) QDim() int { return c.Heads * c.HeadDim }

// SlidingLayer reports whether layer l attends through the sliding window.
func (c *Config) SlidingLayer(l int) bool {
	if c.Window <= 0 {
		return false
	}
	if c.SWAPattern <= 0 {
		return true
	}
	return (l+1)%c.SWAPattern != 0
}

// RopeVariant names the rope scaling for display: "none", "linear x4",
// "llama3 (rope_freqs, 32 factors 1..8)", "longrope", ...
func (c *Config) RopeVariant() string {
	factors := func(f []float32) string {
		lo, hi := f[0], f[0]
		for _, v := range f {
			lo, hi = min(lo, v), max(hi, v)
		}
		return fmt.Sprintf("%d factors %g..%g", len(f), lo, hi)
	}
	var parts []string
	if c.RopeFreqs != nil {
		parts = append(parts, "llama3 rope_freqs: "+factors(c.RopeFreqs))
	}
	if c.RopeLong != nil {
		parts = append(parts, fmt.Sprintf("longrope (original context %d): short %s; long %s", c.RopeOrigCtx, factors(c.RopeShort), factors(c.RopeLong)))
	}
	if c.RopeAttnFactor != 0 && c.RopeAttnFactor != 1 {
		parts = append(parts, fmt.Sprintf("attention factor %g", c.RopeAttnFactor))
	}
	if c.RopeScale != 1 {
		parts = append(parts, fmt.Sprintf("linear x%g", c.RopeScale))
	}
	if c.RopeBaseLocal != 0 {
		parts = append(parts, fmt.Sprintf("sliding layers: base %g, unscaled", c.RopeBaseLocal))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

// ErrArch reports an architecture this package does not run.
var ErrArch = fmt.Errorf("model: unsupported architecture")

// ReadConfig extracts the hyperparameters of a supported GGUF, including
// the rope-scaling tensors (rope_freqs, rope_factors_long/short).
func ReadConfig(f *gguf.File) (Config, error) {
	c, _, err := readConfig(f)
	return c, err
}

// readConfig is ReadConfig, also returning the file's family: its
// switches, then the generic hyperparameters, then the family's own rules.
func readConfig(f *gguf.File) (Config, *family, error) {
	arch := f.Architecture()
	c := Config{Arch: arch}
	fam, ok := lookup(arch)
	if !ok {
		return c, nil, &gguf.Error{Path: f.Path, Err: fmt.Errorf("%w %q (Arborist runs %v)", ErrArch, arch, SupportedArchs)}
	}
	c.Arch = fam.names[0]
	s := fam.switches
	c.RopeNeox, c.QKVBias, c.QKNorm, c.GELU, c.PostNorms = s.RopeNeox, s.QKVBias, s.QKNorm, s.GELU, s.PostNorms
	m := meta{f: f, arch: arch}
	if err := readGeneric(m, &c); err != nil {
		return c, fam, err
	}
	if fam.after != nil {
		if err := fam.after(m, &c); err != nil {
			return c, fam, err
		}
	}
	return c, fam, checkLimits(f, &c)
}

// readGeneric reads the hyperparameters every family has, under the
// file's architecture prefix: sizes, head width, rope (base, linear
// scaling, the factor tensors), RMS epsilon, the default attention scale
// and the sliding window (0 when absent).
func readGeneric(m meta, c *Config) error {
	f, u, bad := m.f, m.size, m.bad
	var err error
	if c.Dim, err = u("embedding_length", -1); err != nil {
		return err
	}
	if c.Layers, err = u("block_count", -1); err != nil {
		return err
	}
	if c.Heads, err = u("attention.head_count", -1); err != nil {
		return err
	}
	if c.KVHeads, err = u("attention.head_count_kv", c.Heads); err != nil {
		return err
	}
	if c.FFN, err = u("feed_forward_length", -1); err != nil {
		return err
	}
	if c.CtxLen, err = u("context_length", 2048); err != nil {
		return err
	}
	if c.Heads%c.KVHeads != 0 {
		return &gguf.Error{Path: f.Path, Err: fmt.Errorf("%w: %d heads do not divide into %d kv heads", gguf.ErrMetadata, c.Heads, c.KVHeads)}
	}
	// The head width is attention.key_length when written (gemma, qwen3:
	// heads*head width need not equal the model width), else width/heads.
	if c.Dim%c.Heads != 0 {
		if _, ok := m.uint("attention.key_length"); !ok {
			return &gguf.Error{Path: f.Path, Err: fmt.Errorf("%w: %d heads do not divide width %d and no key_length is given", gguf.ErrMetadata, c.Heads, c.Dim)}
		}
	}
	if c.HeadDim, err = u("attention.key_length", max(c.Dim/c.Heads, 1)); err != nil {
		return err
	}
	if vl, ok := m.uint("attention.value_length"); ok && int(vl) != c.HeadDim {
		return &gguf.Error{Path: f.Path, Err: fmt.Errorf("%w: value_length %d differs from key_length %d (not supported)", gguf.ErrMetadata, vl, c.HeadDim)}
	}
	if c.RopeDim, err = u("rope.dimension_count", c.HeadDim); err != nil {
		return err
	}
	if c.RopeDim > c.HeadDim || c.RopeDim%2 != 0 {
		return bad(fmt.Sprintf("rope.dimension_count = %d", c.RopeDim))
	}
	c.RopeBase, c.RopeScale, c.Eps = 10000, 1, 1e-5
	if v, ok := m.float("rope.freq_base"); ok {
		c.RopeBase = float32(v)
	}
	if v, ok := m.float("attention.layer_norm_rms_epsilon"); ok {
		c.Eps = float32(v)
	}
	if typ, _ := m.str("rope.scaling.type"); typ == "linear" {
		if v, ok := m.float("rope.scaling.factor"); ok && v > 0 {
			c.RopeScale = float32(v)
		}
	} else if typ != "" && typ != "none" {
		return &gguf.Error{Path: f.Path, Err: fmt.Errorf("%w: rope scaling %q is not supported (linear, llama3 rope_freqs and phi3 longrope only)", gguf.ErrMetadata, typ)}
	}
	if v, ok := m.float("rope.scale_linear"); ok && v > 0 {
		c.RopeScale = float32(v)
	}
	if v, ok := m.float("rope.scaling.attn_factor"); ok && v > 0 {
		c.RopeAttnFactor = float32(v)
	}
	// rope factor tensors: one per rotated pair
	factors := func(name string) ([]float32, error) {
		if _, ok := f.Tensor(name); !ok {
			return nil, nil
		}
		t, data, err := f.TensorData(name, uint64(c.RopeDim/2))
		if err != nil {
			return nil, err
		}
		out := make([]float32, c.RopeDim/2)
		if err := quant.Dequantize(t.Type, data, out); err != nil {
			return nil, &gguf.Error{Path: f.Path, Err: fmt.Errorf("%s: %w", name, err)}
		}
		for i, v := range out {
			if !(v > 0) || math.IsInf(float64(v), 0) {
				return nil, &gguf.Error{Path: f.Path, Err: fmt.Errorf("%w: %s[%d] = %g is not a positive factor", gguf.ErrShape, name, i, v)}
			}
		}
		return out, nil
	}
	if c.RopeFreqs, err = factors("rope_freqs.weight"); err != nil {
		return err
	}
	if c.RopeLong, err = factors("rope_factors_long.weight"); err != nil {
		return err
	}
	if c.RopeShort, err = factors("rope_factors_short.weight"); err != nil {
		return err
	}
	if (c.RopeLong == nil) != (c.RopeShort == nil) {
		return &gguf.Error{Path: f.Path, Err: fmt.Errorf("%w: rope_factors_long and rope_factors_short come in pairs", gguf.ErrShape)}
	}
	if c.RopeOrigCtx, err = u("rope.scaling.original_context_length", c.CtxLen); err != nil {
		return err
	}

	c.AttnScale = float32(1 / math.Sqrt(float64(c.HeadDim)))
	if c.Window, err = u("attention.sliding_window", 0); err != nil {
		return err
	}
	return nil
}
