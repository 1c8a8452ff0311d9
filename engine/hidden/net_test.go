package hidden

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"testing"

	"arborist/engine/gguf"
	"arborist/engine/model"
	"arborist/engine/model/modeltest/testfiles"
	"arborist/kernels/cpu"
)

// loadTarget loads a target: stories260K always (the embedded copy
// without ../shared), any other model from ../shared/models, skipping the
// test without it.
func loadTarget(t testing.TB, name string) *model.Model {
	t.Helper()
	path := testfiles.Stories260K(t)
	if name != "stories260K.gguf" {
		path = testfiles.Shared(t, "models/"+name)
	}
	be := cpu.New(runtime.NumCPU())
	t.Cleanup(be.Close)
	m, err := model.Load(path, be)
	if err != nil {
		t.Fatalf("model %s: %v", name, err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// randomSeq makes a sequence with random hidden states and logits (the
// gradient check needs no real labels).
func randomSeq(rng *rand.Rand, T, dim, vocab int) *seq {
	sq := &seq{tokens: make([]int, T), h: make([]float32, T*dim), z: make([]float32, T*vocab)}
	for i := range sq.tokens {
		sq.tokens[i] = rng.IntN(vocab)
	}
	for i := range sq.h {
		sq.h[i] = float32(rng.NormFloat64())
	}
	for i := range sq.z {
		sq.z[i] = float32(2 * rng.NormFloat64())
	}
	return sq
}

// TestGradientCheck compares the hand-written gradient of every parameter
// block with central finite differences, through three unrolled levels.
func TestGradientCheck(t *testing.T) {
	target := loadTarget(t, "stories260K.gguf")
	d, err := New(target, 16, 2, 7)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range d.Block(bW2) { // a non-zero W2, so W1's gradient is too
		d.Block(bW2)[i] = float32(0.1 * rng.NormFloat64())
	}
	set := DefaultSettings()
	n, err := newNet(d, target, set)
	if err != nil {
		t.Fatal(err)
	}
	sq := randomSeq(rng, 7, d.Dim, d.Vocab)
	info := append([]int(nil), sq.tokens...)
	info[3] = (info[3] + 1) % d.Vocab // a noised token
	const K = 3
	lossAt := func() float64 {
		_, parts := n.forward(sq, info, K)
		l, _, _ := n.loss(parts)
		return l
	}
	clear(n.g)
	lvs, _ := n.forward(sq, info, K)
	n.backward(sq, info, lvs, 1)
	for _, b := range n.lay {
		worst, biggest := 0.0, 0.0
		for trial := 0; trial < 6; trial++ {
			i := b.Off + rng.IntN(b.Size())
			old := n.p[i]
			const h = 1e-5
			n.p[i] = old + h
			up := lossAt()
			n.p[i] = old - h
			down := lossAt()
			n.p[i] = old
			num := (up - down) / (2 * h)
			ana := n.g[i]
			rel := math.Abs(num-ana) / math.Max(1e-6, math.Abs(num)+math.Abs(ana))
			worst = math.Max(worst, rel)
			biggest = math.Max(biggest, math.Abs(num))
		}
		if biggest < 1e-5 {
			t.Errorf("%s: the sampled gradients are all near zero (%.1e): the check proves nothing", b.Name, biggest)
		}
		if worst > 1e-4 {
			t.Errorf("%s: analytic and numeric gradients differ (worst relative error %.2e)", b.Name, worst)
		} else {
			t.Logf("%s: worst relative error %.1e (largest gradient %.1e)", b.Name, worst, biggest)
		}
	}
}

// TestMiddleLayer: the default initial block is the middle live one; a
// block whose attention output and feed-forward down projection are all
// zero adds nothing to the residual stream and is passed over.
func TestMiddleLayer(t *testing.T) {
	m := loadTarget(t, "stories260K.gguf")
	if l, err := MiddleLayer(m); err != nil || l != 2 {
		t.Fatalf("stories260K (five live blocks): block %d, %v; want 2", l, err)
	}
	// blocks 1, 2 and 3 emptied: the live ones are 0 and 4
	src, err := gguf.Open(testfiles.Stories260K(t))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var ts []gguf.WriteTensor
	for i := range src.Tensors {
		ti := &src.Tensors[i]
		data := src.Data(ti)
		for _, l := range []int{1, 2, 3} {
			if ti.Name == fmt.Sprintf("blk.%d.attn_output.weight", l) || ti.Name == fmt.Sprintf("blk.%d.ffn_down.weight", l) {
				data = make([]byte, len(data)) // float32 zeros
			}
		}
		ts = append(ts, gguf.WriteTensor{Name: ti.Name, Dims: ti.Dims, Type: ti.Type, Data: data})
	}
	p := filepath.Join(t.TempDir(), "hollow.gguf")
	if err := gguf.WriteFile(p, src.KV, ts); err != nil {
		t.Fatal(err)
	}
	hollow, err := model.Load(p, m.Backend)
	if err != nil {
		t.Fatal(err)
	}
	defer hollow.Close()
	if l, err := MiddleLayer(hollow); err != nil || l != 4 {
		t.Fatalf("blocks 1-3 empty: block %d, %v; want 4 (the middle of 0 and 4, rounding up)", l, err)
	}
}
