// Package demo builds Arborist's built-in demo pair from one small real model
// (stories260K, embedded by the caller): a target that costs like a model
// of tens of millions of parameters yet writes the small model's text, and
// a drafter that is the small model with a little noise in its weights.
//
// Why this construction: a demo must show the point of speculative decoding,
// real text and a real speedup, from a few MiB inside the binary, on any
// laptop. Random weights cannot do that (a random drafter agrees with its
// target almost never), and shipping a real target of tens of MiB is not an
// option. So the target is the small model expanded by a function-preserving
// construction:
//
//   - the residual stream is widened k times; the original values sit in the
//     first Dim columns and the rest stay exactly zero, because every matrix
//     that writes the residual stream (embedding, attention output, FFN down)
//     has zero rows beyond Dim and zero columns for the added heads and FFN
//     units;
//   - RMSNorm over the wider stream sees the same sum of squares over k times
//     the width, so its weights are divided by sqrt(k) and its epsilon by k;
//   - the added heads, FFN units and the columns that read the zero part of
//     the stream carry random weights, so every product costs what it would
//     in a real model of that shape;
//   - extra blocks whose attention output and FFN down matrices are zero are
//     identities, which deepens the model.
//
// The target is then quantised (Q8_0 by default), so it is close to the small
// model but not equal to it, and the drafter gets Gaussian noise of a small
// fraction of each matrix's standard deviation, so the pair agrees often but
// not always, as a real target and drafter do.
package demo

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"arborist/engine/gguf"
	"arborist/engine/synth"
	"arborist/kernels/quant"
)

// Options shape the demo pair. The zero value gives the defaults.
type Options struct {
	Widen  int // residual width factor k (default 8)
	Layers int // target depth, at least the source's (default 12)
	// Float32 keeps the target's weights in F32 instead of Q8_0, so a test
	// can check that the construction preserves the source's function.
	Float32 bool
	Noise   float64 // drafter noise, as a fraction of each matrix's std (default 0.05)
	Seed    uint64  // random weights and noise
}

func (o *Options) defaults() {
	if o.Widen <= 0 {
		o.Widen = 8
	}
	if o.Layers <= 0 {
		o.Layers = 12
	}
	if o.Noise == 0 {
		o.Noise = 0.05
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
}

// File names of the pair inside the output folder.
const (
	TargetName = "demo-target.gguf"
	DraftName  = "demo-drafter.gguf"
)

// source is the small model's hyperparameters and tensors as float32.
type source struct {
	arch                             string
	dim, layers, heads, kvHeads, ffn int
	vocab                            int
	eps                              float64
	kv                               []gguf.KV
	t                                map[string]*tensor
}

// tensor is a float32 tensor in ggml order: rows of cols values.
type tensor struct {
	rows, cols int
	v          []float32
}

// Write builds the demo pair from src (the bytes of a llama-architecture
// GGUF with F32 weights, such as stories260K) into dir and returns the two
// paths. It is deterministic for given options.
func Write(ctx context.Context, src []byte, dir string, opt Options) (target, draft string, err error) {
	opt.defaults()
	typ := quant.Q8_0
	if opt.Float32 {
		typ = quant.F32
	}
	s, err := load(src)
	if err != nil {
		return "", "", err
	}
	if opt.Layers < s.layers || opt.Layers > 64 {
		return "", "", fmt.Errorf("demo: target depth %d must be between the source's %d and 64", opt.Layers, s.layers)
	}
	if opt.Widen > 32 {
		return "", "", fmt.Errorf("demo: width factor %d is over 32", opt.Widen)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("demo: %w", err)
	}
	target = filepath.Join(dir, TargetName)
	draft = filepath.Join(dir, DraftName)
	kvs, ts, err := s.expand(ctx, opt, typ)
	if err != nil {
		return "", "", err
	}
	if err := gguf.WriteFile(target, kvs, ts); err != nil {
		return "", "", fmt.Errorf("demo: target: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return "", "", err
	}
	kvs, ts = s.noisy(opt)
	if err := gguf.WriteFile(draft, kvs, ts); err != nil {
		return "", "", fmt.Errorf("demo: drafter: %w", err)
	}
	return target, draft, nil
}

func load(src []byte) (*source, error) {
	f, err := gguf.Parse("demo source", src)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	s := &source{arch: f.Architecture(), kv: f.KV, t: map[string]*tensor{}}
	if s.arch != "llama" {
		return nil, fmt.Errorf("demo: source architecture %q, want llama", s.arch)
	}
	u := func(k string) int {
		v, _ := f.Uint(s.arch + "." + k)
		return int(v)
	}
	s.dim, s.layers, s.heads, s.ffn = u("embedding_length"), u("block_count"), u("attention.head_count"), u("feed_forward_length")
	s.kvHeads = u("attention.head_count_kv")
	if s.kvHeads == 0 {
		s.kvHeads = s.heads
	}
	s.eps = 1e-5
	if v, ok := f.Float(s.arch + ".attention.layer_norm_rms_epsilon"); ok {
		s.eps = v
	}
	if s.dim == 0 || s.layers == 0 || s.heads == 0 || s.ffn == 0 || s.dim%s.heads != 0 || s.heads%s.kvHeads != 0 {
		return nil, fmt.Errorf("demo: source hyperparameters %d/%d/%d/%d/%d do not fit", s.dim, s.layers, s.heads, s.kvHeads, s.ffn)
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if ti.Type != quant.F32 || len(ti.Dims) > 2 {
			return nil, fmt.Errorf("demo: source tensor %s is %s %v, want F32 of at most 2 dims", ti.Name, ti.Type, ti.Dims)
		}
		cols, rows := int(ti.Dims[0]), 1
		if len(ti.Dims) == 2 {
			rows = int(ti.Dims[1])
		}
		v := make([]float32, rows*cols)
		if err := quant.Dequantize(quant.F32, f.Data(ti), v); err != nil {
			return nil, fmt.Errorf("demo: %s: %w", ti.Name, err)
		}
		s.t[ti.Name] = &tensor{rows: rows, cols: cols, v: v}
	}
	emb, ok := s.t["token_embd.weight"]
	if !ok || emb.cols != s.dim {
		return nil, fmt.Errorf("demo: source has no token_embd.weight of width %d", s.dim)
	}
	s.vocab = emb.rows
	if _, ok := s.t["output.weight"]; !ok {
		s.t["output.weight"] = emb
	}
	return s, nil
}

// std is the standard deviation of a tensor's values.
func (t *tensor) std() float64 {
	var sum, sq float64
	for _, v := range t.v {
		sum += float64(v)
		sq += float64(v) * float64(v)
	}
	n := float64(len(t.v))
	m := sum / n
	return math.Sqrt(math.Max(sq/n-m*m, 0))
}

// expand builds the widened, deepened target's metadata and tensors.
func (s *source) expand(ctx context.Context, opt Options, typ quant.Type) ([]gguf.KV, []gguf.WriteTensor, error) {
	k := opt.Widen
	D := s.dim * k
	hd := s.dim / s.heads
	H, KV := s.heads*k, s.kvHeads*k
	// FFN width: k times the source's, rounded up to whole 32-value blocks.
	F := (s.ffn*k + 31) / 32 * 32
	if D%typ.BlockSize() != 0 || F%typ.BlockSize() != 0 {
		return nil, nil, fmt.Errorf("demo: width %d or FFN %d is not a whole number of %s blocks", D, F, typ)
	}
	rng := rand.New(rand.NewPCG(opt.Seed, 0x7a26e7))
	rootK := float32(math.Sqrt(float64(k)))

	var ts []gguf.WriteTensor
	add := func(name string, typ quant.Type, rows, cols int, v []float32) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		var data []byte
		if typ == quant.F32 {
			data = f32Bytes(v)
		} else {
			n, err := quant.RowBytes(typ, cols)
			if err != nil {
				return fmt.Errorf("demo: %s: %w", name, err)
			}
			data = make([]byte, n*rows)
			for r := 0; r < rows; r++ {
				if err := quant.Quantize(typ, v[r*cols:(r+1)*cols], data[r*n:(r+1)*n]); err != nil {
					return fmt.Errorf("demo: %s: %w", name, err)
				}
			}
		}
		dims := []uint64{uint64(cols)}
		if rows > 1 {
			dims = append(dims, uint64(rows))
		}
		ts = append(ts, gguf.WriteTensor{Name: name, Dims: dims, Type: typ, Data: data})
		return nil
	}
	// random fills v with N(0, std^2).
	random := func(v []float32, std float64) {
		for i := range v {
			v[i] = float32(rng.NormFloat64() * std)
		}
	}
	// place builds a rows x cols matrix: the source's matrix in the top-left
	// corner, zero(r, c) deciding which other entries stay zero; the rest random.
	place := func(src *tensor, rows, cols int, zero func(r, c int) bool) []float32 {
		v := make([]float32, rows*cols)
		std := src.std()
		for r := 0; r < rows; r++ {
			for c := 0; c < cols; c++ {
				switch {
				case r < src.rows && c < src.cols:
					v[r*cols+c] = src.v[r*src.cols+c]
				case zero(r, c):
				default:
					v[r*cols+c] = float32(rng.NormFloat64() * std)
				}
			}
		}
		return v
	}
	norm := func(src *tensor) []float32 {
		v := make([]float32, D)
		for i := range v {
			v[i] = 1 / rootK
			if i < s.dim {
				v[i] = src.v[i] / rootK
			}
		}
		return v
	}
	never := func(r, c int) bool { return false }

	emb := s.t["token_embd.weight"]
	if err := add("token_embd.weight", typ, s.vocab, D, place(emb, s.vocab, D, func(r, c int) bool { return true })); err != nil {
		return nil, nil, err
	}
	// Where the source's blocks go among the target's: spread evenly.
	srcAt := map[int]int{}
	for i := 0; i < s.layers; i++ {
		srcAt[i*opt.Layers/s.layers] = i
	}
	ref := func(i int, name string) *tensor { return s.t[fmt.Sprintf("blk.%d.%s", i, name)] }
	for l := 0; l < opt.Layers; l++ {
		i, real := srcAt[l]
		if !real {
			i = l % s.layers // random weights of the source's scale
		}
		name := func(n string) string { return fmt.Sprintf("blk.%d.%s", l, n) }
		for _, n := range []string{"attn_norm.weight", "ffn_norm.weight"} {
			if ref(i, n) == nil {
				return nil, nil, fmt.Errorf("demo: source lacks blk.%d.%s", i, n)
			}
			if err := add(name(n), quant.F32, 1, D, norm(ref(i, n))); err != nil {
				return nil, nil, err
			}
		}
		// Q, K, V: the added heads' rows are random, and so are the columns
		// that read the zero part of the stream.
		for _, m := range []struct {
			n    string
			rows int
		}{{"attn_q.weight", H * hd}, {"attn_k.weight", KV * hd}, {"attn_v.weight", KV * hd}} {
			src := ref(i, m.n)
			if src == nil {
				return nil, nil, fmt.Errorf("demo: source lacks blk.%d.%s", i, m.n)
			}
			if !real {
				v := make([]float32, m.rows*D)
				random(v, src.std())
				if err := add(name(m.n), typ, m.rows, D, v); err != nil {
					return nil, nil, err
				}
				continue
			}
			if err := add(name(m.n), typ, m.rows, D, place(src, m.rows, D, never)); err != nil {
				return nil, nil, err
			}
		}
		// Attention output and FFN down write the residual stream: only the
		// source's block, zero elsewhere (all zero in an identity block).
		for _, m := range []struct {
			n          string
			rows, cols int
		}{{"attn_output.weight", D, H * hd}, {"ffn_down.weight", D, F}} {
			src := ref(i, m.n)
			if src == nil {
				return nil, nil, fmt.Errorf("demo: source lacks blk.%d.%s", i, m.n)
			}
			v := make([]float32, m.rows*m.cols)
			if real {
				v = place(src, m.rows, m.cols, func(r, c int) bool { return true })
			}
			if err := add(name(m.n), typ, m.rows, m.cols, v); err != nil {
				return nil, nil, err
			}
		}
		for _, n := range []string{"ffn_gate.weight", "ffn_up.weight"} {
			src := ref(i, n)
			if src == nil {
				return nil, nil, fmt.Errorf("demo: source lacks blk.%d.%s", i, n)
			}
			var v []float32
			if real {
				v = place(src, F, D, never)
			} else {
				v = make([]float32, F*D)
				random(v, src.std())
			}
			if err := add(name(n), typ, F, D, v); err != nil {
				return nil, nil, err
			}
		}
	}
	if s.t["output_norm.weight"] == nil {
		return nil, nil, fmt.Errorf("demo: source lacks output_norm.weight")
	}
	if err := add("output_norm.weight", quant.F32, 1, D, norm(s.t["output_norm.weight"])); err != nil {
		return nil, nil, err
	}
	if err := add("output.weight", typ, s.vocab, D, place(s.t["output.weight"], s.vocab, D, never)); err != nil {
		return nil, nil, err
	}

	kvs := s.metadata(func(key string, v gguf.KV) gguf.KV {
		switch strings.TrimPrefix(key, s.arch+".") {
		case "embedding_length":
			return gguf.Uint32(key, uint32(D))
		case "block_count":
			return gguf.Uint32(key, uint32(opt.Layers))
		case "attention.head_count":
			return gguf.Uint32(key, uint32(H))
		case "attention.head_count_kv":
			return gguf.Uint32(key, uint32(KV))
		case "feed_forward_length":
			return gguf.Uint32(key, uint32(F))
		case "attention.layer_norm_rms_epsilon":
			return gguf.Float32(key, float32(s.eps/float64(k)))
		case "rope.dimension_count":
			return gguf.Uint32(key, uint32(hd))
		case "general.name":
			return gguf.String(key, "Arborist demo target (stories260K expanded)")
		case "general.file_type":
			return gguf.Uint32(key, synth.FileType(typ))
		}
		return v
	})
	kvs = append(kvs, gguf.String("arborist.demo", fmt.Sprintf(
		"Arborist's demo target: stories260K expanded %dx wide and %d deep by a function-preserving construction (costs like %.0fM parameters, writes stories260K's text)",
		k, opt.Layers, float64(params(ts))/1e6)))
	if _, ok := s.find(s.arch + ".attention.head_count_kv"); !ok {
		kvs = append(kvs, gguf.Uint32(s.arch+".attention.head_count_kv", uint32(KV)))
	}
	if _, ok := s.find(s.arch + ".attention.layer_norm_rms_epsilon"); !ok {
		kvs = append(kvs, gguf.Float32(s.arch+".attention.layer_norm_rms_epsilon", float32(s.eps/float64(k))))
	}
	return kvs, ts, nil
}

// noisy is the drafter: the source with Gaussian noise on its matrices.
func (s *source) noisy(opt Options) ([]gguf.KV, []gguf.WriteTensor) {
	rng := rand.New(rand.NewPCG(opt.Seed, 0xd2af7e))
	var ts []gguf.WriteTensor
	for _, n := range s.order() {
		t := s.t[n]
		v := append([]float32(nil), t.v...)
		if t.rows > 1 && !strings.Contains(n, "norm") {
			sd := t.std() * opt.Noise
			for i := range v {
				v[i] += float32(rng.NormFloat64() * sd)
			}
		}
		data := f32Bytes(v)
		dims := []uint64{uint64(t.cols)}
		if t.rows > 1 {
			dims = append(dims, uint64(t.rows))
		}
		ts = append(ts, gguf.WriteTensor{Name: n, Dims: dims, Type: quant.F32, Data: data})
	}
	kvs := s.metadata(func(key string, v gguf.KV) gguf.KV {
		if key == "general.name" {
			return gguf.String(key, "Arborist demo drafter (stories260K with noise)")
		}
		return v
	})
	kvs = append(kvs, gguf.String("arborist.demo", fmt.Sprintf("Arborist's demo drafter: stories260K with Gaussian noise of %.0f%% of each matrix's spread", 100*opt.Noise)))
	return kvs, ts
}

// order lists the source's tensor names in a stable order: token
// embedding, blocks in order, output norm and head.
func (s *source) order() []string {
	var out []string
	seen := map[string]bool{}
	push := func(n string) {
		if s.t[n] != nil && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	push("token_embd.weight")
	for i := 0; i < s.layers; i++ {
		for _, n := range []string{"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_down", "ffn_up"} {
			push(fmt.Sprintf("blk.%d.%s.weight", i, n))
		}
	}
	push("output_norm.weight")
	// A tied head is written explicitly only in the target; the drafter
	// keeps the source's tensors as they were.
	if s.t["output.weight"] != s.t["token_embd.weight"] {
		push("output.weight")
	}
	return out
}

func (s *source) find(key string) (gguf.KV, bool) {
	for _, kv := range s.kv {
		if kv.Key == key {
			return kv, true
		}
	}
	return gguf.KV{}, false
}

// metadata copies the source's key-value pairs through edit, dropping the
// alignment key (the writer adds its default).
func (s *source) metadata(edit func(key string, v gguf.KV) gguf.KV) []gguf.KV {
	out := make([]gguf.KV, 0, len(s.kv))
	for _, kv := range s.kv {
		if kv.Key == "general.alignment" {
			continue
		}
		out = append(out, edit(kv.Key, kv))
	}
	return out
}

// params counts the weights of the tensors.
func params(ts []gguf.WriteTensor) uint64 {
	var n uint64
	for _, t := range ts {
		e := uint64(1)
		for _, d := range t.Dims {
			e *= d
		}
		n += e
	}
	return n
}

func f32Bytes(v []float32) []byte {
	data := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(x))
	}
	return data
}
