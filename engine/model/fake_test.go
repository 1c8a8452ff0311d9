package model_test

import (
	"testing"

	"arborist/engine/model/modeltest"
	"arborist/kernels"
	"arborist/kernels/devicetest"
)

// TestFakeDevice runs the model-level suite, speculative decoding with
// every strategy included, on kernels/devicetest's Fake: a float64 device
// whose tensors, matrices and KV caches hold float64 values the code above
// the backend cannot read. That every check passes on it shows that
// engine/model, engine/spec and the drafters reach activations and the KV
// cache only through the kernels.Device interface.
func TestFakeDevice(t *testing.T) {
	var fakes []*devicetest.Fake
	modeltest.RunOptions(t, func(t *testing.T) kernels.Device {
		f := devicetest.NewFake()
		fakes = append(fakes, f)
		return f
	}, modeltest.Options{Small: true})
	calls := 0
	for _, f := range fakes {
		for _, n := range f.Calls() {
			calls += n
		}
	}
	if calls == 0 {
		t.Fatal("the suite made no calls on the fake devices")
	}
	t.Logf("%d primitive calls on %d fake devices", calls, len(fakes))
}
