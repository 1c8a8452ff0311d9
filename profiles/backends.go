package profiles

import (
	"fmt"
	"sort"
	"strings"

	"arborist/kernels"
	"arborist/kernels/cpu"
	"arborist/kernels/quant"
)

// BackendInfo describes one compute backend Arborist can run models on.
// Adding a backend (CUDA, ...) means adding an entry to backends (one line
// in the map, or, for a backend built only with a build tag, one
// assignment in an init function of a file with that tag): the flags
// (--backend), config.yaml (device), `arborist backends` and the GUI find
// it by name, and nothing above this package constructs a backend itself.
type BackendInfo struct {
	Name string
	// Available reports whether the backend can run on this machine: nil,
	// or an error saying plainly why not ("no NVIDIA driver"); a nil
	// Available means always.
	Available func() error
	// New starts the backend with threads workers (0: its default).
	New func(threads int) (kernels.Device, error)
	// DefaultThreads is the worker count it uses when none is given.
	DefaultThreads func() int
	// Kernels names the kernels the backend runs on this machine.
	Kernels func() string
}

// backends is the registry; it is never written after start-up.
var backends = map[string]BackendInfo{
	"cpu": {
		Name:           "cpu",
		Available:      func() error { return nil },
		New:            func(threads int) (kernels.Device, error) { return cpu.New(threads), nil },
		DefaultThreads: cpu.DefaultThreads,
		Kernels:        cpu.Kernels,
	},
	"cuda": cudaBackend, // backends_cuda.go in arborist-cuda, backends_nocuda.go in arborist
}

// available calls Available when the entry has one.
func (b BackendInfo) available() error {
	if b.Available == nil {
		return nil
	}
	return b.Available()
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

// NewBackend starts the named backend with threads workers (0: its
// default), or says why it is not available on this machine.
func NewBackend(name string, threads int) (kernels.Device, error) {
	b, err := Backend(name)
	if err != nil {
		return nil, err
	}
	if err := b.available(); err != nil {
		return nil, fmt.Errorf("backend %s is not available: %w", b.Name, err)
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

// KVTypes names the KV cache element types a model can run with: f32 (the
// default) and f16, which halves the cache's memory (its accuracy against
// f32 is in the README's KV cache section).
const KVTypes = "f32, f16"

// ParseKV reads a KV cache type name ("" is f32).
func ParseKV(name string) (quant.Type, error) {
	switch name {
	case "", "f32":
		return quant.F32, nil
	case "f16":
		return quant.F16, nil
	}
	return 0, fmt.Errorf("unknown KV cache type %q (available: %s)", name, KVTypes)
}

// DefaultThreads is the default backend's worker count on this machine.
func DefaultThreads() int { return backends[DefaultBackend].DefaultThreads() }

// BackendStatus is one registered backend and whether it runs here.
type BackendStatus struct {
	Name    string `json:"name"`
	Kernels string `json:"kernels,omitempty"` // the kernels it runs, when available
	Threads int    `json:"default_threads,omitempty"`
	Err     string `json:"unavailable,omitempty"` // why it is not available; "" when it is
}

// Backends lists every registered backend with its availability on this
// machine, by name.
func Backends() []BackendStatus {
	var out []BackendStatus
	for _, n := range BackendNames() {
		b := backends[n]
		st := BackendStatus{Name: n}
		if err := b.available(); err != nil {
			st.Err = err.Error()
		} else {
			st.Kernels, st.Threads = b.Kernels(), b.DefaultThreads()
		}
		out = append(out, st)
	}
	return out
}
