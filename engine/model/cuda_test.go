//go:build cuda

package model_test

import (
	"testing"

	"arborist/engine/model/modeltest"
	"arborist/kernels"
	"arborist/kernels/cuda"
)

// TestCUDADevice runs the model-level suite (float64 references of whole
// passes, masks and compaction, batch equals sequential, F16 caches, the
// shared conformance models, greedy identity of every strategy) with the
// CUDA backend; skipped without a GPU.
func TestCUDADevice(t *testing.T) {
	if cuda.StandIn() {
		t.Skip("the stand-in driver runs no kernels")
	}
	modeltest.RunOptions(t, func(t *testing.T) kernels.Device {
		d, err := cuda.New(0)
		if err != nil {
			t.Skipf("no usable CUDA device: %v", err)
		}
		return d
	}, modeltest.Options{HalfActivations: true})
}
