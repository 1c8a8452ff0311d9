package devicetest

import (
	"testing"

	"arborist/kernels"
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
