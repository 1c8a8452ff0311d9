package measure

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"arborist/profiles/costmodel"
	"arborist/profiles/latency"
	"arborist/profiles/pairs"
)

// TestRescaleContexts: the short context's curve takes the short
// factors, the long one's and longer the long factors, one between them
// the blend by its share of the way; one before the short context the
// short factors.
func TestRescaleContexts(t *testing.T) {
	ms := time.Millisecond
	flat := []latency.Point{{W: 1, Median: 10 * ms}, {W: 8, Median: 10 * ms}}
	fam := []costmodel.ContextCurve{{Context: 32, Verify: flat}, {Context: 128, Verify: flat}, {Context: 1128, Verify: flat}, {Context: 2128, Verify: flat}, {Context: 4096, Verify: flat}}
	out := RescaleContexts(fam, 2128, []int{1, 8}, []float64{2, 2}, []int{1, 8}, []float64{0.5, 1})
	want := [][2]float64{{2, 2}, {2, 2}, {1.25, 1.5}, {0.5, 1}, {0.5, 1}}
	for i, c := range out {
		for k, p := range c.Verify {
			if d := float64(p.Median) - want[i][k]*float64(10*ms); math.Abs(d) > 1e3 {
				t.Errorf("context %d W=%d: %v, want x%.2f", c.Context, p.W, p.Median, want[i][k])
			}
		}
	}
	if fam[2].Verify[0].Median != 10*ms {
		t.Error("the family was changed in place")
	}
}

// TestRecheckContextRescalesAStaleLongCurve: a curve after 512 tokens
// stored five times slower than the machine is rescaled to what the
// re-check times there now (at its anchors), the short context's kept
// (its own re-check found it true), and plain decoding's token there is
// timed; a context the family has no curve at is refused.
func TestRecheckContextRescalesAStaleLongCurve(t *testing.T) {
	m := benchModel(t)
	ctx := context.Background()
	short, err := VerifyCurve(ctx, m, []int{1, 4, 8, 16}, CurveOptions{MinReps: 3, MaxReps: 5})
	if err != nil {
		t.Fatal(err)
	}
	at, err := VerifyCurve(ctx, m, []int{1, 4, 8, 16}, CurveOptions{Context: 512, MinReps: 3, MaxReps: 5})
	if err != nil {
		t.Fatal(err)
	}
	var stale []latency.Point
	for _, p := range at {
		stale = append(stale, latency.Point{W: p.W, Median: 5 * p.Median, Reps: p.Reps})
	}
	fam := []costmodel.ContextCurve{{Context: 512, Verify: stale}, {Context: ShortContext, Verify: short}}
	kept := &Recheck{}
	for _, w := range RecheckAnchors(16) {
		kept.Anchors = append(kept.Anchors, Anchor{W: w, Scale: 1})
	}
	got, rc, err := RecheckContext(ctx, m, pairs.Drafting{}, fam, 512, kept)
	if err != nil {
		t.Fatal(err)
	}
	if !rc.Rescaled || rc.Context != 512 || rc.Plain <= 0 || len(rc.Anchors) != len(kept.Anchors) || !strings.Contains(rc.String(), "re-check after 512 tokens") {
		t.Fatalf("a curve 5x too slow after 512 tokens: %+v %q", rc, rc.String())
	}
	for _, a := range rc.Anchors {
		if a.Scale > 0.6 {
			t.Errorf("W=%d: x%.2f, want well under 1 for a curve stored 5x slow", a.W, a.Scale)
		}
	}
	if got[0].Context != ShortContext || got[0].Verify[1] != short[1] {
		t.Errorf("the short context's curve moved: %+v", got[0].Verify[1])
	}
	now := map[int]Anchor{}
	for _, a := range rc.Anchors {
		now[a.W] = a
	}
	for _, p := range got[1].Verify {
		a, ok := now[p.W]
		if !ok {
			continue
		}
		if d := math.Abs(float64(p.Median-a.Now)) / float64(a.Now); d > 1e-6 {
			t.Errorf("after 512, W=%d: %v, want what the re-check timed, %v", p.W, p.Median, a.Now)
		}
	}
	if l := rc.Long(); l.At != 512 || l.Plain != rc.Plain || l.DraftScale != 0 {
		t.Errorf("what the cost model takes: %+v", l)
	}
	if _, _, err := RecheckContext(ctx, m, pairs.Drafting{}, fam, 1024, kept); err == nil {
		t.Error("a context without a curve was re-checked")
	}
	// a curve profiled right up to the model's positions: the rounds'
	// passes do not fit after it, so it is priced as stored, and said so
	edge := m.CtxLen - 4
	near := []costmodel.ContextCurve{{Context: ShortContext, Verify: short}, {Context: edge, Verify: stale[:2]}}
	got, rc, err = RecheckContext(ctx, m, pairs.Drafting{}, near, edge, kept)
	if err != nil || rc.Skipped == "" || rc.Rescaled || got[1].Verify[0] != stale[0] || rc.Long() != (costmodel.LongContext{}) ||
		!strings.Contains(rc.String(), "not run") {
		t.Errorf("a context at the model's edge: %v, %+v %q", err, rc, rc.String())
	}
}

// TestRecheckPasses: a curve of passes of two sequences stored ten
// times slower than the machine is rescaled by its own pass now, one of
// four that is true is kept, and one sequence's curve is not theirs to
// touch. The family's curves of two sequences move with it: its copy of
// the short context's by that pass's ratio, and one after 32 tokens,
// stored ten times too fast, by its own pass after 32 tokens, timed
// beside it; four sequences' curve after 32 tokens, true, stays. (Ten
// times either way: the timings here and the re-check's are moments
// apart on a machine that may be loaded.)
func TestRecheckPasses(t *testing.T) {
	m := benchModel(t)
	ctx := context.Background()
	two, err := SeqsCurve(ctx, m, 2, []int{2, 4}, CurveOptions{MinReps: 3, MaxReps: 5})
	if err != nil {
		t.Fatal(err)
	}
	four, err := SeqsCurve(ctx, m, 4, []int{4, 8}, CurveOptions{MinReps: 3, MaxReps: 5})
	if err != nil {
		t.Fatal(err)
	}
	four32, err := SeqsCurve(ctx, m, 4, []int{4, 8}, CurveOptions{Context: 32, MinReps: 3, MaxReps: 5})
	if err != nil {
		t.Fatal(err)
	}
	scaled := func(pts []latency.Point, f float64) []latency.Point {
		var out []latency.Point
		for _, p := range pts {
			out = append(out, latency.Point{W: p.W, Median: time.Duration(f * float64(p.Median)), Reps: p.Reps})
		}
		return out
	}
	stale := scaled(two, 10)
	// "true" within any tolerance: four's curve is the machine's own, a
	// tenth of the stale one's time, so a re-check on a loaded machine
	// still keeps them apart
	in := []costmodel.PassCurve{{Seqs: 2, Verify: stale}, {Seqs: 4, Verify: four}}
	fam := []costmodel.PassCurve{
		{Seqs: 2, Context: ShortContext, Verify: stale},
		{Seqs: 2, Context: 32, Verify: scaled(two, 1.0/10)},
		{Seqs: 4, Context: ShortContext, Verify: four},
		{Seqs: 4, Context: 32, Verify: four32},
	}
	got, gotFam, found, err := RecheckPasses(ctx, m, in, fam)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 4 || found[0].Seqs != 2 || found[0].Context != ShortContext || found[0].Scale > 0.6 ||
		found[1].Seqs != 2 || found[1].Context != 32 || found[1].Scale < 1.5 || found[2].Seqs != 4 || found[3].Context != 32 {
		t.Fatalf("found %+v", found)
	}
	if d := math.Abs(float64(got[0].Verify[0].Median-found[0].Now)) / float64(found[0].Now); d > 1e-6 {
		t.Errorf("two sequences' pass rescaled to %v, want what the re-check timed, %v", got[0].Verify[0].Median, found[0].Now)
	}
	if gotFam[0].Verify[0].Median != got[0].Verify[0].Median {
		t.Errorf("the family's copy of two sequences' curve reads %v, the curve %v", gotFam[0].Verify[0].Median, got[0].Verify[0].Median)
	}
	if d := math.Abs(float64(gotFam[1].Verify[0].Median-found[1].Now)) / float64(found[1].Now); d > 1e-6 {
		t.Errorf("two sequences' pass after 32 tokens rescaled to %v, want what the re-check timed, %v", gotFam[1].Verify[0].Median, found[1].Now)
	}
	if in[0].Verify[0].Median != stale[0].Median || fam[1].Verify[0].Median != time.Duration(float64(two[0].Median)/10) {
		t.Error("the caller's curves were changed in place")
	}
	if line := passesLine(found); !strings.Contains(line, "2 stored") || !strings.Contains(line, "2 after 32 tokens stored") ||
		!strings.Contains(line, "rescaled x0.") {
		t.Errorf("report: %q", line)
	}
}

// TestRecheckBelow: a curve before the short context stored at three
// times the short context's curve (a ratio no pass after 32 tokens has
// to one after 128, the two timed side by side) is rescaled to the ratio
// timed now, the short context's curve and one past it are not its to
// touch, and a family without the short context's curve is left alone.
func TestRecheckBelow(t *testing.T) {
	m := benchModel(t)
	ctx := context.Background()
	short, err := VerifyCurve(ctx, m, []int{1, 2}, CurveOptions{MinReps: 3, MaxReps: 5})
	if err != nil {
		t.Fatal(err)
	}
	// built from the short context's curve, so its stored ratio is 3
	// whatever moment each timing met (two curves timed apart on a loaded
	// machine are what the re-check is for)
	stale := make([]latency.Point, len(short))
	for i, p := range short {
		stale[i] = latency.Point{W: p.W, Median: 3 * p.Median, Reps: p.Reps}
	}
	fam := []costmodel.ContextCurve{{Context: 256, Verify: short}, {Context: 32, Verify: stale}, {Context: ShortContext, Verify: short}}
	got, found, err := RecheckBelow(ctx, m, fam)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found[0].Context != 32 || !found[0].Rescaled || math.Abs(found[0].Stored-3) > 1e-9 {
		t.Fatalf("found %+v", found)
	}
	ratio := float64(costmodel.Interp(got[1].Verify, 1)) / float64(costmodel.Interp(got[2].Verify, 1))
	if d := math.Abs(ratio-found[0].Now) / found[0].Now; d > 1e-6 {
		t.Errorf("the curve after 32 tokens reads %.3fx the short one's, want the ratio timed now, %.3fx", ratio, found[0].Now)
	}
	// and the wider pass beside it (two rows: the widest the short curve
	// prices within three one-row passes), each width to its own ratio
	if found[0].W != 2 || math.Abs(found[0].WStored-3) > 1e-9 || !(found[0].WNow > 0) {
		t.Fatalf("the wider anchor: %+v", found[0])
	}
	ratio = float64(costmodel.Interp(got[1].Verify, 2)) / float64(costmodel.Interp(got[2].Verify, 2))
	if d := math.Abs(ratio-found[0].WNow) / found[0].WNow; d > 1e-6 {
		t.Errorf("two rows after 32 tokens read %.3fx the short one's, want the ratio timed now, %.3fx", ratio, found[0].WNow)
	}
	if got[0].Verify[0] != short[0] || got[2].Verify[0] != short[0] || fam[1].Verify[0] != stale[0] {
		t.Error("a curve not before the short context moved, or the caller's changed in place")
	}
	if line := belowLine(found); !strings.Contains(line, "after 32 tokens stored") || !strings.Contains(line, ", 2 rows stored 3.00x, now ") || !strings.Contains(line, "(rescaled)") {
		t.Errorf("report: %q", line)
	}
	if _, none, err := RecheckBelow(ctx, m, fam[:2]); err != nil || none != nil {
		t.Errorf("no short context's curve: %+v, %v", none, err)
	}
}

// TestBelowWide: the wider pass the re-check before the short context
// times is the widest of the short curve's widths, within the curve
// before it, whose pass costs at most three one-row passes; none where
// no width above one does.
func TestBelowWide(t *testing.T) {
	ms := time.Millisecond
	short := []latency.Point{{W: 1, Median: 4 * ms}, {W: 2, Median: 5 * ms}, {W: 8, Median: 11 * ms}, {W: 16, Median: 20 * ms}, {W: 48, Median: 50 * ms}}
	if got := belowWide(short, short); got != 8 {
		t.Errorf("widest within three one-row passes: %d, want 8", got)
	}
	if got := belowWide(short, short[:2]); got != 2 {
		t.Errorf("within a curve reaching two rows: %d, want 2", got)
	}
	if got := belowWide(short[:1], short); got != 0 {
		t.Errorf("a short curve of one row: %d, want none", got)
	}
}
