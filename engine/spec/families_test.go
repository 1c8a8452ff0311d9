package spec

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"arborist/engine/drafter"
	"arborist/engine/generate"
	"arborist/engine/hidden"
	"arborist/engine/model"
	"arborist/engine/synth"
	"arborist/kernels/cpu"
	"arborist/kernels/quant"
)

// familyShapes are tiny random models of each family beyond plain llama,
// with sliding windows shorter than the generations below, so the window
// moves while draft trees are verified and the cache is compacted.
var familyShapes = map[string]string{
	"llama3-rope": "custom:dim=64,layers=2,heads=4,kv=2,ffn=96,vocab=300,rope=500000,llama3rope=8",
	"qwen3":       "custom:dim=64,layers=2,heads=4,kv=2,hd=24,ffn=96,vocab=300,arch=qwen3,tied=1",
	"phi3":        "custom:dim=64,layers=2,heads=4,kv=4,ffn=96,vocab=300,arch=phi3,window=7,longrope=1,ctx=8192",
	"gemma":       "custom:dim=64,layers=2,heads=2,kv=1,hd=48,ffn=96,vocab=300,arch=gemma",
	"gemma2":      "custom:dim=64,layers=3,heads=2,kv=1,hd=32,ffn=96,vocab=300,arch=gemma2,window=6",
	"gemma3":      "custom:dim=64,layers=6,heads=2,kv=1,hd=32,ffn=96,vocab=300,arch=gemma3,window=5,linearrope=4",
}

// loadFamily writes a family's tiny model and loads it twice: as the
// target, and as a drafter on its own backend (the duo strategy drafts
// concurrently).
func loadFamily(t *testing.T, shape string) (target, self *model.Model) {
	t.Helper()
	sh, err := synth.ParseShape(shape)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := synth.WriteFile(context.Background(), p, sh, synth.Options{Type: quant.F32, Seed: 11}); err != nil {
		t.Fatal(err)
	}
	load := func(threads int) *model.Model {
		be := cpu.New(threads)
		t.Cleanup(be.Close)
		m, err := model.Load(p, be)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	return load(2), load(1)
}

// TestGreedyLosslessFamilies: for every new family, every strategy and
// the draft sources (the model itself: long accepted paths across the
// window; its first layer: frequent rejections; an n-gram drafter; a
// hidden-state drafter, on the target's device and on its own), greedy
// speculative output equals plain decoding; the sources on a device of
// their own draft ahead (AOT, duo, tails) while the target verifies.
func TestGreedyLosslessFamilies(t *testing.T) {
	ctx := context.Background()
	prompts := [][]int{{1, 17, 99, 250, 3}, {1, 200, 5}}
	const n = 40
	for fam, shape := range familyShapes {
		t.Run(fam, func(t *testing.T) {
			target, self := loadFamily(t, shape)
			want := make([][]int, len(prompts))
			for i, pr := range prompts {
				out, _, err := generate.Run(ctx, target, pr, generate.Options{MaxTokens: n})
				if err != nil {
					t.Fatal(err)
				}
				want[i] = out
			}
			srcs := map[string]func() (drafter.Source, bool){
				"self": func() (drafter.Source, bool) { return drafter.NewModel(self, 0, 256, "self"), true },
				"layers": func() (drafter.Source, bool) {
					return drafter.NewModel(target, 1, 256, "layers:1"), false
				},
				"ngram": func() (drafter.Source, bool) { return drafter.NewNGram(2, target.Vocab), false },
				"hidden": func() (drafter.Source, bool) {
					d, err := hidden.New(target, 8, -1, 1)
					if err != nil {
						t.Fatal(err)
					}
					src, err := hidden.NewSource(d, target, hidden.Options{ResampleMin: 0.2})
					if err != nil {
						t.Fatal(err)
					}
					return src, false
				},
				// its layer on a device of its own, drafting beside the target
				"hidden-own": func() (drafter.Source, bool) {
					d, err := hidden.New(target, 8, -1, 1)
					if err != nil {
						t.Fatal(err)
					}
					src, err := hidden.NewSource(d, target, hidden.Options{ResampleMin: 0.2, Device: self.Backend})
					if err != nil {
						t.Fatal(err)
					}
					return src, true
				},
			}
			for cname, cfg := range configs() {
				for sname, mk := range srcs {
					if cfg.Strategy == "ar" && sname != "self" {
						continue
					}
					src, conc := mk()
					e := &Engine{Target: target, Source: src, Concurrent: conc}
					if cfg.Strategy == "ar" {
						e.Source = nil
					}
					accepted := 0
					for i, pr := range prompts {
						c := cfg
						c.MaxTokens = n
						res, err := e.Run(ctx, pr, c)
						if err != nil {
							t.Fatalf("%s/%s: %v", cname, sname, err)
						}
						if fmt.Sprint(res.Tokens) != fmt.Sprint(want[i]) {
							t.Fatalf("%s/%s, prompt %v:\n got %v\nwant %v", cname, sname, pr, res.Tokens, want[i])
						}
						accepted += len(res.Tokens) - len(res.Steps)
					}
					if cfg.Strategy != "ar" && sname == "self" && accepted == 0 {
						t.Errorf("%s/self: the model drafting for itself never had a token accepted", cname)
					}
				}
			}
		})
	}
}
