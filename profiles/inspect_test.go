package profiles

import (
	"context"
	"path/filepath"
	"testing"

	"arborist/engine/synth"
	"arborist/kernels/cpu"
	"arborist/kernels/quant"
)

// TestInspectCountsRepackedWeights: the memory estimate of a Q4_0 or Q8_0
// model whose rows come in eights adds the CPU backend's repacked copy
// where this CPU makes one, and an F16 model has none.
func TestInspectCountsRepackedWeights(t *testing.T) {
	s, err := synth.ParseShape("custom:dim=64,layers=2,heads=4,kv=2,ffn=96,vocab=300")
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q8_0, quant.F16} {
		p := filepath.Join(t.TempDir(), typ.String()+".gguf")
		if err := synth.WriteFile(context.Background(), p, s, synth.Options{Type: typ, Seed: 1}); err != nil {
			t.Fatal(err)
		}
		m, err := Inspect(p, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := typ != quant.F16 && cpu.RepackedBytes(typ, 96, 64) > 0
		if got := m.Repacked > 0; got != want {
			t.Errorf("%s: repacked copy counted %v (%d bytes), want %v", typ, got, m.Repacked, want)
		}
		if m.Config == nil || m.Context != min(m.Config.CtxLen, 4096) || m.KVBytes == 0 || m.Unrunnable != nil || m.Tokenizer.Vocab != 300 {
			t.Errorf("%s: facts %+v", typ, m)
		}
	}
}
