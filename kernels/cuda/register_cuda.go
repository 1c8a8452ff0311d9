//go:build cuda

package cuda

import (
	"os"

	"arborist/kernels"
)

// linked: this is arborist-cuda, with the CUDA backend linked in.
const linked = true

// The CUDA backend runs models on the first NVIDIA GPU.
func init() {
	kernels.Register(kernels.Registration{
		Name:      "cuda",
		Available: func() error { return nil }, // cu's init already found the driver and a device, or exited
		New: func(threads int) (kernels.Device, error) {
			d, err := New(threads)
			if err != nil {
				return nil, err // not a nil *Device in a non-nil interface
			}
			return d, nil
		},
		DefaultThreads: func() int { return 1 },
		// which path a run takes (ARBORIST_CUDA_PATH): `arborist backends` says
		Kernels: func() string { return "CUDA C, PTX for sm_80 and sm_90; " + PathStatus(os.Getenv(PathEnv)) },
	})
}
