// Package modeltest is the model-level conformance suite every
// kernels.Device runs, as gonum's testblas is for BLAS implementations: the
// forward pass of engine/model on the device against a float64 reference
// for the families and weight types engine/synth writes, tree masks and
// cache compaction, batch-equals-sequential, a pass of several sequences
// equal to each alone, a copied prefix, the F16 KV
// cache within a bound of F32, the ../shared/conformance models against
// llama.cpp's logits, and greedy identity of every registered speculative
// strategy (engine/spec) with plain decoding on the device.
//
// A backend's test calls Run with a constructor:
//
//	func TestModel(t *testing.T) {
//		modeltest.Run(t, func(t *testing.T) kernels.Device { return cpu.New(2) })
//	}
//
// (the primitive-level checks are kernels/devicetest's; this suite checks
// what the model code makes of them).
//
// It also finds the files tests read (files.go, from package testfiles):
// Stories260K and Stories260KGreedy are always there (the model embedded
// in the binary, its greedy references in testdata/), and Shared gives a
// path under ../shared (or $ARBORIST_SHARED), skipping the test with a
// message naming the folder when it is absent. Without ../shared the suite
// runs everything but the conformance kit and the shared models' checks.
package modeltest

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"arborist/engine/model"
	"arborist/engine/sample"
	"arborist/engine/synth"
	"arborist/kernels"
	"arborist/kernels/quant"
)

// Device makes a device for a test; the suite closes it.
type Device func(t *testing.T) kernels.Device

// Run runs the whole suite on the devices dev makes.
func Run(t *testing.T, dev Device) { RunOptions(t, dev, Options{}) }

// Options adjusts the suite to a device.
type Options struct {
	// Small skips the conformance kit, the models of real size (the
	// bench target) and the strategies' runs on quantised weights and F16
	// caches: for slow reference devices such as kernels/devicetest's
	// float64 Fake, whose passes above the backend are what is being
	// checked, not its speed.
	Small bool
	// HalfActivations says the device's F16 products round the
	// activations to half precision (tensor cores, as llama.cpp's CUDA
	// backend does); the F16 reference case is then held to 5e-3, the
	// error of that rounding, instead of 1e-4.
	HalfActivations bool
}

// RunOptions runs the suite with options.
func RunOptions(t *testing.T, dev Device, o Options) {
	t.Run("Reference", func(t *testing.T) { reference(t, dev, o) })
	t.Run("BatchEqualsSequential", func(t *testing.T) { BatchEqualsSequential(t, dev) })
	t.Run("TreeMaskAndCompaction", func(t *testing.T) { TreeMaskAndCompaction(t, dev) })
	t.Run("CopyPrefix", func(t *testing.T) { CopyPrefix(t, dev) })
	t.Run("MultiSequence", func(t *testing.T) { MultiSequence(t, dev) })
	t.Run("KVF16", func(t *testing.T) { kvF16(t, dev, o) })
	if !o.Small {
		t.Run("Conformance", func(t *testing.T) { Conformance(t, dev) })
	}
	t.Run("Argmax", func(t *testing.T) { Argmax(t, dev) })
	t.Run("Strategies", func(t *testing.T) { strategies(t, dev, o) })
}

// open makes a device for t and closes it when t ends.
func open(t *testing.T, dev Device) kernels.Device {
	t.Helper()
	d := dev(t)
	t.Cleanup(d.Close)
	return d
}

// Synth writes a synthetic model (an engine/synth shape) of weight type typ
// to a temporary folder and loads it on d; it returns the model and its
// file (for loading it again).
func Synth(t *testing.T, d kernels.Device, shape string, typ quant.Type, seed uint64) (*model.Model, string) {
	t.Helper()
	sh, err := synth.ParseShape(shape)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := synth.WriteFile(context.Background(), p, sh, synth.Options{Type: typ, Seed: seed}); err != nil {
		t.Fatal(err)
	}
	return Load(t, d, p), p
}

// Load loads a GGUF file on d, closed when t ends.
func Load(t *testing.T, d kernels.Device, path string) *model.Model {
	t.Helper()
	m, err := model.Load(path, d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// Shapes are the tiny synthetic models the structural checks run on: each
// family's switches (biases, q/k norms, fused tensors, soft-caps, GELU,
// post-norms, sliding windows shorter than the sequences, RoPE variants)
// and a quantised weight type.
var Shapes = []struct {
	Name, Shape string
	Type        quant.Type
}{
	{"llama", "custom:dim=64,layers=2,heads=4,kv=2,ffn=96,vocab=300", quant.F32},
	{"qwen2-tied", "custom:dim=64,layers=2,heads=4,kv=1,ffn=96,vocab=300,arch=qwen2,tied=1", quant.F32},
	{"llama-q8", "custom:dim=64,layers=2,heads=2,kv=2,ffn=96,vocab=300", quant.Q8_0},
	{"llama-q4k", "custom:dim=256,layers=2,heads=4,kv=2,ffn=256,vocab=300", quant.Q4_K},
	{"qwen3", "custom:dim=64,layers=2,heads=4,kv=2,hd=24,ffn=96,vocab=300,arch=qwen3", quant.F32},
	{"phi3-window", "custom:dim=64,layers=2,heads=4,kv=4,ffn=96,vocab=300,arch=phi3,window=3", quant.Q8_0},
	{"gemma2-window", "custom:dim=64,layers=3,heads=2,kv=1,hd=32,ffn=96,vocab=300,arch=gemma2,window=3", quant.F32},
	{"gemma3-window", "custom:dim=64,layers=6,heads=2,kv=1,hd=32,ffn=96,vocab=300,arch=gemma3,window=3,linearrope=2", quant.F32},
}

// MaxDiff is the largest |a[i] - b[i]|.
func MaxDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

// Reference: the forward pass equals the float64 reference of the
// published Qwen3, Gemma 3 and Phi-3 (longrope) architectures on tiny
// random models, including a head width that differs from width/heads,
// Gemma 3's local layers (own rope base, sliding window shorter than the
// sequence) and a linearly scaled global layer; with F32 weights within
// 1e-4 (relative above 1), and with F16 and quantised weights within the
// error their types (and the CPU's 8-bit activations) allow.
func Reference(t *testing.T, dev Device) { reference(t, dev, Options{}) }

func reference(t *testing.T, dev Device, o Options) {
	f16 := 1e-4
	if o.HalfActivations {
		f16 = 5e-3
	}
	cases := []struct {
		name, shape string
		typ         quant.Type
		tol         float64
	}{
		{"qwen3", "custom:dim=64,layers=2,heads=4,kv=2,hd=24,ffn=96,vocab=300,arch=qwen3,rope=1000000,tied=1", quant.F32, 1e-4},
		{"qwen3-untied", "custom:dim=64,layers=2,heads=2,kv=1,hd=32,ffn=64,vocab=300,arch=qwen3", quant.F32, 1e-4},
		{"gemma3", "custom:dim=64,layers=7,heads=2,kv=1,hd=32,ffn=96,vocab=300,arch=gemma3,window=5,linearrope=4,rope=1000000", quant.F32, 1e-4},
		{"phi3-short", "custom:dim=64,layers=2,heads=4,kv=4,ffn=96,vocab=300,arch=phi3,window=6,longrope=1,ctx=16384", quant.F32, 1e-4},
		{"phi3-long", "custom:dim=64,layers=2,heads=4,kv=4,ffn=96,vocab=300,arch=phi3,window=6,longrope=1,ctx=16384", quant.F32, 1e-4},
		{"qwen3-f16", "custom:dim=64,layers=2,heads=4,kv=2,hd=24,ffn=96,vocab=300,arch=qwen3", quant.F16, f16},
		{"qwen3-q8_0", "custom:dim=64,layers=2,heads=4,kv=2,hd=24,ffn=96,vocab=300,arch=qwen3", quant.Q8_0, 0.05},
		// the K-quants' products with AVX-512 VNNI scale activations per
		// 256 values, as llama.cpp's do (the conformance kit's K-quant
		// logits then come within float rounding of llama.cpp's): Q4_K
		// reads 0.063 from this reference there, 0.037 per 32 values
		{"qwen3-q4_k", "custom:dim=256,layers=2,heads=4,kv=2,ffn=256,vocab=300,arch=qwen3", quant.Q4_K, 0.08},
		{"qwen3-q6_k", "custom:dim=256,layers=2,heads=4,kv=2,ffn=256,vocab=300,arch=qwen3", quant.Q6_K, 0.05},
	}
	ids := []int{1, 17, 99, 250, 3, 42, 7, 180, 64, 33, 299, 5, 120}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, _ := Synth(t, open(t, dev), c.shape, c.typ, 7)
			arch := m.Arch
			u := func(k string) int {
				v, ok := m.File.Uint(arch + "." + k)
				if !ok {
					t.Fatalf("%s.%s missing", arch, k)
				}
				return int(v)
			}
			fl := func(k string, def float64) float64 {
				if v, ok := m.File.Float(arch + "." + k); ok {
					return v
				}
				return def
			}
			ref := &refModel{arch: arch, dim: u("embedding_length"), layers: u("block_count"), heads: u("attention.head_count"),
				kv: u("attention.head_count_kv"), eps: fl("attention.layer_norm_rms_epsilon", 1e-6),
				base: fl("rope.freq_base", 10000), scale: fl("rope.scaling.factor", 1), f: m.File}
			ref.hd = ref.dim / ref.heads
			if _, ok := m.File.Uint(arch + ".attention.key_length"); ok {
				ref.hd = u("attention.key_length")
			}
			if arch == "gemma3" || arch == "phi3" {
				ref.window = u("attention.sliding_window")
			}
			slots := len(ids)
			if arch == "phi3" {
				// HF picks the long factors past the original context;
				// Arborist (like llama.cpp) by the cache's size
				name := "rope_factors_short.weight"
				if c.name == "phi3-long" {
					name, slots = "rope_factors_long.weight", u("rope.scaling.original_context_length")+1
				}
				ref.factors, ref.mscale = ref.tensor(t, name), fl("rope.scaling.attn_factor", 1)
			}
			want := ref.forward(t, ids)
			var res model.Result
			if err := m.Forward(context.Background(), m.NewCache(slots), model.Batch{Tokens: ids}, &res); err != nil {
				t.Fatal(err)
			}
			worst := 0.0
			for i := range ids {
				for v := 0; v < m.Vocab; v++ {
					d := math.Abs(float64(res.Logits[i*m.Vocab+v]) - want[i][v])
					worst = math.Max(worst, d/math.Max(1, math.Abs(want[i][v])))
				}
			}
			t.Logf("%s: max |engine - float64 reference| %.3g (relative above 1)", c.name, worst)
			if worst > c.tol {
				t.Errorf("%s: engine logits differ from the float64 reference by %.3g (tolerance %g)", c.name, worst, c.tol)
			}
		})
	}
}

// BatchEqualsSequential: prefilling n tokens in one causal batch gives the
// same logits, row for row, as n one-token passes.
func BatchEqualsSequential(t *testing.T, dev Device) {
	ctx := context.Background()
	toks := []int{1, 17, 99, 250, 3, 42, 7}
	d := open(t, dev)
	for _, s := range Shapes {
		t.Run(s.Name, func(t *testing.T) {
			m, _ := Synth(t, d, s.Shape, s.Type, 42)
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
				if d := MaxDiff(row, one.Logits); d > 1e-4 {
					t.Fatalf("row %d: batch and sequential logits differ by %g", i, d)
				}
			}
			if c1.Len() != len(toks) || c2.Len() != len(toks) {
				t.Errorf("cache lengths %d, %d", c1.Len(), c2.Len())
			}
		})
	}
}

// TreeMaskAndCompaction verifies a token tree in one pass: after a shared
// prefix, two branches [a b] and [c] are batched with a mask so each row sees
// only its ancestors. Each row's logits must equal those of running its own
// path alone; compacting the cache to one branch must leave a cache that
// continues exactly like one built from that path.
func TreeMaskAndCompaction(t *testing.T, dev Device) {
	ctx := context.Background()
	d := open(t, dev)
	for _, s := range Shapes {
		t.Run(s.Name, func(t *testing.T) {
			m, _ := Synth(t, d, s.Shape, s.Type, 42)
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
				// to the bit: greedy verification of a tree is lossless only so
				if d := MaxDiff(tr.Logits[i*m.Vocab:(i+1)*m.Vocab], r.Logits); d != 0 {
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
			if d := MaxDiff(cont.Logits, ref.Logits); d > 1e-4 {
				t.Fatalf("after compaction the next step differs by %g", d)
			}
			// keeping the other branch, in a non-increasing order, also works
			cache2 := m.NewCache(32)
			must(t, m.Forward(ctx, cache2, model.Batch{Tokens: prefix}, &res))
			must(t, m.Forward(ctx, cache2, model.Batch{Tokens: tree, Pos: pos, Mask: mask}, &tr))
			must(t, cache2.Compact([]int{0, 1, 2, past + 2}))
			must(t, m.Forward(ctx, cache2, model.Batch{Tokens: []int{70}}, &cont))
			rc2 := m.NewCache(32)
			must(t, m.Forward(ctx, rc2, model.Batch{Tokens: []int{1, 20, 30, c, 70}, Want: []int{4}}, &ref))
			if d := MaxDiff(cont.Logits, ref.Logits); d > 1e-4 {
				t.Fatalf("after compaction to branch c the next step differs by %g", d)
			}
			if err := cache2.Compact([]int{0, cache2.Len()}); err == nil {
				t.Fatal("compaction to a slot past the cache's length was accepted")
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// CopyPrefix: a cache copied from another's first slots continues exactly
// as a cache built from those tokens, and the original is unchanged by the
// copy's passes.
func CopyPrefix(t *testing.T, dev Device) {
	ctx := context.Background()
	d := open(t, dev)
	for _, s := range Shapes[:3] {
		t.Run(s.Name, func(t *testing.T) {
			m, _ := Synth(t, d, s.Shape, s.Type, 42)
			c := m.NewCache(16)
			var res, cont, ref model.Result
			must(t, m.Forward(ctx, c, model.Batch{Tokens: []int{1, 20, 30, 40, 50}}, &res))
			cp, err := c.CopyPrefix(3)
			if err != nil {
				t.Fatal(err)
			}
			must(t, m.Forward(ctx, cp, model.Batch{Tokens: []int{77, 78}}, &cont))
			must(t, m.Forward(ctx, m.NewCache(16), model.Batch{Tokens: []int{1, 20, 30, 77, 78}, Want: []int{3, 4}}, &ref))
			if d := MaxDiff(cont.Logits, ref.Logits); d > 1e-4 {
				t.Fatalf("the copied prefix continues %g away from a fresh cache", d)
			}
			must(t, m.Forward(ctx, c, model.Batch{Tokens: []int{60}}, &cont))
			must(t, m.Forward(ctx, m.NewCache(16), model.Batch{Tokens: []int{1, 20, 30, 40, 50, 60}, Want: []int{5}}, &ref))
			if d := MaxDiff(cont.Logits, ref.Logits); d > 1e-4 {
				t.Fatalf("the original cache continues %g away after its copy ran", d)
			}
			if _, err := c.CopyPrefix(7); err == nil {
				t.Fatal("a copy longer than the cache was accepted")
			}
			// into a cache of another size: larger, then just the prefix's
			for _, capacity := range []int{40, 5} {
				big, err := c.CopyPrefixCap(5, capacity)
				if err != nil {
					t.Fatal(err)
				}
				if big.Cap() != capacity || big.Len() != 5 {
					t.Fatalf("copied into %d slots: a cache of %d holding %d", capacity, big.Cap(), big.Len())
				}
				if capacity > 5 {
					must(t, m.Forward(ctx, big, model.Batch{Tokens: []int{61}}, &cont))
					must(t, m.Forward(ctx, m.NewCache(16), model.Batch{Tokens: []int{1, 20, 30, 40, 50, 61}, Want: []int{5}}, &ref))
					if d := MaxDiff(cont.Logits, ref.Logits); d > 1e-4 {
						t.Fatalf("a copy into %d slots continues %g away from a fresh cache", capacity, d)
					}
				}
			}
			if _, err := c.CopyPrefixCap(5, 4); err == nil {
				t.Fatal("a copy into a cache smaller than the prefix was accepted")
			}
		})
	}
}

// KVStats compares the logits of an F16 KV cache with an F32 one's.
type KVStats struct {
	Max, RMS float64 // largest and RMS |logit difference| over every row
	Rows     int     // positions compared
	Flips    int     // positions whose argmax differs
}

// KVDiff runs ids through m twice, with an F32 and an F16 KV cache (the
// first half of ids as one prefill batch, the rest one token per pass, so
// both the batched and the decoding attention read the cache), and
// compares the logits of every position.
func KVDiff(ctx context.Context, m *model.Model, ids []int) (KVStats, error) {
	var st KVStats
	run := func(t quant.Type) ([]float32, error) {
		saved := m.KVType
		defer func() { m.KVType = saved }()
		m.KVType = t
		c := m.NewCache(len(ids))
		defer c.Free()
		var res model.Result
		half := max(1, len(ids)/2)
		if err := m.Forward(ctx, c, model.Batch{Tokens: ids[:half]}, &res); err != nil {
			return nil, err
		}
		out := append([]float32(nil), res.Logits...)
		for _, id := range ids[half:] {
			if err := m.Forward(ctx, c, model.Batch{Tokens: []int{id}}, &res); err != nil {
				return nil, err
			}
			out = append(out, res.Logits...)
		}
		return out, nil
	}
	a, err := run(quant.F32)
	if err != nil {
		return st, err
	}
	b, err := run(quant.F16)
	if err != nil {
		return st, err
	}
	var sq float64
	for i := range a {
		d := float64(a[i] - b[i])
		st.Max = math.Max(st.Max, math.Abs(d))
		sq += d * d
	}
	st.RMS = math.Sqrt(sq / float64(len(a)))
	st.Rows = len(a) / m.Vocab
	for r := 0; r < st.Rows; r++ {
		if sample.Argmax(a[r*m.Vocab:(r+1)*m.Vocab]) != sample.Argmax(b[r*m.Vocab:(r+1)*m.Vocab]) {
			st.Flips++
		}
	}
	return st, nil
}

// KVF16: an F16 KV cache gives logits within 1e-2 of the F32 cache's
// (relative to the logits' largest magnitude, at least 1) on every
// synthetic shape and on stories260K (real weights), and
// holds half the memory. Quantised weights get 3e-2: their 8-bit
// activations on the CPU turn the cache's rounding into a block scale
// that moves (measured 1.2e-2 on the Q8_0 shapes, 1e-4 on F32 ones).
func KVF16(t *testing.T, dev Device) { kvF16(t, dev, Options{}) }

func kvF16(t *testing.T, dev Device, o Options) {
	ctx := context.Background()
	d := open(t, dev)
	ids := []int{1, 17, 99, 250, 3, 42, 7, 180, 64, 33, 299, 5, 120, 8, 9, 10}
	check := func(t *testing.T, m *model.Model, ids []int, bound float64) {
		st, err := KVDiff(ctx, m, ids)
		if err != nil {
			t.Fatal(err)
		}
		maxd := st.Max
		var res model.Result
		must(t, m.Forward(ctx, m.NewCache(len(ids)), model.Batch{Tokens: ids}, &res))
		scale := 1.0
		for _, v := range res.Logits {
			scale = math.Max(scale, math.Abs(float64(v)))
		}
		t.Logf("F16 vs F32 KV cache: max |diff| %.3g, RMS %.3g (logits up to %.3g); argmax differs at %d of %d positions", maxd, st.RMS, scale, st.Flips, st.Rows)
		if maxd > bound*scale {
			t.Errorf("an F16 KV cache moves the logits by %.3g (bound %.3g)", maxd, bound*scale)
		}
		m.KVType = quant.F16
		c16 := m.NewCache(64)
		m.KVType = quant.F32
		c32 := m.NewCache(64)
		must(t, m.Forward(ctx, c16, model.Batch{Tokens: ids[:2]}, &res))
		must(t, m.Forward(ctx, c32, model.Batch{Tokens: ids[:2]}, &res))
		if c16.Type() != quant.F16 || m.KVBytesAs(64, quant.F16)*2 != m.KVBytes(64) {
			t.Errorf("an F16 cache is %s, %d bytes against %d", c16.Type(), m.KVBytesAs(64, quant.F16), m.KVBytes(64))
		}
	}
	for _, s := range Shapes {
		t.Run(s.Name, func(t *testing.T) {
			m, _ := Synth(t, d, s.Shape, s.Type, 42)
			bound := 1e-2
			if s.Type.BlockSize() > 1 {
				bound = 3e-2
			}
			check(t, m, ids, bound)
		})
	}
	// real weights (stories260K, always there), the Q8_0 bench target and
	// a conformance model with grouped-query attention (each when
	// ../shared holds it)
	for _, r := range []struct {
		name, path string
		n          int
		bound      float64
		large      bool
	}{
		{"stories260K", "", 96, 1e-2, false},
		{"bench-target-q8_0", "models/bench/target-60m-q8_0.gguf", 64, 3e-2, true},
		{"conformance-llama2-gqa", "conformance/models/llama2-gqa.gguf", 64, 1e-2, false},
	} {
		t.Run(r.name, func(t *testing.T) {
			if r.large && o.Small {
				t.Skip("a model of real size, skipped for this device (Options.Small)")
			}
			var p string
			if r.path == "" {
				p = Stories260K(t)
			} else {
				p = Shared(t, r.path)
			}
			m := Load(t, d, p)
			ids := make([]int, r.n)
			for i := range ids {
				ids[i] = (i*37 + 1) % m.Vocab
			}
			check(t, m, ids, r.bound)
		})
	}
}
