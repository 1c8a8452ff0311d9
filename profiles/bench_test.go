package profiles

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"arborist/engine/generate"
	"arborist/engine/model"
	"arborist/engine/model/modeltest"
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

// TestBenchDepths: bench's default depths are 1024 and 4096 where the
// model's context leaves room for the runs after them, else half of the
// context that is left, and an error where nothing is left; the model's
// own context is read from its file.
func TestBenchDepths(t *testing.T) {
	for _, c := range []struct {
		ctxLen, room int
		want         []int
	}{
		{131072, 128, []int{1024, 4096}},
		{4224, 128, []int{1024, 4096}},
		{4223, 128, []int{1024}},
		{2048, 128, []int{1024}},
		{1100, 128, []int{486}},
		{512, 128, []int{192}},
		{130, 128, []int{1}},
	} {
		got, err := depthsFor(c.ctxLen, c.room)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("context %d, room %d: %v %v, want %v", c.ctxLen, c.room, got, err, c.want)
		}
	}
	if got, err := depthsFor(129, 128); err == nil || !strings.Contains(err.Error(), "context of 129 positions leaves no depth") {
		t.Errorf("no room: %v %v", got, err)
	}
	def := BenchDefaults()
	got, err := BenchDepths(filepath.Join(modeltest.ModelsDir(t), "stories260K.gguf"), def.Tokens, slices.Max(def.Widths))
	if err != nil || !slices.Equal(got, []int{1024}) { // a context of 2048
		t.Errorf("stories260K: %v %v", got, err)
	}
	if _, err := BenchDepths(filepath.Join(t.TempDir(), "none.gguf"), 128, 64); err == nil {
		t.Error("a missing file gave depths")
	}
}

// TestBenchStagesNameTheProgress: BenchStages names every stage
// BenchModel reports, in the order it reports them, each with a weight.
func TestBenchStagesNameTheProgress(t *testing.T) {
	opt := BenchOptions{Model: filepath.Join(modeltest.ModelsDir(t), "stories260K.gguf"), Reps: 2, Tokens: 4, Widths: []int{1, 4}, Ctx: []int{64, 600}}
	var heard []string
	opt.Progress = func(e Event) {
		if len(heard) == 0 || heard[len(heard)-1] != e.Stage {
			heard = append(heard, e.Stage)
		}
	}
	if _, err := BenchModel(context.Background(), opt); err != nil {
		t.Fatal(err)
	}
	var named []string
	for _, s := range BenchStages(opt) {
		if !(s.Weight > 0) {
			t.Errorf("stage %q weighs %v", s.Name, s.Weight)
		}
		named = append(named, s.Name)
	}
	if !slices.Equal(heard, named) {
		t.Errorf("BenchModel reported %q, BenchStages names %q", heard, named)
	}
}
