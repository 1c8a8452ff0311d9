package jobs

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestJobs: a second heavy job is refused beside a running one (a light
// one is not), a job's result stays its pair's, Cancel ends a job as
// cancelled, and the estimate follows the progress's pace.
func TestJobs(t *testing.T) {
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	jobs := New(func() time.Time { return clock })
	var seen []View
	jobs.Watch(func(v View) { seen = append(seen, v) })
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
	if len(seen) < 6 {
		t.Errorf("watchers saw %d changes", len(seen))
	}
}
