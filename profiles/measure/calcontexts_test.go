package measure

import (
	"slices"
	"testing"

	"arborist/profiles/costmodel"
)

// TestCalibrationContexts: a calibration of long steps asks for the grid
// at or above its median and its longest; one whose median step ran
// before the short context asks for the low grid's context at or below
// it too (the shortest below that), so its steps are priced between it
// and the short context; none past what a pass may start from.
func TestCalibrationContexts(t *testing.T) {
	acc := func(ctxs ...int) *costmodel.Acceptance {
		a := &costmodel.Acceptance{}
		for _, n := range ctxs {
			a.Depths = append(a.Depths, costmodel.DepthSample{Context: n})
		}
		return a
	}
	for _, tc := range []struct {
		ctxs []int
		most int
		want []int
	}{
		{[]int{300, 900, 1500, 3000}, 8192, []int{2048, 4096}},
		{[]int{5, 20, 40, 60, 85}, 8192, []int{32}},
		{[]int{5, 8, 10, 300}, 8192, []int{16, 512}},
		{[]int{70, 80, 90, 200}, 8192, []int{64, 256}},
		{[]int{20, 40, 60}, 24, []int{}},
		{nil, 8192, nil},
	} {
		got := CalibrationContexts(acc(tc.ctxs...), tc.most)
		if !slices.Equal(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
			t.Errorf("steps at %v (most %d): %v, want %v", tc.ctxs, tc.most, got, tc.want)
		}
	}
}
