package profiles

import (
	"arborist/kernels"
	"arborist/profiles/pairs"
)

// BackendStatus is one registered backend as the faces offer it: its
// name, the kernels it runs here, and why it cannot run (Err, "" when it
// can); the registry's own record.
type BackendStatus = kernels.Status

// Backends lists the registered backends with their availability here.
func Backends() []BackendStatus { return kernels.Statuses() }

// CheckBackend says whether name is a registered backend (not whether it
// can run here: Backends says that).
func CheckBackend(name string) error {
	_, err := kernels.Lookup(name)
	return err
}

// CheckKV says whether name is a KV cache type a model can run with.
func CheckKV(name string) error {
	_, err := kernels.ParseKV(name)
	return err
}

// HandOff prepares a run on the named device: in the default binary a
// cuda run is handed over to arborist-cuda (the process is replaced), or
// HandOff says why CUDA is unavailable; for every other device it does
// nothing.
func HandOff(device string) error { return pairs.HandOff(device) }
