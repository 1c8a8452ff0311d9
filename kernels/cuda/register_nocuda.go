//go:build !cuda

package cuda

import (
	"fmt"
	"os"

	"arborist/kernels"
)

// linked: this is the default arborist binary, which never links the CUDA
// driver library (gorgonia.org/cu exits the process at start-up where the
// driver is missing); a --device cuda run is handed over to arborist-cuda
// by HandOff.
const linked = false

// In the default binary the CUDA backend stands for arborist-cuda: naming
// it is valid (HandOff moves the run to arborist-cuda first), and starting
// it here says why it cannot run in this process.
func init() {
	kernels.Register(kernels.Registration{
		Name: "cuda",
		Available: func() error {
			if _, err := Probe(SystemProbeEnv()); err != nil {
				return fmt.Errorf("cuda is unavailable: %w", err)
			}
			return nil
		},
		New: func(int) (kernels.Device, error) {
			if _, err := Probe(SystemProbeEnv()); err != nil {
				return nil, fmt.Errorf("cuda is unavailable: %w", err)
			}
			return nil, fmt.Errorf("cuda runs in %s, not in this binary (run with --device cuda, which hands the run over)", Binary)
		},
		DefaultThreads: func() int { return 1 },
		Kernels: func() string {
			if _, err := Probe(SystemProbeEnv()); err != nil {
				return "unavailable: " + err.Error()
			}
			return "in " + Binary + "; " + PathStatus(os.Getenv(PathEnv))
		},
	})
}
