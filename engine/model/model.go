package model

import (
	"fmt"

	"arborist/engine/gguf"
	"arborist/engine/tokenizer"
	"arborist/kernels"
	"arborist/kernels/quant"
)

// Layer is one transformer block, named like its GGUF tensors (blk.N.*).
// Vectors are on the model's device (kernels.Device.NewVector).
type Layer struct {
	AttnNorm   kernels.Tensor // attn_norm [n]
	Q          kernels.Matrix // attn_q [n -> heads*hd]
	K, V       kernels.Matrix // attn_k, attn_v [n -> kvheads*hd]
	QB, KB, VB kernels.Tensor // qwen2 biases [heads*hd], [kvheads*hd], nil for llama
	O          kernels.Matrix // attn_output [heads*hd -> n]
	FFNNorm    kernels.Tensor // ffn_norm [n]
	Gate, Up   kernels.Matrix // ffn_gate, ffn_up [n -> ffn]
	Down       kernels.Matrix // ffn_down [ffn -> n]

	QNorm, KNorm kernels.Tensor // attn_q_norm, attn_k_norm [hd] (qwen3, gemma3), nil otherwise
	PostAttn     kernels.Tensor // post_attention_norm [n] (gemma2, gemma3), nil otherwise
	PostFFN      kernels.Tensor // post_ffw_norm [n] (gemma2, gemma3), nil otherwise
}

// Model is a loaded model: configuration, weights on a device, tokenizer.
// The forward pass (forward.go) is written once, on kernels.Device
// primitives; a backend implements the primitives, not the architectures.
type Model struct {
	Config
	Path    string
	File    *gguf.File
	Tok     *tokenizer.Tokenizer
	Backend kernels.Device
	// KVType is the element type of the caches NewCache makes: quant.F32
	// (the default, the zero value) or quant.F16, which halves their
	// memory at a measured cost in accuracy (docs/KV-CACHE.md).
	KVType quant.Type

	embdType quant.Type
	embd     []byte         // token_embd rows, for host lookups (Embed)
	embdRow  int            // bytes per embedding row
	embdM    kernels.Matrix // token_embd [vocab rows of n] on the device, for the pass

	Blocks  []Layer
	OutNorm kernels.Tensor // output_norm [n]
	Output  kernels.Matrix // output [n -> vocab], token_embd when tied

	// maxRows bounds the rows of one pass (0: MaxRows); tests lower it.
	maxRows int
}

// MaxRows is the most rows one pass takes: a longer causal batch (a long
// prompt) runs as passes of at most MaxRows rows. A row computes the same
// bits alone as in a batch (the device suites check it), so the outputs do
// not change, while the activations stay bounded (a 100K-token prompt in
// one pass would take gigabytes of them) and a device's launch grids fit.
const MaxRows = 2048

// Load opens a GGUF model on backend be. The file stays mapped until Close.
func Load(path string, be kernels.Device) (*Model, error) {
	return LoadWith(path, be, gguf.Options{})
}

// FromFile builds a model over an open GGUF file, which it then owns.
func FromFile(f *gguf.File, be kernels.Device) (*Model, error) {
	cfg, fam, err := readConfig(f)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		return nil, err
	}
	m := &Model{Config: cfg, Path: f.Path, File: f, Tok: tok, Backend: be}
	n, hd := uint64(cfg.Dim), uint64(cfg.HeadDim)
	et, embd, err := f.TensorData("token_embd.weight")
	if err != nil {
		return nil, err
	}
	if len(et.Dims) != 2 || et.Dims[0] != n {
		return nil, &gguf.Error{Path: f.Path, Err: fmt.Errorf("%w: token_embd.weight is %v, want [%d vocab]", gguf.ErrShape, et.Dims, n)}
	}
	m.Vocab = int(et.Dims[1])
	if m.Vocab != tok.VocabSize() {
		return nil, &gguf.Error{Path: f.Path, Err: fmt.Errorf("%w: token_embd.weight has %d rows but the vocabulary has %d tokens", gguf.ErrShape, m.Vocab, tok.VocabSize())}
	}
	m.embdType, m.embd = et.Type, embd
	m.embdRow, _ = quant.RowBytes(et.Type, cfg.Dim)

	// vec and mat load tensors; the first failure is kept in loadErr and
	// every later call is skipped, so a block's tensors read straight down.
	var loadErr error
	vec := func(name string, size uint64) kernels.Tensor {
		if loadErr != nil {
			return nil
		}
		t, data, err := f.TensorData(name, size)
		if err != nil {
			loadErr = err
			return nil
		}
		out := make([]float32, size)
		if err := quant.Dequantize(t.Type, data, out); err != nil {
			loadErr = &gguf.Error{Path: f.Path, Err: fmt.Errorf("%s: %w", name, err)}
			return nil
		}
		v, err := be.NewVector(out)
		if err != nil {
			loadErr = &gguf.Error{Path: f.Path, Err: fmt.Errorf("%s: %w", name, err)}
			return nil
		}
		return v
	}
	// matRows prepares rows [lo, lo+rows) of a tensor of in-wide rows: the
	// parts of phi3's fused attn_qkv and ffn_up, which are stored one after
	// the other, become separate matrices without copying.
	matRows := func(name string, in, total, lo, rows uint64) kernels.Matrix {
		if loadErr != nil {
			return nil
		}
		t, data, err := f.TensorData(name, in, total)
		if err != nil {
			loadErr = err
			return nil
		}
		rb, err := quant.RowBytes(t.Type, int(in))
		if err != nil {
			loadErr = &gguf.Error{Path: f.Path, Err: fmt.Errorf("%s: %w", name, err)}
			return nil
		}
		mm, err := be.NewMatrix(t.Type, data[lo*uint64(rb):(lo+rows)*uint64(rb)], int(rows), int(in))
		if err != nil {
			loadErr = &gguf.Error{Path: f.Path, Err: fmt.Errorf("%s: %w", name, err)}
			return nil
		}
		return mm
	}
	mat := func(name string, in, out uint64) kernels.Matrix { return matRows(name, in, out, 0, out) }
	qd, kvd := uint64(cfg.QDim()), uint64(cfg.KVHeads)*hd
	ffn := uint64(cfg.FFN)
	fusedQKV, fusedUp := layout(f, fam)
	m.Blocks = make([]Layer, cfg.Layers)
	for i := range m.Blocks {
		l := &m.Blocks[i]
		p := fmt.Sprintf("blk.%d.", i)
		l.AttnNorm = vec(p+"attn_norm.weight", n)
		if fusedQKV {
			// rows Q, then K, then V
			name := p + "attn_qkv.weight"
			l.Q = matRows(name, n, qd+2*kvd, 0, qd)
			l.K = matRows(name, n, qd+2*kvd, qd, kvd)
			l.V = matRows(name, n, qd+2*kvd, qd+kvd, kvd)
		} else {
			l.Q = mat(p+"attn_q.weight", n, qd)
			l.K = mat(p+"attn_k.weight", n, kvd)
			l.V = mat(p+"attn_v.weight", n, kvd)
		}
		l.O = mat(p+"attn_output.weight", qd, n)
		l.FFNNorm = vec(p+"ffn_norm.weight", n)
		if fusedUp {
			// rows gate, then up
			l.Gate = matRows(p+"ffn_up.weight", n, 2*ffn, 0, ffn)
			l.Up = matRows(p+"ffn_up.weight", n, 2*ffn, ffn, ffn)
		} else {
			l.Gate = mat(p+"ffn_gate.weight", n, ffn)
			l.Up = mat(p+"ffn_up.weight", n, ffn)
		}
		l.Down = mat(p+"ffn_down.weight", ffn, n)
		if cfg.QKVBias {
			l.QB = vec(p+"attn_q.bias", qd)
			l.KB = vec(p+"attn_k.bias", kvd)
			l.VB = vec(p+"attn_v.bias", kvd)
		}
		if cfg.QKNorm {
			l.QNorm = vec(p+"attn_q_norm.weight", hd)
			l.KNorm = vec(p+"attn_k_norm.weight", hd)
		}
		if cfg.PostNorms {
			l.PostAttn = vec(p+"post_attention_norm.weight", n)
			l.PostFFN = vec(p+"post_ffw_norm.weight", n)
		}
	}
	m.OutNorm = vec("output_norm.weight", n)
	m.embdM = mat("token_embd.weight", n, uint64(m.Vocab))
	if _, ok := f.Tensor("output.weight"); ok {
		m.Output = mat("output.weight", n, uint64(m.Vocab))
	} else {
		m.Output = m.embdM // tied embeddings
	}
	if loadErr != nil {
		return nil, loadErr
	}
	return m, nil
}

// layout says how f's layers store their projections: Q, K and V fused in
// attn_qkv (rows Q, then K, then V) when the family says so or the file
// has that tensor, and gate and up fused in ffn_up (rows gate, then up)
// when there is no ffn_gate.
func layout(f *gguf.File, fam *family) (fusedQKV, fusedUp bool) {
	fusedQKV = fam.fusedQKV
	if _, ok := f.Tensor("blk.0.attn_qkv.weight"); ok {
		fusedQKV = true
	}
	_, fusedUp = f.Tensor("blk.0.ffn_up.weight")
	if _, ok := f.Tensor("blk.0.ffn_gate.weight"); ok {
		fusedUp = false
	}
	return fusedQKV, fusedUp
}

// Close releases the model file.
func (m *Model) Close() error { return m.File.Close() }

// Embed writes the embedding of token id into dst.
func (m *Model) Embed(id int, dst []float32) error {
	if id < 0 || id >= m.Vocab {
		return fmt.Errorf("model: token id %d out of range [0, %d)", id, m.Vocab)
	}
	return quant.Dequantize(m.embdType, m.embd[id*m.embdRow:(id+1)*m.embdRow], dst)
}

// MatMACs is the number of multiply-adds the weight matrices cost per token
// (every layer's projections and the output head): what one token of a
// pass computes, whatever the weights' type.
func (m *Model) MatMACs() int64 {
	var n int64
	add := func(w kernels.Matrix) {
		if w != nil {
			n += int64(w.Rows()) * int64(w.Cols())
		}
	}
	for i := range m.Blocks {
		l := &m.Blocks[i]
		for _, w := range []kernels.Matrix{l.Q, l.K, l.V, l.O, l.Gate, l.Up, l.Down} {
			add(w)
		}
	}
	add(m.Output)
	return n
}

// WeightBytes is the size of the weights read per token (all tensors).
func (m *Model) WeightBytes() uint64 { return m.File.WeightBytes() }

// KVBytes is the memory a KV cache of ctx positions takes (float32 K and V).
func (c *Config) KVBytes(ctx int) uint64 { return c.KVBytesAs(ctx, quant.F32) }

// KVBytesAs is the memory a KV cache of ctx positions of type t takes.
func (c *Config) KVBytesAs(ctx int, t quant.Type) uint64 {
	return uint64(ctx) * uint64(c.Layers) * c.kvPositionBytes(t)
}

// kvPositionBytes is one layer's key and value of one position in a
// cache of type t: the unit both the cache's size and a step's reads
// of it count in.
func (c *Config) kvPositionBytes(t quant.Type) uint64 {
	return uint64(c.KVDim()) * 2 * uint64(t.TypeSize())
}

// KVReadBytes is what a step attending over positions cached positions
// reads of a cache of type t: every layer's keys and values, a sliding
// layer's no further back than its window. Beside the weights, it is
// what a decode step must stream, and at long contexts a large part.
func (c *Config) KVReadBytes(positions int, t quant.Type) uint64 {
	var n uint64
	for l := range c.Layers {
		p := positions
		if c.SlidingLayer(l) {
			p = min(p, c.Window)
		}
		n += uint64(p)
	}
	return n * c.kvPositionBytes(t)
}

// HeadOn loads the final norm and the output head onto another device:
// for a drafter that shares the target's head (the hidden-state drafter)
// but runs on a device of its own while the target verifies.
func (m *Model) HeadOn(dev kernels.Device) (kernels.Tensor, kernels.Matrix, error) {
	f, n := m.File, uint64(m.Dim)
	t, data, err := f.TensorData("output_norm.weight", n)
	if err != nil {
		return nil, nil, err
	}
	w := make([]float32, n)
	if err := quant.Dequantize(t.Type, data, w); err != nil {
		return nil, nil, &gguf.Error{Path: f.Path, Err: fmt.Errorf("output_norm.weight: %w", err)}
	}
	norm, err := dev.NewVector(w)
	if err != nil {
		return nil, nil, err
	}
	name := "output.weight"
	if _, ok := f.Tensor(name); !ok {
		name = "token_embd.weight" // tied embeddings
	}
	ht, hdata, err := f.TensorData(name, n, uint64(m.Vocab))
	if err != nil {
		return nil, nil, err
	}
	head, err := dev.NewMatrix(ht.Type, hdata, m.Vocab, m.Dim)
	if err != nil {
		return nil, nil, &gguf.Error{Path: f.Path, Err: fmt.Errorf("%s: %w", name, err)}
	}
	return norm, head, nil
}
