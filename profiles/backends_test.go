package profiles

import (
	"errors"
	"strings"
	"testing"

	"arborist/kernels/quant"
)

// TestBackendRegistry: cpu is listed and available; an unavailable entry
// is listed with its reason and refused by NewBackend with it.
func TestBackendRegistry(t *testing.T) {
	bs := Backends()
	if len(bs) == 0 || bs[0].Name != "cpu" || bs[0].Err != "" || bs[0].Kernels == "" {
		t.Fatalf("backends %+v", bs)
	}
	saved := backends
	defer func() { backends = saved }()
	backends = map[string]BackendInfo{"cpu": saved["cpu"], "gone": {Name: "gone", Available: func() error { return errors.New("no such device") },
		DefaultThreads: func() int { return 1 }, Kernels: func() string { return "" }}}
	bs = Backends()
	if len(bs) != 2 || bs[1].Name != "gone" || bs[1].Err != "no such device" {
		t.Fatalf("backends %+v", bs)
	}
	if _, err := NewBackend("gone", 1); err == nil || !strings.Contains(err.Error(), "no such device") {
		t.Fatalf("an unavailable backend started: %v", err)
	}
}

func TestParseKV(t *testing.T) {
	for in, want := range map[string]quant.Type{"": quant.F32, "f32": quant.F32, "f16": quant.F16} {
		if got, err := ParseKV(in); err != nil || got != want {
			t.Errorf("ParseKV(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseKV("q8_0"); err == nil || !strings.Contains(err.Error(), "f32, f16") {
		t.Errorf("ParseKV(q8_0): %v", err)
	}
}
