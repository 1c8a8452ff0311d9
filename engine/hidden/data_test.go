package hidden

import (
	"context"
	"math"
	"testing"

	"arborist/engine/model"
	"arborist/engine/sample"
)

// TestBatchedGeneration: sequences generated side by side in one cache are
// the target's own greedy continuations, with its hidden states, as when
// each prompt is decoded alone.
func TestBatchedGeneration(t *testing.T) {
	m := loadTarget(t, "stories260K.gguf")
	set := DefaultSettings()
	set.Tokens, set.Samples, set.Temps, set.Corpus, set.HeldOut = 20, 1, []float64{0}, false, 0
	tr := &Trainer{Target: m, Prompts: storyPrompts(t, m), Settings: set}
	ctx := context.Background()
	if err := tr.Generate(ctx); err != nil {
		t.Fatal(err)
	}
	if len(tr.data) != len(tr.Prompts) {
		t.Fatalf("%d sequences for %d prompts", len(tr.data), len(tr.Prompts))
	}
	for i, sq := range tr.data {
		p := tr.Prompts[i]
		cache := m.NewCache(len(sq.tokens))
		var res model.Result
		toks := append([]int(nil), p...)
		var h []float32
		if err := m.Forward(ctx, cache, model.Batch{Tokens: p, Hidden: true}, &res); err != nil {
			t.Fatal(err)
		}
		h = append(h, res.Hidden...)
		for len(toks) < len(sq.tokens) {
			next := sample.Argmax(res.Logits[len(res.Logits)-m.Vocab:])
			toks = append(toks, next)
			if err := m.Forward(ctx, cache, model.Batch{Tokens: []int{next}, Hidden: true}, &res); err != nil {
				t.Fatal(err)
			}
			h = append(h, res.Hidden...)
		}
		for j := range toks {
			if toks[j] != sq.tokens[j] {
				t.Fatalf("prompt %d: token %d is %d in the batch, %d alone", i, j, sq.tokens[j], toks[j])
			}
		}
		var worst float64
		for j := range h {
			worst = math.Max(worst, math.Abs(float64(h[j]-sq.h[j])))
		}
		if worst > 1e-3 {
			t.Errorf("prompt %d: hidden states differ by up to %.2g", i, worst)
		}
	}
}

// TestDataRoundTrip: cached data decodes to the same sequences (hidden
// states to half precision), and damaged data is refused.
func TestDataRoundTrip(t *testing.T) {
	seqs := []*seq{{tokens: []int{1, 7, 3}, h: []float32{0.5, -1, 2, 3.25, 0, 1e-3}}, {tokens: []int{4, 4}, h: []float32{1, 2, 3, 4}}}
	b := encodeData(seqs, 2)
	got, err := decodeData(b, 2, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].tokens[1] != 7 || got[1].h[3] != 4 || math.Abs(float64(got[0].h[5])-1e-3) > 1e-6 {
		t.Fatalf("round trip changed the data: %+v %+v", got[0], got[1])
	}
	for name, bad := range map[string][]byte{
		"cut":         b[:len(b)-3],
		"empty":       nil,
		"trailing":    append(append([]byte(nil), b...), 0),
		"other width": {1, 0, 0, 0, 3, 0, 0, 0},
	} {
		if _, err := decodeData(bad, 2, 10); err == nil {
			t.Errorf("%s data was accepted", name)
		}
	}
	if _, err := decodeData(b, 2, 5); err == nil {
		t.Error("a token outside the vocabulary was accepted")
	}
	huge := append([]byte{0xff, 0xff, 0xff, 0x7f, 2, 0, 0, 0}, make([]byte, 16)...)
	if _, err := decodeData(huge, 2, 10); err == nil {
		t.Error("a sequence count larger than the data was accepted")
	}
}
