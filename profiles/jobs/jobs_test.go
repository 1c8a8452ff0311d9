package jobs

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestJobs: a second heavy job is refused beside a running one (a light
// one is not), a job's result stays its pair's, Cancel ends a job as
// cancelled, and the estimate follows the progress's pace.
func TestJobs(t *testing.T) {
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	jobs := New(func() time.Time { return clock })
	var seen atomic.Int64 // a watcher runs on the job's goroutine
	jobs.Watch(func(View) { seen.Add(1) })
	a, b := "a.gguf|ngram 3|cpu|", "b.gguf|ngram 3|cpu|"
	tune, ctx, err := jobs.Start(context.Background(), "tune", a, true)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = jobs.Start(context.Background(), "profile", b, true)
	var busy *BusyError
	if !errors.As(err, &busy) || busy.Running.Kind != "tune" {
		t.Fatalf("a second heavy job: %v", err)
	}
	light, _, err := jobs.Start(context.Background(), "export", b, false)
	if err != nil {
		t.Fatalf("a light job beside a heavy one: %v", err)
	}
	light.Finish("ok", nil)

	// the estimate: a quarter done after 10 minutes leaves 30
	clock = clock.Add(10 * time.Minute)
	tune.Progress(0.25, "round 1")
	if v := tune.View(); v.Remaining != 30*time.Minute || v.Status != "round 1" {
		t.Errorf("estimate %v, status %q", v.Remaining, v.Status)
	}
	if v := (&Job{jobs: jobs, frac: -1, started: clock}).viewLocked(); v.Remaining != 0 {
		t.Errorf("an estimate without progress: %v", v.Remaining)
	}
	tune.Finish("best plan", nil)
	if v, ok := jobs.Last(a, "tune"); !ok || v.State != Done || v.Result != "best plan" {
		t.Errorf("pair a's tune: %+v", v)
	}
	if _, ok := jobs.Last(b, "tune"); ok {
		t.Error("pair a's tune reported to pair b")
	}
	if ctx.Err() == nil {
		t.Error("a finished job's context is live")
	}

	// the heavy slot is free again; cancel ends the next job
	cal, ctx, err := jobs.Start(context.Background(), "calibrate", b, true)
	if err != nil {
		t.Fatalf("after the tune ended: %v", err)
	}
	go func() { <-ctx.Done(); cal.Finish(nil, ctx.Err()) }()
	jobs.Cancel(cal.ID)
	<-cal.Done()
	if v := cal.View(); v.State != Cancelled || v.Cancellable {
		t.Errorf("cancelled job: %+v", v)
	}
	if len(jobs.Running()) != 0 {
		t.Errorf("running after all ended: %+v", jobs.Running())
	}
	if n := seen.Load(); n < 6 {
		t.Errorf("watchers saw %d changes", n)
	}
}

// TestJobsQueue: a heavy job queued beside a running one waits (its Ready
// stays open, it says what it waits for), runs when the first ends, in
// the order queued; Cancel takes a queued job out of the queue without
// running it; a second job of the same kind and pair is refused.
func TestJobsQueue(t *testing.T) {
	jobs := New(nil)
	a, b := "a.gguf|ngram 3|cpu|", "b.gguf|ngram 3|cpu|"
	first, _, err := jobs.Queue(context.Background(), "tune", a, true)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-first.Ready():
	default:
		t.Fatal("the only job waits")
	}
	second, _, err := jobs.Queue(context.Background(), "profile", b, true)
	if err != nil {
		t.Fatal(err)
	}
	third, ctx3, err := jobs.Queue(context.Background(), "calibrate", b, true)
	if err != nil {
		t.Fatal(err)
	}
	var twice *QueuedError
	if _, _, err := jobs.Queue(context.Background(), "profile", b, true); !errors.As(err, &twice) || twice.Existing.State != Queued {
		t.Errorf("the same job queued twice: %v", err)
	}
	for _, q := range []*Job{second, third} {
		select {
		case <-q.Ready():
			t.Fatalf("%s runs beside the tune", q.Kind)
		default:
		}
	}
	if v := second.View(); v.State != Queued || v.Behind != "tune" || !v.Cancellable {
		t.Errorf("queued: %+v", v)
	}
	if v := third.View(); v.Behind != "profile" {
		t.Errorf("the third waits behind %q", v.Behind)
	}
	if q := jobs.Queued(); len(q) != 2 || q[0].Kind != "profile" {
		t.Errorf("queue: %+v", q)
	}

	// Cancel takes the third out of the queue: it never runs
	jobs.Cancel(third.ID)
	<-third.Done()
	if v := third.View(); v.State != Cancelled || ctx3.Err() == nil {
		t.Errorf("a cancelled queued job: %+v", v)
	}
	if q := jobs.Queued(); len(q) != 1 {
		t.Errorf("the queue after Cancel: %+v", q)
	}

	// the first ends: the second runs, alone
	first.Finish("done", nil)
	<-second.Ready()
	if v := second.View(); v.State != Running || v.Behind != "" {
		t.Errorf("after the first: %+v", v)
	}
	select {
	case <-third.Ready():
		t.Error("the cancelled job ran")
	default:
	}
	if r := jobs.Running(); len(r) != 1 || r[0].Kind != "profile" {
		t.Errorf("running: %+v", r)
	}
	second.Finish(nil, nil)
	if len(jobs.Running())+len(jobs.Queued()) != 0 {
		t.Error("jobs left after all ended")
	}
}
