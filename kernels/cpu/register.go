package cpu

import "arborist/kernels"

// The CPU backend runs everywhere; it is the default (kernels.DefaultBackend)
// and the host backend (kernels.HostBackend), offering its host math.
func init() {
	kernels.Register(kernels.Registration{
		Name:           "cpu",
		New:            func(threads int) (kernels.Device, error) { return New(threads), nil },
		DefaultThreads: DefaultThreads,
		Kernels:        Kernels,
		Host:           host{},
	})
}
