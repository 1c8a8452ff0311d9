package profiles

import (
	"testing"

	"arborist/profiles/hardware"
)

// TestConfigHardwareGPU: config.yaml's gpu_type is the first GPU's name.
func TestConfigHardwareGPU(t *testing.T) {
	hw := hardware.DetectHardware()
	hw.Threads = 4
	hw.GPUs = "0: NVIDIA H200 (140 GiB, SM 1980 MHz, memory 3201 MHz, PCIe 5 x16, driver 570.124.06)"
	if g := ConfigHardware(hw).GPUType; g != "NVIDIA H200" {
		t.Errorf("gpu_type %q", g)
	}
	hw.GPUs = ""
	if g := ConfigHardware(hw).GPUType; g != "none" {
		t.Errorf("no GPUs: gpu_type %q", g)
	}
}
