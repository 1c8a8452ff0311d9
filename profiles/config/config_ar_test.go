package config

import (
	"strings"
	"testing"

	"arborist/profiles/costmodel"
	"arborist/profiles/pairs"
)

// TestConfigARNoDrafter: a plain-decoding plan exports no drafter, neither
// in config.yaml nor in the other engines' settings (no --draft-max 0).
func TestConfigARNoDrafter(t *testing.T) {
	c := New(pairs.Spec{Target: "/m/t.gguf", Draft: "/m/d.gguf"}, Hardware{}, 2, 2048, "Q8_0",
		costmodel.Prediction{Plan: costmodel.Plan{Strategy: "ar"}, Speedup: 1, AAL: 1})
	if c.Models.Draft.Kind != "none" || c.Models.Draft.Path != "" {
		t.Errorf("ar config carries a drafter: %+v", c.Models.Draft)
	}
	b, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse("ar.yaml", b); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	eq := c.Equivalents()
	for _, bad := range []string{"d.gguf", "draft", "speculative"} {
		if strings.Contains(eq, bad) {
			t.Errorf("ar equivalents mention %q:\n%s", bad, eq)
		}
	}
	if !strings.Contains(eq, "llama-server -m /m/t.gguf -t 2") || !strings.Contains(eq, "vllm serve /m/t.gguf") {
		t.Errorf("ar equivalents:\n%s", eq)
	}
	c = New(pairs.Spec{Target: "/m/t.gguf", Draft: "/m/d.gguf"}, Hardware{}, 2, 2048, "Q8_0",
		costmodel.Prediction{Plan: costmodel.Plan{Strategy: "chain", Gamma: 4}, Speedup: 1.5, AAL: 2})
	if eq := c.Equivalents(); !strings.Contains(eq, "-md /m/d.gguf --draft-max 4") {
		t.Errorf("chain equivalents:\n%s", eq)
	}
}
