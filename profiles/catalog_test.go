package profiles

import (
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
