package devicetest

import (
	"testing"
	"time"

	"arborist/kernels"
	"arborist/kernels/quant"
)

// TestFake runs the suite on the Fake itself: it checks the suite's
// plumbing (tensors, cache layout, compaction, error paths) on a device
// whose arithmetic is the reference's, so a failure here is a bug in the
// suite or the Fake, not in a backend.
func TestFake(t *testing.T) {
	total := map[string]int{}
	var fakes []*Fake
	Run(t, func(t *testing.T) kernels.Device { f := NewFake(); fakes = append(fakes, f); return f }, Options{})
	for _, f := range fakes {
		for k, v := range f.Calls() {
			total[k] += v
		}
	}
	for _, op := range []string{"MatMulT", "Embed", "RMSNorm", "RoPE", "StoreKV", "Attention", "Compact", "CopyKV", "Gather", "Argmax"} {
		if total[op] == 0 {
			t.Errorf("the suite never called %s", op)
		}
	}
}

// TestFakeRefusesForeignTensors: handing the Fake another backend's tensor
// panics with the call's name instead of computing on it.
func TestFakeRefusesForeignTensors(t *testing.T) {
	f := NewFake()
	x, _ := f.NewTensor(4)
	defer func() {
		if r := recover(); r == nil {
			t.Fatal("Add with a foreign tensor did not panic")
		}
	}()
	f.Add(x, foreign{}, 4)
}

type foreign struct{}

func (foreign) Len() int { return 4 }

// TestSlowComputesAndWaits: the stand-in gives the wrapped device's
// results and sleeps its scripted latency per product.
func TestSlowComputesAndWaits(t *testing.T) {
	s := NewSlow(NewFake(), 2*time.Millisecond, time.Millisecond)
	Run(t, func(t *testing.T) kernels.Device { return NewSlow(NewFake(), 0, 0) }, Options{Types: []quant.Type{quant.F32, quant.Q8_0}})
	w, _ := s.NewMatrix(quant.F32, make([]byte, 4*8*4), 4, 8)
	x, _ := s.NewTensor(3 * 8)
	out, _ := s.NewTensor(3 * 4)
	t0 := time.Now()
	s.MatMulT(out, w, x, 3)
	s.Download(make([]float32, 4), out)
	if el := time.Since(t0); el < 5*time.Millisecond || s.Slept() != 5*time.Millisecond {
		t.Fatalf("a product of 3 rows took %v and recorded %v, want 5ms", el, s.Slept())
	}
	if s.Name() != "slow-fake64" {
		t.Fatalf("name %q", s.Name())
	}
}
