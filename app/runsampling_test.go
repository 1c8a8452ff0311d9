package app

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2/test"

	"arborist/engine/model/modeltest"
	"arborist/profiles"
)

// TestRunSampling: the Run screen offers every sampling field the run verb
// takes, and what is typed in is the sampling the run decodes at and
// stores, not a temperature with top-p 1 and seed 1; a value out of its
// field's bounds starts nothing.
func TestRunSampling(t *testing.T) {
	dir := modeltest.ModelsDir(t)
	wb := newBench(t)
	s, r, m := wb.Session, wb.Run, wb.Models
	for _, f := range profiles.SamplingFields() {
		if r.Sampling.entries[f.Name] == nil {
			t.Errorf("the Run screen has no %s", f.Label)
		}
	}
	m.Target.SetText(filepath.Join(dir, "stories260K.gguf"))
	m.Draft.SetText(modeltest.NoisyDraft(t))
	test.Tap(m.Load)
	waitFor(t, "loading", func() bool { return s.idle() && strings.Contains(m.Status.Text, "Loaded") })

	set := func(name, v string) { r.Sampling.entries[name].SetText(v) }
	set("top_p", "1.5")
	test.Tap(r.Start)
	if !r.Stop.Disabled() || r.Start.Disabled() {
		t.Fatal("a run started with top-p 1.5")
	}
	want := profiles.SampleParams{Temp: 0.7, TopK: 20, TopP: 0.9, MinP: 0.05, Seed: 42}
	set("temperature", "0.7")
	set("top_k", "20")
	set("top_p", "0.9")
	set("min_p", "0.05")
	set("seed", "42")
	r.Strategy.SetSelected("chain")
	r.Tokens.SetText("8")
	test.Tap(r.Start)
	time.Sleep(50 * time.Millisecond)
	r.Wait()
	waitFor(t, "the run", func() bool { return s.idle() && !r.Start.Disabled() })
	if !strings.Contains(r.Stats.Text, "Stored as run 1") {
		t.Fatalf("run: %s", r.Stats.Text)
	}
	b, err := s.Bench(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	run, err := b.StoredRun(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if got, n, ok := run.RanSampling(); !ok || got != want || n != 8 {
		t.Errorf("the run sampled %+v with %d tokens (%v), want %+v with 8", got, n, ok, want)
	}
}
