package demo

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"arborist/assets"
	"arborist/engine/model"
	"arborist/kernels/cpu"
)

func logits(t *testing.T, path string, ids []int) ([]float32, int) {
	t.Helper()
	be := cpu.New(2)
	t.Cleanup(be.Close)
	m, err := model.Load(path, be)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	var res model.Result
	if err := m.Forward(context.Background(), m.NewCache(len(ids)), model.Batch{Tokens: ids}, &res); err != nil {
		t.Fatal(err)
	}
	return res.Logits, m.Vocab
}

// TestExpansionPreservesFunction: with F32 weights the expanded target
// computes the source's logits (up to float rounding) at every position,
// though it is k times as wide and deeper; this is what makes the demo
// target write the source's text. A construction that let the added heads,
// FFN units or identity blocks leak into the residual stream would move the
// logits by far more than the tolerance.
func TestExpansionPreservesFunction(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src.gguf")
	if err := writeBytes(src, assets.DemoModel); err != nil {
		t.Fatal(err)
	}
	target, draft, err := Write(context.Background(), assets.DemoModel, dir, Options{Widen: 2, Layers: 7, Float32: true})
	if err != nil {
		t.Fatal(err)
	}
	ids := []int{1, 403, 407, 261, 378, 290, 357, 267, 379, 1000 % 512, 44, 87, 300, 12, 499, 3}
	want, vocab := logits(t, src, ids)
	got, _ := logits(t, target, ids)
	var worst float64
	for i := range want {
		worst = math.Max(worst, math.Abs(float64(got[i]-want[i])))
	}
	if worst > 2e-3 {
		t.Fatalf("expanded target's logits differ from the source's by up to %g", worst)
	}
	t.Logf("max |logit difference| over %d positions x %d: %.2g", len(ids), vocab, worst)

	// The drafter is the source plus noise: close, not equal.
	dl, _ := logits(t, draft, ids)
	var diff float64
	agree := 0
	for p := range ids {
		if argmax(dl[p*vocab:(p+1)*vocab]) == argmax(want[p*vocab:(p+1)*vocab]) {
			agree++
		}
		for j := 0; j < vocab; j++ {
			diff = math.Max(diff, math.Abs(float64(dl[p*vocab+j]-want[p*vocab+j])))
		}
	}
	if diff < 1e-3 {
		t.Fatalf("drafter equals the source (max difference %g): the noise is missing", diff)
	}
	if agree < len(ids)/2 {
		t.Fatalf("drafter agrees with the source at %d of %d positions: too much noise for a useful demo", agree, len(ids))
	}
}

// TestDefaultsQuantised: the default pair (Q8_0 target) loads, has the
// advertised shape, and greedy-agrees with the source most of the time.
func TestDefaultsQuantised(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 35M-parameter model")
	}
	dir := t.TempDir()
	target, _, err := Write(context.Background(), assets.DemoModel, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	be := cpu.New(2)
	defer be.Close()
	m, err := model.Load(target, be)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Dim != 512 || m.Layers != 12 {
		t.Fatalf("default target is %d wide and %d deep, want 512 and 12", m.Dim, m.Layers)
	}
	if p := m.File.Params(); p < 20e6 {
		t.Fatalf("default target has %d parameters, want a model that costs like tens of millions", p)
	}
}

// TestCancel: a cancelled context stops the build with its error.
func TestCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := Write(ctx, assets.DemoModel, t.TempDir(), Options{}); err == nil {
		t.Fatal("cancelled build succeeded")
	}
}

// TestBadSource: a source that is not a llama GGUF is refused clearly.
func TestBadSource(t *testing.T) {
	if _, _, err := Write(context.Background(), []byte("not a gguf"), t.TempDir(), Options{}); err == nil {
		t.Fatal("garbage source accepted")
	}
	if _, _, err := Write(context.Background(), assets.DemoModel, t.TempDir(), Options{Layers: 2}); err == nil {
		t.Fatal("a target shallower than its source accepted")
	}
}

func argmax(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

func writeBytes(path string, b []byte) error { return os.WriteFile(path, b, 0o644) }
