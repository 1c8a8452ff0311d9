package costmodel

import (
	"strings"
	"testing"
	"time"

	"arborist/profiles/latency"
)

// lineCurve is a stand-in verification curve: base + per*W at widths 1-64.
func lineCurve(base, per time.Duration) []latency.Point {
	var pts []latency.Point
	for _, w := range []int{1, 2, 4, 8, 16, 32, 64} {
		pts = append(pts, latency.Point{W: w, Median: base + time.Duration(w)*per, Spread: base / 100, Reps: 5})
	}
	return pts
}

// standInFamily: curves at 128, 1024 and 4096 cached tokens, a pass
// costing more the longer the context.
func standInFamily() []ContextCurve {
	return []ContextCurve{
		{Context: 4096, Verify: lineCurve(5*time.Millisecond, 400*time.Microsecond)},
		{Context: 128, Verify: lineCurve(time.Millisecond, 100*time.Microsecond)},
		{Context: 1024, Verify: lineCurve(2*time.Millisecond, 200*time.Microsecond)},
	}
}

func withContexts(ctxs ...int) *Acceptance {
	acc := Uniform(0.8, 0.4, 8, 4)
	for _, n := range ctxs {
		acc.Depths = append(acc.Depths, DepthSample{Best: []float64{0.8}, Accepted: 1, Context: n})
	}
	return acc
}

// TestAtContextBounds: between measured contexts a pass is interpolated
// linearly, below the shortest it costs the shortest's, and past the
// longest nothing is made up (0: the caller leaves it out).
func TestAtContextBounds(t *testing.T) {
	sorted := []ContextCurve{standInFamily()[1], standInFamily()[2], standInFamily()[0]}
	w := 4
	t128, t1024, t4096 := Interp(sorted[0].Verify, w), Interp(sorted[1].Verify, w), Interp(sorted[2].Verify, w)
	if got, want := AtContext(sorted, w, 576), (t128+t1024)/2; got != want {
		t.Errorf("midway between 128 and 1024: %v, want %v", got, want)
	}
	if got := AtContext(sorted, w, 64); got != t128 {
		t.Errorf("below the shortest: %v, want the shortest's %v", got, t128)
	}
	if got := AtContext(sorted, w, 4096); got != t4096 {
		t.Errorf("at the longest: %v, want %v", got, t4096)
	}
	if got := AtContext(sorted, w, 4097); got != 0 {
		t.Errorf("past the longest measured context: %v, want nothing (never extrapolated)", got)
	}
}

// TestAtContextsPricesEachStep: the verification curve is scaled at each
// width by the mean, over the calibration's steps, of the pass at the
// step's context over the pass at the short one; steps past the longest
// measured context are left out and counted; predictions carry the range.
func TestAtContextsPricesEachStep(t *testing.T) {
	fam := standInFamily()
	short := fam[1].Verify
	c := Costs{Verify: short}
	acc := withContexts(128, 1024, 1024, 4096, 9000)
	got := AtContexts(c, 128, fam, acc)
	r := got.Context
	if r.Low != 128 || r.High != 4096 || r.Steps != 4 || r.Beyond != 1 || r.First != 128 || r.Last != 9000 || r.Longest != 4096 {
		t.Fatalf("range %+v", r)
	}
	for _, p := range got.Verify {
		a, b, d := Interp(fam[1].Verify, p.W), Interp(fam[2].Verify, p.W), Interp(fam[0].Verify, p.W)
		want := (a + 2*b + d) / 4
		if diff := p.Median - want; diff < -time.Microsecond || diff > time.Microsecond {
			t.Errorf("W=%d: %v, want %v, the mean of the steps' contexts", p.W, p.Median, want)
		}
	}
	if short[0].Median != time.Millisecond+100*time.Microsecond {
		t.Error("the stored curve was changed in place")
	}
	if len(got.Short) != len(short) || got.Short[2] != short[2] {
		t.Errorf("the curve it priced from: %v, want the short one %v", got.Short, short)
	}
	pr, err := Predict(Plan{Strategy: "chain", Gamma: 4}, acc, got)
	if err != nil {
		t.Fatal(err)
	}
	if pr.Context != r || !strings.Contains(pr.Context.String(), "contexts 128-4096") || !strings.Contains(pr.Context.String(), "1 past 4096") {
		t.Errorf("prediction's range: %+v %q", pr.Context, pr.Context.String())
	}
	// priced at the short context, the same plan looks faster than it is
	at128, _ := Predict(Plan{Strategy: "chain", Gamma: 4}, acc, Costs{Verify: short})
	if at128.Step >= pr.Step {
		t.Errorf("a step at the steps' contexts %v, not dearer than at the short one %v", pr.Step, at128.Step)
	}

	// steps only as long as a shorter family's longest: High is the
	// shortest measured context that covers them
	if r := AtContexts(c, 128, fam, withContexts(200, 900)).Context; r.High != 1024 || r.Beyond != 0 || r.Steps != 2 {
		t.Errorf("steps up to 900: %+v, want priced between 128 and 1024", r)
	}
}

// TestAtContextsWithoutContexts: the negative controls: a calibration
// that recorded no contexts, a family of the short curve alone, and
// steps all past the longest curve leave the curve as it was, the range
// saying it rests on the short context alone.
func TestAtContextsWithoutContexts(t *testing.T) {
	fam := standInFamily()
	c := Costs{Verify: fam[1].Verify, Plain: time.Millisecond}
	for name, tc := range map[string]struct {
		fam []ContextCurve
		acc *Acceptance
	}{
		"no contexts":    {fam, withContexts(0, 0)},
		"one curve":      {fam[1:2], withContexts(300, 3000)},
		"all past":       {fam, withContexts(5000, 6000)},
		"no calibration": {fam, nil},
	} {
		got := AtContexts(c, 128, tc.fam, tc.acc)
		if got.Verify[3] != c.Verify[3] || got.Plain != c.Plain {
			t.Errorf("%s: the curve moved: %v, want %v", name, got.Verify[3], c.Verify[3])
		}
		if got.Context.Low != 128 || got.Context.High != 128 || got.Context.Steps != 0 {
			t.Errorf("%s: range %+v, want the short context alone", name, got.Context)
		}
		// steps it could have priced at theirs say so, and what to do
		if unpriced := strings.Contains(got.Context.String(), "not priced at theirs: profile again"); unpriced != (name == "one curve" || name == "all past") {
			t.Errorf("%s: range named %q", name, got.Context.String())
		}
	}
	// and with contexts the plain token moves with the curve
	if got := AtContexts(c, 128, fam, withContexts(1024)); got.Plain != 2*time.Millisecond {
		t.Errorf("plain token at 1024: %v", got.Plain)
	}
}

// TestAtContextsTimedAtLength: where the re-check timed plain decoding
// and the drafter after a long context too (Costs.Long), plain
// decoding's token is each step's share of the way between the two
// timings, not the short one carried by the curves' ratio, and the
// drafter's curves take the mean of its ratio the same way; without it
// (the negative control) the drafter's curves are the short context's.
func TestAtContextsTimedAtLength(t *testing.T) {
	fam := standInFamily()
	ms := time.Millisecond
	draft := lineCurve(100*time.Microsecond, 10*time.Microsecond)
	c := Costs{Verify: fam[1].Verify, Plain: ms, Draft: draft, DraftAfter: draft[:1],
		Long: LongContext{At: 4096, Plain: 10 * ms, DraftScale: 3}}
	acc := withContexts(128, 1024, 4096)
	share := float64(1024-128) / float64(4096-128)
	got := AtContexts(c, 128, fam, acc)
	want := time.Duration((1 + (1 + 9*share) + 10) / 3 * float64(ms))
	if d := got.Plain - want; d < -time.Microsecond || d > time.Microsecond {
		t.Errorf("plain decoding's token %v, want %v (timed at 128 and 4096, each step's context between)", got.Plain, want)
	}
	f := (1 + (1 + 2*share) + 3) / 3
	for i, p := range got.Draft {
		if want := time.Duration(float64(draft[i].Median) * f); p.Median-want > time.Microsecond || want-p.Median > time.Microsecond {
			t.Errorf("draft W=%d: %v, want %v (x%.3f)", p.W, p.Median, want, f)
		}
	}
	if got.DraftAfter[0].Median == draft[0].Median || draft[0].Median != 110*time.Microsecond {
		t.Errorf("the after-target point %v was not scaled, or the stored curve changed (%v)", got.DraftAfter[0].Median, draft[0].Median)
	}
	c.Long = LongContext{}
	plainOnly := AtContexts(c, 128, fam, acc)
	if plainOnly.Draft[3] != draft[3] {
		t.Errorf("without a long re-check the drafter's curve moved: %v, want %v", plainOnly.Draft[3], draft[3])
	}
	if plainOnly.Plain == got.Plain {
		t.Errorf("plain decoding's token %v the same with and without the long timing", got.Plain)
	}
}

// TestAtContextsBeforeTheShortContext: steps before the short context
// are priced there on a curve measured before it, one sequence's passes
// and plain decoding's token alike; each pass size's curve is priced on
// its own curves over context (the eight sequences' ratio, not the one
// sequence's), a pass size with none left at the short context; and the
// extra a pass of several sequences adds past the short context counts
// only the steps past it (Above: none here).
func TestAtContextsBeforeTheShortContext(t *testing.T) {
	ms := time.Millisecond
	fam := []ContextCurve{
		{Context: 32, Verify: lineCurve(8*ms/10, 80*time.Microsecond)},
		{Context: 128, Verify: lineCurve(ms, 100*time.Microsecond)},
	}
	eight := PassCurve{Seqs: 8, Verify: lineCurve(2*ms, 200*time.Microsecond)}
	four := PassCurve{Seqs: 4, Verify: lineCurve(3*ms/2, 150*time.Microsecond)}
	c := Costs{Verify: fam[1].Verify, Plain: ms, Passes: []PassCurve{four, eight}, PassFamily: []PassCurve{
		{Seqs: 8, Context: 128, Verify: eight.Verify},
		{Seqs: 8, Context: 32, Verify: lineCurve(ms, 100*time.Microsecond)}, // half: not the one sequence's 0.8
		{Seqs: 4, Context: 128, Verify: four.Verify},
	}}
	got := AtContexts(c, 128, fam, withContexts(32, 32))
	if r := got.Context; r.Low != 32 || r.Steps != 2 {
		t.Errorf("range %+v, want from 32 with 2 steps", r)
	}
	if v, want := Interp(got.Verify, 1), Interp(fam[0].Verify, 1); v != want {
		t.Errorf("T_verify(1) at 32 tokens %v, want the curve there %v", v, want)
	}
	if got.Plain != ms*88/110 {
		t.Errorf("plain decoding's token %v, want %v (its ratio there)", got.Plain, ms*88/110)
	}
	if p := Interp(got.Passes[1].Verify, 8); p != Interp(eight.Verify, 8)/2 {
		t.Errorf("a pass of 8 sequences of a row %v, want its own curve's half %v", p, Interp(eight.Verify, 8)/2)
	}
	if p := Interp(got.Passes[0].Verify, 4); p != Interp(four.Verify, 4) {
		t.Errorf("4 sequences with no curve before the short context: %v, want as stored %v", p, Interp(four.Verify, 4))
	}
	if d := Interp(got.Above, 1) - Interp(got.Short, 1); d != 0 {
		t.Errorf("Above is %v past the short curve, want nothing: no step ran past it", d)
	}
	pt := NewPassTimes(got)
	if p, ok := pt.At(8, 8); !ok || p != Interp(eight.Verify, 8)/2 {
		t.Errorf("PassTimes(8, 8) = %v %v, want %v and no extra", p, ok, Interp(eight.Verify, 8)/2)
	}
	// half the steps past the short context: the extra counts them alone
	long := append(fam, ContextCurve{Context: 1024, Verify: lineCurve(2*ms, 200*time.Microsecond)})
	mixed := AtContexts(c, 128, long, withContexts(32, 1024))
	if d, want := Interp(mixed.Above, 1)-Interp(mixed.Short, 1), (Interp(long[2].Verify, 1)-Interp(long[1].Verify, 1))/2; d != want {
		t.Errorf("Above at W=1 %v past the short curve, want half the 1024 curve's difference %v", d, want)
	}
}

// TestContextPasses: a pass is priced at the context its sequences run
// at, as AtContexts prices a calibration whose steps all ran there, one
// pricing a bucket of contexts; no context, or no curves over context,
// is the short context's; a context past the longest measured is priced
// at it.
func TestContextPasses(t *testing.T) {
	ms := time.Millisecond
	fam := []ContextCurve{
		{Context: 32, Verify: lineCurve(8*ms/10, 80*time.Microsecond)},
		{Context: 128, Verify: lineCurve(ms, 100*time.Microsecond)},
		{Context: 1024, Verify: lineCurve(2*ms, 200*time.Microsecond)},
	}
	eight := lineCurve(2*ms, 200*time.Microsecond)
	c := Costs{Verify: fam[1].Verify, Passes: []PassCurve{{Seqs: 8, Verify: eight}}, PassFamily: []PassCurve{
		{Seqs: 8, Context: 128, Verify: eight},
		{Seqs: 8, Context: 32, Verify: lineCurve(ms, 100*time.Microsecond)},
	}}
	cp := NewContextPasses(c, 128, fam)
	for _, n := range []int{32, 100, 128, 600, 1024} {
		want, _ := NewPassTimes(AtContexts(c, 128, fam, withContexts(contextBucket(n)))).At(8, 16)
		if got, ok := cp.At(8, 16, n); !ok || got != want {
			t.Errorf("after %d tokens: %v %v, want %v", n, got, ok, want)
		}
	}
	short, _ := NewPassTimes(c).At(8, 16)
	if got, _ := cp.At(8, 16, 0); got != short {
		t.Errorf("no context: %v, want the short context's %v", got, short)
	}
	if got, _ := NewContextPasses(c, 128, fam[1:2]).At(8, 16, 32); got != short {
		t.Errorf("no curves over context: %v, want the short context's %v", got, short)
	}
	if got, _ := NewContextPasses(c, 128, nil).At(8, 16, 32); got != short {
		t.Errorf("no family at all: %v, want the short context's %v", got, short)
	}
	longest, _ := cp.At(8, 16, 1024)
	if got, _ := cp.At(8, 16, 5000); got != longest {
		t.Errorf("past the longest: %v, want the longest's %v", got, longest)
	}
	if at32, _ := cp.At(8, 8, 32); at32 != Interp(eight, 8)/2 {
		t.Errorf("8 one-row sequences after 32 tokens: %v, want their own curve's %v", at32, Interp(eight, 8)/2)
	}
	for _, tc := range [][2]int{{1, 16}, {20, 32}, {100, 112}, {256, 256}, {300, 320}, {4000, 4096}} {
		if got := contextBucket(tc[0]); got != tc[1] {
			t.Errorf("contextBucket(%d) = %d, want %d", tc[0], got, tc[1])
		}
	}
}
