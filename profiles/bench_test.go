package profiles

import (
	"strings"
	"testing"
	"time"

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

// TestPrefillLeft: a depth's prefill estimates its chunks to come on the
// line through the first chunk's time and the latest's (attention grows
// with where a chunk starts), never below the first's, and nothing after
// the last chunk.
func TestPrefillLeft(t *testing.T) {
	ms := time.Millisecond
	// chunks taking 10, 12, 14, ... ms: after the third (14 ms), the
	// fourth to sixth take 16 + 18 + 20
	if got := prefillLeft(10*ms, 14*ms, 2, 6); got != 54*ms {
		t.Errorf("growing chunks: %v left, want 54ms", got)
	}
	// one chunk measured: the rest priced at its time
	if got := prefillLeft(10*ms, 10*ms, 0, 4); got != 30*ms {
		t.Errorf("after the first chunk: %v left, want 30ms", got)
	}
	// a latest chunk faster than the first prices the rest at the first's
	if got := prefillLeft(10*ms, 6*ms, 2, 4); got != 10*ms {
		t.Errorf("a faster latest chunk: %v left, want 10ms", got)
	}
	if got := prefillLeft(10*ms, 30*ms, 5, 6); got != 0 {
		t.Errorf("after the last chunk: %v left", got)
	}
	if leftOf(time.Second, 2, 2) != "" || !strings.Contains(leftOf(2*time.Second, 1, 3), "about 4 s left") {
		t.Errorf("leftOf: %q, %q", leftOf(time.Second, 2, 2), leftOf(2*time.Second, 1, 3))
	}
}
