package profiles

import (
	"fmt"
	"sort"
	"strings"

	"arborist/kernels"
	"arborist/kernels/cpu"
)

// BackendInfo describes one compute backend Arborist can run models on.
// Adding a backend (CUDA, ...) means adding an entry to backends: the
// flags (--backend), config.yaml (device) and the GUI find it by name, and
// nothing above this package constructs a backend itself.
type BackendInfo struct {
	Name string
	// New starts the backend with threads workers (0: its default).
	New func(threads int) (kernels.Backend, error)
	// DefaultThreads is the worker count it uses when none is given.
	DefaultThreads func() int
	// Kernels names the kernels the backend runs on this machine.
	Kernels func() string
}

// backends is the registry; it is never written after start-up.
var backends = map[string]BackendInfo{
	"cpu": {
		Name:           "cpu",
		New:            func(threads int) (kernels.Backend, error) { return cpu.New(threads), nil },
		DefaultThreads: cpu.DefaultThreads,
		Kernels:        cpu.Kernels,
	},
	"cuda": cudaBackend, // backends_cuda.go in arborist-cuda, backends_nocuda.go in arborist
}

// DefaultBackend is the backend used when none is named.
const DefaultBackend = "cpu"

// Backend returns the named backend's entry ("" is DefaultBackend).
func Backend(name string) (BackendInfo, error) {
	if name == "" {
		name = DefaultBackend
	}
	b, ok := backends[name]
	if !ok {
		return b, fmt.Errorf("unknown backend %q (available: %s)", name, strings.Join(BackendNames(), ", "))
	}
	return b, nil
}

// NewBackend starts the named backend with threads workers (0: its default).
func NewBackend(name string, threads int) (kernels.Backend, error) {
	b, err := Backend(name)
	if err != nil {
		return nil, err
	}
	if threads <= 0 {
		threads = b.DefaultThreads()
	}
	return b.New(threads)
}

// BackendNames lists the registered backends.
func BackendNames() []string {
	var out []string
	for n := range backends {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// DefaultThreads is the default backend's worker count on this machine.
func DefaultThreads() int { return backends[DefaultBackend].DefaultThreads() }
