package profiles

import (
	"strings"
	"testing"

	"arborist/engine/spec"
	"arborist/profiles/config"
	"arborist/profiles/costmodel"
	"arborist/profiles/pairs"
)

// TestStopsAt: speculation stops paying at the first priced level where
// plain batching ranks first; a level not priced says nothing.
func TestStopsAt(t *testing.T) {
	plan := costmodel.LoadPrediction{Policy: costmodel.PolicyFixed}
	plain := costmodel.LoadPrediction{Policy: costmodel.PolicyPlain}
	levels := []costmodel.LoadLevel{
		{Concurrency: 1, Ranked: []costmodel.LoadPrediction{plan, plain}},
		{Concurrency: 4, Err: "passes of 4 sequences not measured"},
		{Concurrency: 8, Ranked: []costmodel.LoadPrediction{plain, plan}},
	}
	if got := stopsAt(levels); got != 8 {
		t.Errorf("stopsAt = %d, want 8", got)
	}
	if got := stopsAt(levels[:2]); got != 0 {
		t.Errorf("stopsAt without a plain-first level = %d, want 0", got)
	}
}

// TestTunedServingReachesTheConfig: the concurrency a plan was tuned for,
// the policy that served it best there and the level where speculation
// stops paying are what the exported config.yaml records and what its
// other runtimes' lines are sized by; a plain plan never adapts.
func TestTunedServingReachesTheConfig(t *testing.T) {
	best := costmodel.Prediction{Plan: costmodel.Plan{Strategy: spec.ChainName, Gamma: 4}, Speedup: 1.5, AAL: 3, Concurrency: 8, Adaptive: true, StopsAt: 16}
	c := config.New(pairs.Spec{Target: "/m/t.gguf", Draft: "/m/d.gguf"}, config.Hardware{}, 8, 4096, "Q4_K", best)
	if c.Serving != (config.Serving{Concurrency: 8, Policy: config.PolicyAdaptive, SpeculationStopsAt: 16}) {
		t.Fatalf("serving = %+v", c.Serving)
	}
	data, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := config.Parse("c.yaml", data)
	if err != nil {
		t.Fatalf("the exported config does not read back: %v\n%s", err, data)
	}
	if back.Serving != c.Serving {
		t.Errorf("read back %+v, wrote %+v", back.Serving, c.Serving)
	}
	if eq := c.Equivalents(); !strings.Contains(eq, "-np 8") || !strings.Contains(eq, "disable_by_batch_size") {
		t.Errorf("the lines are not sized for 8 requests:\n%s", eq)
	}
	one := config.New(pairs.Spec{Target: "/m/t.gguf", Draft: "/m/d.gguf"}, config.Hardware{}, 8, 4096, "Q4_K", costmodel.Prediction{Plan: best.Plan, Speedup: 1.5, AAL: 3})
	if one.Serving != (config.Serving{Concurrency: 1, Policy: config.PolicyPlan}) {
		t.Errorf("a plan tuned at one request serves %+v", one.Serving)
	}
	plain := config.New(pairs.Spec{Target: "/m/t.gguf"}, config.Hardware{}, 8, 4096, "Q4_K", best)
	if plain.Serving.Policy != config.PolicyPlan || plain.Serving.SpeculationStopsAt != 0 {
		t.Errorf("a pair without a drafter serves %+v", plain.Serving)
	}
}
