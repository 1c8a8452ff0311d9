// Package synth writes random-weight GGUF models with the shape of real ones.
// Forward-pass timing does not depend on weight values, so a synthetic model
// lets a user profile a model they have not downloaded, and lets tests build
// models of any size. Every file is marked synthetic in its metadata
// (arborist.synthetic = true) so no screen or report mistakes it for a real
// model.
package synth

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"

	"arborist/engine/gguf"
	"arborist/kernels/quant"
)

// Shape is a model's architecture and dimensions.
type Shape struct {
	Name     string
	Arch     string // llama or qwen2
	Dim      int
	Layers   int
	Heads    int
	KVHeads  int
	FFN      int
	Vocab    int
	CtxLen   int
	RopeBase float32
	Tied     bool // no output.weight: the head reuses token_embd
}

// Shapes are the named shapes synth knows, from the models' published configs.
var Shapes = map[string]Shape{
	"llama-2-7b":     {Arch: "llama", Dim: 4096, Layers: 32, Heads: 32, KVHeads: 32, FFN: 11008, Vocab: 32000, CtxLen: 4096, RopeBase: 10000},
	"llama-3.2-1b":   {Arch: "llama", Dim: 2048, Layers: 16, Heads: 32, KVHeads: 8, FFN: 8192, Vocab: 128256, CtxLen: 131072, RopeBase: 500000, Tied: true},
	"tinyllama-1.1b": {Arch: "llama", Dim: 2048, Layers: 22, Heads: 32, KVHeads: 4, FFN: 5632, Vocab: 32000, CtxLen: 2048, RopeBase: 10000},
	"qwen2.5-0.5b":   {Arch: "qwen2", Dim: 896, Layers: 24, Heads: 14, KVHeads: 2, FFN: 4864, Vocab: 151936, CtxLen: 32768, RopeBase: 1000000, Tied: true},
	"stories15m":     {Arch: "llama", Dim: 288, Layers: 6, Heads: 6, KVHeads: 6, FFN: 768, Vocab: 32000, CtxLen: 256, RopeBase: 10000},
	"stories110m":    {Arch: "llama", Dim: 768, Layers: 12, Heads: 12, KVHeads: 12, FFN: 2048, Vocab: 32000, CtxLen: 1024, RopeBase: 10000},
	"stories260k":    {Arch: "llama", Dim: 64, Layers: 5, Heads: 8, KVHeads: 4, FFN: 172, Vocab: 512, CtxLen: 512, RopeBase: 10000},
}

// ShapeNames lists the named shapes, sorted.
func ShapeNames() []string {
	var names []string
	for n := range Shapes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ParseShape accepts a named shape, or custom dimensions written as
// "custom:dim=512,layers=4,heads=8,kv=4,ffn=1376,vocab=512[,ctx=2048][,arch=qwen2][,tied=1]".
func ParseShape(s string) (Shape, error) {
	if sh, ok := Shapes[strings.ToLower(s)]; ok {
		sh.Name = strings.ToLower(s)
		return sh, nil
	}
	spec, ok := strings.CutPrefix(s, "custom:")
	if !ok {
		return Shape{}, fmt.Errorf("synth: unknown shape %q (named shapes: %s; or custom:dim=..,layers=..,heads=..,kv=..,ffn=..,vocab=..)", s, strings.Join(ShapeNames(), ", "))
	}
	sh := Shape{Name: s, Arch: "llama", CtxLen: 2048, RopeBase: 10000}
	for _, kv := range strings.Split(spec, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return Shape{}, fmt.Errorf("synth: custom shape entry %q is not key=value", kv)
		}
		if k == "arch" {
			if v != "llama" && v != "qwen2" {
				return Shape{}, fmt.Errorf("synth: arch %q (want llama or qwen2)", v)
			}
			sh.Arch = v
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return Shape{}, fmt.Errorf("synth: custom shape %s=%q is not a non-negative integer", k, v)
		}
		switch k {
		case "dim":
			sh.Dim = n
		case "layers":
			sh.Layers = n
		case "heads":
			sh.Heads = n
		case "kv":
			sh.KVHeads = n
		case "ffn":
			sh.FFN = n
		case "vocab":
			sh.Vocab = n
		case "ctx":
			sh.CtxLen = n
		case "tied":
			sh.Tied = n != 0
		case "rope":
			sh.RopeBase = float32(n)
		default:
			return Shape{}, fmt.Errorf("synth: unknown custom shape key %q", k)
		}
	}
	if sh.KVHeads == 0 {
		sh.KVHeads = sh.Heads
	}
	if err := sh.Validate(); err != nil {
		return Shape{}, err
	}
	return sh, nil
}

// Validate checks the dimensions describe a runnable model.
func (s Shape) Validate() error {
	switch {
	case s.Dim <= 0 || s.Layers <= 0 || s.Heads <= 0 || s.FFN <= 0 || s.Vocab <= 0 || s.CtxLen <= 0:
		return fmt.Errorf("synth: shape %s needs positive dim, layers, heads, ffn, vocab and ctx", s.Name)
	case s.Dim%s.Heads != 0 || s.KVHeads <= 0 || s.Heads%s.KVHeads != 0:
		return fmt.Errorf("synth: shape %s: %d heads and %d kv heads do not divide width %d", s.Name, s.Heads, s.KVHeads, s.Dim)
	case (s.Dim/s.Heads)%2 != 0:
		return fmt.Errorf("synth: shape %s: head width %d must be even for RoPE", s.Name, s.Dim/s.Heads)
	case s.Vocab < 259:
		return fmt.Errorf("synth: shape %s: vocab %d is below the 259 tokens of the byte-fallback vocabulary", s.Name, s.Vocab)
	}
	return nil
}

// Params is the number of weights.
func (s Shape) Params() uint64 {
	hd := s.Dim / s.Heads
	per := uint64(s.Dim)*uint64(s.Heads*hd)*2 + uint64(s.Dim)*uint64(s.KVHeads*hd)*2 + uint64(s.Dim)*uint64(s.FFN)*3 + 2*uint64(s.Dim)
	n := uint64(s.Layers)*per + uint64(s.Dim)*uint64(s.Vocab) + uint64(s.Dim)
	if !s.Tied {
		n += uint64(s.Dim) * uint64(s.Vocab)
	}
	if s.Arch == "qwen2" {
		n += uint64(s.Layers) * uint64(s.Heads*hd+2*s.KVHeads*hd)
	}
	return n
}

// Options control what Write produces.
type Options struct {
	Type quant.Type // type of the 2-D weights; norms stay F32
	Seed uint64
	// Progress, when set, is called with bytes written so far and the total.
	Progress func(done, total uint64)
}

// Vocab builds the synthetic SentencePiece vocabulary: <unk>, <s>, </s>,
// the 256 byte-fallback tokens, then filler pieces, so any text encodes
// (through byte fallback) and any id decodes.
func Vocab(n int) (tokens []string, scores []float32, types []int32) {
	tokens = []string{"<unk>", "<s>", "</s>"}
	types = []int32{2, 3, 3}
	for b := 0; b < 256; b++ {
		tokens = append(tokens, fmt.Sprintf("<0x%02X>", b))
		types = append(types, 6)
	}
	for i := len(tokens); i < n; i++ {
		tokens = append(tokens, fmt.Sprintf("\u2581tok%d", i))
		types = append(types, 1)
	}
	scores = make([]float32, n)
	for i := range scores {
		scores[i] = -float32(i)
	}
	return tokens[:n], scores, types[:n]
}

// Write streams a synthetic model of shape s to w.
func Write(ctx context.Context, w io.Writer, s Shape, opt Options) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if !opt.Type.Supported() {
		return fmt.Errorf("synth: weight type %s is not supported", opt.Type)
	}
	if s.Dim%opt.Type.BlockSize() != 0 || s.FFN%opt.Type.BlockSize() != 0 {
		return fmt.Errorf("synth: %s needs rows that are multiples of %d; shape %s has width %d and ffn %d", opt.Type, opt.Type.BlockSize(), s.Name, s.Dim, s.FFN)
	}
	a := s.Arch
	hd := s.Dim / s.Heads
	tokens, scores, types := Vocab(s.Vocab)
	kvs := []gguf.KV{
		gguf.String("general.architecture", a),
		gguf.String("general.name", "synthetic "+s.Name),
		gguf.Bool("arborist.synthetic", true),
		gguf.String("arborist.synthetic_shape", s.Name),
		gguf.Uint32("general.file_type", fileType(opt.Type)),
		gguf.Uint32(a+".context_length", uint32(s.CtxLen)),
		gguf.Uint32(a+".embedding_length", uint32(s.Dim)),
		gguf.Uint32(a+".block_count", uint32(s.Layers)),
		gguf.Uint32(a+".feed_forward_length", uint32(s.FFN)),
		gguf.Uint32(a+".attention.head_count", uint32(s.Heads)),
		gguf.Uint32(a+".attention.head_count_kv", uint32(s.KVHeads)),
		gguf.Uint32(a+".rope.dimension_count", uint32(hd)),
		gguf.Float32(a+".rope.freq_base", s.RopeBase),
		gguf.Float32(a+".attention.layer_norm_rms_epsilon", 1e-5),
		gguf.String("tokenizer.ggml.model", "llama"),
		gguf.Array("tokenizer.ggml.tokens", tokens),
		gguf.Array("tokenizer.ggml.scores", scores),
		gguf.Array("tokenizer.ggml.token_type", types),
		gguf.Uint32("tokenizer.ggml.bos_token_id", 1),
		gguf.Uint32("tokenizer.ggml.eos_token_id", 2),
		gguf.Uint32("tokenizer.ggml.unknown_token_id", 0),
	}
	var ts []gguf.WriteTensor
	var total uint64
	add := func(name string, typ quant.Type, std float32, dims ...uint64) {
		t := gguf.WriteTensor{Name: name, Dims: dims, Type: typ}
		total += t.Bytes()
		seed := opt.Seed ^ hash(name)
		t.Fill = func(w io.Writer) error { return fill(ctx, w, typ, dims, std, seed) }
		ts = append(ts, t)
	}
	d, q, kv, f, v := uint64(s.Dim), uint64(s.Heads*hd), uint64(s.KVHeads*hd), uint64(s.FFN), uint64(s.Vocab)
	std := float32(1 / math.Sqrt(float64(s.Dim)))
	add("token_embd.weight", opt.Type, 1, d, v)
	for l := 0; l < s.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		add(p+"attn_norm.weight", quant.F32, -1, d)
		add(p+"attn_q.weight", opt.Type, std, d, q)
		add(p+"attn_k.weight", opt.Type, std, d, kv)
		add(p+"attn_v.weight", opt.Type, std, d, kv)
		if a == "qwen2" {
			add(p+"attn_q.bias", quant.F32, 0.02, q)
			add(p+"attn_k.bias", quant.F32, 0.02, kv)
			add(p+"attn_v.bias", quant.F32, 0.02, kv)
		}
		add(p+"attn_output.weight", opt.Type, std, q, d)
		add(p+"ffn_norm.weight", quant.F32, -1, d)
		add(p+"ffn_gate.weight", opt.Type, std, d, f)
		add(p+"ffn_up.weight", opt.Type, std, d, f)
		add(p+"ffn_down.weight", opt.Type, float32(1/math.Sqrt(float64(s.FFN))), f, d)
	}
	add("output_norm.weight", quant.F32, -1, d)
	if !s.Tied {
		add("output.weight", opt.Type, std, d, v)
	}
	// progress counts the bytes each tensor's Fill writes through gguf.Write
	pw := &progressWriter{total: total, fn: opt.Progress}
	for i := range ts {
		fill := ts[i].Fill
		ts[i].Fill = func(w io.Writer) error { pw.w = w; return fill(pw) }
	}
	return gguf.Write(w, kvs, ts)
}

func fileType(t quant.Type) uint32 {
	// llama.cpp's LLAMA_FTYPE values for the uniform types
	switch t {
	case quant.F32:
		return 0
	case quant.F16:
		return 1
	case quant.Q4_0:
		return 2
	case quant.Q4_1:
		return 3
	case quant.Q8_0:
		return 7
	case quant.Q5_0:
		return 8
	case quant.Q5_1:
		return 9
	case quant.Q4_K:
		return 15
	case quant.Q5_K:
		return 17
	case quant.Q6_K:
		return 18
	case quant.Q2_K:
		return 10
	case quant.Q3_K:
		return 12
	case quant.IQ4_NL:
		return 25
	case quant.IQ4_XS:
		return 30
	case quant.BF16:
		return 32
	}
	return 0
}

func hash(s string) uint64 {
	h := uint64(1469598103934665603)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

type progressWriter struct {
	w     io.Writer
	done  uint64
	total uint64
	last  uint64
	fn    func(done, total uint64)
}

func (p *progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.done += uint64(n)
	if p.fn != nil && (p.done-p.last >= 16<<20 || p.done == p.total) {
		p.last = p.done
		p.fn(p.done, p.total)
	}
	return n, err
}

// fill writes a tensor of normal(0, std) values (std < 0: all ones, for
// norms) row by row, quantised to typ.
func fill(ctx context.Context, w io.Writer, typ quant.Type, dims []uint64, std float32, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	cols := int(dims[0])
	rows := 1
	for _, d := range dims[1:] {
		rows *= int(d)
	}
	rb, err := quant.RowBytes(typ, cols)
	if err != nil {
		return err
	}
	// a chunk of rows at a time keeps writes large and memory small
	per := max(1, (4<<20)/max(rb, 1))
	x := make([]float32, cols*per)
	buf := make([]byte, rb*per)
	for r := 0; r < rows; r += per {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(per, rows-r)
		xs := x[:n*cols]
		for i := range xs {
			if std < 0 {
				xs[i] = 1
			} else {
				xs[i] = float32(rng.NormFloat64()) * std
			}
		}
		if err := quant.Quantize(typ, xs, buf[:n*rb]); err != nil {
			return err
		}
		if _, err := w.Write(buf[:n*rb]); err != nil {
			return err
		}
	}
	return nil
}

// WriteFile writes a synthetic model to path atomically (a failure or a
// cancellation leaves no partial file under that name).
func WriteFile(ctx context.Context, path string, s Shape, opt Options) error {
	return gguf.WriteFileFunc(path, func(w io.Writer) error { return Write(ctx, w, s, opt) })
}
