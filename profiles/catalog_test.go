package profiles

import (
	"maps"
	"slices"
	"testing"
)

// TestChoices: the catalog offers the registered strategies with a
// default and plain decoding among them, every plan field once with a
// flag, the default backend among the backends, and positive defaults.
func TestChoices(t *testing.T) {
	c := Choices()
	if !slices.Contains(c.Strategies, c.DefaultStrategy) || !slices.Contains(c.Strategies, c.PlainStrategy) || c.DefaultStrategy == c.PlainStrategy {
		t.Errorf("strategies %v, default %q, plain %q", c.Strategies, c.DefaultStrategy, c.PlainStrategy)
	}
	if !slices.Contains(c.WhatIf, c.WhatIfStart) {
		t.Errorf("what-if strategies %v start at %q", c.WhatIf, c.WhatIfStart)
	}
	seen := map[string]bool{}
	for _, f := range c.PlanFields {
		if f.Flag == "" || seen[f.Name] {
			t.Errorf("plan field %+v: no flag, or offered twice", f)
		}
		seen[f.Name] = true
	}
	if len(seen) == 0 || !slices.Contains(c.Backends, c.DefaultBackend) || c.DefaultThreads < 1 || c.DefaultDB == "" ||
		len(c.SynthShapes) == 0 || c.Rounds < 1 || c.RoundBudget <= 0 || c.DrafterSettings.Validate() != nil {
		t.Errorf("catalog %+v", c)
	}
}

// TestDraftSources: every kind sets a pair spec from its fields and reads
// the same values back, clears the other kinds, and refuses a missing or
// malformed value.
func TestDraftSources(t *testing.T) {
	values := map[string]map[string]string{
		"model":  {"draft": "/m/d.gguf"},
		"ngram":  {"ngram": "5"},
		"layers": {"layers": "3"},
		"hidden": {"draft": "7", "resample": "2"},
	}
	for _, k := range draftSources() {
		v, ok := values[k.Name]
		if !ok || len(k.Fields) == 0 || k.Label == "" {
			t.Fatalf("kind %q untested or unlabelled", k.Name)
		}
		ps := PairSpec{Target: "/m/t.gguf", Draft: "/other.gguf", NGram: 9, Layers: 9, DraftHidden: "9"}
		if err := k.Set(&ps, v); err != nil {
			t.Fatalf("%s: %v", k.Name, err)
		}
		if ps.Sources() != 1 || DraftSourceOf(ps).Name != k.Name {
			t.Errorf("%s: spec %+v is of kind %s", k.Name, ps, DraftSourceOf(ps).Name)
		}
		if back := k.Values(ps); !maps.Equal(back, v) {
			t.Errorf("%s: read back %v, set %v", k.Name, back, v)
		}
		empty := map[string]string{}
		for _, f := range k.Fields {
			empty[f.Name] = "x"
			if f.File {
				empty[f.Name] = " "
			}
		}
		if err := k.Set(&ps, empty); err == nil && k.Name != "model" { // a draft model may be left out: the target alone
			t.Errorf("%s: %v accepted", k.Name, empty)
		}
	}
}
