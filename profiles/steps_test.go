package profiles

import "testing"

// TestPairKey: pairs that differ in their target, their draft source or
// a device have keys of their own, so a job of one is never another's.
func TestPairKey(t *testing.T) {
	base := PairSpec{Target: "a.gguf", NGram: 3, Backend: "cpu"}
	seen := map[string]string{PairKey(base): "base"}
	for name, ps := range map[string]PairSpec{
		"target":       {Target: "b.gguf", NGram: 3, Backend: "cpu"},
		"source":       {Target: "a.gguf", NGram: 4, Backend: "cpu"},
		"backend":      {Target: "a.gguf", NGram: 3, Backend: "cuda"},
		"draft device": {Target: "a.gguf", NGram: 3, Backend: "cpu", DraftBackend: "cuda"},
	} {
		k := PairKey(ps)
		if other, ok := seen[k]; ok {
			t.Errorf("another %s shares the key %q with %s", name, k, other)
		}
		seen[k] = name
	}
	if PairKey(base) != PairKey(PairSpec{Target: "a.gguf", NGram: 3, Backend: "cpu"}) {
		t.Error("one pair has two keys")
	}
}
