package model_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"runtime"
	"testing"

	"arborist/engine/gguf"
	"arborist/engine/model"
	"arborist/kernels/cpu"
	"arborist/kernels/quant"
)

// microModel is the smallest llama GGUF Load accepts: width 4, one layer,
// two heads (one KV head), FFN 4, a four-token vocabulary; a few hundred
// bytes, so the fuzzer's mutations land on metadata and shapes.
func microModel(t testing.TB) []byte {
	t.Helper()
	f32 := func(n int, v float32) []byte {
		b := make([]byte, 4*n)
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v*float32(i%3+1)))
		}
		return b
	}
	kvs := []gguf.KV{
		gguf.String("general.architecture", "llama"),
		gguf.Uint32("llama.embedding_length", 4), gguf.Uint32("llama.block_count", 1),
		gguf.Uint32("llama.attention.head_count", 2), gguf.Uint32("llama.attention.head_count_kv", 1),
		gguf.Uint32("llama.feed_forward_length", 4), gguf.Uint32("llama.context_length", 16),
		gguf.String("tokenizer.ggml.model", "llama"),
		gguf.Array("tokenizer.ggml.tokens", []string{"<unk>", "<s>", "</s>", "\u2581a"}),
		gguf.Array("tokenizer.ggml.scores", []float32{0, 0, 0, -1}),
		gguf.Array("tokenizer.ggml.token_type", []int32{2, 3, 3, 1}),
	}
	mat := func(name string, in, out int) gguf.WriteTensor {
		return gguf.WriteTensor{Name: name, Dims: []uint64{uint64(in), uint64(out)}, Type: quant.F32, Data: f32(in*out, 0.1)}
	}
	vec := func(name string, n int) gguf.WriteTensor {
		return gguf.WriteTensor{Name: name, Dims: []uint64{uint64(n)}, Type: quant.F32, Data: f32(n, 1)}
	}
	ts := []gguf.WriteTensor{
		mat("token_embd.weight", 4, 4), vec("output_norm.weight", 4),
		vec("blk.0.attn_norm.weight", 4), mat("blk.0.attn_q.weight", 4, 4), mat("blk.0.attn_k.weight", 4, 2),
		mat("blk.0.attn_v.weight", 4, 2), mat("blk.0.attn_output.weight", 4, 4), vec("blk.0.ffn_norm.weight", 4),
		mat("blk.0.ffn_gate.weight", 4, 4), mat("blk.0.ffn_up.weight", 4, 4), mat("blk.0.ffn_down.weight", 4, 4),
	}
	var buf bytes.Buffer
	if err := gguf.Write(&buf, kvs, ts); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestMicroModelLoads(t *testing.T) {
	be := cpu.New(1)
	defer be.Close()
	f, err := gguf.Parse("micro", microModel(t))
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.FromFile(f, be)
	if err != nil {
		t.Fatal(err)
	}
	var res model.Result
	if err := m.Forward(context.Background(), m.NewCache(4), model.Batch{Tokens: []int{1, 3}}, &res); err != nil {
		t.Fatal(err)
	}
}

// FuzzLoad fuzzes the model loader, not only the GGUF parser: arbitrary
// bytes are parsed, checked (model.Check) and loaded (FromFile), and an
// accepted model runs one forward pass. Whatever the input, loading ends
// in bounded memory (a small multiple of the input; unbounded, a 1.2 MB
// file could take 7.3 GiB), and Check and FromFile agree.
func FuzzLoad(f *testing.F) {
	good := microModel(f)
	f.Add(good)
	f.Add(good[:len(good)/2])
	be := cpu.New(1)
	f.Cleanup(be.Close)
	f.Fuzz(func(t *testing.T, data []byte) {
		var a, b runtime.MemStats
		runtime.ReadMemStats(&a)
		fl, err := gguf.Parse("fuzz", data)
		var m *model.Model
		var cerr error
		if err == nil {
			cerr = model.Check(fl)
			m, err = model.FromFile(fl, be)
		}
		runtime.ReadMemStats(&b)
		if used, limit := b.TotalAlloc-a.TotalAlloc, 64*uint64(len(data))+4<<20; used > limit {
			t.Fatalf("loading %d bytes allocated %d (limit %d)", len(data), used, limit)
		}
		if err != nil {
			return
		}
		if cerr != nil {
			t.Fatalf("FromFile accepted a file Check refuses: %v", cerr)
		}
		var res model.Result
		if m.CtxLen >= 2 {
			m.Forward(context.Background(), m.NewCache(2), model.Batch{Tokens: []int{0, m.Vocab - 1}}, &res)
		}
	})
}
