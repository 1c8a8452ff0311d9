package profiles

import (
	"testing"

	"arborist/engine/generate"
	"arborist/engine/model"
	"arborist/kernels/quant"
)

// TestDecodeKV: bench's roofline reads, beside the weights, the KV cache
// a decode step attends over, averaged over the run's steps: the first
// token comes out of the prefill, step k attends over the prompt and k
// positions more, and the cache's type sets the bytes.
func TestDecodeKV(t *testing.T) {
	m := &model.Model{Config: model.Config{Layers: 3, KVHeads: 2, HeadDim: 4}, KVType: quant.F16}
	pos, bytes := decodeKV(m, generate.Stats{PromptTokens: 5, Tokens: 8})
	// steps 1..7 attend over 6..12 positions: 9 on average
	if pos != 9 {
		t.Errorf("mean context %v positions, want 9", pos)
	}
	if want := float64(m.KVReadBytes(9, quant.F16)); bytes != want {
		t.Errorf("%v bytes of KV cache a token, want %v", bytes, want)
	}
	if pos, bytes := decodeKV(m, generate.Stats{PromptTokens: 5, Tokens: 1}); pos != 0 || bytes != 0 {
		t.Errorf("no decode step: %v positions, %v bytes", pos, bytes)
	}
}
