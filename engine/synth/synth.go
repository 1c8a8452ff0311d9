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
	"slices"
	"sort"
	"strconv"
	"strings"

	"arborist/engine/gguf"
	"arborist/kernels/quant"
)

// Shape is a model's architecture and dimensions.
type Shape struct {
	Name     string
	Arch     string // llama, qwen2, qwen3, phi3, gemma, gemma2 or gemma3
	Dim      int
	Layers   int
	Heads    int
	KVHeads  int
	HeadDim  int // 0: Dim/Heads; otherwise written as attention.key_length
	FFN      int
	Vocab    int
	CtxLen   int
	RopeBase float32
	Tied     bool // no output.weight: the head reuses token_embd
	// Llama3Rope, when positive, is the llama3 rope-scaling factor (8 for
	// Llama 3.1, 32 for 3.2; low/high frequency factors 1 and 4, original
	// context 8192), written as the rope_freqs.weight tensor as llama.cpp's
	// converter does.
	Llama3Rope float32
	// LinearRope, when positive, is written as rope.scaling.type linear
	// with this factor (gemma3 4B and larger: 8).
	LinearRope float32
	Window     int // attention.sliding_window (gemma2, gemma3, phi3); 0 = none
	// LongRope writes phi3's rope_factors_long/short tensors (and the
	// attention factor) for an original context of 4096.
	LongRope bool
}

// HD is the width of one attention head.
func (s Shape) HD() int {
	if s.HeadDim > 0 {
		return s.HeadDim
	}
	return s.Dim / max(s.Heads, 1)
}

// Archs are the architectures synth writes.
var Archs = []string{"llama", "qwen2", "qwen3", "phi3", "gemma", "gemma2", "gemma3"}

// Shapes are the named shapes synth knows, from the models' published configs.
var Shapes = map[string]Shape{
	"llama-2-7b":     {Arch: "llama", Dim: 4096, Layers: 32, Heads: 32, KVHeads: 32, FFN: 11008, Vocab: 32000, CtxLen: 4096, RopeBase: 10000},
	"llama-3.2-1b":   {Arch: "llama", Dim: 2048, Layers: 16, Heads: 32, KVHeads: 8, FFN: 8192, Vocab: 128256, CtxLen: 131072, RopeBase: 500000, Tied: true, Llama3Rope: 32},
	"llama-3.2-3b":   {Arch: "llama", Dim: 3072, Layers: 28, Heads: 24, KVHeads: 8, FFN: 8192, Vocab: 128256, CtxLen: 131072, RopeBase: 500000, Tied: true, Llama3Rope: 32},
	"llama-3.1-8b":   {Arch: "llama", Dim: 4096, Layers: 32, Heads: 32, KVHeads: 8, FFN: 14336, Vocab: 128256, CtxLen: 131072, RopeBase: 500000, Llama3Rope: 8},
	"qwen3-0.6b":     {Arch: "qwen3", Dim: 1024, Layers: 28, Heads: 16, KVHeads: 8, HeadDim: 128, FFN: 3072, Vocab: 151936, CtxLen: 40960, RopeBase: 1000000, Tied: true},
	"qwen3-4b":       {Arch: "qwen3", Dim: 2560, Layers: 36, Heads: 32, KVHeads: 8, HeadDim: 128, FFN: 9728, Vocab: 151936, CtxLen: 40960, RopeBase: 1000000, Tied: true},
	"qwen3-8b":       {Arch: "qwen3", Dim: 4096, Layers: 36, Heads: 32, KVHeads: 8, HeadDim: 128, FFN: 12288, Vocab: 151936, CtxLen: 40960, RopeBase: 1000000},
	"gemma-2-2b":     {Arch: "gemma2", Dim: 2304, Layers: 26, Heads: 8, KVHeads: 4, HeadDim: 256, FFN: 9216, Vocab: 256000, CtxLen: 8192, RopeBase: 10000, Tied: true, Window: 4096},
	"gemma-3-1b":     {Arch: "gemma3", Dim: 1152, Layers: 26, Heads: 4, KVHeads: 1, HeadDim: 256, FFN: 6912, Vocab: 262144, CtxLen: 32768, RopeBase: 1000000, Tied: true, Window: 512},
	"gemma-3-4b":     {Arch: "gemma3", Dim: 2560, Layers: 34, Heads: 8, KVHeads: 4, HeadDim: 256, FFN: 10240, Vocab: 262208, CtxLen: 131072, RopeBase: 1000000, Tied: true, Window: 1024, LinearRope: 8},
	"phi-3-mini":     {Arch: "phi3", Dim: 3072, Layers: 32, Heads: 32, KVHeads: 32, FFN: 8192, Vocab: 32064, CtxLen: 4096, RopeBase: 10000, Window: 2047},
	"phi-3.5-mini":   {Arch: "phi3", Dim: 3072, Layers: 32, Heads: 32, KVHeads: 32, FFN: 8192, Vocab: 32064, CtxLen: 131072, RopeBase: 10000, Window: 262144, LongRope: true},
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
// "custom:dim=512,layers=4,heads=8,kv=4,ffn=1376,vocab=512[,ctx=2048][,arch=qwen2][,tied=1]
// [,hd=64][,window=128][,llama3rope=8][,linearrope=4][,longrope=1]".
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
			if !slices.Contains(Archs, v) {
				return Shape{}, fmt.Errorf("synth: arch %q (want one of %s)", v, strings.Join(Archs, ", "))
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
		case "hd":
			sh.HeadDim = n
		case "window":
			sh.Window = n
		case "llama3rope":
			sh.Llama3Rope = float32(n)
		case "linearrope":
			sh.LinearRope = float32(n)
		case "longrope":
			sh.LongRope = n != 0
		default:
			return Shape{}, fmt.Errorf("synth: unknown custom shape key %q", k)
		}
	}
	if sh.KVHeads == 0 {
		sh.KVHeads = sh.Heads
	}
	if strings.HasPrefix(sh.Arch, "gemma") {
		sh.Tied = true // the gemma family always shares its embeddings with the head
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
	case (s.HeadDim == 0 && s.Dim%s.Heads != 0) || s.KVHeads <= 0 || s.Heads%s.KVHeads != 0:
		return fmt.Errorf("synth: shape %s: %d heads and %d kv heads do not divide width %d", s.Name, s.Heads, s.KVHeads, s.Dim)
	case s.HD()%2 != 0:
		return fmt.Errorf("synth: shape %s: head width %d must be even for RoPE", s.Name, s.HD())
	case s.Arch == "phi3" && s.Window == 0:
		return fmt.Errorf("synth: shape %s: phi3 needs a sliding window (window=2047 for Phi-3-mini-4k)", s.Name)
	case s.Arch == "gemma3" && s.Window == 0:
		return fmt.Errorf("synth: shape %s: gemma3 needs a sliding window (window=512 for Gemma-3-1B)", s.Name)
	case s.Vocab < 259:
		return fmt.Errorf("synth: shape %s: vocab %d is below the 259 tokens of the byte-fallback vocabulary", s.Name, s.Vocab)
	}
	return nil
}

// Params is the number of weights.
func (s Shape) Params() uint64 {
	hd := s.HD()
	per := uint64(s.Dim)*uint64(s.Heads*hd)*2 + uint64(s.Dim)*uint64(s.KVHeads*hd)*2 + uint64(s.Dim)*uint64(s.FFN)*3 + 2*uint64(s.Dim)
	n := uint64(s.Layers)*per + uint64(s.Dim)*uint64(s.Vocab) + uint64(s.Dim)
	if !s.Tied {
		n += uint64(s.Dim) * uint64(s.Vocab)
	}
	switch s.Arch {
	case "qwen2":
		n += uint64(s.Layers) * uint64(s.Heads*hd+2*s.KVHeads*hd)
	case "qwen3":
		n += uint64(s.Layers) * uint64(2*hd)
	case "gemma2":
		n += uint64(s.Layers) * uint64(2*s.Dim)
	case "gemma3":
		n += uint64(s.Layers) * uint64(2*s.Dim+2*hd)
	}
	return n
}

// Options control what Write produces.
type Options struct {
	Type quant.Type // type of the 2-D weights; norms stay F32
	// Medium, with Type Q4_K or Q5_K, mixes the matrices' types as
	// llama.cpp's Q4_K_M and Q5_K_M files do (the files most users run),
	// so their products are timed on the types they will meet; see
	// tensorType.
	Medium bool
	Seed   uint64
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
	if opt.Medium && opt.Type != quant.Q4_K && opt.Type != quant.Q5_K {
		return fmt.Errorf("synth: a medium mix is of Q4_K or Q5_K, not %s", opt.Type)
	}
	if !opt.Medium && (s.Dim%opt.Type.BlockSize() != 0 || s.FFN%opt.Type.BlockSize() != 0) {
		return fmt.Errorf("synth: %s needs rows that are multiples of %d; shape %s has width %d and ffn %d", opt.Type, opt.Type.BlockSize(), s.Name, s.Dim, s.FFN)
	}
	a := s.Arch
	hd := s.HD()
	tokens, scores, types := Vocab(s.Vocab)
	kvs := []gguf.KV{
		gguf.String("general.architecture", a),
		gguf.String("general.name", "synthetic "+s.Name),
		gguf.Bool("arborist.synthetic", true),
		gguf.String("arborist.synthetic_shape", s.Name),
		gguf.Uint32("general.file_type", FileType(opt.Type)),
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
	if s.HeadDim > 0 {
		kvs = append(kvs, gguf.Uint32(a+".attention.key_length", uint32(hd)), gguf.Uint32(a+".attention.value_length", uint32(hd)))
	}
	if s.Window > 0 {
		kvs = append(kvs, gguf.Uint32(a+".attention.sliding_window", uint32(s.Window)))
	}
	if s.LinearRope > 0 {
		kvs = append(kvs, gguf.String(a+".rope.scaling.type", "linear"), gguf.Float32(a+".rope.scaling.factor", s.LinearRope))
	}
	if a == "gemma2" {
		kvs = append(kvs, gguf.Float32(a+".attn_logit_softcapping", 50), gguf.Float32(a+".final_logit_softcapping", 30))
	}
	if s.LongRope {
		orig := 4096
		kvs = append(kvs, gguf.Uint32(a+".rope.scaling.original_context_length", uint32(orig)),
			gguf.Float32(a+".rope.scaling.attn_factor", float32(math.Sqrt(1+math.Log(float64(s.CtxLen)/float64(orig))/math.Log(float64(orig))))))
	} else if a == "phi3" {
		kvs = append(kvs, gguf.Uint32(a+".rope.scaling.original_context_length", uint32(s.CtxLen)))
	}
	ts, total := tensors(ctx, s, opt)
	stop := prefetch(ctx, ts)
	defer stop()
	// progress counts the bytes each tensor's Fill writes through gguf.Write
	pw := &progressWriter{total: total, fn: opt.Progress}
	for i := range ts {
		fill := ts[i].Fill
		ts[i].Fill = func(w io.Writer) error { pw.w = w; return fill(pw) }
	}
	return gguf.Write(w, kvs, ts)
}

// tensors is what Write writes after the header: every tensor of shape s
// with its type and its filler, and their bytes in all.
func tensors(ctx context.Context, s Shape, opt Options) ([]gguf.WriteTensor, uint64) {
	a, hd := s.Arch, s.HD()
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
	addFactors := func(name string, fs []float32) {
		ts = append(ts, gguf.WriteTensor{Name: name, Dims: []uint64{uint64(len(fs))}, Type: quant.F32, Fill: func(w io.Writer) error {
			buf := make([]byte, 4*len(fs))
			if err := quant.Quantize(quant.F32, fs, buf); err != nil {
				return err
			}
			_, err := w.Write(buf)
			return err
		}})
		total += uint64(4 * len(fs))
	}
	tied := s.Tied || a == "gemma" || a == "gemma2" || a == "gemma3"
	embd := "token_embd"
	if tied { // the embeddings are the output matrix too
		embd = "output"
	}
	add("token_embd.weight", opt.tensorType(s, embd, 0, d), 1, d, v)
	if s.Llama3Rope > 0 {
		addFactors("rope_freqs.weight", Llama3RopeFactors(s.RopeBase, hd, s.Llama3Rope, 1, 4, 8192))
	}
	if s.LongRope {
		short, long := make([]float32, hd/2), make([]float32, hd/2)
		for i := range short {
			// ramps shaped like Phi-3.5-mini's published factors (about 1..3 and 1..60)
			x := float64(i) / float64(max(hd/2-1, 1))
			short[i], long[i] = float32(1+2*x*x), float32(math.Pow(60, x))
		}
		addFactors("rope_factors_long.weight", long)
		addFactors("rope_factors_short.weight", short)
	}
	qkNorm := a == "qwen3" || a == "gemma3"
	postNorms := a == "gemma2" || a == "gemma3"
	for l := 0; l < s.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		add(p+"attn_norm.weight", quant.F32, -1, d)
		if a == "phi3" {
			add(p+"attn_qkv.weight", opt.tensorType(s, "attn_qkv", l, d), std, d, q+2*kv) // rows Q, K, V
		} else {
			add(p+"attn_q.weight", opt.tensorType(s, "attn_q", l, d), std, d, q)
			add(p+"attn_k.weight", opt.tensorType(s, "attn_k", l, d), std, d, kv)
			add(p+"attn_v.weight", opt.tensorType(s, "attn_v", l, d), std, d, kv)
		}
		if a == "qwen2" {
			add(p+"attn_q.bias", quant.F32, 0.02, q)
			add(p+"attn_k.bias", quant.F32, 0.02, kv)
			add(p+"attn_v.bias", quant.F32, 0.02, kv)
		}
		if qkNorm {
			add(p+"attn_q_norm.weight", quant.F32, normStd, uint64(hd))
			add(p+"attn_k_norm.weight", quant.F32, normStd, uint64(hd))
		}
		add(p+"attn_output.weight", opt.tensorType(s, "attn_output", l, q), std, q, d)
		if postNorms {
			add(p+"post_attention_norm.weight", quant.F32, normStd, d)
		}
		add(p+"ffn_norm.weight", quant.F32, -1, d)
		if a == "phi3" {
			add(p+"ffn_up.weight", opt.tensorType(s, "ffn_up", l, d), std, d, 2*f) // rows gate, then up
		} else {
			add(p+"ffn_gate.weight", opt.tensorType(s, "ffn_gate", l, d), std, d, f)
			add(p+"ffn_up.weight", opt.tensorType(s, "ffn_up", l, d), std, d, f)
		}
		add(p+"ffn_down.weight", opt.tensorType(s, "ffn_down", l, f), float32(1/math.Sqrt(float64(s.FFN))), f, d)
		if postNorms {
			add(p+"post_ffw_norm.weight", quant.F32, normStd, d)
		}
	}
	add("output_norm.weight", quant.F32, -1, d)
	if !tied {
		add("output.weight", opt.tensorType(s, "output", 0, d), std, d, v)
	}
	return ts, total
}

// Size is the bytes of tensor data Write writes for shape s (the file
// is that and a header of the vocabulary and settings).
func Size(s Shape, opt Options) uint64 {
	_, total := tensors(context.Background(), s, opt)
	return total
}

// tensorType is the type Write gives a matrix of cols columns in role
// (its name without blk.N. and .weight; "output" for the output matrix
// and for embeddings tied to it) in layer l: opt.Type, or with Medium
// the type llama.cpp's quantiser chooses for a Q4_K_M or Q5_K_M file of a
// dense model: the output matrix Q6_K; attn_v and ffn_down Q6_K in the
// layers use_more_bits picks (the first and last eighth, and every third
// between); Phi-3's fused attn_qkv Q5_K (Q6_K in Q5_K_M); the rest
// opt.Type. A type whose blocks do not divide cols falls back as there.
// (llama.cpp also raises a 70B model's other attn_v to Q5_K: a small
// matrix, left as it is here.)
func (opt Options) tensorType(s Shape, role string, l int, cols uint64) quant.Type {
	t := opt.Type
	if !opt.Medium {
		return t
	}
	n := s.Layers
	moreBits := l < n/8 || l >= 7*n/8 || (l-n/8)%3 == 2
	switch role {
	case "output":
		t = quant.Q6_K
	case "attn_v", "ffn_down":
		if moreBits {
			t = quant.Q6_K
		}
	case "attn_qkv":
		t = quant.Q5_K
		if opt.Type == quant.Q5_K {
			t = quant.Q6_K
		}
	}
	if cols%uint64(t.BlockSize()) == 0 {
		return t
	}
	switch t { // llama.cpp's fallbacks for rows its blocks do not divide
	case quant.Q4_K:
		t = quant.Q5_0
	case quant.Q5_K:
		t = quant.Q5_1
	case quant.Q6_K:
		t = quant.Q8_0
	}
	if cols%uint64(t.BlockSize()) != 0 {
		return quant.F16
	}
	return t
}

// TypeName is the --type that gives opt's types: its weight type, with
// _M for a medium mix (ParseType reads it back).
func (opt Options) TypeName() string {
	if opt.Medium {
		return opt.Type.String() + "_M"
	}
	return opt.Type.String()
}

// ParseType reads a --type: a weight type (quant.ParseType's names), or
// Q4_K_M / Q5_K_M for Q4_K / Q5_K with Medium.
func ParseType(name string) (quant.Type, bool, error) {
	up := strings.ToUpper(name)
	if base, ok := strings.CutSuffix(up, "_M"); ok && (base == "Q4_K" || base == "Q5_K") {
		t, err := quant.ParseType(base)
		return t, true, err
	}
	t, err := quant.ParseType(up)
	if err != nil || !t.Supported() {
		return 0, false, fmt.Errorf("--type %q is not a supported weight type (or Q4_K_M, Q5_K_M)", name)
	}
	return t, false, nil
}

// FileType is llama.cpp's general.file_type for a model of one weight type.
func FileType(t quant.Type) uint32 {
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

// normStd marks a norm weight drawn near 1 (1 + N(0, 0.1)), as trained
// ones are: the newer families' extra norms get it, so a test of them
// sees a norm that is applied with the wrong weights.
const normStd = -2

// Llama3RopeFactors computes the rope_freqs.weight values llama.cpp's
// converter writes for Llama 3.1+ rope scaling: per rotated pair, 1 for
// short wavelengths, factor for long ones, a smooth blend between.
func Llama3RopeFactors(base float32, headDim int, factor, low, high float32, origCtx int) []float32 {
	out := make([]float32, headDim/2)
	lowWave, highWave := float64(origCtx)/float64(low), float64(origCtx)/float64(high)
	for i := range out {
		freq := 1 / math.Pow(float64(base), float64(2*i)/float64(headDim))
		wave := 2 * math.Pi / freq
		switch {
		case wave < highWave:
			out[i] = 1
		case wave > lowWave:
			out[i] = factor
		default:
			smooth := (float64(origCtx)/wave - float64(low)) / float64(high-low)
			out[i] = float32(1 / ((1-smooth)/float64(factor) + smooth))
		}
	}
	return out
}

// fill writes a tensor of normal(0, std) values (std -1: all ones, for
// norms; normStd: near one) row by row, quantised to typ.
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
			switch {
			case std == normStd:
				xs[i] = 1 + 0.1*float32(rng.NormFloat64())
			case std < 0:
				xs[i] = 1
			default:
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
