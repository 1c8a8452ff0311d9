package app

import (
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2/test"

	"arborist/profiles"
	"arborist/profiles/costmodel"
	"arborist/profiles/hardware"
	"arborist/profiles/latency"
	"arborist/profiles/measure"
	"arborist/profiles/store"
)

// The Profile chart draws the roofline of the device the target runs on:
// a GPU's own memory where it has one, the host's otherwise.
func TestRooflineSeries(t *testing.T) {
	vp := &measure.Profile{Curve: &store.Curve{Points: []latency.Point{{W: 1, Median: 2 * time.Millisecond}, {W: 64, Median: 9 * time.Millisecond}}}}
	host := hardware.Limits{Bandwidth: 20e9, WeightBytes: 20e6}
	s := rooflineSeries(vp, host)
	if s == nil || s.Y[0] != 1 || s.X[0] != 1 || s.X[1] != 64 || !strings.Contains(s.Name, "20 GB/s (host memory)") {
		t.Fatalf("host roofline %+v", s)
	}
	gpu := hardware.Limits{Bandwidth: 4e12, WeightBytes: 4e9, Memory: &store.DeviceMemory{Description: "NVIDIA H200", Copy: 4e12}}
	if s := rooflineSeries(vp, gpu); s == nil || s.Y[1] != 1 || !strings.Contains(s.Name, "4000 GB/s (NVIDIA H200)") {
		t.Fatalf("device roofline %+v", s)
	}
	if rooflineSeries(vp, hardware.Limits{}) != nil {
		t.Fatal("a roofline without a bandwidth")
	}
}

// The Speedup screen offers placing models on devices where more than one
// can run, not before the check nor with one; placed plans are listed with
// their devices.
func TestSpeedupPlacementChoice(t *testing.T) {
	a := test.NewTempApp(t)
	w := a.NewWindow("x")
	sp := NewSpeedupScreen(NewSession(a, w, t.TempDir()))
	w.SetContent(sp.Content())
	if !sp.Place.Disabled() {
		t.Fatal("placement offered before the devices were checked")
	}
	sp.SetBackends([]profiles.BackendStatus{{Name: "cpu"}, {Name: "cuda", Err: "no NVIDIA driver"}})
	if !sp.Place.Disabled() || !strings.Contains(sp.Place.Text, "one device here") {
		t.Fatalf("one device: %q, disabled %v", sp.Place.Text, sp.Place.Disabled())
	}
	sp.SetBackends([]profiles.BackendStatus{{Name: "cpu"}, {Name: "cuda"}})
	if sp.Place.Disabled() || strings.Contains(sp.Place.Text, "one device") {
		t.Fatalf("two devices: %q, disabled %v", sp.Place.Text, sp.Place.Disabled())
	}
	sp.SetRanked([]costmodel.Prediction{{Plan: costmodel.Plan{Strategy: "duo", Gamma: 3}, Speedup: 1.5, AAL: 2, Backend: "cuda", DraftBackend: "cpu"}})
	if o := sp.Ranked.Options[0]; !strings.Contains(o, "target on cuda, drafter on cpu") {
		t.Fatalf("ranked option %q", o)
	}
}
