package app

import (
	"strings"
	"testing"
	"time"

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
