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
	"arborist/engine/sample"
	"arborist/engine/synth"
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

var shapes = []struct {
	name, shape string
	typ         quant.Type
}{
	{"llama", "custom:dim=64,layers=2,heads=4,kv=2,ffn=96,vocab=300", quant.F32},
	{"qwen2-tied", "custom:dim=64,layers=2,heads=4,kv=1,ffn=96,vocab=300,arch=qwen2,tied=1", quant.F32},
	{"llama-q8", "custom:dim=64,layers=2,heads=2,kv=2,ffn=96,vocab=300", quant.Q8_0},
	{"qwen3", "custom:dim=64,layers=2,heads=4,kv=2,hd=24,ffn=96,vocab=300,arch=qwen3", quant.F32},
	{"phi3-window", "custom:dim=64,layers=2,heads=4,kv=4,ffn=96,vocab=300,arch=phi3,window=3", quant.Q8_0},
	{"gemma2-window", "custom:dim=64,layers=3,heads=2,kv=1,hd=32,ffn=96,vocab=300,arch=gemma2,window=3", quant.F32},
	{"gemma3-window", "custom:dim=64,layers=6,heads=2,kv=1,hd=32,ffn=96,vocab=300,arch=gemma3,window=3,linearrope=2", quant.F32},
}

func maxDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

// TestBatchEqualsSequential: prefilling n tokens in one causal batch gives the
// same logits, row for row, as n one-token passes.
func TestBatchEqualsSequential(t *testing.T) {
	ctx := context.Background()
	toks := []int{1, 17, 99, 250, 3, 42, 7}
	for _, s := range shapes {
		t.Run(s.name, func(t *testing.T) {
			m := tinyModel(t, s.shape, s.typ)
			var batch model.Result
			c1 := m.NewCache(16)
			if err := m.Forward(ctx, c1, model.Batch{Tokens: toks}, &batch); err != nil {
				t.Fatal(err)
			}
			c2 := m.NewCache(16)
			for i, tok := range toks {
				var one model.Result
				if err := m.Forward(ctx, c2, model.Batch{Tokens: []int{tok}}, &one); err != nil {
					t.Fatal(err)
				}
				row := batch.Logits[i*m.Vocab : (i+1)*m.Vocab]
				if d := maxDiff(row, one.Logits); d > 1e-4 {
					t.Fatalf("row %d: batch and sequential logits differ by %g", i, d)
				}
			}
			if c1.Len() != len(toks) || c2.Len() != len(toks) {
				t.Errorf("cache lengths %d, %d", c1.Len(), c2.Len())
			}
		})
	}
}

// TestTreeMaskAndCompaction verifies a token tree in one pass: after a shared
// prefix, two branches [a b] and [c] are batched with a mask so each row sees
// only its ancestors. Each row's logits must equal those of running its own
// path alone; compacting the cache to one branch must leave a cache that
// continues exactly like one built from that path.
func TestTreeMaskAndCompaction(t *testing.T) {
	ctx := context.Background()
	for _, s := range shapes {
		t.Run(s.name, func(t *testing.T) {
			m := tinyModel(t, s.shape, s.typ)
			prefix := []int{1, 20, 30}
			a, b, c := 40, 50, 60
			cache := m.NewCache(32)
			var res model.Result
			if err := m.Forward(ctx, cache, model.Batch{Tokens: prefix}, &res); err != nil {
				t.Fatal(err)
			}
			past := cache.Len()
			// rows: 0=a (depth 1), 1=b (child of a), 2=c (depth 1)
			tree := []int{a, b, c}
			parent := []int{-1, 0, -1}
			pos := []int{past, past + 1, past}
			total := past + len(tree)
			mask := make([]bool, len(tree)*total)
			for i := range tree {
				for j := 0; j < past; j++ {
					mask[i*total+j] = true
				}
				for k := i; k >= 0; k = parent[k] {
					mask[i*total+past+k] = true
				}
			}
			var tr model.Result
			if err := m.Forward(ctx, cache, model.Batch{Tokens: tree, Pos: pos, Mask: mask}, &tr); err != nil {
				t.Fatal(err)
			}
			paths := [][]int{{a}, {a, b}, {c}}
			for i, p := range paths {
				ref := m.NewCache(32)
				var r model.Result
				seq := append(append([]int{}, prefix...), p...)
				if err := m.Forward(ctx, ref, model.Batch{Tokens: seq, Want: []int{len(seq) - 1}}, &r); err != nil {
					t.Fatal(err)
				}
				if d := maxDiff(tr.Logits[i*m.Vocab:(i+1)*m.Vocab], r.Logits); d > 1e-4 {
					t.Fatalf("tree row %d (path %v) differs from its path alone by %g", i, p, d)
				}
			}
			// keep the prefix and branch [a b], drop c, then continue with token 70
			keep := []int{0, 1, 2, past, past + 1}
			if err := cache.Compact(keep); err != nil {
				t.Fatal(err)
			}
			var cont, ref model.Result
			if err := m.Forward(ctx, cache, model.Batch{Tokens: []int{70}}, &cont); err != nil {
				t.Fatal(err)
			}
			rc := m.NewCache(32)
			if err := m.Forward(ctx, rc, model.Batch{Tokens: []int{1, 20, 30, a, b, 70}, Want: []int{5}}, &ref); err != nil {
				t.Fatal(err)
			}
			if d := maxDiff(cont.Logits, ref.Logits); d > 1e-4 {
				t.Fatalf("after compaction the next step differs by %g", d)
			}
			// keeping the other branch, in a non-increasing order, also works
			cache2 := m.NewCache(32)
			m.Forward(ctx, cache2, model.Batch{Tokens: prefix}, &res)
			m.Forward(ctx, cache2, model.Batch{Tokens: tree, Pos: pos, Mask: mask}, &tr)
			if err := cache2.Compact([]int{0, 1, 2, past + 2}); err != nil {
				t.Fatal(err)
			}
			m.Forward(ctx, cache2, model.Batch{Tokens: []int{70}}, &cont)
			rc2 := m.NewCache(32)
			m.Forward(ctx, rc2, model.Batch{Tokens: []int{1, 20, 30, c, 70}, Want: []int{4}}, &ref)
			if d := maxDiff(cont.Logits, ref.Logits); d > 1e-4 {
				t.Fatalf("after compaction to branch c the next step differs by %g", d)
			}
		})
	}
}

func TestLayerSkipAndHidden(t *testing.T) {
	m := tinyModel(t, shapes[0].shape, quant.F32)
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
	m := tinyModel(t, shapes[0].shape, quant.F32)
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
	m := tinyModel(t, shapes[0].shape, quant.F32)
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
	m := tinyModel(t, shapes[2].shape, quant.Q8_0)
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

// TestHostileLayerCount is issue 17 item 2: a 1.2 MB GGUF whose
// llama.block_count was 2^24 took 7.3 GiB and 23 s before failing. Layers
// are now bounded (512, the reference engine's limit) and every claimed
// layer must have tensors, checked by name before anything is allocated.
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
// it is allocated (issue 17: sizes checked against the machine).
func TestCheckCache(t *testing.T) {
	m := tinyModel(t, shapes[0].shape, shapes[0].typ)
	if err := m.CheckCache(64); err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS == "linux" {
		if err := m.CheckCache(1 << 50 / int(m.KVBytes(1))); err == nil {
			t.Error("a 1 PiB cache passed")
		}
	}
}
