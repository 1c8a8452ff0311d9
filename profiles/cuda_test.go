//go:build cuda

package profiles

// End to end on the GPU, in arborist-cuda's build (go test -tags cuda; the
// test binary needs a GPU: gorgonia.org/cu exits it at start-up without a
// driver). CI compiles these (make cuda-check); scripts/device-check.sh runs
// the same checks through the CLI on the GPU machine.

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"arborist/engine/sample"
	"arborist/engine/spec"
	"arborist/engine/synth"
	"arborist/kernels/cuda"
	"arborist/kernels/quant"
)

// skipStandIn skips a test of what the GPU computes on the stand-in
// driver, which runs no kernels.
func skipStandIn(t *testing.T) {
	t.Helper()
	if cuda.StandIn() {
		t.Skip("the stand-in driver runs no kernels")
	}
}

func synthModel(t *testing.T, shape string, typ quant.Type) string {
	t.Helper()
	s, err := synth.ParseShape(shape)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), typ.String()+".gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := synth.Write(context.Background(), f, s, synth.Options{Type: typ, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCUDALogitsMatchCPU: for every weight type the GPU computes, the
// logits of a 24-token batch are the CPU backend's within 2% of the largest
// logit, with the same argmax at every position.
func TestCUDALogitsMatchCPU(t *testing.T) {
	skipStandIn(t)
	ids := make([]int, 24)
	for i := range ids {
		ids[i] = i + 1
	}
	for _, typ := range cuda.WeightTypes {
		path := synthModel(t, "custom:dim=512,layers=2,heads=8,kv=4,ffn=1536,vocab=2048", typ)
		get := func(backend string) []map[int]float64 {
			var rows []map[int]float64
			err := Logits(context.Background(), LogitsOptions{Model: path, Backend: backend, Threads: 2, IDs: ids, Top: 2048}, func(pos int, top [][2]float64) error {
				m := map[int]float64{}
				for _, p := range top {
					m[int(p[0])] = p[1]
				}
				m[-1] = top[0][0] // the argmax
				rows = append(rows, m)
				return nil
			})
			if err != nil {
				t.Fatalf("%v on %s: %v", typ, backend, err)
			}
			return rows
		}
		c, g := get("cpu"), get("cuda")
		var diff, big float64
		for i := range c {
			if c[i][-1] != g[i][-1] {
				t.Errorf("%v: position %d: argmax %v on the CPU, %v on the GPU", typ, i, c[i][-1], g[i][-1])
			}
			for id, v := range c[i] {
				if id >= 0 {
					diff = math.Max(diff, math.Abs(v-g[i][id]))
					big = math.Max(big, math.Abs(v))
				}
			}
		}
		t.Logf("%v: max |cuda - cpu| %.3g (largest logit %.3g)", typ, diff, big)
		if diff > 0.02*big+1e-3 {
			t.Errorf("%v: logits differ by %.3g (largest %.3g)", typ, diff, big)
		}
	}
}

// TestCUDAGreedyIdentity: chain, tree and egt on the GPU give the GPU's own
// autoregressive tokens.
func TestCUDAGreedyIdentity(t *testing.T) {
	skipStandIn(t)
	ctx := context.Background()
	b := openBench(t)
	target := synthModel(t, "custom:dim=512,layers=4,heads=8,kv=4,ffn=1536,vocab=2048", quant.Q8_0)
	ps := PairSpec{Target: target, Layers: 1, Backend: "cuda", Threads: 2}
	for _, p := range []spec.Plan{
		{Strategy: "chain", Gamma: 4},
		{Strategy: "tree", Widths: []int{3, 2, 1}},
		{Strategy: "egt", EGT: []int{1, 2, 2}, Branch: 2, WMax: 6},
	} {
		res, err := b.Run(ctx, ps, RunOptions{Plan: p, Sample: sample.Params{TopP: 1, Seed: 1}, MaxTokens: 48,
			Prompts: []string{"Once upon a time", "The cat"}, Baseline: true, NoStore: true})
		if err != nil {
			t.Fatalf("%s: %v", p.Strategy, err)
		}
		if !res.Identical {
			t.Errorf("%s on the GPU differs from autoregressive decoding", p.Strategy)
		}
	}
}
