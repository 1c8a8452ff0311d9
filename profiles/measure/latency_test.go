package measure

import (
	"context"
	"testing"
	"time"

	"arborist/engine/model"
	"arborist/engine/model/modeltest"
	"arborist/kernels/cpu"
	"arborist/profiles/hardware"
)

func benchModel(t testing.TB) *model.Model {
	t.Helper()
	p := modeltest.Shared(t, "models/bench/target-60m-q8_0.gguf")
	be := cpu.New(cpu.DefaultThreads())
	t.Cleanup(be.Close)
	m, err := model.Load(p, be)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// BenchmarkVerify8 times one 8-token verification pass of the bench target.
func BenchmarkVerify8(b *testing.B) {
	m := benchModel(b)
	for i := 0; i < b.N; i++ {
		if _, err := VerifyCurve(context.Background(), m, []int{8}, CurveOptions{MinReps: 5, MaxReps: 5}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestComputePeak: both ceilings come out positive and plausible (between
// 0.1 and 10000 GMAC/s), and a cancelled context stops the measurement.
func TestComputePeak(t *testing.T) {
	for _, integer := range []bool{true, false} {
		p, err := hardware.ComputePeak(context.Background(), 2, integer)
		if err != nil || p < 1e8 || p > 1e13 {
			t.Errorf("integer=%v: %g MAC/s, %v", integer, p, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := hardware.ComputePeak(ctx, 2, true); err == nil {
		t.Error("a cancelled context was ignored")
	}
}

// DraftAfterTarget gives the extra time of each of the first drafter
// passes after a target pass: one point per pass, never negative, bounded.
func TestDraftAfterTarget(t *testing.T) {
	tm := benchModel(t)
	dm, err := model.Load(modeltest.Shared(t, "models/bench/draft-noisy-0.05.gguf"), tm.Backend)
	if err != nil {
		t.Fatal(err)
	}
	defer dm.Close()
	pts, err := DraftAfterTarget(context.Background(), tm, dm, 3, CurveOptions{Context: 32, Warmup: 1, MaxReps: 5})
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 3 {
		t.Fatalf("%d points", len(pts))
	}
	for k, p := range pts {
		if p.W != k+1 || p.Median < 0 || p.Median > time.Second || p.Reps != 5 {
			t.Errorf("point %d: %+v", k, p)
		}
	}
	t.Logf("extra time of the drafter's passes after a target pass: %v, %v, %v", pts[0].Median, pts[1].Median, pts[2].Median)
	if _, err := DraftAfterTarget(context.Background(), tm, dm, 0, CurveOptions{}); err == nil {
		t.Error("0 passes accepted")
	}
}
