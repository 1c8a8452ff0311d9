package measure

import (
	"context"
	"slices"
	"strconv"
	"strings"
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

// TestVerifyBeside: the target's curve beside a drafter on a backend of
// its own has a point per width, each timed while the drafter drafted
// (it ran a pass before timing began), and so has the drafter's beside
// the target; a drafter on the target's own backend is refused, and a
// cancelled context stops it.
func TestVerifyBeside(t *testing.T) {
	path := modeltest.Stories260K(t)
	load := func() *model.Model {
		be := cpu.New(1)
		t.Cleanup(be.Close)
		m, err := model.Load(path, be)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	target, draft := load(), load()
	widths := []int{1, 4, 8}
	pts, passes, err := VerifyBeside(context.Background(), target, draft, widths, CurveOptions{Context: 32, MinReps: 3, MaxReps: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != len(widths) || passes < 1 {
		t.Fatalf("%d points for %d widths, %d drafter passes", len(pts), len(widths), passes)
	}
	for i, p := range pts {
		if p.W != widths[i] || p.Median <= 0 || p.Reps != 3 {
			t.Errorf("point %d: %+v", i, p)
		}
	}
	// and the drafter's curve beside the target verifying
	dpts, tpasses, err := DraftBeside(context.Background(), draft, target, widths, CurveOptions{Context: 32, MinReps: 3, MaxReps: 3})
	if err != nil || len(dpts) != len(widths) || tpasses < 1 {
		t.Fatalf("drafter beside the target: %d points, %d target passes, %v", len(dpts), tpasses, err)
	}
	if _, _, err := VerifyBeside(context.Background(), target, target, widths, CurveOptions{Context: 32}); err == nil {
		t.Error("a drafter on the target's own backend was timed beside it")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := VerifyBeside(ctx, target, draft, widths, CurveOptions{Context: 32}); err == nil {
		t.Error("a cancelled context was ignored")
	}
}

// TestCurvesAtDepth: a cache at a context's depth holds that many slots
// whatever the part computed; passes of several sequences are timed one
// point per width, widths that do not split evenly over the sequences
// are refused, and a context past the model's trained positions is
// refused before anything is allocated, naming both figures.
func TestCurvesAtDepth(t *testing.T) {
	m, err := model.Load(modeltest.Stories260K(t), cpu.New(1))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	n := min(m.CtxLen-8, 3*ShortContext)
	c, err := DepthCache(ctx, m, n, 8)
	if err != nil {
		t.Fatal(err)
	}
	if c.Len() != n || c.Cap() != n+8 {
		t.Errorf("a cache at depth %d: %d slots of %d", n, c.Len(), c.Cap())
	}
	c.Free()
	pts, err := SeqsCurve(ctx, m, 2, SeqsWidths(2, 8), CurveOptions{Context: 32, Warmup: 1, MinReps: 2, MaxReps: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 3 || pts[0].W != 2 || pts[2].W != 8 || pts[0].Reps != 2 || pts[0].Median <= 0 {
		t.Errorf("passes of 2 sequences: %+v", pts)
	}
	if _, err := SeqsCurve(ctx, m, 2, []int{3}, CurveOptions{Context: 32}); err == nil {
		t.Error("3 rows over 2 sequences accepted")
	}
	err = CheckContext(m, m.CtxLen+1)
	if err == nil || !strings.Contains(err.Error(), strconv.Itoa(m.CtxLen+1)) || !strings.Contains(err.Error(), strconv.Itoa(m.CtxLen)) {
		t.Errorf("a context past the trained length: %v, want both figures named", err)
	}
	if err := CheckContext(m, m.CtxLen); err != nil {
		t.Errorf("the trained length itself refused: %v", err)
	}
	// a cache past the memory left is refused naming both figures and
	// what fits; one within it, or with the memory not known, is not
	const mib = 1 << 20
	err = checkLeft("m.gguf", 40000, 5000*mib, mib/8, 3000*mib)
	if err == nil || !strings.Contains(err.Error(), "5000 MiB") || !strings.Contains(err.Error(), "3000 MiB of memory left") || !strings.Contains(err.Error(), "about 24000 tokens fit") {
		t.Errorf("a cache past the memory left: %v", err)
	}
	if err := checkLeft("m.gguf", 40000, 3000*mib, mib/8, 3000*mib); err != nil {
		t.Errorf("a cache that fits: %v", err)
	}
	if err := checkLeft("m.gguf", 40000, 5000*mib, mib/8, 0); err != nil {
		t.Errorf("memory not known: %v", err)
	}
	if got := ContextWidths(48); !slices.Equal(got, []int{1, 2, 4, 5, 8, 9, 16, 17, 32, 33, 48}) {
		t.Errorf("widths at a long context: %v", got)
	}
}
