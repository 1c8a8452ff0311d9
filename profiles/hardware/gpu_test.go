package hardware

import (
	"context"
	"strings"
	"testing"
)

// TestParseGPUs: nvidia-smi's CSV of one H200 and a card that cannot
// report its clocks, and lines that are not its CSV.
func TestParseGPUs(t *testing.T) {
	out := "0, NVIDIA H200, 143771, 1980, 3201, 570.124.06, 5, 16\n1, NVIDIA GeForce RTX 3060, 12288, [N/A], [Not Supported], 550.54, 4, 8\n"
	gpus, err := parseGPUs(out)
	if err != nil || len(gpus) != 2 {
		t.Fatalf("%v %v", gpus, err)
	}
	h := gpus[0]
	if h.Name != "NVIDIA H200" || h.MemoryMiB != 143771 || h.SMClockMHz != 1980 || h.MemClockMHz != 3201 || h.Driver != "570.124.06" || h.PCIeGen != 5 || h.PCIeWidth != 16 {
		t.Errorf("%+v", h)
	}
	if g := gpus[1]; g.SMClockMHz != 0 || g.MemClockMHz != 0 || g.Index != 1 {
		t.Errorf("unreported clocks: %+v", g)
	}
	if s := gpuSummary(gpus); !strings.Contains(s, "0: NVIDIA H200 (140 GiB, SM 1980 MHz") || !strings.Contains(s, "; 1: NVIDIA GeForce RTX 3060") {
		t.Errorf("summary %q", s)
	}
	for _, bad := range []string{"0, H200, 1", "x, H200, 1, 2, 3, d, 4, 16"} {
		if _, err := parseGPUs(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if gpus, err := parseGPUs(""); err != nil || len(gpus) != 0 {
		t.Errorf("empty output: %v %v", gpus, err)
	}
}

// TestDetectGPUsWithoutDriver: a machine without nvidia-smi has no GPUs
// and no error (this one, or a PATH without it).
func TestDetectGPUsWithoutDriver(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	if gpus, err := DetectGPUs(context.Background()); err != nil || gpus != nil {
		t.Fatalf("%v %v", gpus, err)
	}
}
