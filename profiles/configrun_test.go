package profiles

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"arborist/engine/spec"
	"arborist/profiles/config"
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
