// Package model runs Llama-family transformers (llama, qwen2) from GGUF
// files on a kernels.Backend.
//
// The forward pass takes a batch of tokens with explicit positions and an
// explicit attention mask over the KV cache and the batch itself, so plain
// decoding (one token), prefill (a causal block) and speculative tree
// verification (a tree-shaped mask) are the same call. The cache supports
// append, truncation and compaction to a chosen list of slots, which is how
// rejected draft branches are dropped.
package model

import (
	"fmt"

	"arborist/engine/gguf"
)

// Config is a model's hyperparameters, read from GGUF metadata.
type Config struct {
	Arch      string  // "llama" or "qwen2"
	Dim       int     // embedding width n
	Layers    int     // transformer blocks
	Heads     int     // query heads
	KVHeads   int     // key/value heads (grouped-query attention)
	HeadDim   int     // Dim / Heads
	FFN       int     // SwiGLU hidden width
	Vocab     int     // output logits
	CtxLen    int     // trained context length
	RopeDim   int     // leading dims of each head that are rotated
	RopeBase  float32 // frequency base
	RopeScale float32 // linear position scale (positions are divided by it)
	RopeNeox  bool    // rotate (i, i+d/2) pairs instead of (2i, 2i+1)
	Eps       float32 // RMSNorm epsilon
	QKVBias   bool    // qwen2: biases on Q, K, V
}

// KVDim is the width of one cached key (or value) row.
func (c *Config) KVDim() int { return c.KVHeads * c.HeadDim }

// SupportedArchs lists the architectures this package runs.
var SupportedArchs = []string{"llama", "qwen2"}

// ErrArch reports an architecture this package does not run.
var ErrArch = fmt.Errorf("model: unsupported architecture")

// ReadConfig extracts the hyperparameters of a llama or qwen2 GGUF.
func ReadConfig(f *gguf.File) (Config, error) {
	arch := f.Architecture()
	var c Config
	c.Arch = arch
	switch arch {
	case "llama", "mistral":
		c.Arch = "llama"
	case "qwen2":
		c.RopeNeox, c.QKVBias = true, true
	default:
		return c, &gguf.Error{Path: f.Path, Err: fmt.Errorf("%w %q (Arborist runs %v)", ErrArch, arch, SupportedArchs)}
	}
	bad := func(key string) error {
		return &gguf.Error{Path: f.Path, Err: fmt.Errorf("%w: %s.%s", gguf.ErrMetadata, arch, key)}
	}
	u := func(key string, def int) (int, error) {
		v, ok := f.Uint(arch + "." + key)
		if !ok {
			if def >= 0 {
				return def, nil
			}
			return 0, bad(key)
		}
		if v == 0 || v > 1<<24 {
			return 0, bad(key + fmt.Sprintf(" = %d", v))
		}
		return int(v), nil
	}
	var err error
	if c.Dim, err = u("embedding_length", -1); err != nil {
		return c, err
	}
	if c.Layers, err = u("block_count", -1); err != nil {
		return c, err
	}
	if c.Heads, err = u("attention.head_count", -1); err != nil {
		return c, err
	}
	if c.KVHeads, err = u("attention.head_count_kv", c.Heads); err != nil {
		return c, err
	}
	if c.FFN, err = u("feed_forward_length", -1); err != nil {
		return c, err
	}
	if c.CtxLen, err = u("context_length", 2048); err != nil {
		return c, err
	}
	if c.Dim%c.Heads != 0 || c.Heads%c.KVHeads != 0 {
		return c, &gguf.Error{Path: f.Path, Err: fmt.Errorf("%w: %d heads, %d kv heads, width %d do not divide", gguf.ErrMetadata, c.Heads, c.KVHeads, c.Dim)}
	}
	c.HeadDim = c.Dim / c.Heads
	if kl, ok := f.Uint(arch + ".attention.key_length"); ok && int(kl) != c.HeadDim {
		return c, &gguf.Error{Path: f.Path, Err: fmt.Errorf("%w: key_length %d differs from width/heads %d", gguf.ErrMetadata, kl, c.HeadDim)}
	}
	if c.RopeDim, err = u("rope.dimension_count", c.HeadDim); err != nil {
		return c, err
	}
	if c.RopeDim > c.HeadDim || c.RopeDim%2 != 0 {
		return c, bad(fmt.Sprintf("rope.dimension_count = %d", c.RopeDim))
	}
	c.RopeBase, c.RopeScale, c.Eps = 10000, 1, 1e-5
	if v, ok := f.Float(arch + ".rope.freq_base"); ok {
		c.RopeBase = float32(v)
	}
	if v, ok := f.Float(arch + ".attention.layer_norm_rms_epsilon"); ok {
		c.Eps = float32(v)
	}
	if typ, _ := f.String(arch + ".rope.scaling.type"); typ == "linear" {
		if v, ok := f.Float(arch + ".rope.scaling.factor"); ok && v > 0 {
			c.RopeScale = float32(v)
		}
	} else if typ != "" && typ != "none" {
		return c, &gguf.Error{Path: f.Path, Err: fmt.Errorf("%w: rope scaling %q is not supported (linear only)", gguf.ErrMetadata, typ)}
	}
	if v, ok := f.Float(arch + ".rope.scale_linear"); ok && v > 0 {
		c.RopeScale = float32(v)
	}
	return c, checkLimits(f, &c)
}
