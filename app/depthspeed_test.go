package app

import (
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"

	"arborist/engine/model/modeltest"
	"arborist/profiles"
)

// TestDepthSpeed: on the Profile screen the user measures the target's
// speed at depth as bench --ctx does: the depths come filled with the
// target's defaults, a list it cannot read or a depth past the model's
// context is refused naming why, and a measurement shows decode against
// the roofline at a short context and after each depth, with the
// prefill, on its chart; Cancel stops one under way; the measurement is
// kept, and shown again when the pair is loaded again.
func TestDepthSpeed(t *testing.T) {
	dir := modeltest.ModelsDir(t)
	wb := newBench(t)
	s, m, d := wb.Session, wb.Models, wb.Profile.Depth
	fyne.DoAndWait(func() { wb.Profile.Lower.SelectIndex(1) })
	test.Tap(d.Start) // no target yet: refused, nothing started
	if d.Start.Disabled() || !d.Cancel.Disabled() || d.Status.Text != depthHint {
		t.Errorf("no target: start disabled %v, cancel enabled %v, status %q", d.Start.Disabled(), !d.Cancel.Disabled(), d.Status.Text)
	}
	m.Target.SetText(filepath.Join(dir, "stories260K.gguf"))
	m.Draft.SetText(modeltest.NoisyDraft(t))
	test.Tap(m.Load)
	// stories260K holds 2048 positions: 1024 leaves room for the runs
	waitFor(t, "the default depths", func() bool { return s.idle() && d.Contexts.Text == "1024" })

	fyne.DoAndWait(func() { d.Contexts.SetText("64,x") })
	test.Tap(d.Start)
	if !strings.Contains(d.Status.Text, "Not started: context depths") || !d.Cancel.Disabled() {
		t.Errorf("a list it cannot read: %q", d.Status.Text)
	}
	fyne.DoAndWait(func() { d.Contexts.SetText("4000") })
	test.Tap(d.Start)
	waitFor(t, "the refusal", func() bool { return s.idle() && !d.Start.Disabled() })
	if !strings.Contains(d.Status.Text, "exceed the model's context of 2048") || d.Chart.Image != nil {
		t.Errorf("a depth past the context: %q, chart drawn %v", d.Status.Text, d.Chart.Image != nil)
	}

	fyne.DoAndWait(func() { d.Contexts.SetText("64,1024") })
	test.Tap(d.Start)
	waitWithin(t, 5*time.Minute, "the measurement", func() bool { return s.idle() && !d.Start.Disabled() && d.Chart.Image != nil })
	for _, want := range []string{"positions: decode ", "of its roofline", "After 64: decode ", "After 1024: decode ", "; prefill "} {
		if !strings.Contains(d.Summary.Text, want) {
			t.Errorf("the figures lack %q: %s", want, d.Summary.Text)
		}
	}
	if !strings.HasPrefix(d.Status.Text, "Measured stories260K.gguf: ") {
		t.Errorf("status %q", d.Status.Text)
	}
	spec := *d.Chart.line
	if len(spec.Series) != 3 || len(spec.Series[0].X) != 3 || spec.Series[0].X[1] != 64 || spec.Series[0].X[2] != 1024 || len(spec.Series[2].X) != 2 {
		t.Errorf("chart series %+v", spec.Series)
	}
	for i, y := range spec.Series[0].Y { // decode within its roofline's reach, and measured
		if y <= 0 || spec.Series[0].Err[i] < 0 || spec.Series[1].Y[i] <= 0 {
			t.Errorf("point %d: decode %v ± %v, roofline %v", i, y, spec.Series[0].Err[i], spec.Series[1].Y[i])
		}
	}

	test.Tap(d.Start)
	waitFor(t, "the measurement to start", func() bool { return !d.Cancel.Disabled() })
	test.Tap(d.Cancel)
	waitFor(t, "the cancel", func() bool { return s.idle() && !d.Start.Disabled() })
	if !strings.Contains(d.Status.Text, "Cancelled") {
		t.Errorf("after Cancel: %q", d.Status.Text)
	}

	// the measurement was kept: loading the pair again shows it, dated
	want := d.Summary.Text
	test.Tap(m.Load)
	waitFor(t, "the kept measurement", func() bool {
		return s.idle() && strings.HasPrefix(d.Status.Text, "Measured stories260K.gguf on ") && d.Chart.Image != nil
	})
	if d.Summary.Text != want {
		t.Errorf("kept figures\n%s\nmeasured\n%s", d.Summary.Text, want)
	}
}

// TestBenchStages: a bench's progress runs through its stages in order,
// each its share of the work, the depths' after the short context's, a
// long prefill the largest of its depth's.
func TestBenchStages(t *testing.T) {
	opt := profiles.BenchDefaults()
	opt.Ctx = []int{1024, 4096}
	st := profiles.BenchStages(opt)
	if len(st) != 8 || st[5].Name != "context 4096: prefill" || st[5].Weight <= st[2].Weight || st[5].Weight <= st[6].Weight {
		t.Fatalf("stages %+v", st)
	}
	prev := -1.0
	for i, e := range []profiles.Event{{Stage: "decode runs", Done: 1, Total: 5}, {Stage: "verify passes", Done: 15, Total: 15},
		{Stage: "context 1024: prefill", Done: 1, Total: 2}, {Stage: "context 4096: decode runs", Done: 5, Total: 5},
		{Stage: "context 4096: verify passes", Done: 15, Total: 15}} {
		f := profiles.BenchDone(st, e)
		if f <= prev || f > 1 {
			t.Errorf("event %d %+v: %v after %v", i, e, f, prev)
		}
		prev = f
	}
	if math.Abs(prev-1) > 1e-12 {
		t.Errorf("the last stage done: %v", prev)
	}
	if f := profiles.BenchDone(st, profiles.Event{Stage: "something else", Done: 1, Total: 2}); f != -1 {
		t.Errorf("an unknown stage: %v", f)
	}
}

// TestDepthSpecCarriesEveryFigure: the chart and summary of a report,
// figure by figure.
func TestDepthSpecCarriesEveryFigure(t *testing.T) {
	r := &profiles.BenchReport{Decode: []float64{58, 60, 65}, Median: 60, Roofline: 100, Context: 70, Bandwidth: 20e9}
	spec, note := depthSpec(r, 3)
	if len(spec.Series) != 2 || spec.Series[0].Y[0] != 60 || spec.Series[0].Err[0] != 5 || spec.Series[1].Y[0] != 100 {
		t.Errorf("series %+v", spec.Series)
	}
	if want := "At 70 positions: decode 60.0\ntokens/s, 60% of its roofline (100)"; note != want {
		t.Errorf("note %q, want %q", note, want)
	}
	r.Depths = []profiles.DepthReport{{Context: 4096, Decode: []float64{18, 19, 21}, Median: 19, Roofline: 25, Share: 0.76, KVRead: 32 << 20, Prefill: 85.7}}
	spec, note = depthSpec(r, 3)
	if len(spec.Series) != 3 || spec.Series[0].X[1] != 4096 || spec.Series[0].Err[1] != 2 || spec.Series[1].Y[1] != 25 || spec.Series[2].Y[0] != 85.7 {
		t.Errorf("series %+v", spec.Series)
	}
	if want := "\nAfter 4096: decode 19.0 (18.0-21.0),\n76% of 25; prefill 85.7 tokens/s"; !strings.HasSuffix(note, want) {
		t.Errorf("note %q, want it to end %q", note, want)
	}
}
