package profiles

import (
	"fmt"
	"strings"

	"arborist/profiles/store"
)

// ConfigHardware is the hardware block of an exported config for hw.
func ConfigHardware(hw store.Hardware) HardwareConfig {
	gpu := "none"
	if name, _, ok := strings.Cut(strings.TrimPrefix(hw.GPUs, "0: "), " ("); ok && strings.HasPrefix(hw.GPUs, "0: ") {
		gpu = name
	}
	return HardwareConfig{CPUCores: hw.Cores, CPU: hw.CPU, GPUType: gpu, CPUAffinity: fmt.Sprintf("0-%d", hw.Threads-1)}
}
