package model

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"arborist/engine/gguf"
	"arborist/engine/tokenizer"
)

// Limits on a model's hyperparameters, checked when its metadata is read
// and before anything is allocated for it. They follow the reference
// engine's own limits (llama.cpp refuses more than 512 layers) and sit far
// above any model this engine can run on a CPU; a file beyond them is
// damaged or hostile, and is refused with the key that broke them.
const (
	MaxLayers  = 512     // llama.cpp's LLAMA_MAX_LAYERS
	MaxWidth   = 1 << 16 // embedding width (the largest models use 16K)
	MaxHeads   = 1024    // query heads
	MaxFFN     = 1 << 20 // SwiGLU hidden width
	MaxContext = 1 << 24 // trained context length
)

// checkLimits bounds c's sizes and checks its floats, then checks that the
// file holds tensors for every layer it claims (and none past them): one
// pass over the tensor names, so a file whose block_count is 2^24 is
// refused at once instead of allocating and visiting every layer.
func checkLimits(f *gguf.File, c *Config) error {
	bad := func(format string, args ...any) error {
		return &gguf.Error{Path: f.Path, Err: fmt.Errorf("%w: "+format, append([]any{gguf.ErrMetadata}, args...)...)}
	}
	for _, l := range []struct {
		key      string
		v, limit int
	}{
		{"block_count", c.Layers, MaxLayers},
		{"embedding_length", c.Dim, MaxWidth},
		{"attention.head_count", c.Heads, MaxHeads},
		{"feed_forward_length", c.FFN, MaxFFN},
		{"context_length", c.CtxLen, MaxContext},
	} {
		if l.v > l.limit {
			return bad("%s.%s = %d is more than Arborist's limit of %d", c.Arch, l.key, l.v, l.limit)
		}
	}
	for _, v := range []struct {
		key string
		v   float32
		max float64
	}{
		{"attention.layer_norm_rms_epsilon", c.Eps, 1},
		{"rope.freq_base", c.RopeBase, math.MaxFloat32},
		{"rope scale", c.RopeScale, math.MaxFloat32},
	} {
		x := float64(v.v)
		if math.IsNaN(x) || math.IsInf(x, 0) || x <= 0 || x >= v.max {
			return bad("%s.%s = %g must be a finite positive number (below %g)", c.Arch, v.key, v.v, v.max)
		}
	}
	return checkLayers(f, c.Layers)
}

// checkLayers checks that every layer 0..layers-1 has tensors (blk.N.*) and
// that no tensor belongs to a layer past them, whatever the architecture's
// tensor names.
func checkLayers(f *gguf.File, layers int) error {
	seen := make([]bool, layers)
	for i := range f.Tensors {
		rest, ok := strings.CutPrefix(f.Tensors[i].Name, "blk.")
		if !ok {
			continue
		}
		num, _, _ := strings.Cut(rest, ".")
		n, err := strconv.Atoi(num)
		if err != nil || n < 0 {
			continue
		}
		if n >= layers {
			return &gguf.Error{Path: f.Path, Err: fmt.Errorf("%w: tensor %s belongs to layer %d but block_count is %d", gguf.ErrMetadata, f.Tensors[i].Name, n, layers)}
		}
		seen[n] = true
	}
	for i, ok := range seen {
		if !ok {
			return &gguf.Error{Path: f.Path, Err: fmt.Errorf("%w: no tensors for layer %d (blk.%d.*) of the %d that block_count claims", gguf.ErrNoTensor, i, i, layers)}
		}
	}
	return nil
}

// Check reads f's configuration and tokenizer and checks, without loading
// anything, that every tensor a model of its architecture needs is present
// with the right shape and a type the kernels compute with, and that the
// embedding's rows match the vocabulary. It is what inspect reports as
// "runnable", and what Load would refuse.
func Check(f *gguf.File) error {
	c, fam, err := readConfig(f)
	if err != nil {
		return err
	}
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		return err
	}
	n, hd := uint64(c.Dim), uint64(c.HeadDim)
	et, ok := f.Tensor("token_embd.weight")
	if !ok {
		return &gguf.Error{Path: f.Path, Err: fmt.Errorf("%w: token_embd.weight", gguf.ErrNoTensor)}
	}
	if len(et.Dims) != 2 || et.Dims[0] != n {
		return &gguf.Error{Path: f.Path, Err: fmt.Errorf("%w: token_embd.weight is %v, want [%d vocab]", gguf.ErrShape, et.Dims, n)}
	}
	vocab := et.Dims[1]
	if int(vocab) != tok.VocabSize() {
		return &gguf.Error{Path: f.Path, Err: fmt.Errorf("%w: token_embd.weight has %d rows but the vocabulary has %d tokens", gguf.ErrShape, vocab, tok.VocabSize())}
	}
	qd, kvd, ffn := uint64(c.Heads)*hd, uint64(c.KVHeads)*hd, uint64(c.FFN)
	need := func(name string, dims ...uint64) error {
		_, _, err := f.TensorData(name, dims...)
		return err
	}
	type tensor struct {
		name string
		dims []uint64
	}
	// the tensors FromFile loads, in its order
	fusedQKV, fusedUp := layout(f, fam)
	for i := 0; i < c.Layers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		ts := []tensor{{"attn_norm.weight", []uint64{n}}}
		if fusedQKV {
			ts = append(ts, tensor{"attn_qkv.weight", []uint64{n, qd + 2*kvd}})
		} else {
			ts = append(ts, tensor{"attn_q.weight", []uint64{n, qd}}, tensor{"attn_k.weight", []uint64{n, kvd}}, tensor{"attn_v.weight", []uint64{n, kvd}})
		}
		ts = append(ts, tensor{"attn_output.weight", []uint64{qd, n}}, tensor{"ffn_norm.weight", []uint64{n}})
		if fusedUp {
			ts = append(ts, tensor{"ffn_up.weight", []uint64{n, 2 * ffn}})
		} else {
			ts = append(ts, tensor{"ffn_gate.weight", []uint64{n, ffn}}, tensor{"ffn_up.weight", []uint64{n, ffn}})
		}
		ts = append(ts, tensor{"ffn_down.weight", []uint64{ffn, n}})
		if c.QKVBias {
			ts = append(ts, tensor{"attn_q.bias", []uint64{qd}}, tensor{"attn_k.bias", []uint64{kvd}}, tensor{"attn_v.bias", []uint64{kvd}})
		}
		if c.QKNorm {
			ts = append(ts, tensor{"attn_q_norm.weight", []uint64{hd}}, tensor{"attn_k_norm.weight", []uint64{hd}})
		}
		if c.PostNorms {
			ts = append(ts, tensor{"post_attention_norm.weight", []uint64{n}}, tensor{"post_ffw_norm.weight", []uint64{n}})
		}
		for _, t := range ts {
			if err := need(p+t.name, t.dims...); err != nil {
				return err
			}
		}
	}
	if err := need("output_norm.weight", n); err != nil {
		return err
	}
	if _, ok := f.Tensor("output.weight"); ok {
		return need("output.weight", n, vocab)
	}
	return need("token_embd.weight", n, vocab)
}

// CheckCache refuses a KV cache of slots positions that needs more memory
// than the machine has, before it is allocated: a context from a file or a
// flag then gets an error naming the sizes instead of the process being
// killed for memory.
func (m *Model) CheckCache(slots int) error {
	need := m.KVBytesAs(slots, m.KVType)
	if ram := physicalMemory(); ram > 0 && need > ram {
		return &gguf.Error{Path: m.Path, Err: fmt.Errorf("model: a KV cache of %d positions needs %d MiB, more than this machine's %d MiB of memory; use a shorter context", slots, need>>20, ram>>20)}
	}
	return nil
}
