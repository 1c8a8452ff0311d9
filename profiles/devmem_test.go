package profiles

import (
	"context"
	"path/filepath"
	"testing"

	"arborist/kernels"
	"arborist/kernels/cpu"
	"arborist/profiles/store"
)

// counting is a CPU device that reports memory rates of its own, as a
// GPU's backend does, and counts how often it was asked.
type counting struct {
	kernels.Device
	n *int
}

func (c counting) MeasureMemory() (kernels.MemoryRates, error) {
	*c.n++
	return kernels.MemoryRates{Copy: float64(*c.n) * 1e12, Multiprocessors: 132, Description: "a test GPU"}, nil
}

// A profile measures a device's memory once per machine and backend and
// reads it back after (a new measurement with --fresh); the CPU backend
// has none.
func TestDeviceMemoryStoredOnce(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "w.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	hid, err := st.PutHardware(ctx, &store.Hardware{Fingerprint: "hw"})
	if err != nil {
		t.Fatal(err)
	}
	be := cpu.New(1)
	defer be.Close()
	if m, err := deviceMemory(ctx, st, hid, be, false); m != nil || err != nil {
		t.Fatalf("CPU: %v, %v", m, err)
	}
	n := 0
	dev := counting{be, &n}
	for i, fresh := range []bool{false, false, true, false} {
		m, err := deviceMemory(ctx, st, hid, dev, fresh)
		if err != nil {
			t.Fatal(err)
		}
		want := 1.0
		if i >= 2 {
			want = 2
		}
		if m == nil || m.Copy != want*1e12 || m.Multiprocessors != 132 {
			t.Fatalf("call %d (fresh %v): %+v, want copy %g", i, fresh, m, want*1e12)
		}
	}
	if n != 2 {
		t.Fatalf("measured %d times, want 2 (first and fresh)", n)
	}
}
