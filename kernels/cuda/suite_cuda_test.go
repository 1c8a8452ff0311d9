//go:build cuda

package cuda

import (
	"testing"

	"arborist/kernels"
	"arborist/kernels/devicetest"
)

// TestDeviceSuite holds the CUDA backend to the primitive suite every
// Device runs (devicetest: float64 references per weight type, masks, F16
// caches, compaction, batch-equals-sequential bits), on the weight types
// it computes; skipped without a GPU.
func TestDeviceSuite(t *testing.T) {
	skipStandIn(t)
	devicetest.Run(t, func(t *testing.T) kernels.Device {
		d, err := New(0)
		if err != nil {
			t.Skipf("no usable CUDA device: %v", err)
		}
		return d // Run closes it
	}, devicetest.Options{Types: WeightTypes})
}

// TestFastDeviceSuite is TestDeviceSuite on the fast path, whatever
// ARBORIST_CUDA_PATH says: each primitive recorded, lowered to the fast
// kernels (a lone one to the kernel that fuses it with its neighbours in
// a pass) and issued at the read back.
func TestFastDeviceSuite(t *testing.T) {
	skipStandIn(t)
	devicetest.Run(t, func(t *testing.T) kernels.Device {
		d, err := NewPath(0, Fast)
		if err != nil {
			t.Skipf("no usable CUDA device: %v", err)
		}
		return d
	}, devicetest.Options{Types: WeightTypes})
}
