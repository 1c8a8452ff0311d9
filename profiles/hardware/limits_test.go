package hardware

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"arborist/engine/model"
	"arborist/engine/synth"
	"arborist/kernels"
	"arborist/kernels/cpu"
	"arborist/kernels/quant"
	"arborist/profiles/latency"
)

// TestLimitsDescribe: a curve is set against the roofline (first point) and
// the compute ceiling (widest point) with the right arithmetic.
func TestLimitsDescribe(t *testing.T) {
	l := Limits{Bandwidth: 20e9, WeightBytes: 60e6, Peak: 120e9, MACs: 58e6, Integer: true}
	if got := l.Roofline(); got != 3*time.Millisecond {
		t.Errorf("roofline %v, want 3ms", got)
	}
	pts := []latency.Point{{W: 1, Median: 6 * time.Millisecond}, {W: 8, Median: 15 * time.Millisecond}}
	got := l.Describe(pts)
	for _, want := range []string{"T_verify(1) = 6ms, 50% of the roofline (3ms", "120 GMAC/s of int8", "at W=8 the pass runs 30.9 GMAC/s, 26% of it"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
	// a step that attends over a cache reads it too
	l.KVRead = 20e6
	if got := l.Roofline(); got != 4*time.Millisecond {
		t.Errorf("roofline with 20 MB of KV cache %v, want 4ms", got)
	}
	if (Limits{}).Kind() != "float32 FMA" {
		t.Error("float kind")
	}
}

// meter is a CPU device that reports scripted memory rates, as a GPU's
// backend measures its own.
type meter struct{ kernels.Device }

func (meter) MeasureMemory() (kernels.MemoryRates, error) {
	return kernels.MemoryRates{Copy: 4.3e12, HostToDevice: 25e9, DeviceToHost: 20e9, Peak: 4.8e12, Multiprocessors: 132, Description: "a test GPU"}, nil
}

// TestDeviceLimits: a device with memory of its own is held to that
// memory's copy rate (the roofline) and has no CPU compute ceiling; the
// CPU backend has no device memory and keeps the host's figures.
func TestDeviceLimits(t *testing.T) {
	m := synthModel(t, "custom:dim=64,layers=1,heads=4,kv=2,ffn=128,vocab=300", quant.Q8_0)
	if mem, err := DeviceMemory(cpu.New(1)); mem != nil || err != nil {
		t.Fatalf("the CPU backend: device memory %v, %v; want none", mem, err)
	}
	mem, err := DeviceMemory(meter{cpu.New(1)})
	if err != nil || mem == nil || mem.Copy != 4.3e12 || mem.Multiprocessors != 132 || mem.Backend != "cpu" {
		t.Fatalf("device memory %+v, %v", mem, err)
	}
	l, err := DeviceLimits(context.Background(), m, 1, 20e9, mem)
	if err != nil {
		t.Fatal(err)
	}
	if l.Bandwidth != 4.3e12 || l.Peak != 0 || l.Memory != mem || l.WeightBytes != float64(m.WeightBytes()) {
		t.Fatalf("limits %+v", l)
	}
	got := l.Describe([]latency.Point{{W: 1, Median: time.Millisecond}})
	for _, want := range []string{"Device memory (a test GPU) copies at 4300.0 GB/s", "datasheet rate is 4800.0 GB/s", "132 multiprocessors", "from the host 25.0 GB/s"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "GMAC") {
		t.Errorf("%q sets a device's pass against the CPU's compute ceiling", got)
	}
}

func synthModel(t *testing.T, shape string, typ quant.Type) *model.Model {
	t.Helper()
	s, err := synth.ParseShape(shape)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := synth.WriteFile(context.Background(), path, s, synth.Options{Type: typ, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	be := cpu.New(1)
	t.Cleanup(be.Close)
	m, err := model.Load(path, be)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestCeilingHoldsEveryPass: a pass that ran faster than the probe (a
// wide pass at 193 GMAC/s against a probe's 132, the probe taken while the
// machine was busier) sets the ceiling, so no share of it exceeds 100%;
// the description says the probe fell short, Bound stores the raised
// ceiling and keeps the probe's figure, and slower passes leave the
// probe's figure as the ceiling.
func TestCeilingHoldsEveryPass(t *testing.T) {
	const macs = 58e6
	at := func(w int, rate float64) latency.Point {
		return latency.Point{W: w, Median: time.Duration(float64(w) * macs / rate * float64(time.Second))}
	}
	l := Limits{Bandwidth: 20e9, WeightBytes: 60e6, Peak: 132e9, MACs: macs, Integer: true}
	fast := []latency.Point{at(1, 19e9), at(8, 120e9), at(48, 193e9)}
	peak, w := l.Ceiling(fast)
	if w != 48 || math.Abs(peak-193e9) > 1e6 {
		t.Fatalf("ceiling %.1f GMAC/s set at W=%d, want 193 at W=48", peak/1e9, w)
	}
	for _, p := range fast {
		if share := l.Rate(p.W, p.Median) / peak; share > 1+1e-9 {
			t.Errorf("W=%d: %.0f%% of the ceiling", p.W, 100*share)
		}
	}
	got := l.Describe(fast)
	for _, want := range []string{"Compute ceiling 193 GMAC/s", "at W=48 the pass runs 193.0 GMAC/s, 100% of it", "The probe measured 132 GMAC/s, less than the pass at W=48 ran"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
	// a pass between the probe and the fastest one is a share below 100%
	mid := []latency.Point{at(1, 19e9), at(16, 150e9), at(48, 193e9), at(64, 170e9)}
	got = l.Describe(mid)
	if !strings.Contains(got, "at W=64 the pass runs 170.0 GMAC/s, 88% of it") {
		t.Errorf("%q: the widest pass against a ceiling its wider neighbour set", got)
	}
	b := l
	b.Bound(mid)
	if math.Abs(b.Peak-193e9) > 1e6 || b.Probed != 132e9 || b.BoundW != 48 {
		t.Fatalf("bound: peak %.1f GMAC/s, probed %.1f, at W=%d", b.Peak/1e9, b.Probed/1e9, b.BoundW)
	}
	if got := b.Describe(mid); !strings.Contains(got, "The probe measured 132 GMAC/s, less than the pass at W=48 ran") {
		t.Errorf("bound limits: %q", got)
	}
	b.Bound(fast) // again: nothing faster, nothing changes
	if math.Abs(b.Peak-193e9) > 1e6 || b.Probed != 132e9 || b.BoundW != 48 {
		t.Fatalf("bound twice: peak %.1f GMAC/s, probed %.1f, at W=%d", b.Peak/1e9, b.Probed/1e9, b.BoundW)
	}
	// passes slower than the probe: the probe's figure stands
	slow := []latency.Point{at(1, 19e9), at(48, 100e9)}
	if peak, w := l.Ceiling(slow); peak != 132e9 || w != 0 {
		t.Errorf("slower passes: ceiling %.1f GMAC/s at W=%d, want the probe's 132", peak/1e9, w)
	}
	s := l
	s.Bound(slow)
	if s != l {
		t.Errorf("slower passes changed the limits: %+v", s)
	}
	if got := l.Describe(slow); strings.Contains(got, "probe measured") || !strings.Contains(got, "76% of it") {
		t.Errorf("slower passes: %q", got)
	}
	// no ceiling (a device with memory of its own): none is made up
	if peak, _ := (Limits{MACs: macs}).Ceiling(fast); peak != 0 {
		t.Errorf("no probe: ceiling %g", peak)
	}
}
