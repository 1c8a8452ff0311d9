package kernels

import (
	"fmt"
	"sort"
	"strings"

	"arborist/kernels/quant"
)

// Registration describes one compute backend Arborist can run models on.
// A backend registers itself from its own package (an init function
// calling Register) and is linked in by a blank import; the flags
// (--device), config.yaml (device), `arborist backends` and the GUI then
// find it by name, and nothing above this package constructs a backend
// itself.
type Registration struct {
	Name string
	// Available reports whether the backend can run on this machine: nil,
	// or an error saying plainly why not ("no NVIDIA driver"); a nil
	// Available means always.
	Available func() error
	// New starts the backend with threads workers (at least 1).
	New func(threads int) (Device, error)
	// DefaultThreads is the worker count it uses when none is given.
	DefaultThreads func() int
	// Kernels names the kernels the backend runs on this machine.
	Kernels func() string
	// Host is the host math and machine facts of the backend that
	// computes in host memory (HostBackend); nil for every other.
	Host Host
}

// registry holds every registered backend by name. It is written only by
// Register, from init functions, before main runs (as database/sql keeps
// its drivers), and only read afterwards.
var registry = map[string]Registration{}

// Register adds a backend; a second backend of the same name, or one
// without New, DefaultThreads or Kernels, is a programming error.
func Register(r Registration) {
	if r.Name == "" || r.New == nil || r.DefaultThreads == nil || r.Kernels == nil {
		panic("kernels: Register needs a name, New, DefaultThreads and Kernels")
	}
	if _, dup := registry[r.Name]; dup {
		panic("kernels: backend " + r.Name + " registered twice")
	}
	registry[r.Name] = r
}

// DefaultBackend is the backend used when none is named.
const DefaultBackend = "cpu"

// Check reports whether the backend can run here: Available's answer, or
// nil where the registration has none.
func (r Registration) Check() error {
	if r.Available == nil {
		return nil
	}
	return r.Available()
}

// Lookup returns the named backend's registration ("" is DefaultBackend).
func Lookup(name string) (Registration, error) {
	if name == "" {
		name = DefaultBackend
	}
	r, ok := registry[name]
	if !ok {
		return r, fmt.Errorf("unknown backend %q (available: %s)", name, strings.Join(Names(), ", "))
	}
	return r, nil
}

// Open starts the named backend with threads workers (0: its default), or
// says why it is not available on this machine.
func Open(name string, threads int) (Device, error) {
	r, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	if err := r.Check(); err != nil {
		return nil, fmt.Errorf("backend %s is not available: %w", r.Name, err)
	}
	if threads <= 0 {
		threads = r.DefaultThreads()
	}
	return r.New(threads)
}

// Names lists the registered backends, sorted.
func Names() []string {
	var out []string
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// DefaultThreads is the default backend's worker count on this machine (1
// when no backend is linked in).
func DefaultThreads() int {
	if r, ok := registry[DefaultBackend]; ok {
		return r.DefaultThreads()
	}
	return 1
}

// Status is one registered backend and whether it runs here.
type Status struct {
	Name    string `json:"name"`
	Kernels string `json:"kernels,omitempty"` // the kernels it runs, when available
	Threads int    `json:"default_threads,omitempty"`
	Err     string `json:"unavailable,omitempty"` // why it is not available; "" when it is
}

// Statuses lists every registered backend with its availability on this
// machine, by name.
func Statuses() []Status {
	var out []Status
	for _, n := range Names() {
		r := registry[n]
		st := Status{Name: n}
		if err := r.Check(); err != nil {
			st.Err = err.Error()
		} else {
			st.Kernels, st.Threads = r.Kernels(), r.DefaultThreads()
		}
		out = append(out, st)
	}
	return out
}

// KVTypes names the KV cache element types a model can run with: f32 (the
// default) and f16, which halves the cache's memory (its accuracy against
// f32 is in docs/KV-CACHE.md).
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
