//go:build cuda

package profiles

import (
	"arborist/kernels"
	"arborist/kernels/cuda"
)

// cudaLinked: this is arborist-cuda, with the CUDA backend linked in.
const cudaLinked = true

// cudaBackend runs models on the first NVIDIA GPU (kernels/cuda).
var cudaBackend = BackendInfo{
	Name:      "cuda",
	Available: func() error { return nil }, // cu's init already found the driver and a device, or exited
	New: func(threads int) (kernels.Device, error) {
		d, err := cuda.New(threads)
		if err != nil {
			return nil, err // not a nil *cuda.Device in a non-nil interface
		}
		return d, nil
	},
	DefaultThreads: func() int { return 1 },
	Kernels:        func() string { return "CUDA C, PTX for sm_80 and sm_90" },
}
