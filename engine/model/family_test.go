package model

import (
	"slices"
	"testing"
)

// TestFamilyTable: SupportedArchs lists every family's names in table
// order (the list callers show), each name belongs to one family, and a
// family's first name is the Config.Arch its files get.
func TestFamilyTable(t *testing.T) {
	want := []string{"llama", "mistral", "qwen2", "qwen3", "phi3", "gemma", "gemma2", "gemma3"}
	if !slices.Equal(SupportedArchs, want) {
		t.Errorf("SupportedArchs = %v, want %v", SupportedArchs, want)
	}
	seen := map[string]bool{}
	for _, f := range families {
		if len(f.names) == 0 {
			t.Fatalf("a family without names: %+v", f)
		}
		for _, n := range f.names {
			if seen[n] {
				t.Errorf("%q belongs to two families", n)
			}
			seen[n] = true
			if g, ok := lookup(n); !ok || g != f {
				t.Errorf("lookup(%q) does not find its family", n)
			}
		}
	}
	if _, ok := lookup("gpt2"); ok {
		t.Error("lookup found a family for gpt2")
	}
}
