package kernels_test

import (
	"errors"
	"strings"
	"testing"

	"arborist/kernels"
	_ "arborist/kernels/cpu"
	"arborist/kernels/quant"
)

// gone is a backend that never runs here, registered for this test binary
// only.
func init() {
	kernels.Register(kernels.Registration{Name: "gone", Available: func() error { return errors.New("no such device") },
		New:            func(int) (kernels.Device, error) { return nil, errors.New("started") },
		DefaultThreads: func() int { return 1 }, Kernels: func() string { return "" }})
}

// TestBackendRegistry: cpu is listed and available; an unavailable entry
// is listed with its reason and refused by Open with it.
func TestBackendRegistry(t *testing.T) {
	bs := kernels.Statuses()
	if len(bs) != 2 || bs[0].Name != "cpu" || bs[0].Err != "" || bs[0].Kernels == "" {
		t.Fatalf("backends %+v", bs)
	}
	if bs[1].Name != "gone" || bs[1].Err != "no such device" {
		t.Fatalf("backends %+v", bs)
	}
	if _, err := kernels.Open("gone", 1); err == nil || !strings.Contains(err.Error(), "no such device") {
		t.Fatalf("an unavailable backend started: %v", err)
	}
	if _, err := kernels.Open("nothing", 1); err == nil || !strings.Contains(err.Error(), `unknown backend "nothing" (available: cpu, gone)`) {
		t.Fatalf("an unknown backend: %v", err)
	}
	d, err := kernels.Open("", 0)
	if err != nil || d.Name() != "cpu" || d.Threads() != kernels.DefaultThreads() {
		t.Fatalf("the default backend: %v", err)
	}
	d.Close()
}

// TestLookupHost: the CPU backend is the host backend and offers its host
// math; a backend without one (gone) is not taken for it.
func TestLookupHost(t *testing.T) {
	r, err := kernels.LookupHost()
	if err != nil || r.Name != kernels.HostBackend || r.Host == nil {
		t.Fatalf("LookupHost: %+v, %v", r, err)
	}
	if r.Host.KernelsID() == "" || r.Host.NewPacked() == nil {
		t.Fatalf("the host backend's facts: kernels %q", r.Host.KernelsID())
	}
	if g, err := kernels.Lookup("gone"); err != nil || g.Host != nil {
		t.Fatalf("gone: %+v, %v", g, err)
	}
}

// TestRegisterTwice: a second registration of a name is a programming
// error, caught at start-up.
func TestRegisterTwice(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("a second cpu registered")
		}
	}()
	kernels.Register(kernels.Registration{Name: "cpu", New: func(int) (kernels.Device, error) { return nil, nil },
		DefaultThreads: func() int { return 1 }, Kernels: func() string { return "" }})
}

func TestParseKV(t *testing.T) {
	for in, want := range map[string]quant.Type{"": quant.F32, "f32": quant.F32, "f16": quant.F16} {
		if got, err := kernels.ParseKV(in); err != nil || got != want {
			t.Errorf("ParseKV(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := kernels.ParseKV("q8_0"); err == nil || !strings.Contains(err.Error(), "f32, f16") {
		t.Errorf("ParseKV(q8_0): %v", err)
	}
}
