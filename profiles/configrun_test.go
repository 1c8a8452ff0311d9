package profiles

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"arborist/engine/spec"
	"arborist/kernels/quant"
	"arborist/profiles/config"
	"arborist/profiles/costmodel"
)

// writeConfig writes c as a config.yaml in the test's temporary folder.
func writeConfig(t *testing.T, c *config.Config) string {
	t.Helper()
	y, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, y, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestConfigRun: a run of a config.yaml refuses every setting the config
// holds (pair, devices, plan fields, sampling), takes those it leaves to
// the run, noting the ones that replace the config's own in a fixed
// order, and runs the config's plan and sampling.
func TestConfigRun(t *testing.T) {
	ps := storiesPair(t)
	plan := spec.Plan{Strategy: "chain", Gamma: 3}
	c := &config.Config{Version: config.Version, Speculation: plan, Sampling: config.Sampling{Temperature: 0.5, TopP: 0.9, Seed: 7}}
	c.Models.Target = config.Target{Path: ps.Target, Device: "cpu", Threads: 1, MaxSeqLen: 256}
	c.Models.Draft = config.Draft{Kind: "model", Path: ps.Draft, Device: "cpu", Threads: 1}
	path := writeConfig(t, c)
	ctx := context.Background()
	b := openBench(t)
	var fields []string
	for _, f := range spec.PlanFields() {
		fields = append(fields, f.Flag)
	}
	held := append([]string{"target", "draft", "draft-ngram", "draft-layers", "draft-hidden", "device", "backend", "draft-device",
		"strategy", "temp", "top-k", "top-p", "min-p", "seed"}, fields...)
	r, err := b.ConfigRun(ctx, path, Overrides{Set: append([]string{"threads", "n"}, held...)})
	if err != nil || !reflect.DeepEqual(r.Refused, held) {
		t.Fatalf("refused %v (%v), want %v", r.Refused, err, held)
	}

	flags := PairSpec{Threads: 2, DraftThreads: 1, ResampleDepth: 3, KV: "f16", NoMmap: true}
	r, err = b.ConfigRun(ctx, path, Overrides{Set: []string{"no-resample", "prompt", "threads", "kv", "n"}, Pair: flags, NoStore: true})
	if err != nil || len(r.Refused) > 0 {
		t.Fatalf("%+v, %v", r, err)
	}
	want := PairSpec{Target: ps.Target, Draft: ps.Draft, Threads: 2, DraftThreads: 1, ResampleDepth: 3, KV: "f16", NoMmap: true}
	if !reflect.DeepEqual(r.Pair, want) {
		t.Errorf("pair %+v, want %+v", r.Pair, want)
	}
	if len(r.Notes) < 2 || r.Notes[0] != "--threads 2 overrides "+path || r.Notes[1] != "--no-resample false overrides "+path {
		t.Errorf("notes %q", r.Notes)
	}
	for _, n := range r.Notes[2:] {
		if strings.Contains(n, "overrides") {
			t.Errorf("a note for a setting not given: %q", n)
		}
	}
	if o := r.Options; !reflect.DeepEqual(o.Plan, plan) || o.Sample != (SampleParams{Temp: 0.5, TopP: 0.9, Seed: 7}) || o.Context != 256 {
		t.Errorf("run options %+v", o)
	}
}

// TestConfigKVCache: config.yaml's models.target.kv_cache is the KV cache
// type a replay runs: written by config.New for a pair tuned with f16
// (not for f32, the default), run's --kv replaces it with a note, a
// server opens its target with it, and a type no backend has is refused
// on load.
func TestConfigKVCache(t *testing.T) {
	ps := storiesPair(t)
	plan := spec.Plan{Strategy: "chain", Gamma: 3}
	best := costmodel.Prediction{Plan: plan}
	for _, kv := range []string{"", "f32", "f16"} {
		p := ps
		p.KV = kv
		c := config.New(p, config.Hardware{CPUCores: 2}, 1, 256, "F32", best)
		if want := map[string]string{"f16": "f16"}[kv]; c.Models.Target.KVCache != want {
			t.Errorf("tuned with --kv %q, kv_cache %q, want %q", kv, c.Models.Target.KVCache, want)
		}
	}
	ctx := context.Background()
	b := openBench(t)
	c := &config.Config{Version: config.Version, Speculation: plan, Sampling: config.Sampling{TopP: 1, Seed: 1}}
	c.Models.Target = config.Target{Path: ps.Target, Device: "cpu", Threads: 1, MaxSeqLen: 256, KVCache: "f16"}
	c.Models.Draft = config.Draft{Kind: "model", Path: ps.Draft, Device: "cpu", Threads: 1}
	path := writeConfig(t, c)
	for _, tc := range []struct {
		set  []string
		kv   string
		want string
		note bool
	}{
		{nil, "f32", "f16", false},            // --kv left at its default: the config's
		{[]string{"kv"}, "f32", "f32", true},  // given: it replaces the config's, noted
		{[]string{"kv"}, "f16", "f16", false}, // given as the config has it: nothing to note
	} {
		r, err := b.ConfigRun(ctx, path, Overrides{Set: tc.set, Pair: PairSpec{KV: tc.kv}, NoStore: true})
		if err != nil {
			t.Fatal(err)
		}
		noted := false
		for _, n := range r.Notes {
			noted = noted || strings.HasPrefix(n, "--kv "+tc.kv+" overrides ")
		}
		if r.Pair.KV != tc.want || noted != tc.note {
			t.Errorf("--kv %s (set %v): runs %q, noted %v; want %q, %v (%q)", tc.kv, tc.set, r.Pair.KV, noted, tc.want, tc.note, r.Notes)
		}
	}
	s, err := b.OpenServer(ctx, c, ServeOptions{Policy: config.PolicyPlan})
	if err != nil {
		t.Fatal(err)
	}
	kt := s.pair.Target.KVType
	s.Close()
	if kt != quant.F16 {
		t.Errorf("a server of a kv_cache: f16 config opens its target with %v caches", kt)
	}
	c.Models.Target.KVCache = "q4"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "kv_cache") {
		t.Errorf("kv_cache q4 validated: %v", err)
	}
}
