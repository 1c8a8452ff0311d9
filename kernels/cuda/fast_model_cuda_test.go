//go:build cuda

package cuda_test

// The fast path against the verified path, whole passes at a time: on a
// GPU (scripts/device-check.sh) and on the stand-in driver running the
// kernels on the CPU (ARBORIST_STANDIN_RUN=1, make cuda-check); skipped
// on the stand-in that only counts launches.

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"arborist/engine/model"
	"arborist/engine/model/modeltest"
	"arborist/engine/synth"
	"arborist/kernels"
	"arborist/kernels/cuda"
	"arborist/kernels/quant"
)

func skipCounting(t *testing.T) {
	t.Helper()
	if cuda.StandIn() {
		t.Skip("the stand-in driver runs no kernels (ARBORIST_STANDIN_RUN=1 runs them on the CPU)")
	}
}

func fastDevice(t *testing.T) kernels.Device {
	d, err := cuda.NewPath(0, cuda.Fast)
	if err != nil {
		t.Skipf("no usable CUDA device: %v", err)
	}
	return d
}

// TestFastStructure runs the model-level suite's structural checks on the
// fast path, on its tiny models of every family: a batch equals its rows
// run one at a time, bit for bit; tree rows equal their paths decoded
// alone, bit for bit, before and after compaction; a copied prefix
// continues as the original; the argmax output. (On a GPU the whole suite
// runs on the fast path too: the device check runs the test binaries
// again with ARBORIST_CUDA_PATH=fast.)
//
// With -short (make cuda-check, on the stand-in running the kernels) only
// the tree masks and compaction.
func TestFastStructure(t *testing.T) {
	skipCounting(t)
	t.Run("TreeMaskAndCompaction", func(t *testing.T) { modeltest.TreeMaskAndCompaction(t, fastDevice) })
	if testing.Short() {
		return
	}
	t.Run("BatchEqualsSequential", func(t *testing.T) { modeltest.BatchEqualsSequential(t, fastDevice) })
	t.Run("CopyPrefix", func(t *testing.T) { modeltest.CopyPrefix(t, fastDevice) })
	t.Run("Argmax", func(t *testing.T) { modeltest.Argmax(t, fastDevice) })
}

// fastCases are the models the two paths are compared on: the suite's
// tiny shapes (every family's switches) and shapes that take each of the
// fast kernels' branches (quantised types with 16-byte loads, Q|K|V and
// gate|up fused, several query heads a key/value head, attention
// quantising its output for the output projection, Q/K norms fused into
// RoPE, a mix of types as llama.cpp's Q4_K_M files have).
func fastCases() []fastCase {
	var cs []fastCase
	for _, s := range modeltest.Shapes {
		cs = append(cs, fastCase{name: s.Name, shape: s.Shape, typ: s.Type})
	}
	return append(cs,
		fastCase{name: "llama-q4k-gqa4", shape: "custom:dim=256,layers=2,heads=8,kv=2,hd=32,ffn=512,vocab=300", typ: quant.Q4_K},
		fastCase{name: "llama-q5k", shape: "custom:dim=256,layers=2,heads=4,kv=2,ffn=256,vocab=300", typ: quant.Q5_K},
		fastCase{name: "llama-q6k", shape: "custom:dim=256,layers=2,heads=4,kv=1,ffn=256,vocab=300", typ: quant.Q6_K},
		fastCase{name: "llama-q4_0", shape: "custom:dim=64,layers=2,heads=2,kv=1,ffn=128,vocab=300", typ: quant.Q4_0},
		fastCase{name: "llama-f16", shape: "custom:dim=64,layers=2,heads=4,kv=2,ffn=96,vocab=300", typ: quant.F16},
		fastCase{name: "qwen3-q8-hd32", shape: "custom:dim=128,layers=2,heads=4,kv=2,hd=32,ffn=128,vocab=300,arch=qwen3", typ: quant.Q8_0},
		fastCase{name: "llama-q4k-medium", shape: "custom:dim=256,layers=2,heads=4,kv=2,ffn=512,vocab=300", typ: quant.Q4_K, medium: true},
	)
}

type fastCase struct {
	name, shape string
	typ         quant.Type
	medium      bool
}

// shortCases are the cases run with -short: between them every fast
// kernel and fusion (Q4_K, Q5_K, Q6_K, Q8_0, F16 and F32 products; the
// Q/K norms in RoPE; several query heads a key/value head; soft-caps,
// post-norms, GELU and a sliding window).
var shortCases = map[string]bool{"llama-q4k-gqa4": true, "llama-q5k": true, "qwen3-q8-hd32": true, "llama-f16": true,
	"gemma2-window": true, "llama-q4k-medium": true}

// TestFastMatchesVerified runs the same passes on both paths: a prompt,
// decode steps, a verification pass of a tree with every row's logits,
// the commit of one of its paths, and another decode step; the fast
// path's logits must be the verified path's within the bound the CUDA
// against CPU comparison uses (2% of the largest logit), and, on the
// stand-in driver, where the kernels are compiled without fused
// multiply-adds, bit for bit but for F16 (whose fast product multiplies
// float activations with fused multiply-adds where the verified one
// rounds them for the tensor cores). On a GPU it logs how many logits
// agree bit for bit. The tree rows of the fast path must equal their
// paths decoded alone on the fast path, bit for bit. With -short,
// shortCases only.
func TestFastMatchesVerified(t *testing.T) {
	skipCounting(t)
	for _, c := range fastCases() {
		if testing.Short() && !shortCases[c.name] {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			sh, err := synth.ParseShape(c.shape)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "m.gguf")
			if err := synth.WriteFile(context.Background(), path, sh, synth.Options{Type: c.typ, Seed: 7, Medium: c.medium}); err != nil {
				t.Fatal(err)
			}
			ver, err := cuda.NewPath(0, cuda.Verified)
			if err != nil {
				t.Skipf("no usable CUDA device: %v", err)
			}
			defer ver.Close()
			fast, err := cuda.NewPath(0, cuda.Fast)
			if err != nil {
				t.Fatal(err)
			}
			defer fast.Close()
			mv := modeltest.Load(t, ver, path)
			mf := modeltest.Load(t, fast, path)
			exact := cuda.StandInRuns() && c.typ != quant.F16 && !c.medium
			var same, total int
			compare := func(what string, a, b []float32) {
				t.Helper()
				if len(a) != len(b) {
					t.Fatalf("%s: %d logits on the verified path, %d on the fast path", what, len(a), len(b))
				}
				big := 0.0
				for _, v := range a {
					big = max(big, math.Abs(float64(v)))
				}
				for i := range a {
					total++
					if a[i] == b[i] {
						same++
						continue
					}
					if exact {
						t.Fatalf("%s: logit %d is %g on the fast path, %g on the verified path (bit for bit expected here)", what, i, b[i], a[i])
					}
					if d := math.Abs(float64(a[i] - b[i])); d > 0.02*big+1e-3 || math.IsNaN(d) {
						t.Fatalf("%s: logit %d is %g on the fast path, %g on the verified path (largest logit %g)", what, i, b[i], a[i], big)
					}
				}
			}
			ctx := context.Background()
			cv, cf := mv.NewCache(64), mf.NewCache(64)
			defer cv.Free()
			defer cf.Free()
			var rv, rf model.Result
			step := func(what string, b model.Batch) {
				t.Helper()
				if err := mv.Forward(ctx, cv, b, &rv); err != nil {
					t.Fatal(err)
				}
				if err := mf.Forward(ctx, cf, b, &rf); err != nil {
					t.Fatal(err)
				}
				compare(what, rv.Logits, rf.Logits)
			}
			tok := func(i int) int { return 3 + (i*7919)%(mv.Vocab-3) }
			prompt := make([]int, 9)
			for i := range prompt {
				prompt[i] = tok(i)
			}
			step("prompt", model.Batch{Tokens: prompt})
			for i := 0; i < 3; i++ {
				step(fmt.Sprintf("decode %d", i), model.Batch{Tokens: []int{tok(100 + i)}})
			}
			// a tree of six: 0 <- 1 <- 3 <- 5, 0 <- 2 <- 4
			past := cf.Len()
			parent := []int{-1, 0, 0, 1, 2, 3}
			toks, pos := make([]int, len(parent)), make([]int, len(parent))
			mask := make([]bool, len(parent)*(past+len(parent)))
			depth := make([]int, len(parent))
			for i, p := range parent {
				toks[i] = tok(200 + i)
				if p >= 0 {
					depth[i] = depth[p] + 1
				}
				pos[i] = past + depth[i]
				row := mask[i*(past+len(parent)):]
				for j := 0; j < past; j++ {
					row[j] = true
				}
				for a := i; a >= 0; a = parent[a] {
					row[past+a] = true
				}
			}
			// the fast path's path 0-1-3-5 decoded alone, from a copy
			// of the context
			alone, err := cf.CopyPrefix(past)
			if err != nil {
				t.Fatal(err)
			}
			defer alone.Free()
			var ra model.Result
			var aloneRows [][]float32
			for _, r := range []int{0, 1, 3, 5} {
				if err := mf.Forward(ctx, alone, model.Batch{Tokens: []int{toks[r]}}, &ra); err != nil {
					t.Fatal(err)
				}
				aloneRows = append(aloneRows, append([]float32(nil), ra.Logits...))
			}
			step("tree", model.Batch{Tokens: toks, Pos: pos, Mask: mask})
			v := mf.Vocab
			for k, r := range []int{0, 1, 3, 5} {
				got := rf.Logits[r*v : (r+1)*v]
				for i := range got {
					if got[i] != aloneRows[k][i] {
						t.Fatalf("tree row %d: logit %d is %g, %g when its path is decoded alone (bit for bit expected)", r, i, got[i], aloneRows[k][i])
					}
				}
			}
			// commit the path 0-2-4, then decode on
			keep := make([]int, past, past+3)
			for i := range keep {
				keep[i] = i
			}
			keep = append(keep, past+0, past+2, past+4)
			if err := cv.Compact(keep); err != nil {
				t.Fatal(err)
			}
			if err := cf.Compact(keep); err != nil {
				t.Fatal(err)
			}
			step("after the commit", model.Batch{Tokens: []int{tok(400)}})
			step("two after the commit", model.Batch{Tokens: []int{tok(401), tok(402)}, Want: []int{1}})
			t.Logf("%d of %d logits bit for bit the verified path's", same, total)
		})
	}
}
