package app

import (
	"context"
	"errors"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"

	"arborist/profiles"
	"arborist/profiles/jobs"
)

// TestLlamaJobBelongsToItsPair: a tune in llama.cpp started on pair A
// reports to A: pair B, chosen meanwhile, shows none of it, and A shows
// its result and its config again when chosen back.
func TestLlamaJobBelongsToItsPair(t *testing.T) {
	t.Setenv("ARBORIST_STANDIN_PEAK", "3")
	wb, _ := standinExport(t)
	s, e := wb.Session, wb.Export
	a := profiles.PairSpec{Target: "/m/target.gguf", Draft: "/m/draft.gguf"}
	b := profiles.PairSpec{Target: "/m/other.gguf", NGram: 3}
	yaml := e.YAML.Text
	fyne.DoAndWait(func() { s.SetPair(a) })
	waitFor(t, "pair A read", s.idle)
	fyne.DoAndWait(func() { e.YAML.SetText(yaml) })
	test.Tap(e.Tune)
	fyne.DoAndWait(func() { s.SetPair(b) })
	waitFor(t, "the tune", func() bool {
		v, ok := s.Jobs.Last(a.Key(), jobLlamaTune)
		return s.idle() && ok && v.State != jobs.Running
	})
	if v, _ := s.Jobs.Last(a.Key(), jobLlamaTune); v.State != jobs.Done {
		t.Fatalf("pair A's tune: %v %v", v.State, v.Err)
	}
	if _, ok := s.Jobs.Last(b.Key(), jobLlamaTune); ok {
		t.Error("pair B has a tune it never ran")
	}
	if strings.Contains(e.CheckStatus.Text, "llama.cpp best") || strings.Contains(e.YAML.Text, "draft_max: 3") {
		t.Errorf("pair B shows pair A's tune: %s\n%s", e.CheckStatus.Text, e.YAML.Text)
	}
	fyne.DoAndWait(func() { s.SetPair(a) })
	waitFor(t, "pair A again", s.idle)
	if !strings.Contains(e.CheckStatus.Text, "llama.cpp best: --draft-max 3") || !strings.Contains(e.YAML.Text, "draft_max: 3") {
		t.Errorf("pair A lost its tune: %s\n%s", e.CheckStatus.Text, e.YAML.Text)
	}
}

// TestHeavyJobsQueue: a heavy job started while one runs is queued: the
// buttons stay enabled, the job bar says "queued behind" the running
// job, Remove from queue takes it out without running it; a job queued
// behind the running one starts when it ends. The same job twice is
// refused.
func TestHeavyJobsQueue(t *testing.T) {
	wb, _ := standinExport(t)
	s, e, bar := wb.Session, wb.Export, wb.JobBar
	held := make(chan struct{})
	job, err := s.startJob(jobProfile, true, func(ctx context.Context, job *jobs.Job) (any, error) {
		job.Progress(0.5, "verify curve 8 of 16")
		<-ctx.Done()
		close(held)
		return nil, ctx.Err()
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the bar", func() bool { return bar.Box.Visible() && strings.Contains(bar.Label.Text, "verify curve 8 of 16") })
	for _, b := range []fyne.Disableable{e.Check, e.Tune, wb.Speedup.Tune, wb.Run.Start, wb.Models.TrainBtn} {
		if b.Disabled() {
			t.Errorf("a heavy job's button disabled beside a running profile: it should queue")
		}
	}
	if !strings.Contains(bar.Label.Text, "waits for it in a queue") || !strings.Contains(bar.Label.Text, "left") {
		t.Errorf("bar: %s", bar.Label.Text)
	}
	var twice *jobs.QueuedError
	if _, err := s.startJob(jobProfile, true, func(context.Context, *jobs.Job) (any, error) { return nil, nil }, nil); !errors.As(err, &twice) {
		t.Errorf("the same job twice: %v", err)
	}

	// a check queued, then removed from the queue: it never runs
	ran := make(chan struct{}, 1)
	check, err := s.startJob(jobCheck, true, func(context.Context, *jobs.Job) (any, error) { ran <- struct{}{}; return nil, nil }, nil)
	if err != nil {
		t.Fatalf("a second heavy job: %v", err)
	}
	waitFor(t, "the queue on the bar", func() bool {
		return bar.QueueRow.Visible() && strings.Contains(bar.Queued.Text, "Checking in llama.cpp: queued behind profiling")
	})
	test.Tap(bar.Unqueue)
	<-check.Done()
	waitFor(t, "the queue emptied", func() bool { return !bar.QueueRow.Visible() })
	if v := check.View(); v.State != jobs.Cancelled {
		t.Errorf("removed from the queue: %v", v.State)
	}
	if !job.View().Cancellable || job.View().State != jobs.Running {
		t.Error("removing the queued job touched the running one")
	}

	// a tune queued behind the profile runs when the profile ends
	tune, err := s.startJob(jobLlamaTune, true, func(context.Context, *jobs.Job) (any, error) { ran <- struct{}{}; return "tuned", nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the tune queued", func() bool { return strings.Contains(bar.Queued.Text, "queued behind profiling") })
	select {
	case <-ran:
		t.Fatal("a queued job ran beside the profile")
	default:
	}
	test.Tap(bar.Cancel)
	<-held
	<-job.Done()
	<-tune.Done()
	<-ran
	waitFor(t, "the end", func() bool { return s.idle() && !bar.Box.Visible() })
	if v := job.View(); v.State != jobs.Cancelled {
		t.Errorf("after Cancel: %v", v.State)
	}
	if v := tune.View(); v.State != jobs.Done || v.Result != "tuned" {
		t.Errorf("the queued tune: %v %v", v.State, v.Err)
	}
	select {
	case <-ran:
		t.Error("the job removed from the queue ran")
	default:
	}
}
