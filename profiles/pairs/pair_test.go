package pairs

import "testing"

// TestKey: pairs that differ in their target, their draft source or
// a device have keys of their own, so a job of one is never another's.
func TestKey(t *testing.T) {
	base := Spec{Target: "a.gguf", NGram: 3, Backend: "cpu"}
	seen := map[string]string{base.Key(): "base"}
	for name, ps := range map[string]Spec{
		"target":       {Target: "b.gguf", NGram: 3, Backend: "cpu"},
		"source":       {Target: "a.gguf", NGram: 4, Backend: "cpu"},
		"backend":      {Target: "a.gguf", NGram: 3, Backend: "cuda"},
		"draft device": {Target: "a.gguf", NGram: 3, Backend: "cpu", DraftBackend: "cuda"},
	} {
		k := ps.Key()
		if other, ok := seen[k]; ok {
			t.Errorf("another %s shares the key %q with %s", name, k, other)
		}
		seen[k] = name
	}
	if same := (Spec{Target: "a.gguf", NGram: 3, Backend: "cpu"}); base.Key() != same.Key() {
		t.Error("one pair has two keys")
	}
}
