package profiles

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"arborist/engine/model/modeltest"
)

// TestProfileFamily: a profile times the target's verification curve at
// the contexts asked for and in passes of several sequences, stores each
// under its own context and pass size and reuses them all the next time;
// a context past the target's trained positions is refused before
// anything is measured, naming both figures; a calibration records each
// step's context, and a tune after it prices the steps between the
// measured contexts and says so in every prediction.
func TestProfileFamily(t *testing.T) {
	ps := PairSpec{Target: modeltest.Stories260K(t), Draft: modeltest.NoisyDraft(t), Threads: 1}
	ctx := context.Background()
	b := openBench(t)
	pair, err := b.openPair(ps, false)
	if err != nil {
		t.Fatal(err)
	}
	ctxLen := pair.Target.CtxLen
	pair.Close()

	_, err = b.Profile(ctx, ps, ProfileOptions{MaxW: 8, Contexts: []int{ctxLen}}, nil)
	if err == nil || !strings.Contains(err.Error(), strconv.Itoa(ctxLen+8)) || !strings.Contains(err.Error(), strconv.Itoa(ctxLen)+" positions") {
		t.Fatalf("a context past the trained length: %v, want both figures", err)
	}
	if s, err := b.PairState(ctx, ps); err != nil || s.Verify != nil {
		t.Fatalf("a refused profile measured something: %+v (%v)", s.Verify, err)
	}

	long := 256
	opt := ProfileOptions{MaxW: 8, Contexts: []int{long}, Seqs: []int{1, 2, 4}}
	r, err := b.Profile(ctx, ps, opt, nil)
	if err != nil {
		t.Fatal(err)
	}
	type size struct{ context, seqs int }
	want := []size{{long, 1}, {128, 2}, {128, 4}}
	if len(r.Family) != len(want) {
		t.Fatalf("family of %d curves, want %v", len(r.Family), want)
	}
	for i, p := range r.Family {
		k := p.Curve.Key
		if (size{k.Context, k.Seqs}) != want[i] || p.Cached || len(p.Curve.Points) == 0 {
			t.Errorf("curve %d: context %d, %d sequences, cached %v, %d points; want %v", i, k.Context, k.Seqs, p.Cached, len(p.Curve.Points), want[i])
		}
		for _, pt := range p.Curve.Points {
			if pt.W%k.Seqs != 0 || pt.W > 8 {
				t.Errorf("curve %d: W=%d is not %d sequences of equal rows within --max-w 8", i, pt.W, k.Seqs)
			}
		}
	}
	again, err := b.Profile(ctx, ps, opt, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range again.Family {
		if !p.Cached || p.Curve.ID != r.Family[i].Curve.ID {
			t.Errorf("curve %d measured again instead of reused", i)
		}
	}

	// a prompt long enough that its steps run past the short context
	prompt := strings.Repeat("Once upon a time there was a little cat. ", 16)
	cal, err := b.Calibrate(ctx, ps, []string{prompt}, "", 16, SampleParams{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := cal.Acc.Depths
	if len(d) < 2 || d[0].Context <= 128 || d[0].Context >= long {
		t.Fatalf("the first step's context: %+v, want the prompt's length, past 128 and short of %d", d[0].Context, long)
	}
	for i := 1; i < len(d); i++ {
		if d[i].Context <= d[i-1].Context {
			t.Errorf("step %d at context %d after %d: contexts grow by what each step emitted", i, d[i].Context, d[i-1].Context)
		}
	}
	tr, err := b.Tune(ctx, ps, TuneOptions{NoRecheck: true, Concurrency: []int{8, 1, 4}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// ranked at each concurrency asked for, on the pass sizes measured
	if len(tr.Loads) != 3 || tr.Concurrency != 8 || tr.Best().Concurrency != 8 {
		t.Fatalf("%d levels, tuned for %d (plan says %d)", len(tr.Loads), tr.Concurrency, tr.Best().Concurrency)
	}
	for i, lv := range tr.Loads[:2] {
		if lv.Concurrency != []int{1, 4}[i] || lv.Err != "" || len(lv.Ranked) < 2 {
			t.Errorf("level %d: C=%d, %d ranked, %q", i, lv.Concurrency, len(lv.Ranked), lv.Err)
		}
		for _, lp := range lv.Ranked {
			if lp.TokensPerSec <= 0 || lp.TPOT <= 0 || lp.TTFT <= lp.Pass || lp.Context.Low != 128 {
				t.Errorf("C=%d %s %s: %+v", lv.Concurrency, lp.Plan, lp.Policy, lp)
			}
		}
	}
	if lv := tr.Loads[2]; lv.Err == "" || !strings.Contains(lv.Err, "--seqs 8") || tr.Load != nil {
		t.Errorf("8 requests, passes of 8 not profiled: %+v, load %+v", lv, tr.Load)
	}
	c := tr.Best().Context
	if c.Low != 128 || c.High != long || c.Steps != len(d) || c.First != d[0].Context || c.Beyond != 0 {
		t.Errorf("steps between the measured contexts: range %+v", c)
	}
	if !strings.Contains(c.String(), "contexts 128-256") {
		t.Errorf("range named %q", c.String())
	}
	// priced at other steps' contexts (a load test's requests'), the
	// range is theirs; with none, the calibration's prices
	if oc := tr.Inputs.CostsAt([]int{200, 180, 240}).Context; oc.Steps != 3 || oc.First != 180 || oc.Last != 240 || oc.High != long {
		t.Errorf("priced at other contexts: range %+v", oc)
	}
	if nc := tr.Inputs.CostsAt(nil).Context; nc != tr.Inputs.Costs.Context {
		t.Errorf("priced at no contexts: range %+v, want the calibration's %+v", nc, tr.Inputs.Costs.Context)
	}
	// and with the short context's curve alone (which a tune on stored
	// curves prices the steps at, saying they were not priced at theirs:
	// TestAtContextsWithoutContexts), a tune measures the context the
	// calibration reached first (the pass sizes the profile timed, and
	// only those), and prices the steps there
	b2 := openBench(t)
	if _, err := b2.Profile(ctx, ps, ProfileOptions{MaxW: 8, Seqs: []int{1}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := b2.Calibrate(ctx, ps, []string{prompt}, "", 16, SampleParams{}, nil); err != nil {
		t.Fatal(err)
	}
	tr2, err := b2.Tune(ctx, ps, TuneOptions{NoRecheck: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c := tr2.Best().Context; c.Low != 128 || c.High != long || c.Steps != len(d) || !strings.Contains(c.String(), "contexts 128-256") {
		t.Errorf("a tune after calibrate: range %+v %q, want the steps priced at theirs", c, c.String())
	}
	for _, f := range tr2.Inputs.Family {
		if f.Key.Seqs > 1 {
			t.Errorf("the tune timed passes of %d sequences at context %d, which the profile left out", f.Key.Seqs, f.Key.Context)
		}
	}
}
