package profiles

import (
	"strings"
	"testing"
	"time"

	"arborist/profiles/store"
)

// TestLimitsDescribe: a curve is set against the roofline (first point) and
// the compute ceiling (widest point) with the right arithmetic.
func TestLimitsDescribe(t *testing.T) {
	l := Limits{Bandwidth: 20e9, WeightBytes: 60e6, Peak: 120e9, MACs: 58e6, Integer: true}
	if got := l.Roofline(); got != 3*time.Millisecond {
		t.Errorf("roofline %v, want 3ms", got)
	}
	pts := []store.Point{{W: 1, Median: 6 * time.Millisecond}, {W: 8, Median: 15 * time.Millisecond}}
	got := l.Describe(pts)
	for _, want := range []string{"T_verify(1) = 6ms, 50% of the roofline (3ms", "120 GMAC/s of int8", "at W=8 the pass runs 30.9 GMAC/s, 26% of it"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
	if (Limits{}).Kind() != "float32 FMA" {
		t.Error("float kind")
	}
}
