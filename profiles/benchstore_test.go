package profiles

import (
	"context"
	"reflect"
	"testing"
	"time"

	"arborist/engine/model/modeltest"
)

// TestBenchReportKept: a measurement at depth is kept as the target's
// newest on this machine: the pair's state reads it back, figures and
// all, for its KV cache type ("" and "f32" alike) and not for another;
// a newer one replaces it; a report that was not measured here is
// refused.
func TestBenchReportKept(t *testing.T) {
	ctx := context.Background()
	b := openBench(t)
	ps := PairSpec{Target: modeltest.Stories260K(t), Draft: modeltest.NoisyDraft(t), Threads: 2}
	s, err := b.PairState(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	if s.Depth != nil {
		t.Fatalf("fresh pair holds a measurement at depth: %+v", s.Depth)
	}
	opt := BenchOptions{Model: ps.Target, Threads: 2, Reps: 2, Tokens: 4, Widths: []int{1, 4}, Ctx: []int{64}}
	var last *BenchReport
	for range 2 {
		r, err := BenchModel(ctx, opt)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.SaveBenchReport(ctx, r); err != nil {
			t.Fatal(err)
		}
		last = r
	}
	for _, kv := range []string{"", "f32"} {
		ps.KV = kv
		s, err := b.PairState(ctx, ps)
		if err != nil {
			t.Fatal(err)
		}
		if s.Depth == nil || time.Since(s.DepthAt) > time.Hour {
			t.Fatalf("KV %q: no measurement at depth read back (%v)", kv, s.DepthAt)
		}
		got := *s.Depth
		got.KV, got.identity = last.KV, last.identity
		last.Limits = got.Limits // not kept
		if !reflect.DeepEqual(&got, last) {
			t.Errorf("KV %q: read back\n%+v\nstored\n%+v", kv, got, *last)
		}
	}
	ps.KV = "f16"
	if s, err := b.PairState(ctx, ps); err != nil || s.Depth != nil {
		t.Errorf("another KV cache type read the float32 measurement: %v %v", s.Depth, err)
	}
	if err := b.SaveBenchReport(ctx, &BenchReport{Model: ps.Target, Decode: []float64{1}}); err == nil {
		t.Error("a report not measured here was kept")
	}
}
