package cpu

import (
	"testing"

	"arborist/kernels"
	"arborist/kernels/devicetest"
)

// TestDeviceSuite runs the primitive-level suite every kernels.Device runs
// on the CPU backend: every weight type, float32 and float16 caches (the C
// kernels for heads of width 8, multiples of 8 and others, the Go loop for
// soft-caps), masks, compaction and prefix copies, batch-exact rows.
func TestDeviceSuite(t *testing.T) {
	devicetest.Run(t, func(t *testing.T) kernels.Device { return New(2) }, devicetest.Options{})
}
