package app

import (
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2/test"

	"arborist/profiles"
	"arborist/profiles/store"
)

// The Profile chart draws the roofline of the device the target runs on:
// a GPU's own memory where it has one, the host's otherwise.
func TestRooflineSeries(t *testing.T) {
	vp := &profiles.Profile{Curve: &store.Curve{Points: []store.Point{{W: 1, Median: 2 * time.Millisecond}, {W: 64, Median: 9 * time.Millisecond}}}}
	host := profiles.Limits{Bandwidth: 20e9, WeightBytes: 20e6}
	s := rooflineSeries(vp, host)
	if s == nil || s.Y[0] != 1 || s.X[0] != 1 || s.X[1] != 64 || !strings.Contains(s.Name, "20 GB/s (host memory)") {
		t.Fatalf("host roofline %+v", s)
	}
	gpu := profiles.Limits{Bandwidth: 4e12, WeightBytes: 4e9, Memory: &store.DeviceMemory{Description: "NVIDIA H200", Copy: 4e12}}
	if s := rooflineSeries(vp, gpu); s == nil || s.Y[1] != 1 || !strings.Contains(s.Name, "4000 GB/s (NVIDIA H200)") {
		t.Fatalf("device roofline %+v", s)
	}
	if rooflineSeries(vp, profiles.Limits{}) != nil {
		t.Fatal("a roofline without a bandwidth")
	}
}

// The Speedup screen's placement choice is there, and off where this
// machine has one device; placed plans are listed with their devices.
func TestSpeedupPlacementChoice(t *testing.T) {
	if availableDevices() >= 2 {
		t.Skip("this machine has a second device")
	}
	a := test.NewTempApp(t)
	w := a.NewWindow("x")
	sp := NewSpeedupScreen(NewSession(a, w, t.TempDir()))
	w.SetContent(sp.Content())
	if sp.Place == nil || !sp.Place.Disabled() || !strings.Contains(sp.Place.Text, "one device here") {
		t.Fatalf("placement check %+v", sp.Place)
	}
	sp.SetRanked([]profiles.Prediction{{Plan: profiles.Plan{Strategy: "duo", Gamma: 3}, Speedup: 1.5, AAL: 2, Backend: "cuda", DraftBackend: "cpu"}})
	if o := sp.Ranked.Options[0]; !strings.Contains(o, "target on cuda, drafter on cpu") {
		t.Fatalf("ranked option %q", o)
	}
}
