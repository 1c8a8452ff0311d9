package model_test

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"runtime"
	"testing"

	"arborist/engine/gguf"
	"arborist/engine/model"
	"arborist/engine/model/modeltest"
	"arborist/engine/sample"
	"arborist/engine/synth"
	"arborist/kernels"
	"arborist/kernels/cpu"
	"arborist/kernels/quant"
)

// tinyModel writes a small synthetic model of arch to a temp dir and loads it.
func tinyModel(t *testing.T, shape string, typ quant.Type) *model.Model {
	t.Helper()
	sh, err := synth.ParseShape(shape)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := synth.WriteFile(context.Background(), p, sh, synth.Options{Type: typ, Seed: 42}); err != nil {
		t.Fatal(err)
	}
	be := cpu.New(2)
	t.Cleanup(be.Close)
	m, err := model.Load(p, be)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// shapes are the suite's synthetic models.
var shapes = modeltest.Shapes

func maxDiff(a, b []float32) float64 { return modeltest.MaxDiff(a, b) }

// TestCPUDevice runs the model-level conformance suite on the CPU backend.
func TestCPUDevice(t *testing.T) {
	modeltest.Run(t, func(t *testing.T) kernels.Device { return cpu.New(2) })
}

func TestLayerSkipAndHidden(t *testing.T) {
	m := tinyModel(t, shapes[0].Shape, quant.F32)
	var full, skip model.Result
	ctx := context.Background()
	if err := m.Forward(ctx, m.NewCache(8), model.Batch{Tokens: []int{1, 5}, Hidden: true}, &full); err != nil {
		t.Fatal(err)
	}
	if err := m.Forward(ctx, m.NewCache(8), model.Batch{Tokens: []int{1, 5}, Layers: 1}, &skip); err != nil {
		t.Fatal(err)
	}
	if len(full.Hidden) != 2*m.Dim || len(skip.Logits) != 2*m.Vocab || len(skip.Hidden) != 0 {
		t.Fatalf("hidden %d (%d unasked), logits %d", len(full.Hidden), len(skip.Hidden), len(skip.Logits))
	}
	// argmax only: the logits' argmax, no logits
	var am model.Result
	if err := m.Forward(ctx, m.NewCache(8), model.Batch{Tokens: []int{1, 5}, Want: []int{1, 0, 1}, Output: model.OutArgmax}, &am); err != nil {
		t.Fatal(err)
	}
	if len(am.Logits) != 0 || len(am.Argmax) != 3 {
		t.Fatalf("argmax output: %d logits, %d argmax", len(am.Logits), len(am.Argmax))
	}
	for j, r := range []int{1, 0, 1} {
		if want := sample.Argmax(full.Logits[r*m.Vocab : (r+1)*m.Vocab]); am.Argmax[j] != want {
			t.Fatalf("row %d: argmax %d, want %d", r, am.Argmax[j], want)
		}
	}
	if maxDiff(full.Logits, skip.Logits) == 0 {
		t.Error("one-layer pass gave the same logits as the full model")
	}
}

func TestEmbedsEqualTokens(t *testing.T) {
	m := tinyModel(t, shapes[0].Shape, quant.F32)
	ctx := context.Background()
	toks := []int{1, 5, 9}
	emb := make([]float32, len(toks)*m.Dim)
	for i, tok := range toks {
		if err := m.Embed(tok, emb[i*m.Dim:(i+1)*m.Dim]); err != nil {
			t.Fatal(err)
		}
	}
	var a, b model.Result
	if err := m.Forward(ctx, m.NewCache(8), model.Batch{Tokens: toks}, &a); err != nil {
		t.Fatal(err)
	}
	if err := m.Forward(ctx, m.NewCache(8), model.Batch{Embeds: emb}, &b); err != nil {
		t.Fatal(err)
	}
	if d := maxDiff(a.Logits, b.Logits); d != 0 {
		t.Fatalf("embedding rows gave logits %g away from the tokens'", d)
	}
}

func TestForwardErrors(t *testing.T) {
	m := tinyModel(t, shapes[0].Shape, quant.F32)
	ctx := context.Background()
	var r model.Result
	c := m.NewCache(4)
	cases := []struct {
		name string
		b    model.Batch
	}{
		{"empty", model.Batch{}},
		{"overflow", model.Batch{Tokens: []int{1, 2, 3, 4, 5}}},
		{"bad token", model.Batch{Tokens: []int{m.Vocab}}},
		{"bad pos", model.Batch{Tokens: []int{1}, Pos: []int{0, 1}}},
		{"bad mask", model.Batch{Tokens: []int{1}, Mask: []bool{true, true}}},
		{"bad want", model.Batch{Tokens: []int{1}, Want: []int{1}}},
		{"tokens and embeds", model.Batch{Tokens: []int{1}, Embeds: make([]float32, m.Dim)}},
		{"partial embed row", model.Batch{Embeds: make([]float32, m.Dim+1)}},
	}
	for _, tc := range cases {
		if err := m.Forward(ctx, c, tc.b, &r); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := m.Forward(cctx, m.NewCache(4), model.Batch{Tokens: []int{1}}, &r); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err = %v", err)
	}
	if err := c.Compact([]int{9}); err == nil {
		t.Error("compact to a missing slot succeeded")
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	// a GGUF with an unsupported architecture
	p := filepath.Join(dir, "gpt2.gguf")
	if err := gguf.WriteFile(p, []gguf.KV{gguf.String("general.architecture", "gpt2")}, nil); err != nil {
		t.Fatal(err)
	}
	be := cpu.New(1)
	defer be.Close()
	if _, err := model.Load(p, be); !errors.Is(err, model.ErrArch) {
		t.Errorf("gpt2: err = %v, want ErrArch", err)
	}
	// a llama GGUF with metadata but no tensors
	p2 := filepath.Join(dir, "empty-llama.gguf")
	tokens, scores, types := synth.Vocab(300)
	kvs := []gguf.KV{
		gguf.String("general.architecture", "llama"),
		gguf.Uint32("llama.embedding_length", 64), gguf.Uint32("llama.block_count", 1),
		gguf.Uint32("llama.attention.head_count", 4), gguf.Uint32("llama.feed_forward_length", 96),
		gguf.String("tokenizer.ggml.model", "llama"), gguf.Array("tokenizer.ggml.tokens", tokens),
		gguf.Array("tokenizer.ggml.scores", scores), gguf.Array("tokenizer.ggml.token_type", types),
	}
	if err := gguf.WriteFile(p2, kvs, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := model.Load(p2, be); !errors.Is(err, gguf.ErrNoTensor) {
		t.Errorf("no tensors: err = %v, want ErrNoTensor", err)
	}
	// missing metadata
	if err := gguf.WriteFile(p2, kvs[:2], nil); err != nil {
		t.Fatal(err)
	}
	if _, err := model.Load(p2, be); !errors.Is(err, gguf.ErrMetadata) {
		t.Errorf("missing metadata: err = %v, want ErrMetadata", err)
	}
}

// TestDecodeAllocatesNothing: once its buffers have grown, a one-token
// decode step allocates no memory (the CPU backend reuses its job structs).
func TestDecodeAllocatesNothing(t *testing.T) {
	m := tinyModel(t, shapes[2].Shape, quant.Q8_0)
	ctx := context.Background()
	c := m.NewCache(256)
	var res model.Result
	if err := m.Forward(ctx, c, model.Batch{Tokens: []int{1, 2, 3}}, &res); err != nil {
		t.Fatal(err)
	}
	b := model.Batch{Tokens: []int{5}, Want: []int{0}}
	allocs := testing.AllocsPerRun(50, func() {
		if c.Len() > 200 {
			c.Truncate(3)
		}
		if err := m.Forward(ctx, c, b, &res); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("decode step allocates %.1f times", allocs)
	}
}

// TestHostileLayerCount: a 1.2 MB GGUF whose llama.block_count is 2^24
// (unchecked, 7.3 GiB and 23 s before failing) is refused before anything
// is allocated: layers are bounded (512, the reference engine's limit) and
// every claimed layer must have tensors, checked by name; so are a missing
// layer, a layer left over, a NaN epsilon and a missing tensor.
func TestHostileLayerCount(t *testing.T) {
	dir := t.TempDir()
	sh, err := synth.ParseShape("custom:dim=64,layers=2,heads=4,kv=2,ffn=96,vocab=300")
	if err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.gguf")
	if err := synth.WriteFile(context.Background(), good, sh, synth.Options{Type: quant.F32, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	src, err := gguf.Open(good)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	// rewrite the file with one metadata value changed
	rewrite := func(name, key string, v gguf.KV, dropTensor string) string {
		var kvs []gguf.KV
		for _, kv := range src.KV {
			if kv.Key == key {
				kv = v
			}
			kvs = append(kvs, kv)
		}
		var ts []gguf.WriteTensor
		for i := range src.Tensors {
			ti := &src.Tensors[i]
			if ti.Name == dropTensor {
				continue
			}
			ts = append(ts, gguf.WriteTensor{Name: ti.Name, Dims: ti.Dims, Type: ti.Type, Data: src.Data(ti)})
		}
		p := filepath.Join(dir, name)
		if err := gguf.WriteFile(p, kvs, ts); err != nil {
			t.Fatal(err)
		}
		return p
	}
	be := cpu.New(1)
	defer be.Close()
	for _, c := range []struct {
		name string
		path string
		want error
	}{
		{"block_count 2^24", rewrite("layers.gguf", "llama.block_count", gguf.Uint32("llama.block_count", 1<<24), ""), gguf.ErrMetadata},
		{"block_count 3 (no layer 2)", rewrite("three.gguf", "llama.block_count", gguf.Uint32("llama.block_count", 3), ""), gguf.ErrNoTensor},
		{"block_count 1 (layer 1 left over)", rewrite("one.gguf", "llama.block_count", gguf.Uint32("llama.block_count", 1), ""), gguf.ErrMetadata},
		{"NaN epsilon", rewrite("eps.gguf", "llama.attention.layer_norm_rms_epsilon", gguf.Float32("llama.attention.layer_norm_rms_epsilon", float32(math.NaN())), ""), gguf.ErrMetadata},
		{"missing ffn_up of layer 1", rewrite("missing.gguf", "", gguf.KV{}, "blk.1.ffn_up.weight"), gguf.ErrNoTensor},
	} {
		var f *gguf.File
		var err error
		allocs := testing.AllocsPerRun(1, func() {
			f, err = gguf.Open(c.path)
			if err == nil {
				err = model.Check(f)
				f.Close()
			}
		})
		if !errors.Is(err, c.want) {
			t.Errorf("%s: Check err = %v, want %v", c.name, err, c.want)
		}
		if allocs > 20000 {
			t.Errorf("%s: %v allocations before refusing", c.name, allocs)
		}
		if _, err := model.Load(c.path, be); !errors.Is(err, c.want) {
			t.Errorf("%s: Load err = %v, want %v", c.name, err, c.want)
		}
	}
	if err := model.Check(src); err != nil {
		t.Errorf("a good file fails Check: %v", err)
	}
}

// TestCheckCache: a KV cache beyond the machine's memory is refused before
// it is allocated.
func TestCheckCache(t *testing.T) {
	m := tinyModel(t, shapes[0].Shape, shapes[0].Type)
	if err := m.CheckCache(64); err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS == "linux" {
		if err := m.CheckCache(1 << 50 / int(m.KVBytes(1))); err == nil {
			t.Error("a 1 PiB cache passed")
		}
	}
}

// TestCheckAgreesWithLoad: Check accepts every family's synthetic file
// (phi3's fused attn_qkv and ffn_up included) and, with one of the
// tensors its family needs left out (fused Q/K/V, a q/k norm, a post-norm,
// a bias), refuses it as Load does.
func TestCheckAgreesWithLoad(t *testing.T) {
	be := cpu.New(1)
	defer be.Close()
	dir := t.TempDir()
	for _, c := range []struct{ shape, drop string }{
		{shapes[0].Shape, "blk.1.attn_k.weight"},
		{"custom:dim=64,layers=2,heads=4,kv=1,ffn=96,vocab=300,arch=qwen2,tied=1", "blk.1.attn_v.bias"},
		{"custom:dim=64,layers=2,heads=4,kv=2,hd=24,ffn=96,vocab=300,arch=qwen3", "blk.1.attn_k_norm.weight"},
		{"custom:dim=64,layers=2,heads=4,kv=4,ffn=96,vocab=300,arch=phi3,window=3", "blk.1.attn_qkv.weight"},
		{"custom:dim=64,layers=2,heads=2,kv=1,hd=48,ffn=96,vocab=300,arch=gemma", "blk.1.ffn_gate.weight"},
		{"custom:dim=64,layers=3,heads=2,kv=1,hd=32,ffn=96,vocab=300,arch=gemma2,window=3", "blk.1.post_ffw_norm.weight"},
		{"custom:dim=64,layers=6,heads=2,kv=1,hd=32,ffn=96,vocab=300,arch=gemma3,window=3", "blk.5.attn_q_norm.weight"},
	} {
		sh, err := synth.ParseShape(c.shape)
		if err != nil {
			t.Fatal(err)
		}
		good := filepath.Join(dir, "good.gguf")
		if err := synth.WriteFile(context.Background(), good, sh, synth.Options{Type: quant.F32, Seed: 1}); err != nil {
			t.Fatal(err)
		}
		src, err := gguf.Open(good)
		if err != nil {
			t.Fatal(err)
		}
		if err := model.Check(src); err != nil {
			t.Errorf("%s: Check refuses a file Load runs: %v", sh.Arch, err)
		}
		var ts []gguf.WriteTensor
		found := false
		for i := range src.Tensors {
			ti := &src.Tensors[i]
			if ti.Name == c.drop {
				found = true
				continue
			}
			ts = append(ts, gguf.WriteTensor{Name: ti.Name, Dims: ti.Dims, Type: ti.Type, Data: src.Data(ti)})
		}
		if !found {
			t.Fatalf("%s: the file has no %s", sh.Arch, c.drop)
		}
		bad := filepath.Join(dir, "bad.gguf")
		if err := gguf.WriteFile(bad, src.KV, ts); err != nil {
			t.Fatal(err)
		}
		src.Close()
		f, err := gguf.Open(bad)
		if err != nil {
			t.Fatal(err)
		}
		if err := model.Check(f); !errors.Is(err, gguf.ErrNoTensor) {
			t.Errorf("%s without %s: Check err = %v, want ErrNoTensor", sh.Arch, c.drop, err)
		}
		f.Close()
		if _, err := model.Load(bad, be); !errors.Is(err, gguf.ErrNoTensor) {
			t.Errorf("%s without %s: Load err = %v, want ErrNoTensor", sh.Arch, c.drop, err)
		}
	}
}

// TestKVReadBytes: a step reads every layer's keys and values, a sliding
// layer's no further back than its window.
func TestKVReadBytes(t *testing.T) {
	c := model.Config{Layers: 6, KVHeads: 2, HeadDim: 4}
	if got, want := c.KVReadBytes(10, quant.F32), c.KVBytes(10); got != want {
		t.Errorf("no window: %d bytes, want the whole cache's %d", got, want)
	}
	// layers 0, 1, 3 and 4 slide (a pattern of 3: every third is global)
	c.Window, c.SWAPattern = 3, 3
	row := uint64(2 * 4 * 2) // keys and values of one position, elements
	if got, want := c.KVReadBytes(10, quant.F32), (4*3+2*10)*row*4; got != want {
		t.Errorf("window 3 at 10 positions: %d bytes, want %d", got, want)
	}
	if got, want := c.KVReadBytes(2, quant.F16), 6*2*row*2; got != want {
		t.Errorf("inside the window, float16: %d bytes, want %d", got, want)
	}
}
